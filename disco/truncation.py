"""Time limits that are not terminations, and targets that bootstrap there.

A `TruncatedRollout` records which LAST steps were time limits and the
observations those episodes ended in; `bootstrap_rewards` adds
`discount * V(final observation)` to those steps' rewards, so that every
update rule's targets bootstrap there. Details: `docs/training.md`.
"""

from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp

from disco import types

BOOTSTRAP = 'bootstrap'
TERMINATE = 'terminate'
# The ways a learner can treat a truncated step (`TrainConfig.truncation`).
MODES = (BOOTSTRAP, TERMINATE)

# (observations [T+1, B, ...]) -> [T+1, B] state values.
ValuesFn = Callable[[chex.ArrayTree], chex.Array]


@chex.dataclass
class TruncatedRollout(types.ActorRollout):
  """An `ActorRollout` that tells time limits apart from terminations.

  Mutable, as the rollout it extends (the reference's are).

  Attributes:
    truncated: [T+1, B] bool, True at LAST steps (discount False) where the
      episode reached its time limit without terminating. Always False at
      index 0, which starts no transition of this rollout.
    final_observations: [T+1, B, ...] the observation each environment
      reached at that step, before any automatic restart: at a LAST step
      the episode's final observation (`observations` holds the next
      episode's first one); elsewhere the same as `observations`.
  """

  truncated: chex.Array
  final_observations: chex.ArrayTree

  def as_actor_rollout(self) -> types.ActorRollout:
    """The rollout without the truncation fields."""
    fields = {
        name: getattr(self, name)
        for name in types.ActorRollout.__dataclass_fields__
    }
    return types.ActorRollout(**fields)


def reports_truncation(env: Any) -> bool:
  """Whether `env` reports time limits (has `step_with_truncation`).

  gymnax, Craftax and xminigrid adapters do; Catch has no time limit.
  """
  return callable(getattr(env, 'step_with_truncation', None))


def check_mode(mode: str) -> str:
  """`mode` if it is one of `MODES`; a ValueError naming them otherwise."""
  if mode not in MODES:
    raise ValueError(
        f'Unknown truncation mode {mode!r}; choose one of {", ".join(MODES)}.'
    )
  return mode


def bootstrap_rewards(
    rollout: TruncatedRollout, final_values: chex.Array, discount: float
) -> types.ActorRollout:
  """The rollout whose truncated steps' rewards include the bootstrap.

  Transition t goes from step t to step t+1 and its reward is the one
  stored at t+1; where step t+1 was truncated, that reward becomes
  `r + discount * V(s_final)`. The step stays LAST (discount False), so
  that no target looks past it into the next episode.

  Args:
    rollout: a rollout [T+1, B, ...].
    final_values: [T+1, B] state values of `rollout.final_observations`
      (only those at truncated steps are read); no gradient flows into them.
    discount: the discount of the targets these rewards feed.

  Returns:
    A plain `ActorRollout` with the new rewards.
  """
  chex.assert_equal_shape([rollout.rewards, rollout.truncated, final_values])
  bootstrap = discount * jax.lax.stop_gradient(final_values)
  rewards = jnp.where(
      rollout.truncated, rollout.rewards + bootstrap, rollout.rewards
  )
  return rollout.as_actor_rollout().replace(
      rewards=rewards.astype(rollout.rewards.dtype)
  )


def bootstrap_if_truncated(
    rollout: TruncatedRollout, values_fn: ValuesFn, discount: float
) -> types.ActorRollout:
  """`bootstrap_rewards` with `values_fn(rollout.final_observations)`.

  The values are computed only when some step of the rollout was truncated
  (under `vmap` both branches run); otherwise the rewards are returned
  unchanged.

  Args:
    rollout: a rollout [T+1, B, ...].
    values_fn: observations [T+1, B, ...] -> [T+1, B] state values, in the
      form the rule's targets bootstrap with.
    discount: the discount of those targets.

  Returns:
    A plain `ActorRollout`.
  """

  def _with_bootstrap(rollout: TruncatedRollout) -> chex.Array:
    values = values_fn(rollout.final_observations)
    return bootstrap_rewards(rollout, values, discount).rewards

  rewards = jax.lax.cond(
      jnp.any(rollout.truncated),
      _with_bootstrap,
      lambda rollout: rollout.rewards,
      rollout,
  )
  return rollout.as_actor_rollout().replace(rewards=rewards)
