"""Tests for `disco.environments.gymnax_env`.

The adapter is checked against gymnax's own `reset` and `step`, run one
environment at a time on a separately made gymnax object with the keys the
adapter is documented to derive; against hand-computed episode outcomes
(MemoryChain's terminal reward, CartPole's time limit); and inside `jit`,
`vmap`, `lax.scan` and an agent's actor loop.
"""

import functools
import importlib.metadata
import os
import sys

import chex
import dm_env
from dm_env import specs as dm_specs
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import agent as agent_lib
from disco.environments import gymnax_env
from tests import forced_devices

_MID = int(dm_env.StepType.MID)
_LAST = int(dm_env.StepType.LAST)

# name -> (single observation shape, number of actions).
_ENVS = {
    'Breakout-MinAtar': ((10, 10, 4), 3),
    'CartPole-v1': ((4,), 2),
    'DeepSea-bsuite': ((8, 8), 2),
    'MemoryChain-bsuite': ((3,), 2),
}


# CartPole's float32 physics is fused differently by XLA in the adapter's
# `jit(vmap(...))` than in gymnax's single-environment `step`: observations
# differ by a few ulps (at most 8e-7 over 200 steps when measured). The other
# environments' observations are 0/1 grids or exact values and must match
# bit for bit; rewards and step types are always compared exactly.
_OBS_ATOL = {'CartPole-v1': 1e-6}


_BATCH = 4


@functools.cache
def _env(name: str) -> gymnax_env.GymnaxEnvironment:
  """One adapter of `_BATCH` environments per name and test process."""
  return gymnax_env.GymnaxEnvironment(name, _BATCH)


def _random_actions(
    seed: int, num_steps: int, batch_size: int, num_actions: int
) -> np.ndarray:
  rng = np.random.default_rng(seed)
  return rng.integers(0, num_actions, (num_steps, batch_size), dtype=np.int32)


def _avals(tree: chex.ArrayTree) -> list[jax.core.ShapedArray]:
  """Shapes, dtypes and weak types of every leaf."""
  return [jax.typeof(x) for x in jax.tree.leaves(tree)]


@pytest.mark.parametrize('name', sorted(_ENVS))
def test_matches_gymnax_step_per_environment(name):
  batch_size, num_steps = _BATCH, 40
  env = _env(name)
  ref_env, ref_params = gymnax.make(name)
  assert ref_env is not env.gymnax_env
  actions = _random_actions(0, num_steps, batch_size, _ENVS[name][1])
  rng = jax.random.key(42)

  # Reference: gymnax itself, one environment at a time. Each environment
  # owns key `split(rng, B)[i]`, and splits it into (kept, used) on every
  # reset and step.
  ref_keys, ref_states, ref_obs = [], [], []
  for key in jax.random.split(rng, batch_size):
    key, reset_key = jax.random.split(key)
    obs, state = ref_env.reset(reset_key, ref_params)
    ref_keys.append(key)
    ref_states.append(state)
    ref_obs.append(obs)

  state, timestep = env.reset(rng)
  np.testing.assert_array_equal(timestep.observation, np.stack(ref_obs))
  np.testing.assert_array_equal(timestep.step_type, [_MID] * batch_size)
  np.testing.assert_array_equal(timestep.reward, np.zeros(batch_size))

  num_last, rewards_seen = 0, set()
  for t in range(num_steps):
    ref_obs, ref_rewards, ref_step_types = [], [], []
    for i in range(batch_size):
      ref_keys[i], step_key = jax.random.split(ref_keys[i])
      obs, ref_states[i], reward, terminated, truncated, _ = ref_env.step(
          step_key, ref_states[i], actions[t, i], ref_params
      )
      ref_obs.append(obs)
      ref_rewards.append(reward)
      ref_step_types.append(_LAST if (terminated or truncated) else _MID)
    state, timestep = env.step(state, jnp.asarray(actions[t]))
    np.testing.assert_allclose(
        timestep.observation,
        np.stack(ref_obs),
        rtol=0,
        atol=_OBS_ATOL.get(name, 0),
        err_msg=f'step {t}',
    )
    np.testing.assert_array_equal(
        timestep.reward, np.stack(ref_rewards), err_msg=f'step {t}'
    )
    np.testing.assert_array_equal(
        timestep.step_type, ref_step_types, err_msg=f'step {t}'
    )
    num_last += ref_step_types.count(_LAST)
    rewards_seen.update(np.asarray(ref_rewards).tolist())
  chex.assert_trees_all_close(
      state.state,
      jax.tree.map(lambda *xs: np.stack(xs), *ref_states),
      rtol=0,
      atol=_OBS_ATOL.get(name, 0),
  )
  # The comparison covered episode ends (automatic resets) and rewards.
  assert num_last >= batch_size
  assert any(r != 0 for r in rewards_seen)


