"""Unit tests for the jittable Catch environment, step by step."""

from absl.testing import absltest
import chex
import jax
from ml_collections import config_dict
import numpy as np

from disco.environments import jittable_envs

_ROWS, _COLUMNS = 5, 5
_LEFT, _STAY, _RIGHT = 0, 1, 2
_MID, _LAST = 1, 2


def _board(ball_y, ball_x, paddle_x):
  board = np.zeros((_ROWS, _COLUMNS, 1), np.float32)
  board[ball_y, ball_x, 0] = 1.0
  board[_ROWS - 1, paddle_x, 0] = 1.0
  return board


class CatchJittableTest(chex.TestCase):

  def setUp(self):
    super().setUp()
    self.env = jittable_envs.CatchJittableEnvironment(
        batch_size=2,
        env_settings=config_dict.ConfigDict(dict(rows=_ROWS, columns=_COLUMNS)),
    )

  def test_specs(self):
    action_spec = self.env.single_action_spec()
    self.assertEqual((action_spec.shape, action_spec.dtype), ((), np.int32))
    self.assertEqual((action_spec.minimum, action_spec.maximum), (0, 2))
    obs_spec = self.env.single_observation_spec()
    self.assertEqual(obs_spec['observation'].shape, (_ROWS, _COLUMNS, 1))

  @chex.variants(with_jit=True, without_jit=True)
  def test_ball_falls_and_episodes_restart(self):
    reset = self.variant(self.env.reset)
    step = self.variant(self.env.step)
    env_state, timestep = reset(jax.random.PRNGKey(3))
    ball_x = np.asarray(env_state.state[:, 1])
    # (ball_y, ball_x, paddle_y, paddle_x): the ball starts in the top row,
    # the paddle in the middle of the bottom row.
    np.testing.assert_array_equal(env_state.state[:, 0], [0, 0])
    np.testing.assert_array_equal(env_state.state[:, 2:], [[4, 2], [4, 2]])
    self.assertTrue(np.all((ball_x >= 0) & (ball_x < _COLUMNS)))
    np.testing.assert_array_equal(timestep.step_type, [_MID, _MID])
    np.testing.assert_array_equal(timestep.reward, [0.0, 0.0])
    for b in range(2):
      np.testing.assert_array_equal(
          timestep.observation[b], _board(0, ball_x[b], 2)
      )

    # Environment 0 chases the ball, environment 1 runs away from it: after
    # rows - 1 = 4 steps the ball reaches the paddle's row, caught by 0
    # (+1) and missed by 1 (-1).
    paddle_x = np.array([2, 2])
    for t in range(1, _ROWS):
      chase = _STAY + np.sign(ball_x[0] - paddle_x[0])
      flee = _LEFT if ball_x[1] >= 2 else _RIGHT
      actions = np.array([chase, flee], np.int32)
      paddle_x = np.clip(paddle_x + actions - 1, 0, _COLUMNS - 1)
      env_state, timestep = step(env_state, actions)
      if t < _ROWS - 1:
        # The ball falls one row per step; nothing is rewarded yet.
        np.testing.assert_array_equal(env_state.state[:, 0], [t, t])
        np.testing.assert_array_equal(env_state.state[:, 1], ball_x)
        np.testing.assert_array_equal(env_state.state[:, 3], paddle_x)
        np.testing.assert_array_equal(timestep.step_type, [_MID, _MID])
        np.testing.assert_array_equal(timestep.reward, [0.0, 0.0])
        for b in range(2):
          np.testing.assert_array_equal(
              timestep.observation[b], _board(t, ball_x[b], paddle_x[b])
          )
    self.assertEqual(paddle_x[0], ball_x[0])
    self.assertNotEqual(paddle_x[1], ball_x[1])
    np.testing.assert_array_equal(timestep.step_type, [_LAST, _LAST])
    np.testing.assert_array_equal(timestep.reward, [1.0, -1.0])
    # The terminal step already returns the next episode's first state and
    # observation: ball back in the top row, paddle back in the middle.
    np.testing.assert_array_equal(env_state.state[:, 0], [0, 0])
    np.testing.assert_array_equal(env_state.state[:, 2:], [[4, 2], [4, 2]])
    new_ball_x = np.asarray(env_state.state[:, 1])
    for b in range(2):
      np.testing.assert_array_equal(
          timestep.observation[b], _board(0, new_ball_x[b], 2)
      )
    # ... and the next step is an ordinary one of the new episode.
    stay = np.full((2,), _STAY, np.int32)
    env_state, timestep = step(env_state, stay)
    np.testing.assert_array_equal(env_state.state[:, 0], [1, 1])
    np.testing.assert_array_equal(env_state.state[:, 1], new_ball_x)
    np.testing.assert_array_equal(timestep.step_type, [_MID, _MID])
    np.testing.assert_array_equal(timestep.reward, [0.0, 0.0])

  def test_reset_is_deterministic_per_key(self):
    first, _ = self.env.reset(jax.random.PRNGKey(7))
    again, _ = self.env.reset(jax.random.PRNGKey(7))
    np.testing.assert_array_equal(first.state, again.state)
    np.testing.assert_array_equal(first.rng, again.rng)


if __name__ == '__main__':
  absltest.main()
