"""`disco.unrolling`: scans unrolled inside a function, values unchanged."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import acting
from disco import train
from disco import unrolling
from disco.environments import registry
from disco.train import program as train_program
from tests import actors


def _nested(p: chex.Array, xs: chex.Array) -> chex.Array:
  """Scans inside a scan, a `cond` and a `jit`: 5 + 5 x 3 + 4 + 2 steps."""

  @jax.jit
  def inner(c: chex.Array, x: chex.Array) -> chex.Array:
    c, _ = jax.lax.scan(lambda c, y: (jnp.sin(c * p + y), None), c, x + xs[:3])
    return c

  def body(c: chex.Array, x: chex.Array) -> tuple[chex.Array, chex.Array]:
    c = inner(c, x)
    return c, c * x

  c, ys = jax.lax.scan(body, jnp.float32(0.5), xs)
  c = jax.lax.cond(
      c > 0,
      lambda c: jax.lax.scan(lambda c, y: (c * y + 1.0, None), c, xs[:4])[0],
      lambda c: c,
      c,
  )
  c = jax.lax.fori_loop(0, 2, lambda i, c: c * 0.5 + i, c)  # A scan too.
  return c + jnp.sum(ys)


_XS = jnp.linspace(-1.0, 1.0, 5, dtype=jnp.float32)


def test_every_scan_is_unrolled_and_the_values_are_the_same():
  unrolled = unrolling.unroll_scans(_nested)
  assert unrolling.scan_iterations(_nested, 0.9, _XS) == (26, 0)
  assert unrolling.scan_iterations(unrolled, 0.9, _XS) == (0, 26)
  np.testing.assert_array_equal(
      jax.jit(unrolled)(0.9, _XS), jax.jit(_nested)(0.9, _XS)
  )
  ps = jnp.asarray([0.9, -0.3, 0.2], jnp.float32)
  np.testing.assert_array_equal(
      jax.jit(jax.vmap(unrolled, (0, None)))(ps, _XS),
      jax.jit(jax.vmap(_nested, (0, None)))(ps, _XS),
  )
  np.testing.assert_array_equal(
      jax.jit(jax.grad(unrolled))(0.9, _XS),
      jax.jit(jax.grad(_nested))(0.9, _XS),
  )


def test_max_length_leaves_longer_scans_rolled():
  assert unrolling.scan_iterations(
      unrolling.unroll_scans(_nested, max_length=3), 0.9, _XS
  ) == (5 + 4, 5 * 3 + 2)
  with pytest.raises(ValueError, match='max_length'):
    unrolling.unroll_scans(_nested, max_length=0)


def test_the_scan_around_the_wrapped_function_stays_rolled():
  def steps(xs: chex.Array) -> chex.Array:
    step = unrolling.unroll_scans(lambda c, x: (_nested(c, xs) * x, None))
    return jax.lax.scan(step, jnp.float32(0.1), xs)[0]

  assert unrolling.scan_iterations(steps, _XS) == (5, 5 * 26)


def _counting_actor(params, rng, timestep, actor_state):
  """Uniform actions, shifted by a scan over the observation's rows."""
  rows = jnp.moveaxis(timestep.observation, 1, 0)  # [rows, B, ...]
  total, _ = jax.lax.scan(
      lambda c, row: (c + jnp.sum(row.reshape(row.shape[0], -1), 1), None),
      jnp.zeros(rows.shape[1], jnp.float32),
      rows,
  )
  actions = jax.random.randint(rng, total.shape, 0, 3)
  actions = (actions + total.astype(jnp.int32)) % 3
  return actors.timestep_of(timestep, actions, actor_state, 3)


