"""One agent's meta-gradient: the meta-loss through its inner updates.

`calculate_meta_gradient` differentiates the meta-loss of one agent (its
updated policy scored on a validation rollout, plus regularisers on the
rule's targets) with respect to the update rule's parameters, through a
`lax.scan` of its learner steps; `configured_meta_gradient` binds the
settings a `MetaTrainConfig` or a `DiscoveryConfig` gives.
"""

from collections.abc import Callable
import functools
from typing import Any

import chex
import distrax
import haiku as hk
import jax
import jax.numpy as jnp

from disco import agent as agent_lib
from disco import types
from disco import utils
from disco.meta_train import config as meta_train_config
from disco.meta_train import meta_agent


def _mean_entropy(logits: chex.Array) -> chex.Array:
  return distrax.Softmax(logits).entropy().mean()


def calculate_meta_gradient(
    update_rule_params: types.MetaParams,
    agent_state: meta_agent.MetaTrainState,
    train_rollouts: types.ActorRollout,
    valid_rollout: types.ActorRollout,
    rng: chex.PRNGKey,
    *,
    agent: meta_agent.MetaTrainAgent,
    policy_entropy_cost: float = meta_train_config.POLICY_ENTROPY_COST,
    prediction_entropy_cost: float = meta_train_config.PREDICTION_ENTROPY_COST,
    target_mean_cost: float = meta_train_config.TARGET_MEAN_COST,
    target_kl_cost: float = meta_train_config.TARGET_KL_COST,
    remat: bool = False,
    unroll: int | bool = 1,
) -> tuple[
    types.MetaParams,
    tuple[meta_agent.MetaTrainState, types.LogDict, types.LogDict],
]:
  """One agent's meta-gradient through its inner updates.

  The inner loop is a `lax.scan` over the N train rollouts: a learner step
  with `is_meta_training=True` (gradients reach the rule's targets) and a
  value-function update. As in the reference, the value function is fitted
  to the policy *before* that iteration's learner step. The updated agent
  then scores the validation rollout:

    meta_loss = mean_t(-log pi(a_t|s_t) * stop_grad(normalised adv_t))
                - policy_entropy_cost * H(pi)
                + prediction_entropy_cost * (-H(y) - H(z_a))
                + target_mean_cost * sum over pi-hat, y-hat, z-hat of
                    mean_n(mean_{t,b,.}(target_n)^2)
                + target_kl_cost * KL(stop_grad(target net pi) || pi-hat)

  where the first three terms are on the validation rollout and the last
  two on the rule's targets of the N inner steps. With `agent.axis_name`
  set, the meta-gradients and logs are averaged over that `pmap` axis.

  Args:
    update_rule_params: the rule's (meta-network's) parameters.
    agent_state: the agent before the inner updates.
    train_rollouts: N rollouts stacked, leaves [N, T+1, B, ...].
    valid_rollout: the validation rollout [T', B, ...].
    rng: key; split into the learner keys and the validation key.
    agent: the agent (with its value function and axis name).
    policy_entropy_cost: weight of the validation policy entropy bonus.
    prediction_entropy_cost: weight of the y/z entropy bonus.
    target_mean_cost: weight of the squared mean of the rule's targets.
    target_kl_cost: weight of KL(target network policy || pi-hat).
    remat: rematerialise each inner step in the backward pass (less
      memory, one more forward pass).
    unroll: the inner scan's `unroll` (True unrolls it fully).

  Returns:
    (meta-gradients shaped like `update_rule_params`, (the agent after the
    inner updates, learner logs stacked [N], meta-loss logs)).
  """
  chex.assert_rank(train_rollouts.rewards, 3)  # [N, T+1, B]
  chex.assert_rank(valid_rollout.rewards, 2)  # [T', B]
  num_inner_steps = train_rollouts.rewards.shape[0]

  def _inner_step(
      carry: tuple[agent_lib.LearnerState, types.HaikuState, types.ValueState],
      inputs: tuple[types.ActorRollout, chex.PRNGKey],
      update_rule_params: types.MetaParams,
  ) -> tuple[
      tuple[agent_lib.LearnerState, types.HaikuState, types.ValueState],
      types.LogDict,
  ]:
    learner_state, actor_state, value_state = carry
    rollout, learner_rng = inputs
    new_learner_state, new_actor_state, logs = agent.learner_step(
        rng=learner_rng,
        rollout=rollout,
        learner_state=learner_state,
        agent_net_state=actor_state,
        update_rule_params=update_rule_params,
        is_meta_training=True,
    )
    # Reference behaviour, kept: the value function follows the policy of
    # the parameters *before* this learner step.
    agent_out, _ = agent.unroll_net(learner_state.params, actor_state, rollout)
    new_value_state, _, _ = agent.value_fn.update(
        value_state, rollout, agent_out['logits']
    )
    return (new_learner_state, new_actor_state, new_value_state), logs

  if remat:
    _inner_step = jax.checkpoint(_inner_step)

  def _outer_loss(
      update_rule_params: types.MetaParams,
  ) -> tuple[
      chex.Array, tuple[meta_agent.MetaTrainState, types.LogDict, types.LogDict]
  ]:
    train_rng, valid_rng = jax.random.split(rng)
    learner_rngs = jax.random.split(train_rng, num_inner_steps)
    (learner_state, actor_state, value_state), train_logs = jax.lax.scan(
        functools.partial(_inner_step, update_rule_params=update_rule_params),
        (
            agent_state.learner_state,
            agent_state.actor_state,
            agent_state.value_state,
        ),
        (train_rollouts, learner_rngs),
        unroll=unroll,
    )
    train_logs = dict(train_logs)
    targets = train_logs.pop('meta_out')

    # The updated policy on the validation rollout.
    valid_out, _ = hk.BatchApply(
        lambda timestep: agent.actor_step(
            learner_state.params,
            valid_rng,
            timestep,
            valid_rollout.first_state(time_axis=0),
        )
    )(valid_rollout.to_env_timestep())
    value_out, _, _, _ = agent.value_fn.get_value_outs(
        value_state, valid_rollout, valid_out.logits
    )
    actions = valid_rollout.actions[:-1]  # [T'-1, B]
    logits = valid_out.logits[:-1]  # [T'-1, B, A]
    adv = jax.lax.stop_gradient(value_out.normalized_adv)  # [T'-1, B]
    pg_loss = utils.differentiable_policy_gradient_loss(
        logits, actions, adv_t=adv, backprop=False
    ).mean()
    entropy = _mean_entropy(logits)

    # Regularisers on the validation rollout.
    agent_outs = valid_out.agent_outs
    z_a = utils.batch_lookup(agent_outs['z'][:-1], actions)
    y_entropy_loss = -_mean_entropy(agent_outs['y'])
    z_entropy_loss = -_mean_entropy(z_a)
    reg_loss = -policy_entropy_cost * entropy
    reg_loss += prediction_entropy_cost * (y_entropy_loss + z_entropy_loss)

    # Regularisers on the rule's targets of the inner steps.
    pi_hat, y_hat, z_hat = targets['pi'], targets['y'], targets['z']
    chex.assert_equal_shape_prefix([pi_hat, y_hat, z_hat], 3)  # [N, T, B]
    for target in (y_hat, z_hat, pi_hat):
      per_step_mean = jnp.mean(target, axis=(1, 2, 3))  # [N]
      reg_loss += target_mean_cost * jnp.mean(jnp.square(per_step_mean))
    target_logits = targets['target_out']['logits'][:, :-1]  # [N, T, B, A]
    chex.assert_equal_shape([target_logits, pi_hat])
    target_kl = utils.categorical_kl_divergence(
        jax.lax.stop_gradient(target_logits), pi_hat
    )
    reg_loss += target_kl_cost * jnp.mean(target_kl)

    meta_loss = pg_loss + reg_loss
    meta_log = dict(
        adv=value_out.adv.mean(),
        normalized_adv=value_out.normalized_adv.mean(),
        entropy=entropy,
        value=value_out.value.mean(),
        val_importance_weight=jnp.mean(jnp.minimum(value_out.rho, 1.0)),
        meta_loss=meta_loss,
        pg_loss=pg_loss,
        reg_loss=reg_loss,
    )
    new_agent_state = agent_state.replace(
        learner_state=learner_state,
        actor_state=actor_state,
        value_state=value_state,
    )
    return meta_loss, (new_agent_state, train_logs, meta_log)

  meta_grads, (new_agent_state, train_logs, meta_log) = jax.grad(
      _outer_loss, has_aux=True
  )(update_rule_params)
  if agent.axis_name is not None:
    meta_grads, train_logs, meta_log = jax.lax.pmean(
        (meta_grads, train_logs, meta_log), axis_name=agent.axis_name
    )
  return meta_grads, (new_agent_state, train_logs, meta_log)


