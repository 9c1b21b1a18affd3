"""`DiscoveryConfig`: the paper's discovery recipe as settings.

Details and rationale: `docs/modules.md`.
"""

from collections.abc import Mapping, Sequence
import dataclasses
import re
from typing import Any

from ml_collections import config_dict

from disco import agent as agent_lib
from disco import configs
from disco import reward_scale as reward_scale_lib
from disco.environments import base as base_env
from disco.environments import registry

LOCAL = 'local'
PAPER = 'paper'

# Fields that change neither the maths nor the state.
EXECUTION_FIELDS = frozenset({
    'num_steps',
    'unroll_inner_steps',
    'remat',
    'checkpoint_every',
    'keep_checkpoints',
})


# The pair of a member's spec that sets its reward scale.
REWARD_SCALE_KEY = 'reward_scale'


@dataclasses.dataclass(frozen=True)
class Member:
  """Members of the population that share an environment.

  Attributes:
    env: a jittable registry name ('catch', 'gymnax:<id>', ...).
    settings: the environment's settings (sorted pairs).
    count: how many members act in it.
    reward_scale: multiplies the rewards its agents, their value functions
      and the rule read (`disco.reward_scale`); returns and logs stay in
      the environment's units. A spec gives it as `reward_scale=<x>`.
  """

  env: str
  settings: tuple[tuple[str, Any], ...]
  count: int
  reward_scale: float = reward_scale_lib.UNSCALED

  @property
  def label(self) -> str:
    """A short unique name for logs: env and settings, e.g. 'catch_rows5'."""
    pairs = list(self.settings)
    if self.reward_scale != reward_scale_lib.UNSCALED:
      pairs.append((REWARD_SCALE_KEY, self.reward_scale))
    text = '_'.join([self.env] + [f'{k}{v}' for k, v in pairs])
    return re.sub(r'[^A-Za-z0-9:._-]', '', text)

  def make_env(self, batch_size: int) -> base_env.Environment:
    return registry.make_environment(
        self.env, batch_size=batch_size, settings=dict(self.settings)
    )


