"""Tests for `disco.environments.craftax_env`.

Compiling Craftax's step takes tens of seconds of CPU, so the default tests
compile one program: a jitted, `vmap`ped (over seeds) `lax.scan` rollout of
Craftax-Classic with a random policy, whose episode ends are checked against
Craftax's own world generation. The comparison of the adapter's eager
`reset` and `step` with Craftax's own `...AutoReset` class compiles two more
and is marked slow. The tests that need craftax skip without it; those of
the error messages and names run everywhere.
"""

import functools
import os
import sys

import chex
import dm_env
from dm_env import specs as dm_specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import agent as agent_lib
from disco.environments import craftax_env
from disco.environments import registry
from tests import forced_devices

_MID = int(dm_env.StepType.MID)
_LAST = int(dm_env.StepType.LAST)

_NAME = craftax_env.CLASSIC_SYMBOLIC
_OBS_SIZE = 1345
_NUM_ACTIONS = 17
_BATCH = 4
_SEEDS = 2
# Long enough for a random policy to die in every batch (a random player
# lives about 100 to 200 steps), far below the 10,000-step time limit.
_STEPS = 300


@functools.cache
def _env() -> craftax_env.CraftaxEnvironment:
  pytest.importorskip('craftax')
  return craftax_env.CraftaxEnvironment(_NAME, _BATCH)


def _actions(steps: int = _STEPS, batch_size: int = _BATCH) -> np.ndarray:
  rng = np.random.default_rng(0)
  return rng.integers(
      0, _NUM_ACTIONS, (_SEEDS, steps, batch_size), dtype=np.int32
  )


def _seeds() -> jax.Array:
  return jax.random.split(jax.random.key(42), _SEEDS)


def _second_halves(keys: jax.Array) -> jax.Array:
  return jax.vmap(lambda key: jax.random.split(key)[1])(keys)


@functools.cache
def _rollout_fn():
  """jit(vmap over seeds) of a reset and a scan of random-policy steps."""
  env = _env()

  def rollout(rng, actions):
    state, first = env.reset(rng)

    def body(state, action):
      next_state, timestep = env.step(state, action)
      # The key the adapter must have used to restart a finished episode.
      reset_keys = _second_halves(_second_halves(state.env_state.rng))
      unlocked = env.achievement_counts(next_state) - env.achievement_counts(
          state
      )
      return next_state, (
          timestep,
          reset_keys,
          next_state.env_state.state.timestep,
          unlocked,
          state.env_state.state.achievements,
      )

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


def _assert_timestep_types(timestep, batch_size=_BATCH):
  assert jax.typeof(timestep.observation) == jax.core.ShapedArray(
      (batch_size, _OBS_SIZE), jnp.float32
  )
  assert jax.typeof(timestep.step_type) == jax.core.ShapedArray(
      (batch_size,), jnp.int32
  )
  assert jax.typeof(timestep.reward) == jax.core.ShapedArray(
      (batch_size,), jnp.float32
  )


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
  assert obs_spec['observation'] == dm_specs.Array((_OBS_SIZE,), np.float32)
  assert env.batched_observation_spec()['observation'].shape == (
      _BATCH,
      _OBS_SIZE,
  )
  assert env.batched_action_spec().shape == (_BATCH,)
  assert not env.auto_resets  # The adapter restarts episodes itself.
  assert env.env_params.max_timesteps == 10_000

  # Types without compiling: reset and step give equal, strong types.
  state, reset_timestep = jax.eval_shape(env.reset, jax.random.key(0))
  next_state, step_timestep = jax.eval_shape(
      env.step, state, jax.ShapeDtypeStruct((_BATCH,), jnp.int32)
  )
  assert _avals(next_state) == _avals(state)
  _assert_timestep_types(reset_timestep)
  _assert_timestep_types(step_timestep)


def test_full_craftax_specs():
  pytest.importorskip('craftax')
  env = registry.make_environment('craftax:' + craftax_env.SYMBOLIC, 2)
  assert isinstance(env, craftax_env.CraftaxEnvironment)
  assert env.single_observation_spec()['observation'] == dm_specs.Array(
      (8268,), np.float32
  )
  assert int(env.single_action_spec().maximum) == 42  # 43 actions.


