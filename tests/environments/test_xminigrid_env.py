"""Tests for `disco.environments.xminigrid_env`.

A jitted, `vmap`ped (over seeds) `lax.scan` rollout with a random policy is
checked against xminigrid's own `step` and `reset`, run from the states and
with the keys the adapter is documented to use, and against the adapter's
eager `reset` and `step`; then specs, types, determinism and errors.
Compiling xminigrid's step takes seconds of CPU, so the tests share few
programs. The tests that need xminigrid skip without it; those of the error
messages and names run everywhere (`test_craftax_env` checks that importing
disco imports neither package).
"""

import functools
import sys

import chex
import dm_env
from dm_env import specs as dm_specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import agent as agent_lib
from disco.environments import registry
from disco.environments import xminigrid_env

_MID = int(dm_env.StepType.MID)
_LAST = int(dm_env.StepType.LAST)

# A random start in a 5x5 room: random actions reach the goal (terminal
# reward) or the 100-step limit (truncation) within a short rollout.
_NAME = 'MiniGrid-EmptyRandom-5x5'
_OBS_SHAPE = (7, 7, 2)
_NUM_ACTIONS = 6
_BATCH = 4
_SEEDS = 2
_STEPS = 120


@functools.cache
def _env() -> xminigrid_env.XMinigridEnvironment:
  pytest.importorskip('xminigrid')
  return xminigrid_env.XMinigridEnvironment(_NAME, _BATCH)


def _actions() -> np.ndarray:
  rng = np.random.default_rng(0)
  return rng.integers(0, _NUM_ACTIONS, (_SEEDS, _STEPS, _BATCH), dtype=np.int32)


def _seeds() -> jax.Array:
  return jax.random.split(jax.random.key(42), _SEEDS)


def _second_halves(keys: jax.Array) -> jax.Array:
  return jax.vmap(lambda key: jax.random.split(key)[1])(keys)


@functools.cache
def _rollout_fn():
  """jit(vmap over seeds) of a reset and a scan of steps."""
  env = _env()

  def rollout(rng, actions):
    state, first = env.reset(rng)

    def body(state, action):
      next_state, timestep = env.step(state, action)
      return next_state, (state, next_state, timestep)

    final, outs = jax.lax.scan(body, state, actions)
    return state, first, final, outs

  return jax.jit(jax.vmap(rollout))


@functools.cache
def _rollout():
  return _rollout_fn()(_seeds(), jnp.asarray(_actions()))


def _as_array(x: jax.Array) -> np.ndarray:
  if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  return np.asarray(x)


def _avals(tree: chex.ArrayTree) -> list[jax.core.ShapedArray]:
  return [jax.typeof(x) for x in jax.tree.leaves(tree)]


def test_specs_and_types():
  env = _env()
  action_spec = env.single_action_spec()
  assert isinstance(action_spec, dm_specs.BoundedArray)
  assert action_spec.shape == () and action_spec.dtype == np.int32
  assert (int(action_spec.minimum), int(action_spec.maximum)) == (
      0,
      _NUM_ACTIONS - 1,
  )
  agent_lib.check_action_spec(action_spec)
  obs_spec = env.single_observation_spec()
  assert list(obs_spec) == ['observation']
  assert obs_spec['observation'] == dm_specs.Array(_OBS_SHAPE, np.float32)
  assert env.batched_observation_spec()['observation'].shape == (
      (_BATCH,) + _OBS_SHAPE
  )
  assert env.batched_action_spec().shape == (_BATCH,)

  # Types without compiling: reset and step give equal, strong types.
  state, reset_timestep = jax.eval_shape(env.reset, jax.random.key(0))
  next_state, step_timestep = jax.eval_shape(
      env.step, state, jax.ShapeDtypeStruct((_BATCH,), jnp.int32)
  )
  assert _avals(next_state) == _avals(state)
  for timestep in (reset_timestep, step_timestep):
    assert jax.typeof(timestep.observation) == jax.core.ShapedArray(
        (_BATCH,) + _OBS_SHAPE, jnp.float32
    )
    assert jax.typeof(timestep.step_type) == jax.core.ShapedArray(
        (_BATCH,), jnp.int32
    )
    assert jax.typeof(timestep.reward) == jax.core.ShapedArray(
        (_BATCH,), jnp.float32
    )


