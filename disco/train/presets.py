"""The trainer's presets: named settings, agents and the paper's protocols.

`preset(name, agent=..., **changes)` makes a `TrainConfig`: a preset's
fields (the colab's, the paper's meta-training batches, or one of its
evaluation protocols), then an agent's network sizes, then the changes.
"""

from collections.abc import Mapping
from typing import Any

from disco import configs
from disco import conv_nets
from disco import replay
from disco import schedules
from disco.train.config import MLP_NETWORK
from disco.train.config import TrainConfig

COLAB = 'colab'
PAPER = 'paper'
MINATAR = 'minatar'
CRAFTAX = 'craftax'
CRAFTAX_FRAMES = 'craftax_frames'
# Convolutional agents (`disco.conv_nets`): a small one a CPU trains, the
# same with each stacked frame embedded alone, and the paper's.
CONV = 'conv'
CONV_FRAMES = 'conv_frames'
# The paper's evaluation protocols (its Extended Data Table 6).
CRAFTER = 'crafter'
ATARI = 'atari'


# The paper's evaluation agents (Extended Data Table 6), field by field:
# `test_train_protocols.py` holds the presets to it. Its replay buffer sizes
# are read as environment steps (docs/training.md says why) and held as
# whole rollouts of every environment; `num_envs` is ours: the table gives
# none, and it must make `num_envs / fresh trajectories per update` whole.
PAPER_PROTOCOLS: Mapping[str, Mapping[str, Any]] = {
    CRAFTER: dict(
        learning_rate=3e-4,
        learning_rate_end=3e-4,
        schedule=schedules.CONSTANT,
        warmup_env_steps=0,
        weight_decay=0.3,
        max_abs_update=1.0,
        discount=0.997,
        frame_stack=32,
        batch_size=24,
        rollout_len=29,
        replay_ratio=0.99,
        buffer_env_steps=400_000,
        env_steps=50_000_000,
    ),
    ATARI: dict(
        learning_rate=3e-4,
        learning_rate_end=0.0,
        schedule=schedules.WARMUP_COSINE,
        warmup_env_steps=5_000_000,
        weight_decay=0.1,
        max_abs_update=1.0,
        discount=0.997,
        frame_stack=4,
        batch_size=96,
        rollout_len=29,
        replay_ratio=0.95,
        buffer_env_steps=1_760_000,
        env_steps=200_000_000,
    ),
}
# The paper does not say how many environment steps feed a learner step.
# Each protocol's preset reads its replay ratio as the fresh share of every
# batch (`spread_fresh`: 1% of 24 trajectories at 0.99, about 7 steps per
# update); the `..._rollout_per_update` presets as the chance that a batch
# slot is replayed, each learner step following one rollout of every
# environment (`replay_per_slot`: 8 x 29 = 232 steps per update).
CRAFTER_ROLLOUT_PER_UPDATE = 'crafter_rollout_per_update'
ATARI_ROLLOUT_PER_UPDATE = 'atari_rollout_per_update'
# Each protocol preset's table.
PROTOCOL_PRESETS: Mapping[str, str] = {
    CRAFTER: CRAFTER,
    ATARI: ATARI,
    CRAFTER_ROLLOUT_PER_UPDATE: CRAFTER,
    ATARI_ROLLOUT_PER_UPDATE: ATARI,
}
# Environments per iteration: for the fresh shares, the fewest that make
# the learner steps whole; for the drawn slots, the 8 of a public run of
# the reference on Craftax-Classic (ours: the table gives none).
PROTOCOL_NUM_ENVS = {
    CRAFTER: 6,
    ATARI: 24,
    CRAFTER_ROLLOUT_PER_UPDATE: 8,
    ATARI_ROLLOUT_PER_UPDATE: 8,
}


def protocol_buffer(name: str, num_envs: int, rollout_len: int) -> int | None:
  """Preset `name`'s buffer in trajectories, if a paper protocol's, else None.

  The table's environment steps, up to whole rollouts of `num_envs`
  environments of `rollout_len` steps.
  """
  if name not in PROTOCOL_PRESETS:
    return None
  table = PAPER_PROTOCOLS[PROTOCOL_PRESETS[name]]
  return replay.capacity_for(table['buffer_env_steps'], rollout_len, num_envs)


def _protocol_preset(name: str) -> dict[str, Any]:
  table = PAPER_PROTOCOLS[PROTOCOL_PRESETS[name]]
  num_envs = PROTOCOL_NUM_ENVS[name]
  per_slot = name in (CRAFTER_ROLLOUT_PER_UPDATE, ATARI_ROLLOUT_PER_UPDATE)
  return dict(
      num_envs=num_envs,
      rollout_len=table['rollout_len'],
      learner_batch_size=table['batch_size'],
      replay_fraction=table['replay_ratio'],
      spread_fresh=not per_slot,
      replay_per_slot=per_slot,
      buffer_capacity=protocol_buffer(name, num_envs, table['rollout_len']),
      learning_starts=table['batch_size'],
      discount=table['discount'],
      frame_stack=table['frame_stack'],
      agent_learning_rate=table['learning_rate'],
      agent_lr_schedule=table['schedule'],
      agent_learning_rate_end=table['learning_rate_end'],
      agent_lr_warmup_env_steps=table['warmup_env_steps'],
      agent_lr_decay_env_steps=(
          table['env_steps']
          if table['schedule'] == schedules.WARMUP_COSINE
          else 0
      ),
      agent_lr_fit_budget=table['schedule'] == schedules.WARMUP_COSINE,
      agent_weight_decay=table['weight_decay'],
      agent_max_abs_update=table['max_abs_update'],
  )


