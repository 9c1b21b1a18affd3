"""Reward scale: the environment's rewards as the learner sees them.

Disco103's meta-network reads rewards, values and advantages through a
signed log (`rlax.signed_logp1`), and its q head is a categorical
distribution over a fixed support, so the rule is not blind to the units of
an environment's rewards. `reward_scale` multiplies the rewards of every
rollout before the replay buffer, the value function and the update rule
see them; returns, Crafter scores and every logged return are summed from
the environment's own rewards. 1.0 leaves a rollout untouched (the
reference's behaviour). Rationale and measurements: `docs/results/reward_scale.md`.
"""

import math
from typing import Any, TypeVar

import numpy as np

from disco import configs

# The scale every run had before `reward_scale` existed: rewards as given.
UNSCALED = 1.0

_Rollout = TypeVar('_Rollout')


def scale_rewards(rollout: _Rollout, reward_scale: float) -> _Rollout:
  """`rollout` with its rewards [T+1, B] times `reward_scale`.

  At 1.0 the rollout itself is returned, so an unscaled run computes what
  it did before the setting existed, bit for bit. Apply it after the
  environment's returns are accumulated, and before anything learns.
  """
  if reward_scale == UNSCALED:
    return rollout
  rewards = rollout.rewards  # A jax or numpy array, kept as it is.
  return rollout.replace(
      rewards=rewards * np.asarray(reward_scale, rewards.dtype)
  )


def check_reward_scale(config: Any) -> None:
  """Raises `ConfigError` unless `config.reward_scale` is finite and > 0."""
  value = config.reward_scale
  configs.check(
      isinstance(value, (int, float))
      and not isinstance(value, bool)
      and math.isfinite(value)
      and value > 0,
      "reward_scale must be a finite number > 0 (1.0: the environment's"
      f' rewards as given), got {value!r}.',
  )
