"""An agent whose learning is defined by a pluggable update rule.

`Agent` owns the agent network, its optimizer and an `UpdateRule` (Disco,
actor-critic or policy gradient). Its pure functions (`actor_step`,
`unroll_net`, `learner_step`) are meant to be wrapped in `jit`, `pmap`,
`vmap` or `lax.scan` by the caller; with `batch_axis_name` set, gradients
are averaged over that `pmap` axis.
"""

from collections.abc import Collection

import chex
import distrax
import dm_env
import haiku as hk
import jax
from jax import numpy as jnp
from ml_collections import config_dict
import numpy as np
import optax

from disco import optimizers
from disco import types
from disco.networks import nets
from disco.update_rules import actor_critic
from disco.update_rules import base as update_rules_base
from disco.update_rules import disco as disco_rule
from disco.update_rules import policy_gradient

_UPDATE_RULES = {
    'disco': disco_rule.DiscoUpdateRule,
    'actor_critic': actor_critic.ActorCritic,
    'policy_gradient': policy_gradient.PolicyGradientUpdate,
}


@chex.dataclass(frozen=True)
class LearnerState:
  """What a learner step updates.

  Attributes:
    params: the agent network's parameters.
    opt_state: the optimizer's state.
    meta_state: the update rule's state (EMAs, meta-RNN state, target
      parameters, ...).
  """

  params: hk.Params
  opt_state: optax.OptState
  meta_state: types.MetaState


def check_action_spec(spec: types.ActionSpec) -> None:
  """Raises unless `spec` describes a scalar int32 discrete action."""
  for attribute in ('shape', 'dtype', 'minimum', 'maximum'):
    if not hasattr(spec, attribute):
      raise TypeError(
          'The action spec must be a bounded discrete spec (e.g.'
          ' dm_env.specs.BoundedArray((), np.int32, 0, num_actions - 1)); got'
          f' {spec!r}.'
      )
  if np.dtype(spec.dtype) != np.int32:
    raise TypeError(
        f'Unsupported action spec dtype {np.dtype(spec.dtype)}: the agent'
        ' supports int32 discrete actions only.'
    )
  if tuple(spec.shape):
    raise ValueError(
        f'Unsupported action spec shape {tuple(spec.shape)}: the agent'
        ' supports scalar discrete actions only (shape ()).'
    )
  if np.ndim(spec.minimum) or np.ndim(spec.maximum):
    raise ValueError('The action spec bounds must be scalars.')
  if int(spec.maximum) < int(spec.minimum):
    raise ValueError(
        f'Empty action range [{spec.minimum}, {spec.maximum}] in the spec.'
    )


def _check_rollout(rollout: types.ActorRollout, num_actions: int) -> None:
  """Raises a clear error when a rollout's [T+1, B] axes disagree."""
  if not isinstance(rollout, types.ActorRollout):
    raise TypeError(
        f'Expected a types.ActorRollout, got {type(rollout).__name__}.'
    )
  shapes = {
      'actions': np.shape(rollout.actions),
      'rewards': np.shape(rollout.rewards),
      'discounts': np.shape(rollout.discounts),
  }
  for name, shape in shapes.items():
    if len(shape) != 2:
      raise ValueError(
          f'rollout.{name} must have shape [T+1, B], got {shape}. (Remove any'
          ' device axis before calling the learner, e.g. inside pmap.)'
      )
  time_batch = shapes['actions']
  if time_batch[0] < 2:
    raise ValueError(
        f'A rollout needs at least 2 time steps, got {time_batch[0]}.'
    )
  leaves = dict(shapes)
  leaves['logits'] = np.shape(rollout.logits)
  for path, leaf in jax.tree_util.tree_leaves_with_path(rollout.observations):
    leaves['observations' + jax.tree_util.keystr(path)] = np.shape(leaf)
  behaviour = rollout.agent_outs
  if not isinstance(behaviour, dict) or 'logits' not in behaviour:
    raise ValueError("rollout.agent_outs must be a dict with 'logits'.")
  leaves["agent_outs['logits']"] = np.shape(behaviour['logits'])
  for name, shape in leaves.items():
    if tuple(shape[:2]) != tuple(time_batch):
      raise ValueError(
          f'Inconsistent rollout shapes: rollout.{name} has leading axes'
          f' {tuple(shape[:2])} but rollout.actions has {tuple(time_batch)}'
          ' ([T+1, B]).'
      )
  for name in ('logits', "agent_outs['logits']"):
    if tuple(leaves[name][2:]) != (num_actions,):
      raise ValueError(
          f'rollout.{name} must be [T+1, B, {num_actions}], got {leaves[name]}.'
      )