def test_per_environment_keys_are_distinct():
  env = _env('MemoryChain-bsuite')
  state, timestep = env.reset(jax.random.key(3))
  keys = jax.random.key_data(state.rng)
  assert len({tuple(k) for k in np.asarray(keys).tolist()}) == _BATCH
  # MemoryChain shows its random context (+1 or -1) in the first observation.
  assert set(np.asarray(timestep.observation[:, 2]).tolist()) == {-1.0, 1.0}
  next_state, _ = env.step(state, jnp.zeros(_BATCH, jnp.int32))
  assert not np.any(
      np.asarray(jax.random.key_data(next_state.rng)) == np.asarray(keys)
  )


def test_raw_uint32_keys_work():
  env = _env('CartPole-v1')
  state, timestep = env.reset(jax.random.PRNGKey(0))
  assert state.rng.shape == (_BATCH, 2) and state.rng.dtype == jnp.uint32
  state, timestep = env.step(state, jnp.array([0, 1, 0, 1], jnp.int32))
  assert state.rng.shape == (_BATCH, 2)
  np.testing.assert_array_equal(timestep.step_type, [_MID] * _BATCH)


def test_auto_reset_reports_terminal_reward_and_next_episode():
  batch_size = _BATCH
  env = _env('MemoryChain-bsuite')
  state, timestep = env.reset(jax.random.key(7))
  context = np.asarray(state.state.context[:, 0])  # [B] in {0, 1}.
  assert set(context.tolist()) == {0, 1}
  # Half the batch answers the memory query right, half wrong.
  right = np.arange(batch_size) < batch_size // 2
  actions = jnp.asarray(np.where(right, context, 1 - context), jnp.int32)
  memory_length = int(env.env_params.memory_length)

  for _ in range(memory_length):
    state, timestep = env.step(state, actions)
    np.testing.assert_array_equal(timestep.step_type, [_MID] * batch_size)
    np.testing.assert_array_equal(timestep.reward, np.zeros(batch_size))
  before_last = state
  state, timestep = env.step(state, actions)

  np.testing.assert_array_equal(timestep.step_type, [_LAST] * batch_size)
  np.testing.assert_array_equal(timestep.reward, np.where(right, 1.0, -1.0))
  # The returned state and observation are the next episode's first ones:
  # gymnax's reset with the second half of this step's key.
  np.testing.assert_array_equal(state.state.time, np.zeros(batch_size))
  _, step_keys = jax.vmap(jax.random.split, out_axes=1)(before_last.rng)
  _, reset_keys = jax.vmap(jax.random.split, out_axes=1)(step_keys)
  ref_obs, ref_state = jax.vmap(env.gymnax_env.reset, in_axes=(0, None))(
      reset_keys, env.env_params
  )
  np.testing.assert_array_equal(timestep.observation, ref_obs)
  chex.assert_trees_all_equal(state.state, ref_state)
  # A fresh episode shows its context again, and continues with MID steps.
  np.testing.assert_array_equal(np.abs(timestep.observation[:, 2]), 1.0)
  _, timestep = env.step(state, actions)
  np.testing.assert_array_equal(timestep.step_type, [_MID] * batch_size)


