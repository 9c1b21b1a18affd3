"""`TrainConfig`: the settings of a training run (its presets: `presets`).

Details and rationale: `docs/modules.md`.
"""

from collections.abc import Mapping
import dataclasses
import fractions
from typing import Any, ClassVar

from disco import configs
from disco import precision
from disco import replay
from disco import reward_scale as reward_scale_lib
from disco import rules
from disco import schedules
from disco import truncation as truncation_lib
from disco.environments import registry
from disco.train import checks

MLP_NETWORK = checks.MLP_NETWORK

# Fields that may change when a run resumes: they decide how long it runs,
# how often it checkpoints and how it is cut into calls, never what an
# iteration computes or what the state holds.
EXECUTION_FIELDS = frozenset({
    'num_steps',
    'steps_per_chunk',
    'checkpoint_every',
    'keep_checkpoints',
    'update_rule_params',
    # The same values, compiled otherwise (`disco.unrolling`).
    'unroll_inner_scans',
})


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class TrainConfig(
    configs.ReplayBatches,
    configs.AgentFields,
    configs.ValueFnFields,
    configs.ConfigBase,
):
  """Settings of a training run; the defaults are the `colab` preset.

  Attributes:
    rule: the update rule: 'disco', 'actor_critic' or 'policy_gradient'.
    update_rule_params: where the 'disco' rule's parameters come from:
      'disco103' (the published rule) or the path of an `.npz` file; None
      means 'disco103'. Ignored when `run_train` is given parameters.
    env: an environment understood by
      `disco.environments.registry.make_environment`: jittable ('catch',
      'gymnax:<id>', 'craftax:<id>', 'xminigrid:<id>'), or stepped on the
      host ('gymnasium:<id>', 'catch-cpu'; one seed per run,
      `disco.train.host`).
    env_settings: overrides of the environment's settings (sorted pairs):
      Catch's `rows` and `columns`, or fields of a gymnax, Craftax or
      xminigrid environment's parameters, e.g. `max_steps_in_episode`.
    truncation: what a time limit is to the learner, for environments that
      tell it apart from a termination (gymnax, Craftax, xminigrid):
      'bootstrap' (the targets bootstrap from the value of the state the
      episode reached) or 'terminate' (the state is worth nothing, as at a
      termination; the reference's behaviour, and what runs before
      `truncation` existed did).
    reward_scale: a constant that multiplies every reward the agent, its
      value function and the update rule see (`disco.reward_scale`);
      returns, Crafter scores and every logged return stay in the
      environment's own units. 1.0: the rewards as given.
    num_steps: loop iterations: one rollout of every environment and
      `learner_steps_per_step` learner steps each.
    num_envs: environments acting in parallel (over all devices).
    rollout_len: timesteps per rollout (and per trajectory).
    learner_batch_size: trajectories per learner step (over all devices).
    replay_fraction: the share of each learner batch drawn from the replay
      buffer (rounded to whole trajectories unless `spread_fresh`); the
      rest are fresh trajectories of the newest rollout. With fresh
      trajectories, `num_envs` must be a multiple of their number and each
      rollout is cut into that many learner batches' fresh parts.
    spread_fresh: take `replay_fraction` as the paper's replay ratio,
      fractions of a trajectory allowed: a learner step gets
      `learner_batch_size * (1 - replay_fraction)` fresh trajectories on
      average, each rollout's spread evenly over `num_envs / that` learner
      steps (which must be whole), e.g. one every 25 / 6 steps at 0.99 and
      24. One device per seed.
    replay_per_slot: the other reading of the paper's replay ratio: each
      iteration (one rollout of every environment) makes one learner
      step, and each slot of its batch is a replayed trajectory with
      probability `replay_fraction`, else a fresh one drawn from the
      newest rollout. One device per seed.
    buffer_capacity: the most trajectories the replay buffer holds (a
      multiple of `num_envs`).
    learning_starts: trajectories the buffer must hold before the first
      learner step (the iterations before only act).
    discount: the agent's discount (the update rule's `discount_factor`).
    frame_stack: observations the agent sees at once: each is the newest
      frames of its episode, zeros before its start (1: no stacking). The
      replay buffer keeps each frame once and stacks where it reads.
    seed: seed of the run (its seeds are `seed`, `seed + 1`, ...).
    agent_dense: hidden sizes of the agent network's MLP torso.
    agent_lstm_size: hidden size of the agent's action-model LSTM.
    agent_head_mlp_hiddens: hidden sizes of the action model's output heads.
    agent_head_w_init_std: std of the truncated-normal init of the heads.
    agent_network: the agent network's torso: 'mlp' (the colabs'), 'conv'
      (residual convolutional sections over image observations,
      `disco.conv_nets`) or a name given to
      `disco.networks.nets.register_network` (it gets the same arguments
      as 'mlp': `dense`, the heads' and the action model's).
    agent_conv_channels: with 'conv', the channels of each residual
      section (the dense layers after them are `agent_dense`).
    agent_frame_embedding: with `frame_stack`, the width of an embedding
      shared by the stacked frames, each frame embedded alone ahead of the
      torso's dense layers (0: the torso reads the stacked frames whole,
      flat for 'mlp', on the channels for 'conv'): a linear+ReLU layer for
      'mlp', the convolutions and a linear+ReLU layer for 'conv'.
    agent_learning_rate: the agent optimiser's step size (the peak of a
      schedule).
    agent_lr_schedule: 'constant', or 'warmup_cosine': linear from 0 over
      `agent_lr_warmup_env_steps`, then a cosine to
      `agent_learning_rate_end` at `agent_lr_decay_env_steps`.
    agent_learning_rate_end: the step size a 'warmup_cosine' schedule ends
      at.
    agent_lr_warmup_env_steps: environment steps of the warmup.
    agent_lr_decay_env_steps: environment steps at which the schedule
      reaches its end (warmup included); 0 sets it to the run's budget
      (`num_steps` iterations) when the config is made.
    agent_lr_fit_budget: scale a schedule longer than the run's budget to
      it (warmup and decay by budget / `agent_lr_decay_env_steps`), when
      the config is made: the paper's schedules span its long runs.
    agent_weight_decay: decoupled weight decay (AdamW's): each step also
      subtracts step size x decay x parameter, after the Adam update is
      clipped.
    agent_max_abs_update: element-wise bound on the Adam-normalised update.
    compute_dtype: 'float32', or 'bfloat16' for mixed precision (matrix
      products in bfloat16; parameters, optimiser state, activations
      between layers and losses in float32; see `disco.precision`).
    taken_action_gradients: differentiate the per-action outputs that the
      rule reads at the taken actions there alone (`Agent`'s option: the
      same gradient up to float rounding, for less work); False
      differentiates every action as the reference does, keeping its
      rounding.
    forward_once: run the online network over a learner batch once, its
      outputs feeding both the rule's inputs and (through `jax.vjp`) the
      loss's gradient (`Agent`'s option: the same values, the gradient up
      to float rounding); False runs it twice as the reference does.
    share_meta_inputs: compute what several of the meta-network's inputs
      read alike once (`Agent`'s option: the same targets up to float
      rounding); False computes each as the reference does.
    share_state_gates: in the LSTM action model, compute the part of the
      transition's gates that reads the root state once per state, not once
      per action (`Agent`'s option: the same parameters, the outputs up to
      float rounding; a registered network gets it in `model_kwargs`);
      False steps every action in full as the reference does.
    unroll_inner_scans: unroll the `lax.scan` loops inside one environment
      step and one learner step (Craftax's, Retrace's, the meta-network's;
      `disco.unrolling`): the same values (bit for bit on a CPU), fewer
      kernels one after another on a GPU, a longer compile. The loops over
      a rollout's steps and an iteration's learner steps stay rolled. None
      (the default): unrolled where the learner's devices are GPUs or TPUs,
      rolled on CPUs, where it saves nothing (`unroll_on`).
    value_fn_dense: hidden sizes of the value network trained alongside a
      policy-gradient agent.
    value_fn_head_w_init_std: std of the init of that network's head.
    value_fn_learning_rate: that value network's step size.
    value_fn_td_lambda: V-trace lambda of that value network's targets.
    eval_every: evaluate every this many iterations (at the first chunk end
      at or after each multiple) and at the end; 0 = never.
    eval_envs: evaluation episodes, one in each of this many separate
      environment instances (over all devices).
    eval_max_steps: the most steps an evaluation runs; episodes still going
      then are not counted.
    max_devices: use at most this many devices (None: as many as divide the
      environments and batches).
    steps_per_chunk: iterations per jitted call (one host round trip and one
      log row each).
    log_every_iteration: log one row per iteration instead of one per chunk
      (the chunk still makes one host round trip).
    checkpoint_every: with a checkpoint directory, checkpoint at the first
      chunk end at or after each multiple of this many iterations and at
      the end; 0 = only at the end and on interrupt.
    keep_checkpoints: how many checkpoints to keep on disk.
  """

  # Saved configs from before `truncation` existed ran as 'terminate'.
  LEGACY_DEFAULTS: ClassVar[Mapping[str, Any]] = {
      'truncation': truncation_lib.TERMINATE,
      # Saved configs from before `forward_once` ran the network twice.
      'forward_once': False,
      # ... and before `share_meta_inputs` computed each input on its own.
      'share_meta_inputs': False,
      # ... and before `share_state_gates` stepped every action in full.
      'share_state_gates': False,
  }

  # Update rule.
  rule: str = rules.DISCO
  update_rule_params: str | None = None
  # Environment and data.
  env: str = registry.CATCH
  env_settings: tuple[tuple[str, Any], ...] = ()
  truncation: str = truncation_lib.BOOTSTRAP
  reward_scale: float = reward_scale_lib.UNSCALED
  num_steps: int = 1000
  num_envs: int = 2
  rollout_len: int = 29
  learner_batch_size: int = 64
  replay_fraction: float = 1.0
  spread_fresh: bool = False
  replay_per_slot: bool = False
  buffer_capacity: int = 1024
  learning_starts: int = 64
  discount: float = schedules.DISCOUNT
  frame_stack: int = 1
  # Randomness.
  seed: int = 0
  # Agent: the colab's MLP agent (`configs.AgentFields`), and how it
  # computes. The policy-gradient baseline's value function:
  # `configs.ValueFnFields`.
  agent_network: str = MLP_NETWORK
  agent_conv_channels: tuple[int, ...] = ()
  agent_frame_embedding: int = 0
  agent_lr_schedule: str = schedules.CONSTANT
  agent_learning_rate_end: float = 0.0
  agent_lr_warmup_env_steps: int = 0
  agent_lr_decay_env_steps: int = 0
  agent_lr_fit_budget: bool = False
  agent_weight_decay: float = 0.0
  agent_max_abs_update: float = schedules.MAX_ABS_UPDATE
  compute_dtype: str = precision.FLOAT32
  taken_action_gradients: bool = True
  forward_once: bool = True
  share_meta_inputs: bool = True
  share_state_gates: bool = True
  unroll_inner_scans: bool | None = None
  # Evaluation.
  eval_every: int = 0
  eval_envs: int = 16
  eval_max_steps: int = 1000
  # Execution.
  max_devices: int | None = None
  steps_per_chunk: int = 25
  log_every_iteration: bool = False
  checkpoint_every: int = 500
  keep_checkpoints: int = 2

  def __post_init__(self):
    check = configs.check
    configs.check_fixed_rule(self, rules.RULES, 'training')
    check(
        registry.is_known_name(self.env),
        f'Unknown environment {self.env!r}; known:'
        f' {", ".join(registry.NAMES)}.',
    )
    check(
        self.truncation in truncation_lib.MODES,
        f'Unknown truncation {self.truncation!r}; choose one of'
        f' {", ".join(truncation_lib.MODES)}.',
    )
    configs.check_ints(
        self,
        (
            'num_steps',
            'num_envs',
            'learner_batch_size',
            'buffer_capacity',
            'learning_starts',
            'agent_lstm_size',
            'eval_envs',
            'eval_max_steps',
            'steps_per_chunk',
            'keep_checkpoints',
            'frame_stack',
        ),
        minimum=1,
    )
    configs.check_ints(
        self,
        (
            'seed',
            'eval_every',
            'checkpoint_every',
            'agent_frame_embedding',
            'agent_lr_warmup_env_steps',
            'agent_lr_decay_env_steps',
        ),
        minimum=0,
    )
    configs.check_bools(
        self,
        (
            'spread_fresh',
            'replay_per_slot',
            'forward_once',
            'share_meta_inputs',
            'share_state_gates',
            'agent_lr_fit_budget',
        ),
    )
    check(
        self.unroll_inner_scans is None
        or isinstance(self.unroll_inner_scans, bool),
        'unroll_inner_scans must be True, False or None (unrolled on GPUs'
        f' and TPUs), got {self.unroll_inner_scans!r}.',
    )
    check(
        not (self.spread_fresh and self.replay_per_slot),
        'spread_fresh and replay_per_slot are two readings of the replay'
        ' ratio; choose one.',
    )
    check(
        self.rollout_len >= 2,
        'rollout_len must be >= 2 (a learner needs a transition), got'
        f' {self.rollout_len}.',
    )
    check(
        0.0 <= self.replay_fraction <= 1.0,
        f'replay_fraction must lie in [0, 1], got {self.replay_fraction}.',
    )
    checks.check_replay(self)
    check(
        self.compute_dtype in precision.COMPUTE_DTYPES,
        f'compute_dtype must be one of {", ".join(precision.COMPUTE_DTYPES)},'
        f' got {self.compute_dtype!r}.',
    )
    check(
        self.max_devices is None or self.max_devices >= 1,
        f'max_devices must be >= 1, got {self.max_devices}.',
    )
    configs.check_positive(
        self, (*configs.LEARNING_RATES, 'agent_max_abs_update')
    )
    configs.check_non_negative(
        self, ('agent_learning_rate_end', 'agent_weight_decay')
    )
    configs.check_fractions(self, ('discount',))
    reward_scale_lib.check_reward_scale(self)
    check(
        self.agent_lr_schedule in schedules.SCHEDULES,
        f'Unknown agent_lr_schedule {self.agent_lr_schedule!r}; choose one'
        f' of {", ".join(schedules.SCHEDULES)}.',
    )
    checks.check_network(self)
    checks.fit_schedule(self)
    configs.set_sorted_settings(self)
    configs.set_network_sizes(self)

  @property
  def fresh_per_update(self) -> fractions.Fraction:
    """Fresh trajectories per learner step: whole unless spread or drawn."""
    if self.replay_per_slot:
      ratio = fractions.Fraction(self.replay_fraction).limit_denominator(10**6)
      return self.learner_batch_size * (1 - ratio)
    if not self.spread_fresh:
      return fractions.Fraction(self.fresh_per_batch)
    ratio = fractions.Fraction(self.replay_fraction).limit_denominator(10**6)
    return self.learner_batch_size * (1 - ratio)

  @property
  def learner_steps_per_step(self) -> int:
    """Learner steps per iteration: one per fresh part of the rollout."""
    if self.replay_per_slot:
      return 1
    fresh = self.fresh_per_update
    return int(self.num_envs / fresh) if fresh else 1

  @property
  def env_steps_per_update(self) -> float:
    """Environment steps per learner step (the schedules' clock)."""
    return self.env_steps_per_step / self.learner_steps_per_step

  @property
  def env_steps_per_step(self) -> int:
    """Environment steps per iteration (over all environments)."""
    return self.num_envs * self.rollout_len

  @property
  def warmup_steps(self) -> int:
    """Iterations that only fill the buffer, before the first learner step."""
    return replay.iterations_before_learning(
        self.learning_starts, self.num_envs
    )

  def num_steps_for(self, env_steps: int) -> int:
    """The iterations that take at least `env_steps` environment steps."""
    return max(1, -(-int(env_steps) // self.env_steps_per_step))
