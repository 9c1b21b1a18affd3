"""`TrainState`, the trainer's carry, and what an environment counts.

Shared by the trainer's fused program (`disco.train.program`) and its host
acting (`disco.train.host`).
"""

from typing import Any

import chex
import haiku as hk

from disco import agent as agent_lib
from disco import replay as replay_lib
from disco import types
from disco.environments import base as base_env


@chex.dataclass(frozen=True)
class TrainState:
  """The trainer's carry, per device and seed (the whole checkpoint)."""

  learner_state: agent_lib.LearnerState
  value_state: types.ValueState | None
  actor_state: hk.State
  env_state: Any
  timestep: types.EnvironmentTimestep
  episode_returns: chex.Array  # [N / D] returns of the running episodes.
  replay: replay_lib.ReplayState
  rng: chex.PRNGKey


def achievement_names(env: base_env.Environment) -> tuple[str, ...]:
  """The achievements `env` counts (Craftax-Classic's), else ()."""
  if not hasattr(env, 'achievement_counts'):
    return ()
  return tuple(getattr(env, 'achievement_names', ()))