def _is_key_batch(rng: chex.PRNGKey) -> bool:
  """Whether `rng` holds one key per environment rather than one key."""
  if jax.dtypes.issubdtype(rng.dtype, jax.dtypes.prng_key):
    return rng.ndim == 1
  return rng.ndim == 2


class Agent:
  """An agent trained by an update rule; see the module docstring.

  For evaluation only, `update_rule(...)` (its `__call__`) gives the whole
  loss in one call; `learner_step` keeps the parts separate so that
  meta-training can differentiate through them.
  """

  update_rule: update_rules_base.UpdateRule

  def __init__(
      self,
      *,
      single_observation_spec: types.Specs,
      single_action_spec: types.ActionSpec,
      agent_settings: config_dict.ConfigDict,
      batch_axis_name: str | None,
      taken_action_gradients: bool = False,
      forward_once: bool = False,
      share_meta_inputs: bool = False,
      share_state_gates: bool = False,
      optimizer: optax.GradientTransformation | None = None,
  ):
    """Builds the update rule, the network and the optimizer.

    Args:
      single_observation_spec: spec of one observation (no batch axis).
      single_action_spec: spec of one action: scalar int32, bounded.
      agent_settings: e.g. `get_settings_disco()`.
      batch_axis_name: `pmap` axis to average gradients over, or None.
      taken_action_gradients: differentiate the per-action outputs that the
        rule's loss reads only at the taken actions
        (`UpdateRule.taken_action_outputs`) there alone: the same loss and
        gradient up to float rounding, with a backward pass through one
        action instead of all (Disco: 5-13% less time per learner step on
        a CPU, more with more actions). Off by default: the reference
        differentiates every action, and the faithful loop reproduces its
        rounding.
      forward_once: in `learner_step` (not meta-training), run the online
        network over the rollout once and reuse its outputs for the rule's
        inputs and, through `jax.vjp`, for the loss's gradient, where the
        reference runs it twice (a forward pass, then the loss's forward
        and backward ones): the same values, the gradient up to float
        rounding. Off by default, as the faithful loop keeps the
        reference's program.
      share_meta_inputs: let a rule that can (Disco) compute what several
        meta-network inputs read alike once: the same targets up to float
        rounding. Off by default: the reference's program.
      share_state_gates: give the network's LSTM action model
        (`model_arch_name='lstm'`) `share_state_gates`: the gates' part
        that reads the root state computed once per state, not once per
        action (the same parameters, the outputs up to float rounding).
        Off by default: the reference's program.
      optimizer: the agent's optimiser; None builds the reference's from
        `learning_rate` and `max_abs_update` of the settings (an addition:
        the paper's evaluation protocols schedule the step and decay the
        weights, `disco.schedules`).

    Raises:
      TypeError, ValueError: unsupported action spec, unknown update rule
        or network name.
    """
    check_action_spec(single_action_spec)
    self.settings = agent_settings
    self.single_observation_spec = single_observation_spec
    self.single_action_spec = single_action_spec
    self._batch_axis_name = batch_axis_name
    self._taken_action_gradients = taken_action_gradients
    self._forward_once = forward_once
    self._num_actions = int(
        single_action_spec.maximum - single_action_spec.minimum + 1
    )

    rule_name = agent_settings.update_rule_name
    if rule_name not in _UPDATE_RULES:
      raise ValueError(
          f'Unsupported update rule: {rule_name!r}; available:'
          f' {sorted(_UPDATE_RULES)}.'
      )
    rule_class = _UPDATE_RULES[rule_name]
    rule_kwargs = dict(agent_settings.update_rule)
    if share_meta_inputs and rule_class.can_share_meta_inputs:
      rule_kwargs['share_meta_inputs'] = True
    self.update_rule = rule_class(**rule_kwargs)

    net_args = dict(agent_settings.net_settings.net_args)
    if share_state_gates and net_args.get('model_arch_name') == 'lstm':
      net_args['model_kwargs'] = dict(
          net_args.get('model_kwargs') or {}, share_state_gates=True
      )
    self._network = nets.get_network(
        name=agent_settings.net_settings.name,
        action_spec=single_action_spec,
        out_spec=self.update_rule.flat_output_spec(single_action_spec),
        model_out_spec=self.update_rule.model_output_spec(single_action_spec),
        **net_args,
    )
    self._optimizer = optimizer or optimizers.get_agent_optimizer(
        learning_rate=agent_settings.learning_rate,
        max_abs_update=agent_settings.max_abs_update,
    )

  @property
  def network(self) -> types.PolicyNetwork:
    """The agent network's transformed functions."""
    return self._network

  @property
  def _hyper_params(self) -> types.HyperParams:
    """The rule's hyper-parameters, read from `settings` when traced.

    As in the reference, so that edits to `agent.settings.hyper_params`
    after construction take effect.
    """
    return self.settings.hyper_params.to_dict()

  def _dummy_obs(self, batch_size: int) -> chex.ArrayTree:
    return jax.tree.map(
        lambda s: np.zeros((batch_size,) + tuple(s.shape), dtype=s.dtype),
        self.single_observation_spec,
    )

  def _dummy_act(self, batch_size: int) -> chex.Array:
    return np.zeros((batch_size,), dtype=self.single_action_spec.dtype)

  def _dummy_should_reset(self, batch_size: int) -> chex.Array:
    return jnp.zeros((batch_size,), dtype=bool)

  def initial_actor_state(self, rng: chex.PRNGKey) -> types.HaikuState:
    """The actor's initial recurrent state ({} for the MLP agent)."""
    _, state = self._network.init(
        rng, self._dummy_obs(1), self._dummy_should_reset(1)
    )
    return state

  def initial_learner_state(self, rng_key: chex.PRNGKey) -> LearnerState:
    """Fresh parameters, optimizer state and update-rule state."""
    net_rng, state_rng = jax.random.split(rng_key)
    params, _ = self._network.init(
        net_rng, self._dummy_obs(1), self._dummy_should_reset(1)
    )
    return LearnerState(
        params=params,
        opt_state=self._optimizer.init(params),
        meta_state=self.update_rule.init_meta_state(
            rng=state_rng, params=params
        ),
    )

  def actor_step(
      self,
      actor_params: hk.Params,
      rng: chex.PRNGKey,
      timestep: types.EnvironmentTimestep,
      actor_state: hk.State,
  ) -> tuple[types.ActorTimestep, hk.State]:
    """Samples actions for a batch of timesteps.

    Args:
      actor_params: the agent network's parameters.
      rng: key for sampling, or one key per environment ([B] typed keys or
        [B, 2] raw ones), which makes each action independent of how the
        batch is split (e.g. over devices).
      timestep: the environment's timestep [B, ...].
      actor_state: the actor's recurrent state.

    Returns:
      The `ActorTimestep` to store (its `discounts` are False on LAST steps)
      and the next actor state.
    """
    should_reset = timestep.step_type == dm_env.StepType.LAST
    agent_outs, next_actor_state = self._network.one_step(
        actor_params, actor_state, timestep.observation, should_reset
    )
    if _is_key_batch(rng):
      actions = jax.vmap(
          lambda key, logits: distrax.Softmax(logits=logits).sample(seed=key)
      )(rng, agent_outs['logits'])
    else:
      actions = distrax.Softmax(logits=agent_outs['logits']).sample(seed=rng)
    actor_timestep = types.ActorTimestep(
        observations=timestep.observation,
        actions=actions,
        rewards=timestep.reward,
        discounts=jnp.logical_not(should_reset),
        agent_outs=agent_outs,
        states=actor_state,
        logits=agent_outs['logits'],
    )
    return actor_timestep, next_actor_state

  def unroll_net(
      self,
      agent_net_params: hk.Params,
      agent_net_state: hk.State,
      rollout: types.ActorRollout,
      taken_only: Collection[str] = (),
  ) -> tuple[types.AgentOuts, hk.State]:
    """Applies the network to a whole rollout [T+1, B, ...].

    Reference behaviour, kept: the reset mask passed to the network is
    [False, discounts[:-1] > 0], i.e. True on non-terminal steps, the
    opposite of a reset mask. It has no effect for the (stateless) MLP
    network, the only one the reference defines; a recurrent torso would
    need [False, discounts[:-1] == 0].

    `taken_only` names per-action outputs whose gradient is needed at the
    rollout's actions only: same values, a cheaper backward pass (see
    `LSTMModel.model_step`).
    """
    masks = rollout.discounts[:-1] > 0
    should_reset = jnp.concatenate([jnp.zeros_like(masks[:1]), masks], axis=0)
    if not taken_only:
      return self._network.unroll(
          agent_net_params, agent_net_state, rollout.observations, should_reset
      )
    return self._network.unroll(
        agent_net_params,
        agent_net_state,
        rollout.observations,
        should_reset,
        taken_actions=rollout.actions,
        taken_only=tuple(sorted(taken_only)),
    )

  def _update_rule_inputs(
      self,
      rollout: types.ActorRollout,
      agent_out: types.AgentOuts,
      value_out: types.ValueOuts | None,
  ) -> types.UpdateRuleInputs:
    # Transition t goes from step t to t+1: its reward and terminal flag are
    # the ones stored at step t+1.
    return types.UpdateRuleInputs(
        observations=rollout.observations,  # [T+1, ...]
        actions=rollout.actions,  # [T+1, B]
        rewards=rollout.rewards[1:],  # [T, B]
        is_terminal=rollout.discounts[1:] == 0,  # [T, B]
        behaviour_agent_out=rollout.agent_outs,  # [T+1, ...]
        agent_out=agent_out,  # [T+1, ...]
        value_out=value_out,
    )

  def _loss(
      self,
      agent_net_params: hk.Params,
      agent_net_state: hk.State,
      meta_state: types.MetaState,
      rollout: types.ActorRollout,
      meta_out: types.UpdateRuleOuts,
      is_meta_training: bool,
      value_out: types.ValueOuts | None = None,
  ) -> tuple[chex.Array, tuple[types.MetaState, hk.State, types.LogDict]]:
    """The masked mean of the rule's per-step losses, with logs."""
    agent_out, new_agent_net_state = self.unroll_net(
        agent_net_params,
        agent_net_state,
        rollout,
        taken_only=self._taken_only(),
    )
    total_loss, log_dict = self._loss_of_outputs(
        agent_out, rollout, meta_out, is_meta_training, value_out
    )
    return total_loss, (meta_state, new_agent_net_state, log_dict)

  def _taken_only(self) -> Collection[str]:
    if self._taken_action_gradients:
      return self.update_rule.taken_action_outputs
    return ()

  def _loss_of_outputs(
      self,
      agent_out: types.AgentOuts,
      rollout: types.ActorRollout,
      meta_out: types.UpdateRuleOuts,
      is_meta_training: bool,
      value_out: types.ValueOuts | None,
  ) -> tuple[chex.Array, types.LogDict]:
    """`_loss` as a function of the network's outputs on the rollout."""
    inputs = self._update_rule_inputs(rollout, agent_out, value_out)
    loss, log = self.update_rule.agent_loss(
        inputs, meta_out, self._hyper_params, backprop=is_meta_training
    )
    loss_no_meta, log_no_meta = self.update_rule.agent_loss_no_meta(
        inputs, meta_out, self._hyper_params
    )
    # Steps whose *input* timestep was LAST start no transition: mask them.
    masks = rollout.discounts[:-1] > 0
    total_loss = ((loss + loss_no_meta) * masks).sum() / (masks.sum() + 1e-8)
    log_dict = dict(
        total_loss=total_loss,
        **jax.tree.map(jnp.mean, log_no_meta | log),
    )
    return total_loss, log_dict

  def learner_step(
      self,
      rng: chex.PRNGKey,
      rollout: types.ActorRollout,
      learner_state: LearnerState,
      agent_net_state: hk.State,
      update_rule_params: types.MetaParams,
      is_meta_training: bool,
      value_out: types.ValueOuts | None = None,
  ) -> tuple[LearnerState, hk.State, types.LogDict]:
    """One update of the agent on a rollout [T+1, B, ...].

    Args:
      rng: random key, passed to the update rule.
      rollout: the batch of trajectories.
      learner_state: parameters, optimizer state and rule state.
      agent_net_state: the network state at the start of the rollout.
      update_rule_params: the rule's parameters (e.g. Disco103); None or {}
        for a rule without any (`has_meta_params` False).
      is_meta_training: let gradients flow into the rule's targets, for
        meta-gradients.
      value_out: advantages from a separate value function, for rules that
        need them (policy gradient). None (the default) keeps the
        reference's behaviour.

    Returns:
      The new learner state, the network state after the rollout, and logs
      (scalars, plus the rule's outputs under 'meta_out').
    """
    _check_rollout(rollout, self._num_actions)
    # Rules without meta-parameters also take none (None, {}), as the
    # reference's did; a tree of arrays is still checked (wrong weights).
    if self.update_rule.has_meta_params or jax.tree.leaves(update_rule_params):
      update_rules_base.check_meta_params(self.update_rule, update_rule_params)
    forward_once = self._forward_once and not is_meta_training
    if forward_once:
      # One forward pass; its pullback gives the loss's gradient below.
      agent_out, pullback, last_agent_net_state = jax.vjp(
          lambda params: self.unroll_net(
              params, agent_net_state, rollout, taken_only=self._taken_only()
          ),
          learner_state.params,
          has_aux=True,
      )
    else:
      agent_out, _ = self.unroll_net(
          learner_state.params, agent_net_state, rollout
      )
    meta_out, new_meta_state = self.update_rule.unroll_meta_net(
        meta_params=update_rule_params,
        params=learner_state.params,
        state=agent_net_state,
        meta_state=learner_state.meta_state,
        rollout=self._update_rule_inputs(rollout, agent_out, value_out),
        hyper_params=self._hyper_params,
        unroll_policy_fn=self._network.unroll,
        rng=rng,
        axis_name=self._batch_axis_name,
    )
    if forward_once:
      out_grads, logs = jax.grad(self._loss_of_outputs, has_aux=True)(
          agent_out, rollout, meta_out, is_meta_training, value_out
      )
      (grads,) = pullback(out_grads)
    else:
      grads, (_, last_agent_net_state, logs) = jax.grad(
          self._loss, has_aux=True
      )(
          learner_state.params,
          agent_net_state=agent_net_state,
          meta_state=learner_state.meta_state,
          rollout=rollout,
          meta_out=meta_out,
          is_meta_training=is_meta_training,
          value_out=value_out,
      )
    if self._batch_axis_name is not None:
      grads = jax.lax.pmean(grads, axis_name=self._batch_axis_name)
    updates, new_opt_state = self._optimizer.update(
        grads, learner_state.opt_state, learner_state.params
    )
    new_params = optax.apply_updates(learner_state.params, updates)
    logs['global_gradient_norm'] = optax.tree.norm(grads)
    logs['global_update_norm'] = optax.tree.norm(updates)
    logs['meta_out'] = meta_out
    new_learner_state = LearnerState(
        params=new_params, opt_state=new_opt_state, meta_state=new_meta_state
    )
    return new_learner_state, last_agent_net_state, logs


