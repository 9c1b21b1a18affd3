"""What a run's rule bootstraps with where an episode is cut by a time limit.

`truncation_values_fn` gives the values the rule's own targets bootstrap
with (`disco.truncation` uses them at truncated steps).
"""

from typing import Any

import chex
import jax
import jax.numpy as jnp

from disco import agent as agent_lib
from disco import rules
from disco import truncation
from disco import types
from disco.value_fns import value_utils


def truncation_values_fn(
    setup: Any,
    learner_state: agent_lib.LearnerState,
    actor_state: Any,
    value_state: types.ValueState | None,
) -> tuple[truncation.ValuesFn, float]:
  """How the run's rule values a state, for bootstrapping at time limits.

  The values are the ones the rule's targets bootstrap with, so that a
  truncated transition's target is the one it would have had, had the
  episode gone on: Disco's Retrace uses the target network's action values
  averaged under the online policy (discount `value_discount`),
  actor-critic's V-trace the online state values (`discount_factor`), and
  policy gradient's value function its own values.

  Args:
    setup: the run's pieces (`disco.learner.Setup`).
    learner_state: the agent's current learner state.
    actor_state: the agent network's state.
    value_state: the value function's state (policy gradient), or None.

  Returns:
    (observations [T+1, B, ...] -> [T+1, B] values, the targets' discount).
  """
  agent, settings = setup.agent, setup.agent.settings

  def unroll(params: Any, observations: chex.ArrayTree) -> Any:
    """The agent's outputs [T+1, B, ...] on `observations`, no resets."""
    no_reset = jnp.zeros(jax.tree.leaves(observations)[0].shape[:2], bool)
    outs, _ = agent.network.unroll(params, actor_state, observations, no_reset)
    return outs

  if setup.config.rule == rules.DISCO:
    rule = settings.update_rule

    def disco_values(observations):
      online = unroll(learner_state.params, observations)
      target = unroll(learner_state.meta_state['target_params'], observations)
      values, _ = value_utils.extract_scalar_values_from_net_out(
          None,
          target['q'],
          online['logits'],
          categorical_value=True,
          max_abs_value=rule.max_abs_value,
          nonlinear_transform=True,
      )
      return values

    return disco_values, float(rule.value_discount)
  if setup.config.rule == rules.ACTOR_CRITIC:
    rule = settings.update_rule

    def actor_critic_values(observations):
      online = unroll(learner_state.params, observations)
      return value_utils.get_values_from_net_outs(
          online['v'],
          categorical_value=rule.categorical_value,
          max_abs_value=rule.max_abs_value,
          nonlinear_transform=rule.nonlinear_value_transform,
      )

    return actor_critic_values, float(settings.hyper_params.discount_factor)
  value_fn = setup.value_fn
  # Without moving averages, `get_value_outs` updates no statistics.
  no_ema = value_state.replace(adv_ema_state=None, td_ema_state=None)

  def value_fn_values(observations):
    leading = jax.tree.leaves(observations)[0].shape[:2]
    rollout = types.ActorRollout(
        observations=observations,
        actions=jnp.zeros(leading, jnp.int32),
        rewards=jnp.zeros(leading, jnp.float32),
        discounts=jnp.ones(leading, bool),
        agent_outs={},
        states={},
        logits=jnp.zeros(leading + (1,), jnp.float32),
    )
    value_outs, *_ = value_fn.get_value_outs(no_ema, rollout, rollout.logits)
    return value_outs.value

  return value_fn_values, float(value_fn.config.discount_factor)
