"""Pure-JAX environments that can run inside `jit`, `scan` and `pmap`."""

import chex
import jax
import jax.numpy as jnp
from ml_collections import config_dict

from disco.environments.wrappers import batched_jittable_env

# Catch state layout: one int32 vector (ball_y, ball_x, paddle_y, paddle_x).
_BALL_Y, _BALL_X, _PADDLE_Y, _PADDLE_X = range(4)


class _SingleStreamCatch:
  """Catch: a ball falls one row per step; move the paddle under it.

  Actions are 0 (left), 1 (stay) and 2 (right). The episode ends when the
  ball reaches the paddle's row, with reward +1 if caught and -1 otherwise.
  """

  def __init__(self, rows: int = 10, columns: int = 5):
    self._rows = rows
    self._columns = columns

  @property
  def num_actions(self) -> int:
    return 3

  def initial_state(self, rng: chex.PRNGKey) -> chex.Array:
    ball_x = jax.random.randint(rng, (), 0, self._columns)
    return jnp.array(
        (0, ball_x, self._rows - 1, self._columns // 2), dtype=jnp.int32
    )

  def episode_reset(self, rng: chex.PRNGKey, state: chex.Array) -> chex.Array:
    del state
    return self.initial_state(rng)

  def step(
      self, rng: chex.PRNGKey, state: chex.Array, action: chex.Array
  ) -> chex.Array:
    del rng
    paddle_x = jnp.clip(state[_PADDLE_X] + action - 1, 0, self._columns - 1)
    return jnp.array(
        (state[_BALL_Y] + 1, state[_BALL_X], state[_PADDLE_Y], paddle_x),
        dtype=jnp.int32,
    )

  def is_terminal(self, state: chex.Array) -> chex.Array:
    return state[_BALL_Y] == self._rows - 1

  def render(self, state: chex.Array) -> chex.Array:
    """[rows, columns, 1] board with 1.0 at the ball and at the paddle."""
    ys = jnp.arange(self._rows)[:, None]
    xs = jnp.arange(self._columns)[None, :]
    ball = (ys == state[_BALL_Y]) & (xs == state[_BALL_X])
    paddle = (ys == state[_PADDLE_Y]) & (xs == state[_PADDLE_X])
    return (ball | paddle).astype(jnp.float32)[..., None]

  def reward(self, state: chex.Array) -> chex.Array:
    caught = state[_BALL_X] == state[_PADDLE_X]
    outcome = jnp.where(caught, 1.0, -1.0)
    return jnp.where(self.is_terminal(state), outcome, 0.0).astype(jnp.float32)


class CatchJittableEnvironment(batched_jittable_env.BatchedJittableEnvironment):
  """A batch of jittable Catch environments with automatic episode resets."""

  def __init__(
      self,
      batch_size: int,
      env_settings: config_dict.ConfigDict,
  ) -> None:
    """Builds the batch.

    Args:
      batch_size: the number of environments.
      env_settings: `rows` and `columns` of the board.
    """
    super().__init__(_SingleStreamCatch, batch_size, env_settings)


def get_config_catch() -> config_dict.ConfigDict:
  """Default settings of jittable Catch: an 8x8 board."""
  return config_dict.ConfigDict(dict(rows=8, columns=8))