def use_mlp_network(
    settings: config_dict.ConfigDict,
    *,
    dense: tuple[int, ...],
    lstm_size: int,
    head_mlp_hiddens: tuple[int, ...],
    head_w_init_std: float,
) -> config_dict.ConfigDict:
  """Gives `settings` the colabs' agent: an MLP torso, an LSTM action model.

  Both reference colabs train this network whatever the update rule; only
  its sizes differ between them.
  """
  settings.net_settings.name = 'mlp'
  settings.net_settings.net_args = dict(
      dense=tuple(dense),
      model_arch_name='lstm',
      head_w_init_std=head_w_init_std,
      model_kwargs=dict(
          head_mlp_hiddens=tuple(head_mlp_hiddens),
          lstm_size=lstm_size,
      ),
  )
  return settings


def get_settings_disco() -> config_dict.ConfigDict:
  """Settings of an agent trained by Disco103 (the reference's values)."""
  return config_dict.ConfigDict(
      dict(
          hyper_params=dict(
              pi_cost=1.0,
              y_cost=1.0,
              z_cost=1.0,
              value_cost=0.2,
              aux_policy_cost=1.0,
              target_params_coeff=0.9,
              value_fn_td_lambda=0.95,
              discount_factor=0.997,
          ),
          update_rule_name='disco',
          update_rule=dict(
              net=config_dict.ConfigDict(
                  dict(
                      name='lstm',
                      prediction_size=600,
                      hidden_size=256,
                      embedding_size=(16, 1),
                      policy_target_channels=(16,),
                      policy_channels=(16, 2),
                      output_stddev=0.3,
                      aux_stddev=0.3,
                      policy_target_stddev=0.3,
                      state_stddev=1.0,
                      meta_rnn_kwargs=dict(
                          policy_channels=(16, 2),
                          embedding_size=(16,),
                          pred_embedding_size=(16, 1),
                          hidden_size=128,
                      ),
                      input_option=disco_rule.get_input_option(),
                  )
              ),
              value_discount=0.997,
              num_bins=601,
              max_abs_value=300.0,
          ),
          learning_rate=0.0003,
          max_abs_update=1.0,
          net_settings=dict(
              name='mlp',
              net_args=dict(
                  dense=(512, 512),
                  model_arch_name='lstm',
                  head_w_init_std=1e-2,
                  model_kwargs=dict(
                      head_mlp_hiddens=(128,),
                      lstm_size=128,
                  ),
              ),
          ),
      )
  )


