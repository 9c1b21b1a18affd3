"""The agent optimiser of the paper's evaluation protocols.

The reference's agent optimiser (`optimizers.get_agent_optimizer`: Adam,
an element-wise clip of its update, a constant step) with what the paper's
Extended Data Table 6 adds: a step-size schedule and weight decay. The decay
is decoupled (AdamW's, Loshchilov & Hutter 2019): it is added after the clip
and scaled by the step size, so the clip bounds the gradient's direction
only and a weight shrinks by step size x decay per step, whatever Adam's
normaliser. Rationale: docs/training.md.
"""

from typing import Any

import optax

from disco import optimizers

CONSTANT = 'constant'
WARMUP_COSINE = 'warmup_cosine'
SCHEDULES = (CONSTANT, WARMUP_COSINE)
# The reference's agent settings (and the table's): every rule's discount
# and bound on the Adam-normalised update.
DISCOUNT = 0.997
MAX_ABS_UPDATE = 1.0


def learning_rate_schedule(
    *,
    schedule: str,
    learning_rate: float,
    learning_rate_end: float = 0.0,
    warmup_updates: int = 0,
    decay_updates: int = 0,
) -> optax.Schedule:
  """The step size at each learner update (optax's count, from 0).

  Args:
    schedule: 'constant' or 'warmup_cosine'.
    learning_rate: the constant step, or the peak after the warmup.
    learning_rate_end: where the cosine ends.
    warmup_updates: updates of the linear warmup from 0.
    decay_updates: updates at which the cosine reaches its end (warmup
      included); it stays there after.

  Raises:
    ValueError: an unknown schedule, or a warmup longer than the schedule.
  """
  if schedule == CONSTANT:
    return optax.constant_schedule(learning_rate)
  if schedule != WARMUP_COSINE:
    raise ValueError(
        f'Unknown schedule {schedule!r}; choose one of {", ".join(SCHEDULES)}.'
    )
  if not 0 <= warmup_updates < decay_updates:
    raise ValueError(
        f'A warmup of {warmup_updates} updates needs a schedule longer than'
        f' it, got {decay_updates}.'
    )
  if not warmup_updates:
    return optax.cosine_decay_schedule(
        learning_rate, decay_updates, alpha=learning_rate_end / learning_rate
    )
  return optax.warmup_cosine_decay_schedule(
      init_value=0.0,
      peak_value=learning_rate,
      warmup_steps=warmup_updates,
      decay_steps=decay_updates,
      end_value=learning_rate_end,
  )


def agent_optimizer(
    *,
    learning_rate: float | optax.Schedule,
    max_abs_update: float = MAX_ABS_UPDATE,
    weight_decay: float = 0.0,
) -> optax.GradientTransformation:
  """Adam, clip, decoupled weight decay, then the (scheduled) step.

  With a constant step and no decay this is the reference's optimiser,
  `optimizers.get_agent_optimizer`, itself (same state, same rounding).
  """
  if not callable(learning_rate) and not weight_decay:
    return optimizers.get_agent_optimizer(learning_rate, max_abs_update)
  return optax.chain(
      optimizers.scale_by_adam_sg_denom(),
      optax.clip(max_delta=max_abs_update),
      optax.add_decayed_weights(weight_decay),
      optax.scale_by_learning_rate(learning_rate),
  )


def config_optimizer(config: Any) -> optax.GradientTransformation | None:
  """The agent optimiser of a `TrainConfig` (None: the reference's).

  The schedule's environment steps become learner updates at the config's
  `env_steps_per_update`.
  """
  per_update = config.env_steps_per_update
  constant = config.agent_lr_schedule == CONSTANT
  if (
      constant
      and not config.agent_weight_decay
      and config.agent_max_abs_update == MAX_ABS_UPDATE
  ):
    return None
  learning_rate = config.agent_learning_rate
  if not constant:
    learning_rate = learning_rate_schedule(
        schedule=config.agent_lr_schedule,
        learning_rate=config.agent_learning_rate,
        learning_rate_end=config.agent_learning_rate_end,
        warmup_updates=round(config.agent_lr_warmup_env_steps / per_update),
        decay_updates=max(
            1, round(config.agent_lr_decay_env_steps / per_update)
        ),
    )
  return agent_optimizer(
      learning_rate=learning_rate,
      max_abs_update=config.agent_max_abs_update,
      weight_decay=config.agent_weight_decay,
  )