def parse_member(spec: str, count: int = 1) -> Member:
  """'catch/rows=5/columns=5' -> Member('catch', (('columns', 5), ...), 1).

  `reward_scale=<x>` among the pairs is the member's reward scale, not an
  environment setting: 'gymnax:Asterix-MinAtar/reward_scale=10'.
  """
  # pylint: disable-next=g-import-not-at-top
  from disco import cli

  env, *pairs = spec.split('/')
  settings = dict(cli.parse_settings(','.join(pairs)) if pairs else ())
  scale = settings.pop(REWARD_SCALE_KEY, reward_scale_lib.UNSCALED)
  return Member(env, configs.sorted_settings(settings), count, scale)


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class DiscoveryConfig(
    configs.ReplayBatches,
    configs.AgentFields,
    configs.MetaLossFields,
    configs.ConfigBase,
):
  """Settings of a discovery run; the defaults are the `local` preset.

  Attributes:
    population: (environment spec, members) pairs. A spec is a jittable
      registry name with optional settings after slashes, e.g.
      'catch/rows=5/columns=5' or 'gymnax:DeepSea-bsuite';
      'reward_scale=<x>' among them scales that member's rewards
      (`disco.reward_scale`), e.g. 'gymnax:Asterix-MinAtar/reward_scale=10'.
    num_steps: meta-steps.
    num_inner_steps: K, the agent updates in the meta-gradient's window;
      each meta-step takes the next K updates of every member.
    rollout_len: timesteps per trajectory (the validation rollout is twice
      as long).
    learner_batch_size: trajectories per agent update.
    replay_fraction: the share of them replayed; the rest are one fresh
      rollout of the member's own environments (at least one).
    buffer_capacity: trajectories each member's replay buffer holds.
    valid_envs: environments of each member's validation rollout (the
      fresh trajectories of the meta-gradient).
    lifetime_budgets: environment steps of an agent's lifetime, drawn with
      weight proportional to 1 / budget at every (re)start.
    seed: seed of the population and the loop's keys.
    random_init_seed: the random rule starts from
      `init_params(PRNGKey(random_init_seed))`.
    update_rule_params: the rule to start from: None or 'random',
      'disco103' or the path of an `.npz` file.
    meta_learning_rate: step size of each member's meta-optimiser (Adam).
    meta_max_grad_norm: each member's meta-gradient is clipped to this
      global norm before its Adam.
    agent_dense: hidden sizes of the agents' MLP torso.
    agent_lstm_size: hidden size of the agents' action-model LSTM.
    agent_head_mlp_hiddens: hidden sizes of the action model's heads.
    agent_head_w_init_std: std of the truncated-normal init of the heads.
    agent_learning_rate: the agents' step size.
    value_fn_dense: hidden sizes of the meta-value network.
    value_fn_head_w_init_std: std of the init of its head.
    value_fn_learning_rate: its step size.
    value_fn_max_abs_update: its update clipping.
    value_fn_discount_factor: its V-trace discount.
    value_fn_td_lambda: its V-trace lambda.
    value_fn_outer_value_cost: weight of its value loss.
    value_fn_ema_decay: decay of the lifetime advantage-normalisation EMAs.
    value_fn_ema_eps: epsilon of that normalisation.
    policy_entropy_cost: meta-loss weight of the validation policy entropy.
    prediction_entropy_cost: meta-loss weight of the y and z entropies.
    target_mean_cost: meta-loss weight of the rule targets' squared means.
    target_kl_cost: meta-loss weight of KL(target network || pi-hat).
    unroll_inner_steps: unroll the window's `lax.scan`.
    remat: rematerialise each agent update in the backward pass (memory
      grows gently with K).
    checkpoint_every: checkpoint every this many meta-steps and at the end;
      0 = only at the end and on interrupt.
    keep_checkpoints: how many checkpoints to keep on disk.
  """

  population: tuple[tuple[str, int], ...] = (
      ('catch/rows=5/columns=5', 2),
      ('catch/rows=7/columns=5', 2),
      ('gymnax:DeepSea-bsuite', 2),
  )
  num_steps: int = 1300
  num_inner_steps: int = 2
  rollout_len: int = 16
  learner_batch_size: int = 32
  replay_fraction: float = 0.5
  buffer_capacity: int = 256
  valid_envs: int = 32
  lifetime_budgets: tuple[int, ...] = (8_000_000, 4_000_000, 2_000_000, 800_000)
  seed: int = 0
  random_init_seed: int = 1
  update_rule_params: str | None = None
  meta_learning_rate: float = 1e-3
  meta_max_grad_norm: float = 1.0
  # The agents (`configs.AgentFields`), smaller than the colab's.
  agent_dense: tuple[int, ...] = (128, 128)
  agent_lstm_size: int = 64
  agent_head_mlp_hiddens: tuple[int, ...] = (64,)
  agent_learning_rate: float = 2e-3
  # The meta-loss's value function and regularisers
  # (`configs.MetaLossFields`).
  value_fn_discount_factor: float = 0.997
  unroll_inner_steps: bool = False
  remat: bool = True
  checkpoint_every: int = 50
  keep_checkpoints: int = 2

  def __post_init__(self) -> None:
    check = configs.check
    population = _population(self.population)
    object.__setattr__(self, 'population', population)
    check(population, 'population must name at least one environment.')
    labels = [m.label for m in self.members]
    check(
        len(set(labels)) == len(labels),
        f'population names an environment twice: {labels}.',
    )
    for member in self.members:
      check(
          registry.is_jittable_name(member.env),
          'population: each environment must be jittable (catch,'
          ' gymnax:<id>, craftax:<id> or xminigrid:<id>), got'
          f' {member.env!r}.',
      )
      check(
          member.count >= 1,
          f'population: {member.env} needs at least one member.',
      )
      reward_scale_lib.check_reward_scale(member)
    configs.check_rule_source(self)
    configs.set_network_sizes(self)
    object.__setattr__(
        self,
        'lifetime_budgets',
        configs.positive_ints('lifetime_budgets', self.lifetime_budgets),
    )
    configs.check_ints(
        self,
        (
            'num_steps',
            'num_inner_steps',
            'learner_batch_size',
            'buffer_capacity',
            'valid_envs',
            'agent_lstm_size',
            'keep_checkpoints',
        ),
        minimum=1,
    )
    configs.check_ints(
        self, ('seed', 'random_init_seed', 'checkpoint_every'), minimum=0
    )
    check(
        self.rollout_len >= 2,
        f'rollout_len must be >= 2, got {self.rollout_len!r}.',
    )
    check(
        0.0 <= self.replay_fraction < 1.0,
        'replay_fraction must lie in [0, 1): each update takes at least one'
        f' fresh trajectory, got {self.replay_fraction!r}.',
    )
    check(
        self.fresh_per_batch >= 1,
        f'learner_batch_size ({self.learner_batch_size}) with'
        f' replay_fraction {self.replay_fraction} leaves no fresh'
        ' trajectory.',
    )
    check(
        self.buffer_capacity >= self.fresh_per_batch,
        f'buffer_capacity ({self.buffer_capacity}) must hold at least one'
        f' rollout ({self.fresh_per_batch} trajectories).',
    )
    meta_learning_rate, *positive = configs.META_POSITIVE
    configs.check_positive(
        self, (meta_learning_rate, 'meta_max_grad_norm', *positive)
    )
    configs.check_non_negative(self, configs.META_NON_NEGATIVE)
    configs.check_fractions(self, configs.META_FRACTIONS)
    configs.check_bools(self, ('unroll_inner_steps', 'remat'))

  @property
  def members(self) -> tuple[Member, ...]:
    """The population's environments, in order, with their member counts."""
    return tuple(parse_member(spec, count) for spec, count in self.population)

  @property
  def num_members(self) -> int:
    return sum(count for _, count in self.population)

  @property
  def env_steps_per_step(self) -> int:
    """Environment steps one member takes per meta-step."""
    return self.rollout_len * (
        self.num_inner_steps * self.fresh_per_batch + 2 * self.valid_envs
    )

  def agent_settings(self) -> config_dict.ConfigDict:
    """Settings of the members' agents (`agent.Agent`)."""
    return configs.agent_settings(agent_lib.get_settings_disco(), self)