def test_random_policy_rollout_under_jit_vmap_and_scan():
  state, first, final, (timesteps, reset_keys, craftax_time, *_) = _rollout()
  np.testing.assert_array_equal(first.step_type, _MID)
  np.testing.assert_array_equal(first.reward, 0.0)
  _assert_timestep_types(jax.tree.map(lambda x: x[0], first))
  _assert_timestep_types(jax.tree.map(lambda x: x[0, 0], timesteps))
  assert _avals(final) == _avals(state)
  obs = np.asarray(timesteps.observation)
  assert np.isfinite(obs).all() and obs.min() >= 0 and obs.max() <= 1

  # The random policy dies in every batch; the step that ends an episode is
  # LAST and the next episode starts at Craftax's time 0.
  is_last = np.asarray(timesteps.step_type) == _LAST
  assert is_last.any(axis=(1, 2)).all()
  craftax_time = np.asarray(craftax_time)
  np.testing.assert_array_equal(craftax_time[is_last], 0)
  previous_time = np.concatenate(
      [np.zeros((_SEEDS, 1, _BATCH), np.int32), craftax_time[:, :-1]], axis=1
  )
  np.testing.assert_array_equal(
      craftax_time[~is_last], previous_time[~is_last] + 1
  )
  assert (np.asarray(timesteps.reward) != 0).any()

  # The next episode is Craftax's world for the environment's own key. The
  # reference generates one world at a time, as the adapter does: world
  # generation thresholds float noise, and a vmapped one can place a few
  # tiles differently (XLA computes some batch entries differently).
  craftax = _env().craftax_env
  reset = jax.jit(functools.partial(craftax.reset, params=_env().env_params))
  ref_obs = np.stack([reset(key)[0] for key in reset_keys[is_last]])
  np.testing.assert_array_equal(obs[is_last], ref_obs)
  assert len({tuple(x) for x in ref_obs.tolist()}) > 1


def test_ended_episodes_count_their_achievements():
  _, _, _, (timesteps, _, _, unlocked, before) = _rollout()
  is_last = np.asarray(timesteps.step_type) == _LAST  # [S, T, B]
  unlocked, before = np.asarray(unlocked), np.asarray(before)
  # Counts move only where an episode ended, by at most one each.
  assert set(np.unique(unlocked)) <= {0, 1}
  assert not unlocked[~is_last].any()
  # An ended episode counts at least what it had unlocked before its last
  # step (read before the restart; after it, the new episode has none).
  assert np.all(unlocked[is_last] >= before[is_last])
  assert before[is_last].sum() > 0  # Some ended episodes had unlocked some.
  assert _env().achievement_names == craftax_env.CLASSIC_ACHIEVEMENTS
  assert len(craftax_env.CLASSIC_ACHIEVEMENTS) == unlocked.shape[-1] == 22


def test_grid_and_pixel_observations():
  pytest.importorskip('craftax')
  key = jax.random.key(3)
  flat_env = craftax_env.CraftaxEnvironment(_NAME, 2)
  grid_env = craftax_env.CraftaxEnvironment(craftax_env.CLASSIC_GRID, 2)
  assert grid_env.single_observation_spec()['observation'] == dm_specs.Array(
      (7, 9, 43), np.float32
  )
  _, flat = flat_env.reset(key)
  _, grid = grid_env.reset(key)
  flat, grid = np.asarray(flat.observation), np.asarray(grid.observation)
  # The map's 21 channels, row by row; the 22 other features at every cell.
  np.testing.assert_array_equal(grid[..., :21].reshape(2, -1), flat[:, :1323])
  np.testing.assert_array_equal(grid[:, 3, 4, 21:], flat[:, 1323:])
  np.testing.assert_array_equal(grid[:, 0, 0, 21:], flat[:, 1323:])
  pixel_env = craftax_env.CraftaxEnvironment(craftax_env.CLASSIC_PIXELS, 2)
  assert pixel_env.single_observation_spec()['observation'] == (
      dm_specs.Array((63, 63, 3), np.uint8)
  )
  state, pixels = pixel_env.reset(key)
  craftax = pixel_env.craftax_env
  reference = np.asarray(craftax.get_obs(
      jax.tree.map(lambda x: x[0], state.env_state.state)))  # fmt: skip
  assert pixels.observation.dtype == jnp.uint8
  # Rounded to the nearest of 256 levels: at most half a level off.
  np.testing.assert_allclose(
      np.asarray(pixels.observation[0]) / 255.0, reference, atol=0.5 / 255
  )


