"""Catch on the host, with numpy: the reference's CPU environment."""

import dm_env
from dm_env import specs
from ml_collections import config_dict
import numpy as np

from disco.environments.wrappers import batched_env
from disco.environments.wrappers import single_stream_env

_PADDLE_MOVES = (-1, 0, 1)  # Actions 0, 1, 2: left, stay, right.


class SingleStreamCatch(dm_env.Environment):
  """One game of Catch with its own numpy random state.

  The board is [rows, columns] float32 with 1.0 at the ball and the paddle.
  """

  def __init__(self, env_settings: config_dict.ConfigDict):
    """Creates the game from `rows`, `columns` and `random_seed`."""
    self._rows = env_settings.rows
    self._columns = env_settings.columns
    self._rng = np.random.RandomState(env_settings.random_seed)
    self._board = np.zeros((self._rows, self._columns), dtype=np.float32)
    self._ball_x = None
    self._ball_y = None
    self._paddle_x = None
    self._paddle_y = self._rows - 1
    self._reset_next_step = True

  def reset(self) -> dm_env.TimeStep:
    self._reset_next_step = False
    self._ball_x = self._rng.randint(self._columns)
    self._ball_y = 0
    self._paddle_x = self._columns // 2
    return dm_env.restart(self._observation())

  def step(self, action: int) -> dm_env.TimeStep:
    if self._reset_next_step:
      return self.reset()
    self._paddle_x = np.clip(
        self._paddle_x + _PADDLE_MOVES[action], 0, self._columns - 1
    )
    self._ball_y += 1
    if self._ball_y != self._paddle_y:
      return dm_env.transition(reward=0.0, observation=self._observation())
    self._reset_next_step = True
    reward = 1.0 if self._paddle_x == self._ball_x else -1.0
    return dm_env.termination(reward=reward, observation=self._observation())

  def observation_spec(self) -> specs.Array:
    return specs.Array(
        shape=self._board.shape, dtype=self._board.dtype, name='board'
    )

  def action_spec(self) -> specs.BoundedArray:
    return specs.BoundedArray((), np.int32, 0, len(_PADDLE_MOVES) - 1)

  def _observation(self) -> np.ndarray:
    self._board.fill(0.0)
    self._board[self._ball_y, self._ball_x] = 1.0
    self._board[self._paddle_y, self._paddle_x] = 1.0
    return self._board.copy()


def _single_stream_catch(
    env_settings: config_dict.ConfigDict,
) -> single_stream_env.SingleStreamEnv:
  return single_stream_env.SingleStreamEnv(env=SingleStreamCatch(env_settings))


class CatchEnvironment(batched_env.BatchedSingleStreamEnvironment):
  """A batch of host-side Catch games."""

  def __init__(
      self,
      batch_size: int,
      env_settings: config_dict.ConfigDict,
  ) -> None:
    super().__init__(_single_stream_catch, batch_size, env_settings)


def get_config() -> config_dict.ConfigDict:
  """Default settings of CPU Catch: 8x8 board, seed 1."""
  return config_dict.ConfigDict(dict(rows=8, columns=8, random_seed=1))