def test_the_rollout_unrolls_one_step_s_scans_and_keeps_its_values():
  env = registry.make_environment('catch', batch_size=3)
  env_state, timestep = env.reset(jax.random.key(0))
  args = ({}, {}, timestep, env_state, jax.random.key(1))
  unroll = {
      flag: functools.partial(
          acting.unroll_jittable_actor,
          env=env,
          rollout_len=7,
          actor_step_fn=_counting_actor,
          unroll_inner_scans=flag,
      )
      for flag in (False, True)
  }
  rows = timestep.observation.shape[1]
  # 7 steps, each scanning Catch's rows.
  assert unrolling.scan_iterations(unroll[False], *args) == (7 + 7 * rows, 0)
  assert unrolling.scan_iterations(unroll[True], *args) == (7, 7 * rows)
  chex.assert_trees_all_equal(
      jax.jit(unroll[True])(*args), jax.jit(unroll[False])(*args)
  )


def test_a_disco103_run_with_unrolled_scans_is_the_same_bit_for_bit(
    monkeypatch, tmp_path
):
  wrapped = []
  unroll_scans = unrolling.unroll_scans

  def spy(fn):
    unrolled = unroll_scans(fn)

    def call(*args):
      wrapped.append(unrolling.scan_iterations(fn, *args))
      return unrolled(*args)

    return call

  # Learning from the first iteration: no acting-only program to compile;
  # no evaluation either (Catch's steps have no scans to unroll).
  config = train.TrainConfig(
      rule='disco',
      env_settings={'rows': 5, 'columns': 5},
      rollout_len=4,
      agent_dense=(16,),
      agent_lstm_size=8,
      agent_head_mlp_hiddens=(8,),
      learning_starts=2,
      buffer_capacity=8,
      num_steps=6,
      steps_per_chunk=3,
      eval_every=0,
  )
  rolled = train.run_train(config, num_seeds=2)
  monkeypatch.setattr(train_program.unrolling, 'unroll_scans', spy)
  unrolled = train.run_train(
      config.replace(unroll_inner_scans=True), num_seeds=2
  )
  # The learner step's scans (Retrace's, the meta-network's) were there to
  # unroll; the rollout's steps (Catch) have none.
  assert max(rolled_steps for rolled_steps, _ in wrapped) > 0, wrapped
  chex.assert_trees_all_equal(unrolled.params, rolled.params)
  for name, column in rolled.logs.items():
    if name != 'elapsed':
      np.testing.assert_array_equal(unrolled.logs[name], column, name)
  # A run checkpointed with its scans rolled resumes unrolled.
  train.run_train(
      config.replace(num_steps=3), num_seeds=2, checkpoint_dir=tmp_path
  )
  resumed = train.run_train(
      config.replace(unroll_inner_scans=True),
      num_seeds=2,
      checkpoint_dir=tmp_path,
      resume=True,
  )
  chex.assert_trees_all_equal(resumed.params, rolled.params)


def test_craftax_steps_unrolled_are_the_same_bit_for_bit():
  pytest.importorskip('craftax')
  env = registry.make_environment(
      'craftax:Craftax-Classic-Symbolic-v1', batch_size=4
  )
  state, _ = env.reset(jax.random.key(0))
  actions = jax.random.randint(jax.random.key(1), (200, 4), 0, 17)
  step = jax.jit(env.step_with_truncation)
  unrolled = jax.jit(unrolling.unroll_scans(env.step_with_truncation))
  rolled_steps, _ = unrolling.scan_iterations(
      env.step_with_truncation, state, actions[0]
  )
  assert rolled_steps > 100  # Craftax's step: some 300 iterations.
  assert (
      unrolling.scan_iterations(
          unrolling.unroll_scans(env.step_with_truncation), state, actions[0]
      )[0]
      == 0
  )
  a = b = state
  for action in actions:
    a, *outs_a = step(a, action)
    b, *outs_b = unrolled(b, action)
    chex.assert_trees_all_equal(outs_a, outs_b)
  chex.assert_trees_all_equal(
      jax.random.key_data(a.env_state.rng), jax.random.key_data(b.env_state.rng)
  )
  chex.assert_trees_all_equal(a.env_state.state, b.env_state.state)
  chex.assert_trees_all_equal(a.unlocked, b.unlocked)
