"""Unit tests for the host-side (numpy) Catch environment and its wrappers."""

from absl.testing import absltest
import dm_env
from ml_collections import config_dict
import numpy as np

from disco.environments import catch

_ROWS, _COLUMNS = 4, 3


class SingleStreamCatchTest(absltest.TestCase):

  def test_episode(self):
    env = catch.SingleStreamCatch(
        config_dict.ConfigDict(
            dict(rows=_ROWS, columns=_COLUMNS, random_seed=0)
        )
    )
    first = env.reset()
    self.assertEqual(first.step_type, dm_env.StepType.FIRST)
    board = first.observation
    self.assertEqual(board.shape, (_ROWS, _COLUMNS))
    ball_x = int(np.argmax(board[0]))
    self.assertEqual(board[_ROWS - 1, _COLUMNS // 2], 1.0)
    self.assertEqual(board.sum(), 2.0)
    # Move under the ball, then wait: caught after rows - 1 = 3 steps.
    paddle_x = _COLUMNS // 2
    for t in range(1, _ROWS):
      action = 1 + int(np.sign(ball_x - paddle_x))
      paddle_x = min(max(paddle_x + action - 1, 0), _COLUMNS - 1)
      timestep = env.step(action)
      self.assertEqual(timestep.observation[t, ball_x], 1.0)
    self.assertEqual(timestep.step_type, dm_env.StepType.LAST)
    self.assertEqual(timestep.reward, 1.0)
    # The call after the last step starts a new episode (action ignored).
    self.assertEqual(env.step(0).step_type, dm_env.StepType.FIRST)


class BatchedCatchTest(absltest.TestCase):

  def test_terminal_step_carries_the_next_first_observation(self):
    env = catch.CatchEnvironment(
        batch_size=2,
        env_settings=config_dict.ConfigDict(
            dict(rows=_ROWS, columns=_COLUMNS, random_seed=1)
        ),
    )
    _, timestep = env.reset(None)
    np.testing.assert_array_equal(timestep.step_type, [0, 0])  # FIRST
    self.assertEqual(timestep.observation.dtype, np.float32)
    stay = np.ones((2,), np.int32)
    for _ in range(_ROWS - 2):
      _, timestep = env.step(None, stay)
      np.testing.assert_array_equal(timestep.step_type, [1, 1])  # MID
      np.testing.assert_array_equal(timestep.reward, [0.0, 0.0])
    # The ball is one row above the paddle; staying in the middle column
    # catches it only if it falls there.
    ball_x = np.argmax(timestep.observation[:, _ROWS - 2], axis=1)
    _, timestep = env.step(None, stay)
    np.testing.assert_array_equal(timestep.step_type, [2, 2])  # LAST
    np.testing.assert_array_equal(
        timestep.reward, np.where(ball_x == _COLUMNS // 2, 1.0, -1.0)
    )
    # The observation is already the new episode's first board.
    np.testing.assert_array_equal(timestep.observation[:, 0].sum(axis=1), 1.0)
    np.testing.assert_array_equal(
        timestep.observation[:, _ROWS - 1, _COLUMNS // 2], [1.0, 1.0]
    )
    _, timestep = env.step(None, stay)
    np.testing.assert_array_equal(timestep.step_type, [1, 1])


if __name__ == '__main__':
  absltest.main()
