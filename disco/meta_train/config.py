"""`MetaTrainConfig`: the settings of a meta-training run.

The defaults are the reference's meta-training notebook. The config builds
the population's agent settings, the value function's settings and one
device's batch of environments; `EXECUTION_FIELDS` names the fields that
change neither the maths nor the state, so that a run may be resumed with
other values of them.
"""

from collections.abc import Mapping
import dataclasses
from typing import Any, ClassVar

from ml_collections import config_dict

from disco import agent as agent_lib
from disco import configs
from disco import reward_scale as reward_scale_lib
from disco.configs import POLICY_ENTROPY_COST as POLICY_ENTROPY_COST
from disco.configs import PREDICTION_ENTROPY_COST as PREDICTION_ENTROPY_COST
from disco.configs import TARGET_KL_COST as TARGET_KL_COST
from disco.configs import TARGET_MEAN_COST as TARGET_MEAN_COST
from disco.environments import base as base_env
from disco.environments import registry


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class MetaTrainConfig(
    configs.AgentFields, configs.MetaLossFields, configs.ConfigBase
):
  """Settings of a meta-training run; the defaults are the reference's.

  The defaults reproduce the reference's meta-training notebook: 800
  meta-steps of 2 agents on 5x5 jittable Catch, 32 environments per device,
  2 inner updates on rollouts of 16 steps, meta-optimiser Adam(5e-4). The
  reference's program layout (a Python loop over agents, a rolled inner
  `lax.scan`) is `vmap_agents=False, unroll_inner_steps=False`.

  The execution fields (`EXECUTION_FIELDS`) change neither the maths nor the
  state (only float rounding, speed and memory); they and `num_steps` may
  differ when a run is resumed, all other fields must match the checkpoint.

  Attributes:
    num_steps: meta-steps.
    num_agents: agents in the population (on every device).
    num_inner_steps: agent updates per meta-step (the meta-gradient flows
      through all of them).
    rollout_len: timesteps per inner rollout (the validation rollout is
      twice as long).
    envs_per_device: environments each agent steps on each device (its
      learner batch).
    seed: seed of `jax.random.PRNGKey` for the agents and the loop's keys.
    random_init_seed: `init_params(PRNGKey(random_init_seed))` is the rule
      a run starts from when `update_rule_params` is None or 'random'.
    update_rule_params: the rule to start from: None or 'random' (a random
      rule), 'disco103' (fine-tune the published rule) or the path of an
      `.npz` file. Ignored when `run_meta_train` is given parameters.
    meta_learning_rate: the meta-optimiser's (Adam's) step size.
    env: a jittable environment understood by
      `disco.environments.registry.make_environment`.
    env_settings: overrides of the environment's settings (sorted pairs).
    reward_scale: a constant that multiplies every reward the agent, its
      value function and the update rule see (`disco.reward_scale`);
      returns and every logged reward stay in the environment's own units.
      1.0: the rewards as given.
    agent_dense: hidden sizes of the agent network's MLP torso.
    agent_lstm_size: hidden size of the agent's action-model LSTM.
    agent_head_mlp_hiddens: hidden sizes of the action model's output heads.
    agent_head_w_init_std: std of the truncated-normal init of the heads.
    agent_learning_rate: the agents' optimiser step size.
    value_fn_dense: hidden sizes of the value network that supplies the
      meta-loss's advantages.
    value_fn_head_w_init_std: std of the init of that network's head.
    value_fn_learning_rate: its step size.
    value_fn_max_abs_update: its update clipping.
    value_fn_discount_factor: its discount.
    value_fn_td_lambda: its V-trace lambda.
    value_fn_outer_value_cost: weight of its value loss.
    value_fn_ema_decay: decay of its advantage-normalisation EMAs.
    value_fn_ema_eps: epsilon of that normalisation.
    policy_entropy_cost: meta-loss weight of the validation policy entropy.
    prediction_entropy_cost: meta-loss weight of the y and z entropies.
    target_mean_cost: meta-loss weight of the rule targets' squared means.
    target_kl_cost: meta-loss weight of KL(target network || pi-hat).
    vmap_agents: `vmap` the population (one program for all agents) instead
      of a Python loop over agents (one copy of the program per agent, as the
      reference): about as fast per step on CPU, much quicker to compile.
    unroll_inner_steps: unroll the inner `lax.scan` (fast for a few steps).
    remat: rematerialise each inner step in the backward pass (less memory
      on long inner scans, one more forward pass).
    checkpoint_every: with a checkpoint directory, checkpoint every this many
      meta-steps and at the end; 0 = only at the end and on interrupt.
    keep_checkpoints: how many checkpoints to keep on disk.
  """

  RENAMED: ClassVar[Mapping[str, str]] = {
      'batch_size_per_device': 'envs_per_device',
      'value_dense': 'value_fn_dense',
      'value_head_w_init_std': 'value_fn_head_w_init_std',
      'value_learning_rate': 'value_fn_learning_rate',
      'value_max_abs_update': 'value_fn_max_abs_update',
      'value_discount_factor': 'value_fn_discount_factor',
      'value_td_lambda': 'value_fn_td_lambda',
      'value_outer_value_cost': 'value_fn_outer_value_cost',
      'value_ema_decay': 'value_fn_ema_decay',
      'value_ema_eps': 'value_fn_ema_eps',
  }

  # Meta-training loop.
  num_steps: int = 800
  num_agents: int = 2
  num_inner_steps: int = 2
  rollout_len: int = 16
  envs_per_device: int = 32
  seed: int = 4
  random_init_seed: int = 1
  update_rule_params: str | None = None
  # Meta-optimiser: Adam.
  meta_learning_rate: float = 5e-4
  # Environment: jittable 5x5 Catch.
  env: str = registry.CATCH
  env_settings: tuple[tuple[str, Any], ...] = (('columns', 5), ('rows', 5))
  reward_scale: float = reward_scale_lib.UNSCALED
  # Agent: `agent.get_settings_disco()` with the notebook's network and
  # learning rate (`configs.AgentFields`).
  agent_lstm_size: int = 256
  agent_head_mlp_hiddens: tuple[int, ...] = (256,)
  agent_learning_rate: float = 5e-4
  # The meta-loss's value function and regularisers
  # (`configs.MetaLossFields`, see `calculate_meta_gradient`).
  value_fn_td_lambda: float = 0.96
  # Execution.
  vmap_agents: bool = True
  unroll_inner_steps: bool = True
  remat: bool = False
  # Checkpoints.
  checkpoint_every: int = 100
  keep_checkpoints: int = 2

  def __post_init__(self) -> None:
    check = configs.check
    configs.check_rule_source(self)
    configs.set_network_sizes(self)
    for name in (
        'num_steps',
        'num_agents',
        'num_inner_steps',
        'rollout_len',
        'envs_per_device',
        'agent_lstm_size',
        'keep_checkpoints',
    ):
      configs.positive_ints(name, [getattr(self, name)])
    for name in ('seed', 'random_init_seed', 'checkpoint_every'):
      value = getattr(self, name)
      check(
          not isinstance(value, bool) and isinstance(value, int) and value >= 0,
          f'{name} must be an int >= 0, got {value!r}.',
      )
    check(
        registry.is_jittable_name(self.env),
        'env must be a jittable environment (catch, gymnax:<id>,'
        f' craftax:<id> or xminigrid:<id>), got {self.env!r}.',
    )
    configs.set_sorted_settings(self)
    configs.check_positive(self, configs.META_POSITIVE)
    configs.check_non_negative(self, configs.META_NON_NEGATIVE)
    configs.check_fractions(self, configs.META_FRACTIONS)
    reward_scale_lib.check_reward_scale(self)
    configs.check_bools(self, ('vmap_agents', 'unroll_inner_steps', 'remat'))

  def agent_settings(self) -> config_dict.ConfigDict:
    """Settings of the population's agents (`agent.Agent`)."""
    return configs.agent_settings(agent_lib.get_settings_disco(), self)

  def make_env(self) -> base_env.Environment:
    """One device's batch of environments."""
    return registry.make_environment(
        self.env,
        batch_size=self.envs_per_device,
        settings=dict(self.env_settings),
    )


# Fields that change neither the maths nor the state.
EXECUTION_FIELDS = frozenset({
    'num_steps',
    'vmap_agents',
    'unroll_inner_steps',
    'remat',
    'checkpoint_every',
    'keep_checkpoints',
})
