"""Policy gradient as an update rule, with advantages from outside.

The rule has no value head: the advantages come from `rollout.value_out`,
e.g. computed by a separate `disco.value_fns.value_fn.ValueFunction` (see
`Agent.learner_step(..., value_out=...)`).
"""

import chex
import distrax
from jax import numpy as jnp

from disco import types
from disco import utils
from disco.update_rules import base


class PolicyGradientUpdate(base.UpdateRule):
  """REINFORCE with a baseline, plus an entropy bonus."""

  # `unroll_meta_net` ignores its meta-parameters.
  has_meta_params = False

  def __init__(
      self,
      entropy_cost: float = 0.01,
      normalize_adv: bool = True,
      pg_cost: float = 1,
      kl_prior_cost: float = 0.5,
      p_actor_prior: float = 0.03,
      p_uniform_prior: float = 0.003,
      target_params_coeff: float = 0.1,
  ) -> None:
    """Configures the rule.

    Args:
      entropy_cost: weight of the entropy bonus.
      normalize_adv: use the EMA-normalised advantages of `value_out`.
      pg_cost: weight of the policy-gradient loss.
      kl_prior_cost: accepted for compatibility; unused (as in the
        reference).
      p_actor_prior: accepted for compatibility; unused.
      p_uniform_prior: accepted for compatibility; unused.
      target_params_coeff: accepted for compatibility; unused.
    """
    self._normalize_adv = normalize_adv
    self._target_params_coeff = target_params_coeff
    self._pg_cost = pg_cost
    self._entropy_cost = entropy_cost
    self._kl_prior_cost = kl_prior_cost
    self._p_actor_prior = p_actor_prior
    self._p_uniform_prior = p_uniform_prior

  def init_params(
      self, rng: chex.PRNGKey
  ) -> tuple[types.MetaParams, chex.ArrayTree]:
    """No meta-parameters: a placeholder scalar, as in the reference."""
    del rng
    return {'dummy': jnp.array(0.0)}, {}

  def flat_output_spec(
      self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    return dict(logits=utils.get_logits_specs(single_action_spec))

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
    return dict()

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
    """Picks the advantages out of `rollout.value_out`."""
    del meta_params, params, state, hyper_params, unroll_policy_fn, rng
    del axis_name
    if rollout.value_out is None:
      raise ValueError(
          'PolicyGradientUpdate needs advantages in rollout.value_out (e.g.'
          ' from a ValueFunction); pass value_out= to Agent.learner_step.'
      )
    value_out = rollout.value_out
    pg_adv = value_out.normalized_adv if self._normalize_adv else value_out.adv
    return dict(pi=pg_adv), meta_state

  def agent_loss(
      self,
      rollout: types.UpdateRuleInputs,
      meta_out: types.UpdateRuleOuts,
      hyper_params: types.HyperParams,
      backprop: bool,
  ) -> tuple[chex.Array, types.UpdateRuleLog]:
    """Policy-gradient loss and entropy bonus per step [T, B]."""
    del backprop, hyper_params
    actions = rollout.actions[:-1]
    logits = rollout.agent_out['logits'][:-1]
    pg_loss = utils.differentiable_policy_gradient_loss(
        logits, actions, adv_t=meta_out['pi'], backprop=False
    )
    entropy_loss = -distrax.Softmax(logits).entropy()
    chex.assert_rank((pg_loss, entropy_loss), 2)
    total = self._pg_cost * pg_loss + self._entropy_cost * entropy_loss
    log = dict(
        entropy=-jnp.mean(entropy_loss),
        pg_advs=jnp.mean(meta_out['pi']),
    )
    return total, log
