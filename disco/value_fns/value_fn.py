"""The state-value function that meta-training uses for its advantages.

During discovery the meta-gradient's policy-gradient term needs advantages
that do not depend on the rule being learnt; this separate value function
(trained alongside each agent) supplies them. It is not part of the agent.
"""

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import optax

from disco import optimizers
from disco import types
from disco import utils
from disco.networks import nets
from disco.value_fns import value_utils


class ValueFunction:
  """A scalar state-value network with V-trace targets and EMA statistics.

  Attributes:
    config: the value function's configuration.
    axis_name: `pmap` axis to average gradients and statistics over, if any.
  """

  def __init__(
      self,
      config: types.ValueFnConfig,
      axis_name: str | None,
  ) -> None:
    self.config = config
    self.axis_name = axis_name
    self._discount_factor = config.discount_factor
    self._td_lambda = config.td_lambda
    self._outer_value_cost = config.outer_value_cost
    self._value_fn = nets.get_network(
        config.net,
        out_spec={'value': types.ArraySpec((1,), jnp.float32)},
        module_name='value_fn',
        **config.net_args,
    )
    self._value_opt = optimizers.get_agent_optimizer(
        learning_rate=config.learning_rate,
        max_abs_update=config.max_abs_update,
    )
    self._adv_ema = utils.MovingAverage(
        jnp.zeros(()), decay=config.ema_decay, eps=config.ema_eps
    )
    self._td_ema = utils.MovingAverage(
        jnp.zeros(()), decay=config.ema_decay, eps=config.ema_eps
    )

  def initial_state(
      self, rng: chex.PRNGKey, dummy_observation: chex.ArrayTree
  ) -> types.ValueState:
    """Fresh parameters, optimizer state and moving averages.

    Args:
      rng: key for the parameter initialisation.
      dummy_observation: a batch of observations [B, ...] of the right
        structure and shapes.

    Returns:
      The initial `ValueState`.
    """
    params, state = self._value_fn.init(rng, dummy_observation, None)
    if state:
      raise ValueError(
          'Value functions must be stateless networks, but the network has'
          f' state: {state}.'
      )
    return types.ValueState(
        params=params,
        state=state,
        opt_state=self._value_opt.init(params),
        adv_ema_state=self._adv_ema.init_state(),
        td_ema_state=self._td_ema.init_state(),
    )

  def get_value_outs(
      self,
      value_state: types.ValueState,
      rollout: types.ActorRollout,
      target_logits: chex.Array,
  ) -> tuple[
      types.ValueOuts, chex.Array, types.EmaState | None, types.EmaState | None
  ]:
    """Values and advantages of `rollout` under the policy `target_logits`.

    Args:
      value_state: the value function's state.
      rollout: an actor rollout [T+1, B, ...].
      target_logits: [T+1, B, A] logits of the policy being evaluated.

    Returns:
      (value outputs, raw network outputs [T+1, B, 1], new advantage EMA
      state, new TD EMA state).
    """
    net_out, _ = hk.BatchApply(
        lambda obs: self._value_fn.one_step(
            value_state.params, value_state.state, obs, None
        )
    )(rollout.observations)
    net_out = net_out['value']
    value_outs, adv_ema_state, td_ema_state = value_utils.get_value_outs(
        value_net_out=net_out,
        q_net_out=None,
        target_value_net_out=None,
        target_q_net_out=None,
        rollout=rollout,
        pi_logits=target_logits,
        discount=self._discount_factor,
        lambda_=self._td_lambda,
        nonlinear_transform=True,
        categorical_value=False,
        adv_ema_state=value_state.adv_ema_state,
        adv_ema_fn=self._adv_ema,
        td_ema_state=value_state.td_ema_state,
        td_ema_fn=self._td_ema,
        axis_name=self.axis_name,
    )
    return value_outs, net_out, adv_ema_state, td_ema_state

  def update(
      self,
      value_state: types.ValueState,
      rollout: types.ActorRollout,
      target_logits: chex.Array,
  ) -> tuple[types.ValueState, types.ValueOuts, types.LogDict]:
    """One optimizer step on the value loss of `rollout`.

    The regression follows the EMA-normalised TD error. Reference behaviour,
    kept: the loss uses plain squared error on the raw outputs (no
    signed-hyperbolic transform), although the targets are computed with it.

    Args:
      value_state: the state to update.
      rollout: an actor rollout [T+1, B, ...].
      target_logits: [T+1, B, A] logits of the policy being evaluated.

    Returns:
      (new state, value outputs before the update, logs).
    """

    def _loss(params):
      outs, net_out, adv_ema, td_ema = self.get_value_outs(
          value_state.replace(params=params), rollout, target_logits
      )
      per_step = value_utils.value_loss_from_td(
          net_out[:-1], jax.lax.stop_gradient(outs.normalized_td)
      )
      loss = (self._outer_value_cost * per_step).mean()
      return loss, (outs, adv_ema, td_ema)

    (loss, (value_outs, adv_ema, td_ema)), grads = jax.value_and_grad(
        _loss, has_aux=True
    )(value_state.params)
    if self.axis_name is not None:
      grads = jax.lax.pmean(grads, axis_name=self.axis_name)
    updates, opt_state = self._value_opt.update(
        grads, value_state.opt_state, value_state.params
    )
    new_state = types.ValueState(
        params=optax.apply_updates(value_state.params, updates),
        state=value_state.state,
        opt_state=opt_state,
        adv_ema_state=adv_ema,
        td_ema_state=td_ema,
    )
    log = dict(
        value_loss=loss,
        value_td=value_outs.td,
        value_normalized_td=value_outs.normalized_td,
    )
    return new_state, value_outs, log