def get_settings_actor_critic() -> config_dict.ConfigDict:
  """Settings of the actor-critic baseline (the reference's values)."""
  return config_dict.ConfigDict(
      dict(
          hyper_params=dict(
              discount_factor=0.997,
              vtrace_lambda=0.95,
              entropy_cost=0.2,
              pg_cost=1.0,
              value_cost=0.5,
          ),
          update_rule_name='actor_critic',
          update_rule=config_dict.ConfigDict(
              dict(
                  categorical_value=True,
                  num_bins=601,
                  max_abs_value=300.0,
                  nonlinear_value_transform=True,
                  normalize_adv=False,
                  normalize_td=False,
              )
          ),
          learning_rate=5e-4,
          max_abs_update=1.0,
          net_settings=dict(
              name='mlp',
              net_args=dict(
                  dense=(64, 32, 32),
                  model_arch_name='lstm',
                  head_w_init_std=1e-2,
                  model_kwargs=dict(
                      head_mlp_hiddens=(64,),
                      lstm_size=64,
                  ),
              ),
          ),
      ),
  )


def get_settings_policy_gradient() -> config_dict.ConfigDict:
  """Settings of the policy-gradient baseline.

  Not in the reference (whose `Agent` could not train this rule). The rule
  takes its advantages from `learner_step(..., value_out=...)`; its
  constructor defaults are the reference's, and the optimizer and network
  are those of the actor-critic settings (the network has only a policy
  head: the rule declares no other output).
  """
  settings = get_settings_actor_critic()
  settings.hyper_params = config_dict.ConfigDict(dict(discount_factor=0.997))
  settings.update_rule_name = 'policy_gradient'
  settings.update_rule = config_dict.ConfigDict(
      dict(entropy_cost=0.01, normalize_adv=True, pg_cost=1.0)
  )
  return settings