def test_truncation_is_reported_as_last():
  actions = jnp.array([0, 1, 0, 1], jnp.int32)
  limited = gymnax_env.GymnaxEnvironment(
      'CartPole-v1', 4, env_params={'max_steps_in_episode': 3}
  )
  assert limited.env_params.max_steps_in_episode == 3
  unlimited = _env('CartPole-v1')
  rng = jax.random.key(0)
  state, _ = limited.reset(rng)
  control, _ = unlimited.reset(rng)
  step_types = []
  for t in range(4):
    # Alternate left and right so that the pole cannot fall this early.
    state, timestep = limited.step(state, jnp.roll(actions, t))
    control, control_timestep = unlimited.step(control, jnp.roll(actions, t))
    step_types.append(np.asarray(timestep.step_type).tolist())
    np.testing.assert_array_equal(timestep.reward, np.ones(4))
    np.testing.assert_array_equal(control_timestep.step_type, [_MID] * 4)
    if t == 2:
      np.testing.assert_array_equal(state.state.time, np.zeros(4))
  assert step_types == [[_MID] * 4, [_MID] * 4, [_LAST] * 4, [_MID] * 4]


def test_env_kwargs_reach_gymnax_make():
  env = gymnax_env.GymnaxEnvironment(
      'DeepSea-bsuite', 2, env_kwargs={'size': 5}
  )
  assert env.single_observation_spec()['observation'].shape == (5, 5)
  state, _ = env.reset(jax.random.key(0))
  step_types = []
  for _ in range(5):
    state, timestep = env.step(state, jnp.zeros(2, jnp.int32))
    step_types.append(np.asarray(timestep.step_type).tolist())
  assert step_types == [[_MID] * 2] * 4 + [[_LAST] * 2]


@pytest.mark.parametrize('name', sorted(_ENVS))
def test_specs_and_timestep_types(name):
  obs_shape, num_actions = _ENVS[name]
  batch_size = _BATCH
  env = _env(name)

  action_spec = env.single_action_spec()
  assert isinstance(action_spec, dm_specs.BoundedArray)
  assert action_spec.shape == ()
  assert action_spec.dtype == np.int32
  assert (int(action_spec.minimum), int(action_spec.maximum)) == (
      0,
      num_actions - 1,
  )
  agent_lib.check_action_spec(action_spec)
  obs_spec = env.single_observation_spec()
  assert list(obs_spec) == ['observation']
  assert isinstance(obs_spec['observation'], dm_specs.Array)
  assert obs_spec['observation'].shape == obs_shape
  assert obs_spec['observation'].dtype == np.float32
  batched = env.batched_observation_spec()['observation']
  assert batched.shape == (batch_size,) + obs_shape
  assert env.batched_action_spec().shape == (batch_size,)

  state, reset_timestep = env.reset(jax.random.key(0))
  state, step_timestep = env.step(state, jnp.zeros(batch_size, jnp.int32))
  for timestep in (reset_timestep, step_timestep):
    # Timesteps carry the bare observation array, not the spec's dict.
    assert _avals(timestep.observation) == [
        jax.core.ShapedArray((batch_size,) + obs_shape, jnp.float32)
    ]
    assert jax.typeof(timestep.step_type) == jax.core.ShapedArray(
        (batch_size,), jnp.int32
    )
    assert jax.typeof(timestep.reward) == jax.core.ShapedArray(
        (batch_size,), jnp.float32
    )
    obs_spec['observation'].validate(np.asarray(timestep.observation[0]))


@pytest.mark.parametrize('name', ['Breakout-MinAtar', 'SpaceInvaders-MinAtar'])
def test_jitted_consumer_compiles_once(name):
  # SpaceInvaders' own reset returns a weakly typed state leaf; the adapter
  # must hand out the same types from `reset` and `step`.
  env = _env(name)
  traces = []

  @jax.jit
  def consume(state, timestep):
    traces.append(None)
    leaves = jax.tree.leaves(state.state)
    return (
        timestep.observation.sum()
        + timestep.reward.sum()
        + timestep.step_type.sum()
        + sum(jnp.sum(x) for x in leaves if x.dtype != jnp.bool_)
    )

  state, timestep = env.reset(jax.random.key(0))
  reset_avals = _avals((state, timestep))
  consume(state, timestep)
  for _ in range(2):
    state, timestep = env.step(state, jnp.zeros(_BATCH, jnp.int32))
    assert _avals((state, timestep)) == reset_avals
    consume(state, timestep)
  assert len(traces) == 1


