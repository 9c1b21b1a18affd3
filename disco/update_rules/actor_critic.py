"""Actor-critic as an update rule: a baseline beside the discovered rule.

V-trace advantages from the agent's own (optionally categorical,
signed-hyperbolic) value head; loss = pg_cost * policy gradient
+ value_cost * value loss + entropy_cost * (-entropy).
"""

import chex
import distrax
import jax
from jax import numpy as jnp
import numpy as np

from disco import types
from disco import utils
from disco.update_rules import base
from disco.value_fns import value_utils


class ActorCritic(base.UpdateRule):
  """Advantage actor-critic with V-trace, through the update-rule interface."""

  # `unroll_meta_net` ignores its meta-parameters.
  has_meta_params = False

  def __init__(
      self,
      categorical_value: bool = False,
      num_bins: int = 601,
      max_abs_value: float = 300.0,
      nonlinear_value_transform: bool = False,
      normalize_adv: bool = False,
      normalize_td: bool = False,
      moving_average_decay: float = 0.99,
      moving_average_eps: float = 1e-6,
  ) -> None:
    """Configures the rule.

    Args:
      categorical_value: the value head outputs logits over `num_bins` bins.
      num_bins: number of value bins (categorical values only).
      max_abs_value: the bins span [-max_abs_value, max_abs_value].
      nonlinear_value_transform: values live in signed-hyperbolic space.
      normalize_adv: use EMA-normalised advantages in the policy gradient.
      normalize_td: use EMA-normalised TD errors in the value loss.
      moving_average_decay: decay of the advantage / TD moving averages.
      moving_average_eps: epsilon of their normalisation.
    """
    if normalize_td and categorical_value:
      raise ValueError(
          'normalize_td and categorical_value cannot be used together.'
      )
    self._normalize_adv = normalize_adv
    self._normalize_td = normalize_td
    self._num_bins = num_bins
    self._max_abs_value = max_abs_value
    self._categorical_value = categorical_value
    self._nonlinear_value_transform = nonlinear_value_transform
    self._adv_ema = utils.MovingAverage(
        np.zeros(()), decay=moving_average_decay, eps=moving_average_eps
    )
    self._td_ema = utils.MovingAverage(
        np.zeros(()), decay=moving_average_decay, eps=moving_average_eps
    )

  def init_params(
      self, rng: chex.PRNGKey
  ) -> tuple[types.MetaParams, chex.ArrayTree]:
    """No meta-parameters: a placeholder scalar, as in the reference."""
    del rng
    return {'dummy': jnp.array(0.0)}, {}

  def flat_output_spec(
      self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    value_size = self._num_bins if self._categorical_value else 1
    return dict(
        logits=utils.get_logits_specs(single_action_spec),
        v=types.ArraySpec((value_size,), np.float32),
    )

  def model_output_spec(
      self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    del single_action_spec
    return dict()

  def init_meta_state(
      self,
      rng: chex.PRNGKey,
      params: types.AgentParams,
  ) -> types.MetaState:
    del rng, params
    return dict(
        adv_ema_state=self._adv_ema.init_state(),
        td_ema_state=self._td_ema.init_state(),
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
    """V-trace values and advantages (no meta-network involved).

    The reference updated `meta_state` in place and returned it; this
    returns a new dict and leaves the argument unchanged (same values).
    """
    del meta_params, params, state, unroll_policy_fn, rng
    value_outs, adv_ema_state, td_ema_state = value_utils.get_value_outs(
        value_net_out=rollout.agent_out['v'],
        q_net_out=None,
        target_value_net_out=None,
        target_q_net_out=None,
        rollout=rollout,
        pi_logits=rollout.agent_out['logits'],
        discount=hyper_params['discount_factor'],
        lambda_=hyper_params['vtrace_lambda'],
        nonlinear_transform=self._nonlinear_value_transform,
        categorical_value=self._categorical_value,
        max_abs_value=self._max_abs_value,
        drop_last=False,
        adv_ema_state=meta_state['adv_ema_state'],
        adv_ema_fn=self._adv_ema,
        td_ema_state=meta_state['td_ema_state'],
        td_ema_fn=self._td_ema,
        axis_name=axis_name,
    )
    meta_out = dict(
        raw_advs=value_outs.adv,
        normalized_advs=value_outs.normalized_adv,
        value_target=value_outs.value_target,
        values=value_outs.value,
        normalized_tds=value_outs.normalized_td,
        tds=value_outs.td,
    )
    new_meta_state = meta_state | dict(
        adv_ema_state=adv_ema_state, td_ema_state=td_ema_state
    )
    return meta_out, new_meta_state

  def agent_loss(
      self,
      rollout: types.UpdateRuleInputs,
      meta_out: types.UpdateRuleOuts,
      hyper_params: types.HyperParams,
      backprop: bool,
  ) -> tuple[chex.Array, types.UpdateRuleLog]:
    """Policy-gradient, value and entropy losses per step [T, B]."""
    del backprop
    actions = rollout.actions[:-1]
    logits = rollout.agent_out['logits'][:-1]
    if self._normalize_adv:
      pg_advs = meta_out['normalized_advs']
    else:
      pg_advs = meta_out['raw_advs']
    value_tds = (
        meta_out['normalized_tds'] if self._normalize_td else meta_out['tds']
    )

    value_loss = value_utils.value_loss_from_td(
        rollout.agent_out['v'][:-1],
        jax.lax.stop_gradient(value_tds),
        nonlinear_transform=self._nonlinear_value_transform,
        categorical_value=self._categorical_value,
        max_abs_value=self._max_abs_value,
    )
    entropy_loss = -distrax.Softmax(logits).entropy()
    pg_loss = utils.differentiable_policy_gradient_loss(
        logits, actions, adv_t=pg_advs, backprop=False
    )
    chex.assert_rank((pg_loss, value_loss, entropy_loss), 2)
    total = (
        hyper_params['pg_cost'] * pg_loss
        + hyper_params['value_cost'] * value_loss
        + hyper_params['entropy_cost'] * entropy_loss
    )
    log = dict(
        logits=jnp.mean(logits),
        entropy=-jnp.mean(entropy_loss),
        pg_advs=jnp.mean(pg_advs),
        raw_advs=jnp.mean(meta_out['raw_advs']),
        avg_value=jnp.mean(meta_out['values']),
    )
    return total, log