def test_rollout_matches_xminigrid_and_restarts_finished_episodes():
  """jit + vmap + scan: each step is xminigrid's, LAST ones restart."""
  env = _env()
  xenv, params = env.xminigrid_env, env.env_params
  state, first, final, (before, after, timesteps) = _rollout()
  np.testing.assert_array_equal(first.step_type, _MID)
  np.testing.assert_array_equal(first.reward, 0.0)
  assert timesteps.observation.shape == (_SEEDS, _STEPS, _BATCH) + _OBS_SHAPE
  assert timesteps.observation.dtype == jnp.float32
  assert timesteps.step_type.dtype == jnp.int32
  assert timesteps.reward.dtype == jnp.float32
  assert _avals(final) == _avals(state)

  # xminigrid's own step, from every state the rollout stepped from.
  def flat(x):
    return x.reshape((-1,) + x.shape[3:])

  def unflat(x):
    return x.reshape((_SEEDS, _STEPS, _BATCH) + x.shape[1:])

  ref_step = jax.jit(jax.vmap(lambda ts, a: xenv.step(params, ts, a)))(
      jax.tree.map(flat, before.state), flat(jnp.asarray(_actions()))
  )
  ref_step = jax.tree.map(unflat, ref_step)
  is_last = np.asarray(timesteps.step_type) == _LAST
  np.testing.assert_array_equal(is_last, ref_step.last())
  np.testing.assert_array_equal(timesteps.reward, ref_step.reward)
  # The random policy ends episodes, by reaching the goal and otherwise.
  assert is_last.any(axis=(1, 2)).all()
  assert (np.asarray(timesteps.reward) > 0).any()
  assert (is_last & (np.asarray(timesteps.reward) == 0)).any()
  assert (np.asarray(timesteps.reward)[~is_last] == 0).all()

  # The next state and observation: xminigrid's step after MID steps, and
  # its reset with the key derived from the environment's own key (the
  # second half of the second half of it) after LAST ones.
  chex.assert_trees_all_equal(
      jax.tree.map(lambda x: _as_array(x)[~is_last], after.state),
      jax.tree.map(lambda x: _as_array(x)[~is_last], ref_step),
      strict=False,
  )
  np.testing.assert_array_equal(
      timesteps.observation[~is_last], ref_step.observation[~is_last]
  )
  reset_keys = _second_halves(_second_halves(before.rng[is_last]))
  ref_reset = jax.jit(jax.vmap(lambda key: xenv.reset(params, key)))(reset_keys)
  chex.assert_trees_all_equal(
      jax.tree.map(lambda x: _as_array(x)[is_last], after.state),
      jax.tree.map(_as_array, ref_reset),
      strict=False,
  )
  np.testing.assert_array_equal(
      timesteps.observation[is_last], ref_reset.observation
  )
  assert (
      len({
          tuple(x)
          for x in ref_reset.observation.reshape(len(reset_keys), -1).tolist()
      })
      > 1
  )
  step_num = np.asarray(after.state.state.step_num)
  np.testing.assert_array_equal(step_num[is_last], 0)
  assert (step_num[~is_last] > 0).all()
  assert env.env_params.max_steps == 100


def test_eager_reset_and_step_match_the_jitted_scan():
  env = _env()
  _, first, final, (_, _, timesteps) = _rollout()
  actions = _actions()
  for s, seed in enumerate(_seeds()):
    state, timestep = env.reset(seed)
    chex.assert_trees_all_equal(timestep, jax.tree.map(lambda x: x[s], first))
    for t in range(_STEPS):
      state, timestep = env.step(state, jnp.asarray(actions[s, t]))
      chex.assert_trees_all_equal(
          timestep, jax.tree.map(lambda x, s=s, t=t: x[s, t], timesteps)
      )
    chex.assert_trees_all_equal(
        jax.tree.map(_as_array, state),
        jax.tree.map(lambda x, s=s: _as_array(x)[s], final),
    )