def test_jit_and_scan_match_eager_steps():
  env = _env('CartPole-v1')
  actions = jnp.asarray(_random_actions(1, 30, _BATCH, 2))

  state, timestep = env.reset(jax.random.key(5))
  eager = []
  for a in actions:
    state, timestep = env.step(state, a)
    eager.append(timestep)
  eager = jax.tree.map(lambda *xs: np.stack(xs), *eager)
  eager_final = state

  @jax.jit
  def rollout(rng, actions):
    state, _ = env.reset(rng)
    return jax.lax.scan(env.step, state, actions)

  final, scanned = rollout(jax.random.key(5), actions)
  chex.assert_trees_all_equal(scanned, eager)
  chex.assert_trees_all_equal(final.state, eager_final.state)
  assert (eager.step_type == _LAST).any()

  jit_state, jit_timestep = jax.jit(env.reset)(jax.random.key(5))
  jit_state, jit_timestep = jax.jit(env.step)(jit_state, actions[0])
  chex.assert_trees_all_equal(jit_timestep, jax.tree.map(lambda x: x[0], eager))


def test_vmap_over_seeds_matches_separate_batches():
  env = _env('MemoryChain-bsuite')
  seeds = jax.random.split(jax.random.key(11), 3)
  actions = jnp.asarray(_random_actions(2, 3, _BATCH, 2))  # [seeds, B]

  def reset_and_step(rng, actions):
    state, first = env.reset(rng)
    for _ in range(7):  # Past one episode end (6 steps).
      state, timestep = env.step(state, actions)
    return first, state, timestep

  outs = jax.jit(jax.vmap(reset_and_step))(seeds, actions)
  assert outs[2].observation.shape == (3, _BATCH, 3)
  for s in range(3):
    first, state, timestep = reset_and_step(seeds[s], actions[s])
    chex.assert_trees_all_equal(
        (first, state.state, timestep),
        jax.tree.map(lambda x, s=s: x[s], (outs[0], outs[1].state, outs[2])),
    )
  # The seeds start different episodes (MemoryChain shows its context first).
  first_obs = np.asarray(outs[0].observation).reshape(3, -1)
  assert len({tuple(x) for x in first_obs.tolist()}) == 3


@pytest.mark.parametrize('name', ['Breakout-MinAtar', 'MemoryChain-bsuite'])
def test_agent_actor_step_and_env_step_in_jitted_scan(name):
  batch_size, num_steps = _BATCH, 20
  env = _env(name)
  settings = agent_lib.get_settings_actor_critic()
  settings.net_settings.net_args.dense = (16,)
  settings.net_settings.net_args.model_kwargs.head_mlp_hiddens = (8,)
  settings.net_settings.net_args.model_kwargs.lstm_size = 8
  settings.update_rule.num_bins = 11
  settings.update_rule.max_abs_value = 5.0
  agent = agent_lib.Agent(
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      agent_settings=settings,
      batch_axis_name=None,
  )
  learner_state = agent.initial_learner_state(jax.random.key(0))
  actor_state = agent.initial_actor_state(jax.random.key(1))

  @jax.jit
  def run(params, actor_state, rng):
    reset_rng, rng = jax.random.split(rng)
    env_state, timestep = env.reset(reset_rng)

    def body(carry, step_rng):
      env_state, timestep, actor_state = carry
      actor_timestep, actor_state = agent.actor_step(
          params, step_rng, timestep, actor_state
      )
      env_state, timestep = env.step(env_state, actor_timestep.actions)
      return (env_state, timestep, actor_state), (actor_timestep, timestep)

    _, outs = jax.lax.scan(
        body,
        (env_state, timestep, actor_state),
        jax.random.split(rng, num_steps),
    )
    return outs

  actor_timesteps, env_timesteps = run(
      learner_state.params, actor_state, jax.random.key(2)
  )
  obs_shape, num_actions = _ENVS[name]
  assert actor_timesteps.observations.shape == (
      (num_steps, batch_size) + obs_shape
  )
  assert actor_timesteps.logits.shape == (num_steps, batch_size, num_actions)
  assert np.isfinite(actor_timesteps.logits).all()
  actions = np.asarray(actor_timesteps.actions)
  assert actions.dtype == np.int32
  assert ((actions >= 0) & (actions < num_actions)).all()
  # The actor's discounts are 0 exactly on steps whose input was LAST.
  input_step_types = np.concatenate(
      [np.full((1, batch_size), _MID), env_timesteps.step_type[:-1]]
  )
  np.testing.assert_array_equal(
      actor_timesteps.discounts, input_step_types != _LAST
  )
  assert (env_timesteps.step_type == _LAST).any()


