"""Types shared across `disco`: specs, pytrees of states, and rollouts.

The names and fields follow DiscoRL's `types` module so that code written
against the reference reads the same here. All pytree containers are chex
dataclasses; fields are documented with their shapes where they have one.

The containers of arrays (rollouts, timesteps, update-rule inputs, value
outputs, EMA and value-function states) are mutable, as the reference's
were: code written for it assigns fields, e.g. `inputs.extra_from_rule =
...`. `disco` itself never does (it builds new values with `.replace`), and
nothing hashes them. The configurations (`TransformConfig`,
`MetaNetInputOption`, `PolicyNetwork`) stay frozen.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import chex
import dm_env
from dm_env import specs
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array
ArraySpec = jax.ShapeDtypeStruct
ActionSpec = specs.BoundedArray
Specs = dict[str, specs.Array | ArraySpec]
SpecsTree = ArraySpec | Sequence['SpecsTree'] | dict[str, 'SpecsTree']

HaikuState = hk.State
AgentOuts = dict[str, chex.ArrayTree]
# The key of `AgentOuts` that holds per-action outputs at the taken actions
# ([T, B, ...]), where a learner asked the network for them (`taken_only`).
TAKEN = 'at_taken_action'
UpdateRuleOuts = dict[str, chex.ArrayTree]
UpdateRuleLog = dict[str, chex.ArrayTree]
HyperParams = dict[str, chex.Array | float]
OptState = chex.ArrayTree
AgentParams = chex.ArrayTree
MetaParams = chex.ArrayTree
MetaParamsEMA = dict[float, MetaParams]  # Keyed by the EMA decay.
# State that an update rule carries between learner steps (EMAs, meta-RNN
# state, target parameters, ...).
MetaState = dict[str, chex.ArrayTree | None]
LogDict = dict[str, chex.Array]
RNNState = chex.ArrayTree

# Signature of an agent network applied to one step or to a [T, B] unroll:
# (params, state, observations, should_reset) -> (outputs, new_state).
AgentStepFn = Callable[
    [AgentParams, HaikuState, chex.ArrayTree, chex.Array | None],
    tuple[AgentOuts, HaikuState],
]
AgentUnrollFn = AgentStepFn
SampleActionFn = Callable[
    [chex.PRNGKey, MetaParams, AgentOuts],
    tuple[chex.ArrayTree, chex.ArrayTree, chex.ArrayTree],
]


@chex.dataclass
class ValueFnConfig:
  """Configuration of the meta-training value function (`ValueFunction`).

  Attributes:
    net: network name understood by `disco.networks.nets.get_network`.
    net_args: keyword arguments of that network.
    learning_rate: step size of the value function's optimizer.
    max_abs_update: element-wise clip applied to each update.
    discount_factor: discount used for the V-trace targets.
    td_lambda: trace parameter of V-trace.
    outer_value_cost: weight of the value loss.
    ema_decay: decay of the advantage / TD moving averages.
    ema_eps: epsilon of the moving-average normalisation.
  """

  net: str
  net_args: dict[str, Any]
  learning_rate: float
  max_abs_update: float
  discount_factor: float
  td_lambda: float
  outer_value_cost: float
  ema_decay: float = 0.99
  ema_eps: float = 1e-6


@chex.dataclass
class ValueState:
  """State of a `ValueFunction`: parameters, optimizer state and EMAs."""

  params: AgentParams
  state: HaikuState
  opt_state: OptState
  adv_ema_state: 'EmaState'
  td_ema_state: 'EmaState'


@chex.dataclass(frozen=True)
class TransformConfig:
  """One meta-network input: where to read it and how to transform it.

  Attributes:
    source: a '/'-separated path of attributes or keys into
      `UpdateRuleInputs`, e.g. 'extra_from_rule/target_out/logits'.
    transforms: names from `input_transforms.TRANSFORMS` (or 'y_net' /
      'z_net'), applied in order.
  """

  source: str
  transforms: Sequence[str | Callable[[Any], chex.Array]]


@chex.dataclass(frozen=True)
class MetaNetInputOption:
  """The meta-network's inputs: per-step ones and per-action ones."""

  base: Sequence[TransformConfig]
  action_conditional: Sequence[TransformConfig]


@chex.dataclass(mappable_dataclass=False, frozen=True)
class PolicyNetwork:
  """The Haiku-transformed functions of an agent network.

  Attributes:
    init: (rng, observations, should_reset) -> (params, state).
    one_step: applies the network to a batch of single steps [B, ...].
    unroll: applies the network to a batch of sequences [T, B, ...].
  """

  init: Callable[
      [chex.PRNGKey, chex.ArrayTree, chex.Array | None],
      tuple[AgentParams, HaikuState],
  ]
  one_step: AgentStepFn
  unroll: AgentUnrollFn


@chex.dataclass
class EmaState:
  """State of a `utils.MovingAverage`.

  Attributes:
    moment1: tree of (biased) first moments, one scalar per leaf.
    moment2: tree of (biased) second moments, one scalar per leaf.
    decay_product: product of all decays applied so far (for debiasing).
  """

  moment1: chex.ArrayTree
  moment2: chex.ArrayTree
  decay_product: chex.Array


@chex.dataclass
class EnvironmentTimestep:
  """A batched environment step.

  Attributes:
    observation: observation tree [B, ...].
    step_type: [B] int32 `dm_env.StepType` values.
    reward: [B] float32 reward received on arriving at this step.
  """

  observation: Mapping[str, chex.ArrayTree] | chex.Array
  step_type: chex.Array
  reward: chex.Array


