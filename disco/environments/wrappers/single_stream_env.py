"""Adapts a `dm_env.Environment` to the `disco` environment interface.

Only one stream (no batch axis). Episodes chain without a visible FIRST
step: when an episode ends, the wrapper immediately starts the next one and
returns its first observation, labelled LAST and carrying the terminal
reward, the same convention as the jittable environments.
"""

from typing import Any

import chex
import dm_env
import numpy as np

from disco import types
from disco.environments import base


def _to_env_timestep(timestep: dm_env.TimeStep) -> types.EnvironmentTimestep:
  return types.EnvironmentTimestep(
      observation=timestep.observation,
      step_type=np.array(timestep.step_type, dtype=np.int32),
      reward=np.array(timestep.reward or 0.0),
  )


class UnusedEnvState:
  """Placeholder state: host environments keep their state internally."""


class SingleStreamEnv(base.Environment):
  """Wraps one `dm_env.Environment`."""

  def __init__(self, env: Any):
    self._env = env

  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[UnusedEnvState, types.EnvironmentTimestep]:
    """Starts a new episode (the key is unused: the env has its own RNG)."""
    del rng_key
    return UnusedEnvState(), _to_env_timestep(self._env.reset())

  def step(
      self, state: UnusedEnvState | None, action: int
  ) -> tuple[UnusedEnvState, types.EnvironmentTimestep]:
    del state
    timestep = _to_env_timestep(self._env.step(action))
    if timestep.step_type != dm_env.StepType.LAST:
      return UnusedEnvState(), timestep
    # The wrapped env restarts on the call after its last step (the action is
    # ignored); report that first observation with the terminal step's type
    # and reward.
    restart = _to_env_timestep(self._env.step(action))
    return UnusedEnvState(), restart.replace(
        step_type=timestep.step_type, reward=timestep.reward
    )

  def single_observation_spec(self) -> types.Specs:
    return self._env.observation_spec()

  def single_action_spec(self) -> types.ActionSpec:
    return self._env.action_spec()
