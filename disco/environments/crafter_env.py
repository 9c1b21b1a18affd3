"""The original Crafter (Hafner, 2021) as a batched host `disco` environment.

The paper's Crafter (its Extended Data Table 5), from the `crafter`
package: 64x64 RGB frames (uint8), 17 actions, episodes of at most 10,000
steps. A copy's episode ends at the player's death (a termination:
Crafter's `discount` 0) or at the step limit (a truncation: `discount` 1,
its final frame kept for bootstrapping); the LAST step carries the next
episode's first frame, as in every `disco` environment. The state is what
the trainer's Crafter score reads: per copy, the episodes ended so far that
unlocked each of the 22 achievements (`achievement_counts`).
"""

from collections.abc import Mapping
from typing import Any

import chex
import dm_env
from dm_env import specs as dm_specs
import jax
import numpy as np

from disco import types
from disco.environments import base
from disco.environments import gymnax_api

NAME = 'crafter'
EXTRA = 'pip install "disco-jax[crafter]"'
# crafter.Env's settings a run may change (`env_settings`).
SETTINGS = ('area', 'view', 'size', 'reward', 'length')
_MID = np.int32(dm_env.StepType.MID)
_LAST = np.int32(dm_env.StepType.LAST)


def _require_crafter() -> Any:
  try:
    import crafter  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(f'Crafter needs the crafter package: {EXTRA}') from e
  return crafter


class CrafterEnvironment(base.Environment):
  """`batch_size` copies of `crafter.Env`, stepped one after another."""

  def __init__(
      self, batch_size: int, settings: Mapping[str, Any] | None = None
  ):
    self._crafter = _require_crafter()
    settings = dict(settings or {})
    unknown = set(settings) - set(SETTINGS)
    if unknown:
      raise ValueError(
          f'Unknown Crafter setting(s) {sorted(unknown)}; known:'
          f' {", ".join(SETTINGS)}.'
      )
    self.batch_size = batch_size
    self._settings = settings
    self._envs = []
    size = tuple(settings.get('size', (64, 64)))
    self._shape = size + (3,)

  @property
  def achievement_names(self) -> tuple[str, ...]:
    """Crafter's 22 achievements, in its own order."""
    return tuple(self._crafter.constants.achievements)

  def achievement_counts(self, state: np.ndarray) -> np.ndarray:
    """[B, 22] episodes ended so far that unlocked each achievement."""
    return state

  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[np.ndarray, types.EnvironmentTimestep]:
    """Fresh copies, seeded from `rng_key`, and their first frames."""
    seeds = jax.random.randint(
        rng_key, (self.batch_size,), 0, np.iinfo(np.int32).max
    )
    self._envs = [
        self._crafter.Env(seed=int(seed), **self._settings)
        for seed in np.asarray(seeds)
    ]
    observation = np.stack([env.reset() for env in self._envs])
    unlocked = np.zeros(
        (self.batch_size, len(self.achievement_names)), np.int32
    )
    return unlocked, types.EnvironmentTimestep(
        observation=observation,
        step_type=np.full((self.batch_size,), _MID, np.int32),
        reward=np.zeros((self.batch_size,), np.float32),
    )

  def step_with_truncation(
      self, state: np.ndarray, actions: chex.Array
  ) -> tuple[np.ndarray, types.EnvironmentTimestep, gymnax_api.Truncation]:
    """One step of every copy; finished ones restart at once."""
    actions = np.asarray(actions).reshape(self.batch_size)
    frames, finals, rewards = [], [], []
    last = np.zeros(self.batch_size, bool)
    truncated = np.zeros(self.batch_size, bool)
    unlocked = np.array(state, np.int32, copy=True)
    for i, env in enumerate(self._envs):
      frame, reward, done, info = env.step(int(actions[i]))
      finals.append(frame)
      rewards.append(reward)
      if done:
        last[i] = True
        truncated[i] = info['discount'] == 1.0
        unlocked[i] += np.array(
            [info['achievements'][n] > 0 for n in self.achievement_names],
            np.int32,
        )
        frame = env.reset()
      frames.append(frame)
    timestep = types.EnvironmentTimestep(
        observation=np.stack(frames),
        step_type=np.where(last, _LAST, _MID).astype(np.int32),
        reward=np.asarray(rewards, np.float32),
    )
    truncation = gymnax_api.Truncation(
        truncated=truncated, final_observation=np.stack(finals)
    )
    return unlocked, timestep, truncation

  def step(
      self, state: np.ndarray, actions: chex.Array
  ) -> tuple[np.ndarray, types.EnvironmentTimestep]:
    state, timestep, _ = self.step_with_truncation(state, actions)
    return state, timestep

  def single_observation_spec(self) -> types.Specs:
    return dm_specs.Array(self._shape, np.uint8)

  def single_action_spec(self) -> types.ActionSpec:
    num = len(self._crafter.constants.actions)
    return dm_specs.BoundedArray((), np.int32, minimum=0, maximum=num - 1)