def test_determinism_from_the_key():
  env = _env()
  _, first, final, (_, _, timesteps) = _rollout()
  again = _rollout_fn()(_seeds(), jnp.asarray(_actions()))
  chex.assert_trees_all_equal(
      jax.tree.map(_as_array, (first, timesteps, final)),
      jax.tree.map(_as_array, (again[1], again[3][2], again[2])),
  )
  # Different keys start different episodes (random start), also across the
  # batch: each environment has its own key.
  first_obs = np.asarray(first.observation).reshape(_SEEDS * _BATCH, -1)
  assert len({tuple(x) for x in first_obs.tolist()}) > _BATCH
  state, _ = env.reset(jax.random.PRNGKey(0))  # Raw keys work too.
  assert state.rng.shape == (_BATCH, 2) and state.rng.dtype == jnp.uint32


def test_registry_builds_it():
  pytest.importorskip('xminigrid')
  env = registry.make_environment('xminigrid:' + _NAME, batch_size=2)
  assert isinstance(env, xminigrid_env.XMinigridEnvironment)
  assert env.batch_size == 2 and env.env_name == _NAME
  assert registry.is_jittable(env)
  with pytest.raises(ValueError, match="Unknown setting.*'a'.*fields"):
    registry.make_environment('xminigrid:' + _NAME, 2, settings={'a': 1})
  limited = registry.make_environment(
      'xminigrid:' + _NAME, 2, settings={'max_steps': 7}
  )
  assert limited.env_params.max_steps == 7
  assert env.env_params.max_steps != 7


def test_step_limit_is_reported_as_a_truncation():
  pytest.importorskip('xminigrid')
  limit = 3
  env = registry.make_environment(
      'xminigrid:MiniGrid-Empty-6x6', 2, settings={'max_steps': limit}
  )
  state, timestep = env.reset(jax.random.key(0))
  turn = jnp.full((2,), 2, jnp.int32)  # Turning in place reaches no goal.
  for t in range(1, limit + 2):
    state, timestep, truncation = env.step_with_truncation(state, turn)
    at_limit = t == limit
    np.testing.assert_array_equal(
        timestep.step_type == dm_env.StepType.LAST, [at_limit] * 2
    )
    np.testing.assert_array_equal(truncation.truncated, [at_limit] * 2)
    # The final observation differs from the restarted one at the limit only.
    same = np.all(
        np.isclose(truncation.final_observation, timestep.observation),
        axis=(1, 2, 3),
    )
    np.testing.assert_array_equal(same, [not at_limit] * 2)


def test_bad_arguments_are_rejected():
  pytest.importorskip('xminigrid')
  with pytest.raises(ValueError, match='MiniGrid-Empty-8x8'):
    xminigrid_env.XMinigridEnvironment('MiniGrid-Empty-8x9', 2)
  with pytest.raises(ValueError, match='needs a ruleset'):
    xminigrid_env.XMinigridEnvironment('XLand-MiniGrid-R1-9x9', 2)
  with pytest.raises(ValueError, match='max_step'):
    xminigrid_env.XMinigridEnvironment(_NAME, 2, env_params={'max_step': 3})
  with pytest.raises(ValueError, match='batch_size'):
    xminigrid_env.XMinigridEnvironment(_NAME, 0)
  env = xminigrid_env.XMinigridEnvironment(
      'MiniGrid-Empty-6x6', 2, env_params={'view_size': 3, 'max_steps': 7}
  )
  assert env.single_observation_spec()['observation'].shape == (3, 3, 2)
  assert env.env_params.max_steps == 7


def test_registry_names():
  assert 'xminigrid:<env id>' in registry.NAMES
  assert registry.is_known_name('xminigrid:MiniGrid-Empty-8x8')
  assert registry.is_jittable_name('xminigrid:MiniGrid-Empty-8x8')
  assert not registry.is_known_name('xminigrid:')
  assert not registry.is_jittable_name('xminigrid:')
  with pytest.raises(registry.UnknownEnvironmentError, match='MiniGrid-Empty'):
    registry.make_environment('xminigrid:', batch_size=2)


def test_missing_xminigrid_names_the_extra(monkeypatch):
  # A None entry in sys.modules makes the import fail as if not installed.
  monkeypatch.setitem(sys.modules, 'xminigrid', None)
  with pytest.raises(
      ImportError, match=r'pip install "disco-jax\[xminigrid\]"'
  ):
    registry.make_environment('xminigrid:' + _NAME, batch_size=2)
