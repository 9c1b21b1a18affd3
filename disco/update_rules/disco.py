"""The Disco update rule: a meta-network produces the agent's targets.

Oh et al., "Discovering state-of-the-art reinforcement learning algorithms",
Nature 648 (2025). The agent outputs a policy, predictions y (per state) and
z (per action), categorical action values q and an auxiliary one-step policy
prediction. The meta-network maps a rollout (with Retrace advantages from q
and the outputs of a slowly moving target network) to targets pi-hat, y-hat
and z-hat; the agent minimises KL divergences towards them, plus a value
loss on q that receives no meta-gradient.
"""

from collections.abc import Mapping
from typing import Any

import chex
import distrax
import haiku as hk
import jax
import jax.numpy as jnp
from ml_collections import config_dict

from disco import types
from disco import utils
from disco.networks import meta_nets
from disco.update_rules import base
from disco.value_fns import value_utils

_META_NETS = ('lstm',)


class DiscoUpdateRule(base.UpdateRule):
  """The discovered update rule, parameterised by its meta-network."""

  # The losses read z, aux_pi and q at the taken action only (z_a, aux_pi_a
  # and q_a below); the meta-network reads every action, without gradient.
  taken_action_outputs = frozenset({'z', 'aux_pi', 'q'})
  can_share_meta_inputs = True

  def __init__(
      self,
      net: config_dict.ConfigDict | Mapping[str, Any],
      value_discount: float,
      max_abs_value: float,
      num_bins: int,
      moving_average_decay: float = 0.99,
      moving_average_eps: float = 1e-6,
      share_meta_inputs: bool = False,
  ) -> None:
    """Configures the rule.

    Args:
      net: the meta-network's settings; `net.name` selects it ('lstm') and
        also names its Haiku module. A `ConfigDict` or any mapping, with
        tuples or lists (as Hydra-style configs give them); `input_option`
        may be a `MetaNetInputOption` or a mapping of the same fields.
      value_discount: discount of the Retrace value targets.
      max_abs_value: range of the categorical q's bins.
      num_bins: number of bins of q.
      moving_average_decay: decay of the advantage / TD moving averages.
      moving_average_eps: epsilon of their normalisation.
      share_meta_inputs: compute what several meta-network inputs read
        alike once (`meta_nets.LSTM`'s `share_readings`): the same targets
        up to float rounding. Off: the reference's program.
    """
    super().__init__()
    net = _meta_net_kwargs(net) | dict(share_readings=share_meta_inputs)
    if net['name'] not in _META_NETS:
      raise ValueError(
          f'Invalid meta-network name {net["name"]!r}; available:'
          f' {list(_META_NETS)}.'
      )
    self._net_settings = net
    self._prediction_size = net['prediction_size']
    self._value_discount = value_discount
    self._max_abs_value = max_abs_value
    self._num_bins = num_bins
    self._adv_ema = utils.MovingAverage(
        jnp.zeros(()), decay=moving_average_decay, eps=moving_average_eps
    )
    self._td_ema = utils.MovingAverage(
        jnp.zeros(()), decay=moving_average_decay, eps=moving_average_eps
    )

    def meta_net_fn(*args, **kwargs):
      return meta_nets.LSTM(**net)(*args, **kwargs)

    def meta_rnn_state_fn():
      return meta_nets.LSTM(**net).meta_rnn_state()

    self._eta_init_fn, self._eta_apply = hk.transform_with_state(meta_net_fn)
    self._meta_rnn_state_init, _ = hk.transform_with_state(meta_rnn_state_fn)

  def init_params(
      self, rng: chex.PRNGKey
  ) -> tuple[types.MetaParams, chex.ArrayTree]:
    """Random meta-parameters and the initial meta-network state."""
    dummy_input = self._get_dummy_input(
        include_behaviour_out=True, include_agent_adv=True
    )
    return self._eta_init_fn(rng, dummy_input, axis_name=None)

  def init_meta_state(
      self,
      rng: chex.PRNGKey,
      params: types.AgentParams,
  ) -> types.MetaState:
    """Fresh meta-LSTM state and EMAs; the target network starts at params.

    The meta-LSTM state does not depend on `rng`: it is read without
    initialising the whole meta-network (which the reference did, at the
    cost of a full eager initialisation).
    """
    _, meta_rnn_state = self._meta_rnn_state_init(rng)
    return dict(
        rnn_state=meta_rnn_state,
        adv_ema_state=self._adv_ema.init_state(),
        td_ema_state=self._td_ema.init_state(),
        target_params=params,
    )

  def flat_output_spec(
      self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    return dict(
        logits=utils.get_logits_specs(single_action_spec),
        y=types.ArraySpec((self._prediction_size,), jnp.float32),
    )

  def model_output_spec(
      self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    # The order (z, aux_pi, q) is the creation order of the model heads.
    return dict(
        z=types.ArraySpec((self._prediction_size,), jnp.float32),
        aux_pi=utils.get_logits_specs(single_action_spec),
        q=types.ArraySpec((self._num_bins,), jnp.float32),
    )

  def unroll_meta_net(
      self,
      meta_params: types.MetaParams,
      params: types.AgentParams,
      state: types.HaikuState,
      meta_state: types.MetaState,
      rollout: types.UpdateRuleInputs,
      hyper_params: types.HyperParams,
      unroll_policy_fn: types.AgentUnrollFn,
      rng: chex.PRNGKey,
      axis_name: str | None = None,
  ) -> tuple[types.UpdateRuleOuts, types.MetaState]:
    """Targets from the meta-network, and the rule's next state.

    Steps: unroll the target network; Retrace values and EMA-normalised
    advantages from the online and target q; apply the meta-network; move
    the target parameters towards the online ones (Polyak averaging with
    `hyper_params['target_params_coeff']`).

    Returns:
      (meta_out, new meta_state); meta_out holds pi [T, B, A], y and z
      [T, B, Y], meta_input_emb, the value outputs and `target_out`.
    """
    del rng
    t, b = rollout.rewards.shape
    chex.assert_shape((rollout.rewards, rollout.is_terminal), (t, b))
    chex.assert_tree_shape_prefix(
        (rollout.agent_out, rollout.actions), (t + 1, b)
    )

    target_out, _ = unroll_policy_fn(
        meta_state['target_params'],
        state,
        rollout.observations,
        rollout.should_reset_mask_fwd,
    )
    value_outs, adv_ema_state, td_ema_state = value_utils.get_value_outs(
        value_net_out=None,
        q_net_out=rollout.agent_out['q'],
        target_value_net_out=None,
        target_q_net_out=target_out['q'],
        rollout=rollout,
        pi_logits=rollout.agent_out['logits'],
        discount=self._value_discount,
        lambda_=hyper_params['value_fn_td_lambda'],
        nonlinear_transform=True,
        categorical_value=True,
        max_abs_value=self._max_abs_value,
        drop_last=False,
        adv_ema_state=meta_state['adv_ema_state'],
        adv_ema_fn=self._adv_ema,
        td_ema_state=meta_state['td_ema_state'],
        td_ema_fn=self._td_ema,
        axis_name=axis_name,
    )

    # The reference stored these on the caller's rollout object; here the
    # rollout is left untouched and the meta-network gets an extended copy.
    meta_net_inputs = rollout.replace(
        extra_from_rule=dict(
            v_scalar=value_outs.value,
            adv=value_outs.adv,
            normalized_adv=value_outs.normalized_adv,
            q=value_outs.target_q_value,
            qv_adv=value_outs.qv_adv,
            normalized_qv_adv=value_outs.normalized_qv_adv,
            target_out=target_out,
        )
    )
    meta_out, new_rnn_state = self._eta_apply(
        meta_params,
        meta_state['rnn_state'],
        None,
        meta_net_inputs,
        axis_name=axis_name,
    )
    chex.assert_rank([meta_out['pi'], meta_out['y'], meta_out['z']], 3)

    meta_out = meta_out | dict(
        q_target=value_outs.q_target,
        adv=value_outs.adv,
        normalized_adv=value_outs.normalized_adv,
        qv_adv=value_outs.qv_adv,
        normalized_qv_adv=value_outs.normalized_qv_adv,
        q_value=value_outs.q_value,
        q_td=value_outs.q_td,
        normalized_q_td=value_outs.normalized_q_td,
        target_out=target_out,
    )

    coeff = hyper_params['target_params_coeff']
    new_target_params = jax.tree.map(
        lambda old, new: old * coeff + (1.0 - coeff) * new,
        meta_state['target_params'],
        params,
    )
    new_meta_state = meta_state | dict(
        rnn_state=new_rnn_state,
        adv_ema_state=adv_ema_state,
        td_ema_state=td_ema_state,
        target_params=new_target_params,
    )
    return meta_out, new_meta_state

  def agent_loss(
      self,
      rollout: types.UpdateRuleInputs,
      meta_out: types.UpdateRuleOuts,
      hyper_params: types.HyperParams,
      backprop: bool,
  ) -> tuple[chex.Array, types.UpdateRuleLog]:
    """KL(target || agent) for pi, y and z, plus the auxiliary policy loss.

    The auxiliary head predicts, from step t and the action taken, the
    policy at step t+1 (masked where the transition was terminal).
    """
    t, b = rollout.rewards.shape
    chex.assert_shape((rollout.rewards, rollout.is_terminal), (t, b))
    chex.assert_tree_shape_prefix(
        (rollout.agent_out, rollout.actions), (t + 1, b)
    )

    agent_out, actions = jax.tree.map(
        lambda x: x[:-1], (rollout.agent_out, rollout.actions)
    )
    logits = agent_out['logits']  # [T, B, A]
    y = agent_out['y']  # [T, B, Y]
    z = agent_out['z']  # [T, B, A, Z]
    z_a = base.taken_action_output(agent_out, 'z', actions)  # [T, B, Z]

    pi_hat, y_hat, z_hat = meta_out['pi'], meta_out['y'], meta_out['z']
    if not backprop:
      pi_hat, y_hat, z_hat = jax.lax.stop_gradient((pi_hat, y_hat, z_hat))
    chex.assert_equal_shape([pi_hat, logits])
    chex.assert_equal_shape([y_hat, y])
    chex.assert_equal_shape([z_hat, z_a])
    pi_loss = utils.categorical_kl_divergence(pi_hat, logits)
    y_loss = utils.categorical_kl_divergence(y_hat, y)
    z_loss = utils.categorical_kl_divergence(z_hat, z_a)

    aux_pi_a = base.taken_action_output(
        agent_out, 'aux_pi', actions
    )  # [T, B, A]
    next_logits = rollout.agent_out['logits'][1:]  # [T, B, A]
    aux_loss = utils.categorical_kl_divergence(
        jax.lax.stop_gradient(next_logits), aux_pi_a
    )
    aux_loss *= 1.0 - rollout.is_terminal

    chex.assert_shape((pi_loss, y_loss, z_loss, aux_loss), (t, b))
    total = (
        hyper_params['pi_cost'] * pi_loss
        + hyper_params['y_cost'] * y_loss
        + hyper_params['z_cost'] * z_loss
        + hyper_params['aux_policy_cost'] * aux_loss
    )

    def _mean_entropy(logits):
      return jnp.mean(distrax.Softmax(logits).entropy())

    log = dict(
        logits=jnp.mean(logits),
        y=jnp.mean(y),
        z=jnp.mean(z),
        entropy=_mean_entropy(logits),
        y_entropy=_mean_entropy(y),
        z_entropy=_mean_entropy(z_a),
        pi_loss=jnp.mean(pi_loss),
        aux_kl_loss=jnp.mean(aux_loss),
        pi_hat=jnp.mean(pi_hat),
        y_hat=jnp.mean(y_hat),
        z_hat=jnp.mean(z_hat),
        pi_hat_entropy=_mean_entropy(pi_hat),
        aux_policy_entropy=_mean_entropy(aux_pi_a),
        aux_target_entropy=_mean_entropy(next_logits),
    )
    return total, log

  def agent_loss_no_meta(
      self,
      rollout: types.UpdateRuleInputs,
      meta_out: types.UpdateRuleOuts | None,
      hyper_params: types.HyperParams,
  ) -> tuple[chex.Array, types.UpdateRuleLog]:
    """The categorical Q-value loss along the Retrace TD error."""
    if meta_out is None:
      raise ValueError('DiscoUpdateRule.agent_loss_no_meta needs meta_out.')
    q_a = base.taken_action_output(rollout.agent_out, 'q', rollout.actions)[:-1]
    q_loss = value_utils.value_loss_from_td(
        value_net_out=q_a,
        td=jax.lax.stop_gradient(meta_out['q_td']),
        nonlinear_transform=True,
        categorical_value=True,
        max_abs_value=self._max_abs_value,
    )
    log = dict(
        q_target=jnp.mean(meta_out['q_target']),
        agent_q_mean=jnp.mean(meta_out['q_value']),
        q_loss=jnp.mean(q_loss),
        td=jnp.mean(meta_out['q_td']),
        normalized_td=jnp.mean(meta_out['normalized_q_td']),
    )
    return q_loss * hyper_params['value_cost'], log


def _meta_net_kwargs(net: Any) -> dict[str, Any]:
  """The meta-network's keyword arguments from a ConfigDict or a mapping.

  Sequences may be lists; a mapping `input_option` ({'base': [...],
  'action_conditional': [...]} of {'source', 'transforms'} entries) becomes
  a `MetaNetInputOption`. The values are otherwise passed on unchanged.
  """
  try:
    kwargs = {key: net[key] for key in net.keys()}
  except (AttributeError, TypeError):
    raise TypeError(
        'net must be a ConfigDict or a mapping of the meta-network settings;'
        f' got {type(net).__name__}.'
    ) from None
  missing = [key for key in ('name', 'prediction_size') if key not in kwargs]
  if missing:
    raise ValueError(f'The meta-network settings lack {missing}.')
  option = kwargs.get('input_option')
  if option is not None and not isinstance(option, types.MetaNetInputOption):
    kwargs['input_option'] = _as_input_option(option)
  return kwargs


def _as_input_option(option: Any) -> types.MetaNetInputOption:
  """A `MetaNetInputOption` from a mapping of its fields (lists allowed)."""

  def _configs(group: str) -> tuple[types.TransformConfig, ...]:
    try:
      entries = option[group]
    except (KeyError, TypeError):
      raise ValueError(
          'input_option must be a MetaNetInputOption or a mapping with'
          f' "base" and "action_conditional"; got {option!r}.'
      ) from None
    configs = []
    for entry in entries:
      if not isinstance(entry, types.TransformConfig):
        try:
          entry = _input(entry['source'], *entry['transforms'])
        except (KeyError, TypeError):
          raise ValueError(
              f'Each input_option.{group} entry needs "source" and'
              f' "transforms"; got {entry!r}.'
          ) from None
      configs.append(entry)
    return tuple(configs)

  return types.MetaNetInputOption(
      base=_configs('base'), action_conditional=_configs('action_conditional')
  )


def _input(source: str, *transforms: str) -> types.TransformConfig:
  return types.TransformConfig(source=source, transforms=transforms)


def get_input_option() -> types.MetaNetInputOption:
  """The meta-network inputs of Disco103 (see the paper's Methods).

  Per step: the taken action's probability under the agent, the behaviour
  policy and the target network; reward; discount; value (at t and t+1),
  advantage and normalised advantage; embedded y and z predictions of the
  agent and target network (taken action, policy average and max over
  actions, at t and t+1). Per action: the three policies, embedded z of the
  agent and the target network, Q, Q - V and normalised Q - V.
  """
  policy = ('drop_last', 'softmax', 'stop_grad')
  return types.MetaNetInputOption(
      base=(
          _input('agent_out/logits', *policy, 'select_a'),
          _input('behaviour_agent_out/logits', *policy, 'select_a'),
          _input('rewards', 'sign_log'),
          _input('is_terminal', 'masks_to_discounts'),
          _input(
              'extra_from_rule/v_scalar', 'sign_log', 'td_pair', 'stop_grad'
          ),
          _input('extra_from_rule/adv', 'sign_log', 'stop_grad'),
          _input('extra_from_rule/normalized_adv', 'stop_grad'),
          _input('extra_from_rule/target_out/logits', *policy, 'select_a'),
          _input('agent_out/y', 'softmax', 'y_net', 'td_pair'),
          _input('extra_from_rule/target_out/y', 'softmax', 'y_net', 'td_pair'),
          _input('agent_out/z', 'drop_last', 'softmax', 'z_net', 'select_a'),
          _input(
              'agent_out/z', 'softmax', 'z_net', 'pi_weighted_avg', 'td_pair'
          ),
          _input('agent_out/z', 'softmax', 'z_net', 'max_a', 'td_pair'),
          _input(
              'extra_from_rule/target_out/z',
              'drop_last',
              'softmax',
              'z_net',
              'select_a',
          ),
          _input(
              'extra_from_rule/target_out/z',
              'softmax',
              'z_net',
              'pi_weighted_avg',
              'td_pair',
          ),
          _input(
              'extra_from_rule/target_out/z',
              'softmax',
              'z_net',
              'max_a',
              'td_pair',
          ),
      ),
      action_conditional=(
          _input('agent_out/logits', *policy),
          _input('behaviour_agent_out/logits', *policy),
          _input('extra_from_rule/target_out/logits', *policy),
          _input('agent_out/z', 'drop_last', 'softmax', 'z_net'),
          _input(
              'extra_from_rule/target_out/z', 'drop_last', 'softmax', 'z_net'
          ),
          _input('extra_from_rule/q', 'sign_log', 'drop_last', 'stop_grad'),
          _input(
              'extra_from_rule/qv_adv', 'sign_log', 'drop_last', 'stop_grad'
          ),
          _input('extra_from_rule/normalized_qv_adv', 'drop_last', 'stop_grad'),
      ),
  )
