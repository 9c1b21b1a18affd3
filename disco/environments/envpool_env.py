"""envpool's batched environments (Atari among them) as a host environment.

`envpool:<task id>` makes `envpool.make(task id, env_type='gymnasium',
num_envs=B, seed=...)` and reads it as a Gymnasium vector env in the
NEXT_STEP autoreset mode (`disco.environments.gymnasium_env`): a finished
copy is reset at once with `reset(env_id)`, so no action is spent on
envpool's reset step, and its final observation is kept. Image
observations [C, H, W] are given to the agents as [H, W, C] uint8 (the
`conv` agents read them as [0, 1]); envpool's own frame stack is turned
off (`stack_num=1`): the trainer stacks frames itself (`frame_stack`).

Atari's preprocessing is envpool's, with its defaults unless
`env_settings` change them (`ATARI_DEFAULTS`): 84x84 grayscale frames,
4 frames skipped with the last two max-pooled, up to 30 no-op starts,
sticky actions off (`repeat_action_probability` 0), episodes not ended on a
life lost (`episodic_life` False), rewards not clipped, 27,000 steps (108,000
frames) at most.
"""

from collections.abc import Mapping
from typing import Any

from dm_env import specs as dm_specs
import numpy as np

from disco import types
from disco.environments import gymnasium_env

PREFIX = 'envpool:'
EXTRA = 'pip install "disco-jax[atari]"'
# What envpool's Atari tasks do unless `env_settings` say otherwise.
ATARI_DEFAULTS = {
    'img_height': 84,
    'img_width': 84,
    'gray_scale': True,
    'frame_skip': 4,
    'noop_max': 30,
    'repeat_action_probability': 0.0,
    'episodic_life': False,
    'reward_clip': False,
    'max_episode_steps': 27000,
}


def _require_envpool() -> Any:
  try:
    import envpool  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(f'envpool environments need envpool: {EXTRA}') from e
  return envpool


class _PoolAsVectorEnv:
  """An envpool pool with the Gymnasium vector env's face, made at reset."""

  metadata = {'autoreset_mode': gymnasium_env.NEXT_STEP}
  autoreset_mode = gymnasium_env.NEXT_STEP

  def __init__(self, make: Any, task_id: str, num_envs: int, settings: dict):
    self._make = lambda seed: make(
        task_id, env_type='gymnasium', num_envs=num_envs, seed=seed, **settings
    )
    self._pool = self._make(0)
    self.num_envs = num_envs
    self.single_observation_space = self._pool.observation_space
    self.single_action_space = self._pool.action_space

  def reset(self, *, seed=None, options=None):
    """All copies afresh (a new pool for a seed), or the masked ones."""
    mask = (options or {}).get('reset_mask')
    if mask is None:
      if seed is not None:
        self._pool.close()
        self._pool = self._make(seed)
      return self._pool.reset()
    observation, info = self._pool.reset(np.flatnonzero(mask))
    full = np.zeros((self.num_envs,) + observation.shape[1:], observation.dtype)
    full[np.asarray(info['env_id'])] = observation
    return full, info

  def step(self, actions):
    return self._pool.step(actions)

  def close(self):
    self._pool.close()


class EnvpoolEnvironment(gymnasium_env.GymnasiumEnvironment):
  """A pool of `batch_size` envpool environments, stepped on the host."""

  def __init__(self, vector_env: Any, name: str):
    super().__init__(vector_env, name)
    shape = tuple(vector_env.single_observation_space.shape)
    self._image = len(shape) == 3
    self._shape = shape[1:] + shape[:1] if self._image else shape

  def _observe(self, observation: Any) -> np.ndarray:
    observation = np.asarray(observation)
    if not self._image:
      return super()._observe(observation)
    return np.moveaxis(observation, -3, -1)  # [..., H, W, C] uint8

  def single_observation_spec(self) -> types.Specs:
    if not self._image:
      return super().single_observation_spec()
    return dm_specs.Array(self._shape, np.uint8)


def make(
    task_id: str, batch_size: int, settings: Mapping[str, Any] | None = None
) -> EnvpoolEnvironment:
  """`batch_size` copies of envpool's `task_id` (Atari: `ATARI_DEFAULTS`).

  Raises:
    ImportError: envpool is not installed (the message names the extra).
    ValueError: `task_id` is not one of envpool's, or its spaces are
      unsupported.
  """
  envpool = _require_envpool()
  if task_id not in envpool.list_all_envs():
    raise ValueError(
        f'envpool has no task {task_id!r} (e.g. Pong-v5, Breakout-v5,'
        ' CartPole-v1; envpool.list_all_envs() lists them).'
    )
  settings = dict(settings or {})
  if task_id.endswith('-v5'):  # Atari.
    settings = ATARI_DEFAULTS | settings | {'stack_num': 1}
  vector_env = _PoolAsVectorEnv(envpool.make, task_id, batch_size, settings)
  return EnvpoolEnvironment(vector_env, name=PREFIX + task_id)