PRESETS: Mapping[str, Mapping[str, Any]] = {
    COLAB: {},
    PAPER: dict(
        num_envs=10,
        learner_batch_size=96,
        replay_fraction=0.9,
        buffer_capacity=1000,
        learning_starts=96,
        agent_learning_rate=3e-4,
    ),
    **{name: _protocol_preset(name) for name in PROTOCOL_PRESETS},
}


# Every agent sets the network's fields, so that one replaces another whole.
_MLP = dict(
    agent_network=MLP_NETWORK, agent_conv_channels=(), agent_frame_embedding=0
)

AGENTS: Mapping[str, Mapping[str, Any]] = {
    COLAB: dict(
        agent_dense=(512, 512),
        agent_lstm_size=128,
        agent_head_mlp_hiddens=(128,),
        **_MLP,
    ),
    MINATAR: dict(
        agent_dense=(256, 256),
        agent_lstm_size=64,
        agent_head_mlp_hiddens=(64,),
        **_MLP,
    ),
    CRAFTAX: dict(
        agent_dense=(512, 512),
        agent_lstm_size=64,
        agent_head_mlp_hiddens=(64,),
        **_MLP,
    ),
    # For stacked Craftax frames (`frame_stack` > 1): each frame embedded
    # by one shared layer, then the `craftax` torso over the embeddings.
    CRAFTAX_FRAMES: dict(
        agent_dense=(512, 512),
        agent_lstm_size=64,
        agent_head_mlp_hiddens=(64,),
        agent_network=MLP_NETWORK,
        agent_conv_channels=(),
        agent_frame_embedding=64,
    ),
    # Residual convolutional sections over image observations, frames
    # stacked on the channels (MinAtar, Craftax pixels or grid).
    CONV: dict(
        agent_network=conv_nets.NAME,
        agent_conv_channels=(16, 32, 32),
        agent_dense=(256,),
        agent_lstm_size=64,
        agent_head_mlp_hiddens=(64,),
        agent_frame_embedding=0,
    ),
    # `craftax_frames` with the convolutions as each frame's embedding:
    # for many stacked frames on a CPU (the Craftax-Classic grid).
    CONV_FRAMES: dict(
        agent_network=conv_nets.NAME,
        agent_conv_channels=(16, 32, 32),
        agent_dense=(512, 512),
        agent_lstm_size=64,
        agent_head_mlp_hiddens=(64,),
        agent_frame_embedding=64,
    ),
    # The paper's evaluation agent (its Methods, on Atari): residual
    # sections of 256, 384, 384 and 256 channels, a 768-wide layer, an
    # action-conditional LSTM of 1,024 and 1,024-wide heads.
    PAPER: dict(
        agent_network=conv_nets.NAME,
        agent_conv_channels=(256, 384, 384, 256),
        agent_dense=(768,),
        agent_lstm_size=1024,
        agent_head_mlp_hiddens=(1024,),
        agent_frame_embedding=0,
    ),
}


def agent_fields(name: str) -> dict[str, Any]:
  """The `agent_*` fields of agent `name` (see the module docstring).

  Raises:
    configs.ConfigError: an unknown agent.
  """
  if name not in AGENTS:
    raise configs.ConfigError(
        f'Unknown agent {name!r}; choose one of {", ".join(AGENTS)}.'
    )
  return dict(AGENTS[name])


def preset(
    name: str, *, agent: str | None = None, **changes: Any
) -> TrainConfig:
  """The config of preset `name` with agent `agent`'s sizes and `changes`.

  A paper protocol's buffer follows a change of `num_envs` or `rollout_len`
  (the table's environment steps, up to whole rollouts of every
  environment) unless `changes` sets `buffer_capacity` itself.

  Raises:
    configs.ConfigError: an unknown preset or agent, or an invalid change.
  """
  if name not in PRESETS:
    raise configs.ConfigError(
        f'Unknown preset {name!r}; choose one of {", ".join(PRESETS)}.'
    )
  sizes = agent_fields(agent) if agent is not None else {}
  fields = dict(PRESETS[name]) | sizes | changes
  if name in PROTOCOL_PRESETS and 'buffer_capacity' not in changes:
    fields['buffer_capacity'] = protocol_buffer(
        name, fields['num_envs'], fields['rollout_len']
    )
  return TrainConfig(**fields)