@chex.dataclass
class ActorTimestep:
  """What an actor records at one step.

  Attributes:
    observations: observation tree [B, ...].
    actions: [B] sampled actions.
    rewards: [B] reward received on arriving at this step.
    discounts: [B] bool, False where the step was the last of an episode.
    agent_outs: the network outputs for this step.
    states: the actor's recurrent state before this step.
    logits: [B, A] behaviour policy logits.
  """

  observations: chex.ArrayTree
  actions: Any
  rewards: Any
  discounts: Any
  agent_outs: AgentOuts
  states: HaikuState
  logits: Any

  @classmethod
  def from_rollout(cls, rollout: 'ActorRollout') -> 'ActorTimestep':
    fields = {name: getattr(rollout, name) for name in _ACTOR_FIELDS}
    return cls(**fields)

  def to_env_timestep(self) -> EnvironmentTimestep:
    """Rebuilds environment timesteps (LAST wherever the discount is 0)."""
    step_type = jnp.where(
        self.discounts > 0,
        jnp.int32(dm_env.StepType.MID),
        jnp.int32(dm_env.StepType.LAST),
    )
    return EnvironmentTimestep(
        observation=self.observations,
        step_type=step_type,
        reward=self.rewards,
    )


_ACTOR_FIELDS = (
    'observations',
    'actions',
    'rewards',
    'discounts',
    'agent_outs',
    'states',
    'logits',
)


@chex.dataclass
class ActorRollout(ActorTimestep):
  """Actor timesteps stacked along leading axes.

  The usual layout is time-major [T, B, ...]; under `pmap` a device axis
  comes first and during meta-training an inner-step axis may precede time.
  """

  @classmethod
  def from_timestep(cls, timestep: ActorTimestep) -> 'ActorRollout':
    fields = {name: getattr(timestep, name) for name in _ACTOR_FIELDS}
    return cls(**fields)

  def first_state(self, time_axis: int) -> HaikuState:
    """Returns the recurrent states at time index 0 of `time_axis`."""
    index = (np.s_[:],) * (time_axis - 1) + (0,)
    return jax.tree.map(lambda x: x[index], self.states)


@chex.dataclass
class ValueOuts:
  """Value estimates and advantages computed from a rollout.

  Shapes use T for the number of transitions and B for the batch; A is the
  number of actions. Fields not produced by an estimator keep their
  defaults.

  Attributes:
    value: [T+1, B] scalar state values.
    target_value: [T+1, B] state values of the target network.
    rho: [T, B] importance weights pi/mu of the taken actions.
    adv: [T, B] advantages.
    normalized_adv: [T, B] advantages normalised by their moving average.
    value_target: [T, B] targets for the state value.
    td: [T, B] value_target - value.
    normalized_td: [T, B] td scaled by its moving average.
    qv_adv: [T+1, B, A] Q - V for every action.
    normalized_qv_adv: [T+1, B, A] qv_adv normalised like `adv`.
    q_value: [T+1, B, A] scalar action values.
    target_q_value: [T+1, B, A] action values of the target network.
    q_target: [T, B] Retrace target for the taken action.
    q_td: [T, B] q_target - Q(s_t, a_t).
    normalized_q_td: [T, B] q_td scaled by its moving average.
  """

  value: jax.typing.ArrayLike = 0.0
  target_value: jax.typing.ArrayLike = 0.0
  rho: jax.typing.ArrayLike = 0.0
  adv: jax.typing.ArrayLike = 0.0
  normalized_adv: jax.typing.ArrayLike = 0.0
  value_target: jax.typing.ArrayLike = 0.0
  td: jax.typing.ArrayLike = 0.0
  normalized_td: jax.typing.ArrayLike = 0.0
  qv_adv: chex.ArrayTree | None = None
  normalized_qv_adv: chex.ArrayTree | None = None
  q_value: chex.ArrayTree | None = None
  target_q_value: chex.ArrayTree | None = None
  q_target: chex.ArrayTree | None = None
  q_td: chex.ArrayTree | None = None
  normalized_q_td: chex.ArrayTree | None = None


@chex.dataclass
class UpdateRuleInputs:
  """What an update rule sees of a rollout.

  Attributes:
    observations: observation tree [T+1, B, ...].
    actions: [T+1, B] actions.
    rewards: [T, B] reward of each transition.
    is_terminal: [T, B] bool, whether the transition ended an episode.
    agent_out: the learner's network outputs [T+1, B, ...].
    behaviour_agent_out: the actor's outputs [T+1, B, ...] (at least
      'logits').
    value_out: optional value estimates from a separate value function.
    extra_from_rule: quantities an update rule computes before applying its
      meta-network (advantages, target-network outputs, ...).
  """

  observations: chex.ArrayTree
  actions: chex.Array
  rewards: chex.Array
  is_terminal: chex.Array
  agent_out: chex.ArrayTree
  behaviour_agent_out: AgentOuts | None = None
  value_out: ValueOuts | None = None
  extra_from_rule: chex.ArrayTree | None = None

  @property
  def should_reset_mask_fwd(self) -> chex.Array:
    """[T+1, B] reset mask for a forward RNN: is_terminal moved one step on."""
    first = jnp.zeros_like(self.is_terminal[:1])
    return jnp.concatenate([first, self.is_terminal], axis=0)

  @property
  def should_reset_mask_bwd(self) -> chex.Array:
    """[T+1, B] reset mask for a backward RNN: is_terminal plus a final 0."""
    last = jnp.zeros_like(self.is_terminal[:1])
    return jnp.concatenate([self.is_terminal, last], axis=0)