def test_determinism_from_the_key():
  _, first, final, (timesteps, *_) = _rollout()
  again = _rollout_fn()(_seeds(), jnp.asarray(_actions()))
  chex.assert_trees_all_equal((first, timesteps), (again[1], again[3][0]))
  chex.assert_trees_all_equal(
      jax.tree.map(_as_array, final), jax.tree.map(_as_array, again[2])
  )
  # Each environment, in each seed, starts in a different world.
  first_obs = np.asarray(first.observation).reshape(_SEEDS * _BATCH, -1)
  assert len({tuple(x) for x in first_obs.tolist()}) == _SEEDS * _BATCH


@pytest.mark.slow
def test_eager_steps_match_craftax_auto_reset_class():
  # A short time limit, so that episodes end (truncated) and restart often.
  pytest.importorskip('craftax')
  from craftax import craftax_env as craftax_make  # pylint: disable=g-import-not-at-top

  batch_size, num_steps, time_limit = 3, 25, 10
  env = craftax_env.CraftaxEnvironment(
      _NAME, batch_size, env_params={'max_timesteps': time_limit}
  )
  reference = craftax_make.make_craftax_env_from_name(_NAME, auto_reset=True)
  params = env.env_params
  actions = _actions(num_steps, batch_size)[0]
  rng = jax.random.key(7)

  # One environment at a time (see the note on world generation above), with
  # its key split as the adapter documents: (kept, used) at every reset and
  # step; the `...AutoReset` class splits the used key into its step's and
  # its reset's.
  @jax.jit
  def reference_rollout(key, actions):
    key, reset_key = jax.random.split(key)
    obs, state = reference.reset(reset_key, params)

    def body(carry, action):
      key, state = carry
      key, step_key = jax.random.split(key)
      obs, state, reward, done, _ = reference.step(
          step_key, state, action, params
      )
      return (key, state), (obs, reward, done)

    (_, state), outs = jax.lax.scan(body, (key, state), actions)
    return obs, state, outs

  refs = [
      reference_rollout(key, jnp.asarray(actions[:, i]))
      for i, key in enumerate(jax.random.split(rng, batch_size))
  ]
  # Stack the environments: [B, ...] and [T, B, ...].
  ref_first_obs = np.stack([ref[0] for ref in refs])
  ref_states = jax.tree.map(
      lambda *xs: jnp.stack(xs), *[ref[1] for ref in refs]
  )
  ref_obs, ref_reward, ref_done = jax.tree.map(
      lambda *xs: np.stack(xs, axis=1), *[ref[2] for ref in refs]
  )

  state, timestep = env.reset(rng)
  np.testing.assert_array_equal(timestep.observation, ref_first_obs)
  for t in range(num_steps):
    state, timestep = env.step(state, jnp.asarray(actions[t]))
    np.testing.assert_allclose(
        timestep.observation, ref_obs[t], rtol=0, atol=1e-6, err_msg=f'{t}'
    )
    np.testing.assert_allclose(
        timestep.reward, ref_reward[t], rtol=0, atol=1e-6, err_msg=f'{t}'
    )
    np.testing.assert_array_equal(
        timestep.step_type, np.where(ref_done[t], _LAST, _MID), f'{t}'
    )
  chex.assert_trees_all_close(
      jax.tree.map(_as_array, state.env_state.state),
      jax.tree.map(_as_array, ref_states),
      rtol=0,
      atol=1e-6,
  )
  assert np.asarray(ref_done).sum() >= 2 * batch_size


def test_registry_builds_it():
  pytest.importorskip('craftax')
  env = registry.make_environment('craftax:' + _NAME, batch_size=2)
  assert isinstance(env, craftax_env.CraftaxEnvironment)
  assert env.batch_size == 2 and env.env_name == _NAME
  assert registry.is_jittable(env)
  with pytest.raises(ValueError, match="Unknown setting.*'a'.*fields"):
    registry.make_environment('craftax:' + _NAME, 2, settings={'a': 1})
  limited = registry.make_environment(
      'craftax:' + _NAME, 2, settings={'max_timesteps': 7}
  )
  assert limited.env_params.max_timesteps == 7
  assert env.env_params.max_timesteps == 10000