# `calculate_meta_gradient` with its keyword settings bound: (rule params,
# agent state, train rollouts [N, T+1, B, ...], validation rollout
# [T', B, ...], key) -> (meta-gradients, (agent state, learner logs [N],
# meta-loss logs)).
MetaGradientFn = Callable[
    [
        types.MetaParams,
        meta_agent.MetaTrainState,
        types.ActorRollout,
        types.ActorRollout,
        chex.PRNGKey,
    ],
    tuple[
        types.MetaParams,
        tuple[meta_agent.MetaTrainState, types.LogDict, types.LogDict],
    ],
]


def configured_meta_gradient(
    agent: meta_agent.MetaTrainAgent, config: Any
) -> MetaGradientFn:
  """`calculate_meta_gradient` for `agent` with the settings of `config`.

  The meta-loss weights, `remat` and `unroll_inner_steps`, which a
  `MetaTrainConfig` and a `DiscoveryConfig` name alike.
  """
  return functools.partial(
      calculate_meta_gradient,
      agent=agent,
      policy_entropy_cost=config.policy_entropy_cost,
      prediction_entropy_cost=config.prediction_entropy_cost,
      target_mean_cost=config.target_mean_cost,
      target_kl_cost=config.target_kl_cost,
      remat=config.remat,
      unroll=True if config.unroll_inner_steps else 1,
  )
