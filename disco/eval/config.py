"""What an evaluation run is: `EvalConfig` and what its checkpoints keep.

`disco.eval` re-exports everything here; the faithful loop
(`disco.eval.loop`), the `fast=True` alias of the trainer
(`disco.eval.run.to_train_config`) and the checkpoints
(`disco.run_checkpoints`) read it.
"""

from collections.abc import Mapping
import dataclasses
from typing import Any, ClassVar

from disco import configs
from disco import reward_scale as reward_scale_lib
from disco import rules
from disco.environments import registry

# The rules' names, here for `disco.eval`'s readers (`disco.rules`).
ACTOR_CRITIC = rules.ACTOR_CRITIC
DISCO = rules.DISCO
POLICY_GRADIENT = rules.POLICY_GRADIENT
RULES = rules.RULES
# The kind of the faithful loop's checkpoints (`disco.run_checkpoints`).
CHECKPOINT_KIND = 'disco-eval'

# Fields that may change when a run resumes from a checkpoint: they decide
# how long it runs, how often it checkpoints and how it is cut into calls,
# never what an iteration computes or what the state holds. `max_devices`
# is one only as long as the number of devices used stays the same (checked
# on its own); `update_rule_params` (a source) is checked through the
# digest of the parameters it gives.
EXECUTION_FIELDS = frozenset({
    'num_steps',
    'steps_per_chunk',
    'checkpoint_every',
    'keep_checkpoints',
    'max_devices',
    'update_rule_params',
})


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class EvalConfig(
    configs.AgentFields, configs.ValueFnFields, configs.ConfigBase
):
  """Settings of an evaluation run; the defaults are the reference colab's.

  Attributes:
    rule: the update rule: 'disco', 'actor_critic' or 'policy_gradient'.
    update_rule_params: where the 'disco' rule's parameters come from:
      'disco103' (the published rule, through
      `disco.weights.load_disco103`), or the path of an `.npz` file (e.g.
      saved by meta-training); None means 'disco103' for the 'disco' rule.
      Ignored when `run_eval` is given parameters.
    env: environment name understood by
      `disco.environments.registry.make_environment` ('catch', 'catch-cpu',
      'gymnax:<id>', 'craftax:<id>', 'xminigrid:<id>').
    env_settings: overrides of the environment's settings, e.g.
      `{'rows': 5, 'columns': 5}` for Catch (stored as sorted pairs).
    reward_scale: a constant that multiplies every reward the agent, its
      value function and the update rule see (`disco.reward_scale`);
      returns and every logged reward stay in the environment's own units.
      1.0: the rewards as given.
    num_steps: loop iterations (one actor rollout and at most one learner
      step each).
    learner_batch_size: trajectories per learner step (per device).
    rollout_len: timesteps per actor rollout (and per trajectory).
    replay_ratio: `learner_batch_size // replay_ratio` environments act in
      parallel (`num_envs`).
    buffer_capacity: the most trajectories the replay buffer holds.
    buffer_seed: seed of the replay buffer's sampling generator (faithful
      loop; with `fast=True` replay positions are drawn from the run's
      keys).
    min_buffer_size: trajectories needed before learning starts; None means
      `learner_batch_size`.
    seed: seed of `jax.random.PRNGKey` for initialisation, acting and
      learning (and of CPU environments' own generators).
    agent_dense: hidden sizes of the agent network's MLP torso.
    agent_lstm_size: hidden size of the agent's action-model LSTM.
    agent_head_mlp_hiddens: hidden sizes of the action model's output heads.
    agent_head_w_init_std: std of the truncated-normal init of the output
      heads.
    agent_learning_rate: the agent optimiser's step size.
    value_fn_dense: hidden sizes of the value network trained alongside a
      policy-gradient agent (which has no value head of its own).
    value_fn_head_w_init_std: std of the init of that network's head.
    value_fn_learning_rate: that value network's step size.
    value_fn_td_lambda: V-trace lambda of that value network's targets.
    max_devices: use at most this many devices (None: up to `num_envs`, as
      the reference does).
    store_behaviour_outs: keep every behaviour-network output in the replay
      buffer, as the reference does, instead of the logits alone (no
      effect on results; much more memory with Disco's 600-wide heads;
      faithful loop only).
    record_rollouts: also return every rollout's actions, rewards and
      discounts and the sampled buffer positions (faithful loop only).
    fast: deprecated: run the trainer instead of the faithful loop (use
      `disco.train.run_train` with `disco.train.preset('colab')`;
      `disco.eval.to_train_config` gives the equivalent config).
    steps_per_chunk: with `fast`: iterations per jitted call (one host round
      trip each).
    checkpoint_every: with a checkpoint directory, checkpoint every this
      many iterations (with `fast`, at the first chunk end at or after each
      multiple) and at the end; 0 = only at the end and on interrupt.
    keep_checkpoints: how many checkpoints to keep on disk.
  """

  RENAMED: ClassVar[Mapping[str, str]] = {
      'batch_size': 'learner_batch_size',
      'learning_rate': 'agent_learning_rate',
      'dense': 'agent_dense',
      'lstm_size': 'agent_lstm_size',
      'head_mlp_hiddens': 'agent_head_mlp_hiddens',
      'head_w_init_std': 'agent_head_w_init_std',
      'weights_path': 'update_rule_params',
  }

  # Update rule.
  rule: str = DISCO
  update_rule_params: str | None = None
  # Environment and loop.
  env: str = registry.CATCH
  env_settings: tuple[tuple[str, Any], ...] = ()
  reward_scale: float = reward_scale_lib.UNSCALED
  num_steps: int = 1000
  learner_batch_size: int = 64
  rollout_len: int = 29
  replay_ratio: int = 32
  # Replay buffer.
  buffer_capacity: int = 1024
  buffer_seed: int = 17
  min_buffer_size: int | None = None
  # Randomness.
  seed: int = 0
  # Agent (the colab's MLP agent) and the policy-gradient baseline's value
  # function: `configs.AgentFields` and `configs.ValueFnFields`.
  # Execution: devices, memory, the trainer (deprecated).
  max_devices: int | None = None
  store_behaviour_outs: bool = False
  record_rollouts: bool = False
  fast: bool = False
  steps_per_chunk: int = 25
  # Checkpoints.
  checkpoint_every: int = 500
  keep_checkpoints: int = 2

  def __post_init__(self):
    check = configs.check
    configs.check_fixed_rule(self, RULES, 'evaluation')
    reward_scale_lib.check_reward_scale(self)
    check(
        registry.is_known_name(self.env),
        f'Unknown environment {self.env!r}; known:'
        f' {", ".join(registry.NAMES)}.',
    )
    for name in (
        'num_steps',
        'learner_batch_size',
        'replay_ratio',
        'buffer_capacity',
        'agent_lstm_size',
        'steps_per_chunk',
        'keep_checkpoints',
    ):
      check(
          int(getattr(self, name)) >= 1,
          f'{name} must be >= 1, got {getattr(self, name)}.',
      )
    for name in ('seed', 'buffer_seed', 'checkpoint_every'):
      check(
          int(getattr(self, name)) >= 0,
          f'{name} must be >= 0, got {getattr(self, name)}.',
      )
    check(
        self.rollout_len >= 2,
        'rollout_len must be >= 2 (a learner needs a transition), got'
        f' {self.rollout_len}.',
    )
    check(
        self.learner_batch_size >= self.replay_ratio,
        f'learner_batch_size ({self.learner_batch_size}) // replay_ratio'
        f' ({self.replay_ratio}) must leave at least one environment.',
    )
    check(
        self.min_buffer_size is None
        or 1 <= self.min_buffer_size <= self.buffer_capacity,
        'min_buffer_size must lie in [1, buffer_capacity='
        f'{self.buffer_capacity}], got {self.min_buffer_size}.',
    )
    check(
        self.num_envs <= self.buffer_capacity,
        'One rollout has more trajectories than the buffer.',
    )
    check(
        self.max_devices is None or self.max_devices >= 1,
        f'max_devices must be >= 1, got {self.max_devices}.',
    )
    configs.check_positive(self, configs.LEARNING_RATES)
    check(
        not self.fast or registry.is_jittable_name(self.env),
        'fast=True runs the trainer, which needs a jittable environment;'
        ' catch-cpu steps on the host. Use env="catch" or fast=False.',
    )
    check(
        not (self.fast and self.record_rollouts),
        'record_rollouts is only supported by the faithful loop (fast=False).',
    )
    configs.set_sorted_settings(self)
    configs.set_network_sizes(self)

  @property
  def num_envs(self) -> int:
    """Environments acting in parallel: `learner_batch_size // replay_ratio`."""
    return self.learner_batch_size // self.replay_ratio

  @property
  def learning_starts(self) -> int:
    """Trajectories the buffer must hold before the first learner step."""
    if self.min_buffer_size is None:
      return self.learner_batch_size
    return self.min_buffer_size
