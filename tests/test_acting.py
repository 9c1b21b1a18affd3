"""Tests for `disco.acting`: unrolls, return accounting and key splitting."""

import functools

import chex
import dm_env
import jax
import jax.numpy as jnp
import numpy as np

from disco import acting
from disco import types
from disco.environments import registry


def _scripted_actor_step(params, rng, timestep, actor_state):
  """An 'actor' that always takes action `params['action']` (no network)."""
  del rng
  batch = timestep.step_type.shape[0]
  actions = jnp.full((batch,), params['action'], jnp.int32)
  logits = jnp.zeros((batch, 3), jnp.float32)
  actor_timestep = types.ActorTimestep(
      observations=timestep.observation,
      actions=actions,
      rewards=timestep.reward,
      discounts=timestep.step_type != dm_env.StepType.LAST,
      agent_outs={'logits': logits, 'extra': logits + 1.0},
      states=actor_state,
      logits=logits,
  )
  return actor_timestep, {'count': actor_state['count'] + 1}


class AccumulateRewardsTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_running_returns_restart_after_last_steps(self):
    rewards = jnp.array([[1.0, 0.0], [2.0, 0.0], [0.5, -1.0], [1.0, 3.0]])
    discounts = jnp.array(
        [[True, True], [False, True], [True, False], [True, True]]
    )
    acc, returns = self.variant(acting.accumulate_rewards)(
        jnp.array([10.0, 0.0]), rewards, discounts
    )
    # Column 0: 11, 13 (episode ends), then 0.5, 1.5. Column 1: 0, 0, -1
    # (episode ends), then 3.
    np.testing.assert_allclose(
        returns, [[11.0, 0.0], [13.0, 0.0], [0.5, -1.0], [1.5, 3.0]]
    )
    np.testing.assert_allclose(acc, [1.5, 3.0])

  @chex.variants(with_jit=True, without_jit=True)
  def test_episode_statistics_count_last_steps_only(self):
    returns = jnp.array([[11.0, 0.0], [13.0, 0.0], [0.5, -1.0], [1.5, 3.0]])
    discounts = jnp.array(
        [[True, True], [False, True], [True, False], [True, True]]
    )
    total, count = self.variant(acting.episode_statistics)(returns, discounts)
    self.assertEqual(float(total), 12.0)  # 13 + (-1)
    self.assertEqual(float(count), 2.0)


def test_episode_statistics_on_host_arrays_in_float64():
  total, count = acting.episode_statistics(
      np.array([[0.1, 0.2]], np.float32), np.array([[False, False]])
  )
  assert total.dtype == np.float64 and count == 2
  np.testing.assert_allclose(
      acting.average_return(total, count), 0.15, rtol=1e-6
  )


def test_average_return_is_nan_without_episodes():
  assert np.isnan(acting.average_return(0.0, 0.0))


def test_split_loop_keys_follows_the_reference_order():
  rng = jax.random.PRNGKey(3)
  next_rng, actor, learner = acting.split_loop_keys(rng, 2)
  expected_next, expected_actor, expected_learner = jax.random.split(rng, 3)
  np.testing.assert_array_equal(next_rng, expected_next)
  np.testing.assert_array_equal(actor, jax.random.split(expected_actor, 2))
  np.testing.assert_array_equal(learner, jax.random.split(expected_learner, 2))
  _, single_actor, _ = acting.split_loop_keys(rng, 2, split_actor_key=False)
  np.testing.assert_array_equal(single_actor, expected_actor)


def test_jittable_unroll_uses_the_given_actor_step():
  env = registry.make_environment('catch', batch_size=3)
  env_state, timestep = env.reset(jax.random.PRNGKey(0))
  unroll = jax.jit(
      functools.partial(
          acting.unroll_jittable_actor,
          env=env,
          rollout_len=9,
          actor_step_fn=_scripted_actor_step,
      )
  )
  rollout, actor_state, timestep, _ = unroll(
      {'action': 0}, {'count': 0}, timestep, env_state, jax.random.PRNGKey(1)
  )
  assert isinstance(rollout, types.ActorRollout)
  chex.assert_shape(rollout.observations, (9, 3, 8, 8, 1))
  assert int(actor_state['count']) == 9
  np.testing.assert_array_equal(rollout.actions, 0)
  # Always moving left from column 4 leaves the paddle at column 0: a 7-step
  # episode ends at step index 7 (its reward arrives there) with +1 only if
  # the ball fell in column 0.
  ended = ~np.asarray(rollout.discounts)
  np.testing.assert_array_equal(ended.sum(0), [1, 1, 1])
  np.testing.assert_array_equal(np.flatnonzero(ended[:, 0]), [7])
  assert set(np.asarray(rollout.rewards[7]).tolist()) <= {-1.0, 1.0}
  np.testing.assert_array_equal(rollout.rewards[:7], 0.0)
  chex.assert_shape(timestep.reward, (3,))


def test_cpu_unroll_gathers_actions_and_keeps_the_device_layout():
  env = registry.make_environment('catch-cpu', batch_size=2, seed=1)
  env_state, timestep = env.reset(jax.random.PRNGKey(0))
  devices = jax.devices()[:1]
  actor_step = jax.pmap(_scripted_actor_step, axis_name='i', devices=devices)
  params = {'action': np.array([2], np.int32)}  # [D]: always right.
  rollout, actor_state, timestep, _ = acting.unroll_cpu_actor(
      params,
      {'count': np.zeros((1,), np.int32)},
      timestep,
      env_state,
      jax.random.PRNGKey(1),
      env=env,
      rollout_len=8,
      actor_step_fn=actor_step,
      devices=devices,
  )
  chex.assert_shape(rollout.observations, (1, 8, 2, 8, 8))  # [D, T, B/D, ...]
  np.testing.assert_array_equal(actor_state['count'], [8])
  np.testing.assert_array_equal(rollout.actions, 2)
  # The first step is the reset (FIRST), the seventh move ends the episode.
  np.testing.assert_array_equal(
      rollout.discounts[0, :, 0], [True] * 7 + [False]
  )
  # The paddle moved right from column 4 and stops at the wall (column 7).
  board = rollout.observations[0, 6, 0]
  assert board[7, 7] == 1.0
  assert isinstance(timestep.observation, np.ndarray)


def test_trim_agent_outs_and_merge_device_axis():
  rollout = types.ActorRollout(
      observations=np.zeros((2, 4, 3)),
      actions=np.arange(24).reshape(2, 4, 3),
      rewards=np.zeros((2, 4, 3)),
      discounts=np.ones((2, 4, 3), bool),
      agent_outs={'logits': np.zeros((2, 4, 3, 3)), 'q': np.zeros(1)},
      states={},
      logits=np.zeros((2, 4, 3, 3)),
  )
  assert set(acting.trim_agent_outs(rollout).agent_outs) == {'logits'}
  merged = acting.merge_device_axis(rollout.actions)  # [T, D * B/D]
  chex.assert_shape(merged, (4, 6))
  np.testing.assert_array_equal(merged[1], [3, 4, 5, 15, 16, 17])
