"""The checks of a `TrainConfig` that span several fields.

Called by `TrainConfig.__post_init__`: the replay's shape (whole learner
steps per rollout, whole rows in the buffer), the agent network's fields,
and the step-size schedule fitted to the run's budget.
"""

from typing import Any

from disco import configs
from disco import conv_nets
from disco import frame_nets
from disco import schedules
from disco.networks import nets

# The default network: an MLP torso (`disco.networks.nets`).
MLP_NETWORK = 'mlp'


def check_replay(config: Any) -> None:
  """Each reading of the replay ratio gives whole learner steps."""
  check = configs.check
  if config.replay_per_slot:
    pass  # Any number of environments: one learner step per rollout.
  elif config.spread_fresh:
    fresh = config.fresh_per_update
    steps = config.num_envs / fresh if fresh else 1
    check(
        fresh == 0 or steps.denominator == 1,
        f'num_envs ({config.num_envs}) over the fresh trajectories per'
        f' learner step ({fresh} = learner_batch_size'
        f' {config.learner_batch_size} x (1 - replay_fraction'
        f' {config.replay_fraction})) must be whole, got {steps}: take'
        f' num_envs a multiple of {fresh.numerator}.',
    )
  else:
    fresh = config.fresh_per_batch
    check(
        fresh == 0 or config.num_envs % fresh == 0,
        f'num_envs ({config.num_envs}) must be a multiple of the fresh'
        f' trajectories per learner batch ({fresh} = learner_batch_size'
        f' {config.learner_batch_size} - replayed {config.replay_per_batch}).',
    )
  check(
      config.buffer_capacity % config.num_envs == 0,
      f'buffer_capacity ({config.buffer_capacity}) must be a multiple of'
      f' num_envs ({config.num_envs}).',
  )
  check(
      config.learning_starts <= config.buffer_capacity,
      f'learning_starts ({config.learning_starts}) must be at most'
      f' buffer_capacity ({config.buffer_capacity}).',
  )


def check_network(config: Any) -> None:
  """`agent_network` is registered and the fields it reads fit it."""
  check = configs.check
  check(
      isinstance(config.agent_network, str)
      and config.agent_network in nets.network_names(),
      f'Unknown agent_network {config.agent_network!r}; choose one of'
      f' {", ".join(nets.network_names())} or register one with'
      ' disco.networks.nets.register_network.',
  )
  if config.agent_network == conv_nets.NAME:
    object.__setattr__(
        config,
        'agent_conv_channels',
        configs.positive_ints(
            'agent_conv_channels', config.agent_conv_channels
        ),
    )
  else:
    object.__setattr__(
        config, 'agent_conv_channels', tuple(config.agent_conv_channels)
    )
    check(
        config.agent_network != frame_nets.NAME or config.agent_frame_embedding,
        f'agent_network {frame_nets.NAME!r} needs agent_frame_embedding > 0'
        " (or name 'mlp' with agent_frame_embedding).",
    )
    check(
        config.agent_network in (MLP_NETWORK, frame_nets.NAME)
        or not config.agent_frame_embedding,
        "agent_frame_embedding is the 'mlp' and 'conv' networks';"
        f' agent_network is {config.agent_network!r}.',
    )
    check(
        not config.agent_conv_channels,
        "agent_conv_channels are the 'conv' network's; agent_network is"
        f' {config.agent_network!r}.',
    )
  check(
      config.agent_frame_embedding == 0 or config.frame_stack > 1,
      'agent_frame_embedding embeds stacked frames: it needs frame_stack'
      f' > 1, got {config.frame_stack}.',
  )


def fit_schedule(config: Any) -> None:
  """A warmup-cosine step size fitted to the run's budget, then checked."""
  check = configs.check
  if config.agent_lr_schedule == schedules.WARMUP_COSINE:
    budget = config.num_steps * config.env_steps_per_step
    decay = config.agent_lr_decay_env_steps
    if not decay:
      object.__setattr__(config, 'agent_lr_decay_env_steps', budget)
    elif config.agent_lr_fit_budget and decay > budget:
      warmup = round(config.agent_lr_warmup_env_steps * budget / decay)
      object.__setattr__(config, 'agent_lr_warmup_env_steps', warmup)
      object.__setattr__(config, 'agent_lr_decay_env_steps', budget)
    check(
        config.agent_lr_warmup_env_steps <= config.agent_lr_decay_env_steps,
        'agent_lr_warmup_env_steps'
        f' ({config.agent_lr_warmup_env_steps}) must be at most'
        f' agent_lr_decay_env_steps ({config.agent_lr_decay_env_steps}).',
    )