def _population(value: Any) -> tuple[tuple[str, int], ...]:
  """`population` as sorted-free (spec, count) pairs, or a `ConfigError`."""
  if isinstance(value, Mapping):
    value = value.items()
  try:
    pairs = tuple((spec, count) for spec, count in value)
  except (TypeError, ValueError):
    raise configs.ConfigError(
        f'population must be (environment spec, members) pairs, got {value!r}.'
    ) from None
  for spec, count in pairs:
    configs.check(
        isinstance(spec, str) and spec,
        f'population: a spec must be a non-empty string, got {spec!r}.',
    )
    configs.check(
        isinstance(count, int) and not isinstance(count, bool),
        f'population: the member count of {spec} must be an int, got'
        f' {count!r}.',
    )
  return pairs


def parse_population(text: str) -> tuple[tuple[str, int], ...]:
  """'catch/rows=5*2,gymnax:DeepSea-bsuite' -> (('catch/rows=5', 2), ...)."""
  pairs = []
  for part in filter(None, (p.strip() for p in text.split(','))):
    spec, star, count = part.rpartition('*')
    if not star:
      spec, count = part, '1'
    try:
      pairs.append((spec, int(count)))
    except ValueError:
      raise ValueError(
          f'expected SPEC or SPEC*COUNT separated by commas, got {text!r}'
      ) from None
  return tuple(pairs)


PRESETS: Mapping[str, Mapping[str, Any]] = {
    LOCAL: {},
    PAPER: dict(
        num_inner_steps=20,
        rollout_len=29,
        learner_batch_size=96,
        replay_fraction=0.9,
        buffer_capacity=1000,
        valid_envs=48,
        lifetime_budgets=(200_000_000, 100_000_000, 50_000_000, 20_000_000),
        agent_dense=(512, 512),
        agent_lstm_size=128,
        agent_head_mlp_hiddens=(128,),
        agent_learning_rate=3e-4,
        num_steps=10_000,
    ),
}


def preset(name: str, **changes: Any) -> DiscoveryConfig:
  """The config of preset `name` (see the module docstring) with `changes`.

  Raises:
    configs.ConfigError: an unknown preset or an invalid change.
  """
  if name not in PRESETS:
    raise configs.ConfigError(
        f'Unknown preset {name!r}; choose one of {", ".join(PRESETS)}.'
    )
  return DiscoveryConfig(**(dict(PRESETS[name]) | changes))


def check_members(members: Sequence[Member], num_devices: int) -> None:
  """Raises `ConfigError` unless every environment's members split evenly."""
  for member in members:
    configs.check(
        member.count % num_devices == 0,
        f'population: {member.env} has {member.count} members, not a'
        f' multiple of the {num_devices} devices they are spread over.',
    )