def test_time_limit_is_reported_as_a_truncation():
  pytest.importorskip('craftax')
  limit = 3
  env = registry.make_environment(
      'craftax:' + _NAME, 2, settings={'max_timesteps': limit}
  )
  state, timestep = env.reset(jax.random.key(0))
  noop = jnp.zeros((2,), jnp.int32)  # Action 0: no move, nobody dies.
  for t in range(1, limit + 1):
    previous = timestep
    state, timestep, truncation = env.step_with_truncation(state, noop)
    at_limit = t == limit
    np.testing.assert_array_equal(
        timestep.step_type == dm_env.StepType.LAST, [at_limit] * 2
    )
    np.testing.assert_array_equal(truncation.truncated, [at_limit] * 2)
  # The world was generated anew; the final observation is the old world's.
  final = np.asarray(truncation.final_observation)
  assert not np.allclose(final, timestep.observation)
  # Nothing moved in the old world: only its clock and light changed.
  assert np.mean(np.isclose(final, previous.observation)) > 0.9


def test_bad_arguments_are_rejected():
  pytest.importorskip('craftax')
  with pytest.raises(ValueError, match='max_timestep'):
    craftax_env.CraftaxEnvironment(_NAME, 2, env_params={'max_timestep': 3})
  with pytest.raises(ValueError, match='batch_size'):
    craftax_env.CraftaxEnvironment(_NAME, 0)


def test_unknown_names_are_rejected():
  # Checked before craftax is imported: these run without it too.
  with pytest.raises(ValueError, match='Craftax-Classic-Symbolic-v1'):
    craftax_env.CraftaxEnvironment('Craftax-Pixels-v1', 2)
  with pytest.raises(
      registry.UnknownEnvironmentError, match='craftax:Craftax-Symbolic-v1'
  ):
    registry.make_environment('craftax:Craftax-Pixels-v1', batch_size=2)


def test_registry_names():
  assert registry.CRAFTAX_NAMES == (
      'craftax:Craftax-Classic-Symbolic-v1',
      'craftax:Craftax-Symbolic-v1',
      'craftax:Craftax-Classic-Pixels-v1',
      'craftax:Craftax-Classic-Symbolic-Grid-v1',
  )
  for name in registry.CRAFTAX_NAMES:
    assert name in registry.NAMES
    assert registry.is_known_name(name) and registry.is_jittable_name(name)
  for name in ('craftax:', 'craftax:Craftax-Pixels-v1', 'Craftax-Symbolic-v1'):
    assert not registry.is_known_name(name)
    assert not registry.is_jittable_name(name)
  # The other names, for completeness.
  assert registry.is_known_name('catch') and registry.is_jittable_name('catch')
  assert registry.is_known_name('catch-cpu')
  assert not registry.is_jittable_name('catch-cpu')
  assert registry.is_jittable_name('gymnax:CartPole-v1')
  for name in ('gymnax:', 'pong', '', None):
    assert not registry.is_known_name(name)
    assert not registry.is_jittable_name(name)


def test_missing_craftax_names_the_extra(monkeypatch):
  # None entries in sys.modules make the import fail as if not installed
  # (the submodule too, in case an earlier test imported it).
  monkeypatch.setitem(sys.modules, 'craftax', None)
  monkeypatch.setitem(sys.modules, 'craftax.craftax_env', None)
  with pytest.raises(ImportError, match=r'pip install "disco-jax\[craftax\]"'):
    registry.make_environment('craftax:' + _NAME, batch_size=2)


def test_importing_disco_imports_neither_craftax_nor_xminigrid():
  script = (
      'import sys\n'
      'import disco\n'
      'from disco.environments import registry\n'
      'assert "craftax" not in sys.modules, "craftax imported eagerly"\n'
      'assert "xminigrid" not in sys.modules, "xminigrid imported eagerly"\n'
  )
  result = forced_devices.run_python(
      script, env=dict(os.environ, JAX_PLATFORMS='cpu'), timeout=120
  )
  assert result.returncode == 0, result.stderr