def test_missing_gymnax_names_the_extra(monkeypatch):
  monkeypatch.setitem(sys.modules, 'gymnax', None)
  with pytest.raises(ImportError, match=r'pip install "disco-jax\[envs\]"'):
    gymnax_env.GymnaxEnvironment('CartPole-v1', 2)


def test_old_gymnax_is_rejected(monkeypatch):
  real_version = importlib.metadata.version
  monkeypatch.setattr(
      importlib.metadata,
      'version',
      lambda name: '0.0.9' if name == 'gymnax' else real_version(name),
  )
  with pytest.raises(ImportError, match=r'gymnax>=1\.0\.1.*0\.0\.9'):
    gymnax_env.GymnaxEnvironment('CartPole-v1', 2)


@pytest.mark.parametrize('name', ['Pendulum-v1', 'MountainCarContinuous-v0'])
def test_continuous_actions_are_rejected(name):
  with pytest.raises(ValueError, match='only discrete action spaces'):
    gymnax_env.GymnaxEnvironment(name, 2)


@pytest.mark.parametrize('name', ['Breakout-MinAtr', 'gymnax:CartPole-v1'])
def test_unknown_name_is_rejected(name):
  with pytest.raises(ValueError, match='gymnax.registered_envs') as error:
    gymnax_env.GymnaxEnvironment(name, 2)
  assert 'Breakout-MinAtar' in str(error.value)
  assert 'CartPole-v1' in str(error.value)


def test_bad_arguments_are_rejected():
  with pytest.raises(ValueError, match='max_step_in_episode'):
    gymnax_env.GymnaxEnvironment(
        'CartPole-v1', 2, env_params={'max_step_in_episode': 3}
    )
  with pytest.raises(ValueError, match='batch_size'):
    gymnax_env.GymnaxEnvironment('CartPole-v1', 0)
  env = _env('CartPole-v1')
  state, _ = env.reset(jax.random.key(0))
  with pytest.raises(AssertionError):
    env.step(state, jnp.zeros(_BATCH + 1, jnp.int32))


def test_importing_disco_does_not_import_gymnax():
  script = (
      'import sys\n'
      'import disco\n'
      'from disco.environments import gymnax_env\n'
      'assert "gymnax" not in sys.modules, "gymnax imported eagerly"\n'
      'sys.modules["gymnax"] = None  # As if it were not installed.\n'
      'try:\n'
      '  gymnax_env.GymnaxEnvironment("CartPole-v1", 2)\n'
      'except ImportError as error:\n'
      '  assert \'pip install "disco-jax[envs]"\' in str(error), error\n'
      'else:\n'
      '  raise AssertionError("no ImportError")\n'
  )
  result = forced_devices.run_python(
      script, env=dict(os.environ, JAX_PLATFORMS='cpu'), timeout=120
  )
  assert result.returncode == 0, result.stderr
