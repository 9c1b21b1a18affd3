"""Meta-training: discovering and fine-tuning update rules.

A population of agents learns with the update rule (the meta-network), and
the rule's parameters follow the meta-gradient of how well the agents do
after a few updates (Oh et al., "Discovering state-of-the-art reinforcement
learning algorithms", Nature 648, 2025). Each meta-step, every agent acts,
is updated by the rule a few times and is scored; `meta_update` is that
step for the whole population. One member (`MetaTrainAgent`,
`MetaTrainState`) is `meta_agent`, its meta-gradient
(`calculate_meta_gradient`) is `meta_gradient`; both are re-exported here.

Details and rationale: `docs/modules.md`.
"""

import functools

import chex
import jax
import jax.numpy as jnp
import optax

from disco import reward_scale
from disco import types
from disco import utils
from disco.meta_train import config as meta_train_config
from disco.meta_train import meta_agent
from disco.meta_train import meta_gradient
from disco.meta_train.meta_agent import MetaTrainAgent as MetaTrainAgent
from disco.meta_train.meta_agent import MetaTrainState as MetaTrainState

# pylint: disable=g-importing-member,useless-import-alias
from disco.meta_train.meta_gradient import MetaGradientFn as MetaGradientFn
from disco.meta_train.meta_gradient import (
    calculate_meta_gradient as calculate_meta_gradient,
)
from disco.meta_train.meta_gradient import (
    configured_meta_gradient as configured_meta_gradient,
)

MetaTrainConfig = meta_train_config.MetaTrainConfig
POLICY_ENTROPY_COST = meta_train_config.POLICY_ENTROPY_COST
PREDICTION_ENTROPY_COST = meta_train_config.PREDICTION_ENTROPY_COST
TARGET_MEAN_COST = meta_train_config.TARGET_MEAN_COST
TARGET_KL_COST = meta_train_config.TARGET_KL_COST


def _agent_meta_step(
    update_rule_params: types.MetaParams,
    state: meta_agent.MetaTrainState,
    act_rng: chex.PRNGKey,
    update_rng: chex.PRNGKey,
    *,
    agent: meta_agent.MetaTrainAgent,
    config: MetaTrainConfig,
) -> tuple[
    types.MetaParams,
    meta_agent.MetaTrainState,
    types.LogDict,
    types.LogDict,
    types.LogDict,
]:
  """Rollouts and the meta-gradient of one agent (the reference's key use).

  Train rollout j acts with `split(act_rng, N)[j]`; the validation rollout
  acts with `act_rng` itself (the reference reuses it); the learner steps
  and the validation policy draw from `update_rng` (see
  `calculate_meta_gradient`).

  Returns:
    (meta-gradients, the agent after the inner updates, learner logs [N],
    meta-loss logs, reward logs).
  """
  step_rngs = jax.random.split(act_rng, config.num_inner_steps)
  rollouts = []
  for step_rng in step_rngs:
    state, rollout = agent.unroll_actor(state, step_rng, config.rollout_len)
    rollouts.append(rollout)
  train_rollouts = utils.tree_stack(rollouts)
  state, valid_rollout = agent.unroll_actor(
      state, act_rng, 2 * config.rollout_len
  )
  rewards = train_rollouts.rewards  # [N, T, B], the environment's units.
  train_rollouts, valid_rollout = (
      reward_scale.scale_rewards(rollout, config.reward_scale)
      for rollout in (train_rollouts, valid_rollout)
  )
  meta_gradient_fn = meta_gradient.configured_meta_gradient(agent, config)
  meta_grads, (state, train_logs, meta_log) = meta_gradient_fn(
      update_rule_params, state, train_rollouts, valid_rollout, update_rng
  )
  reward_log = dict(
      rewards=rewards.mean(),
      pos_rewards=(rewards > 0).sum().astype(jnp.float32),
      neg_rewards=(rewards < 0).sum().astype(jnp.float32),
  )
  return meta_grads, state, train_logs, meta_log, reward_log


def meta_update(
    update_rule_params: types.MetaParams,
    meta_opt_state: optax.OptState,
    agents_states: meta_agent.MetaTrainState,
    rng: chex.PRNGKey,
    *,
    agent: meta_agent.MetaTrainAgent,
    meta_opt: optax.GradientTransformation,
    config: MetaTrainConfig,
) -> tuple[
    types.MetaParams,
    optax.OptState,
    meta_agent.MetaTrainState,
    types.LogDict,
    types.LogDict,
]:
  """One meta-step of the whole population (on one device, inside `pmap`).

  Every agent collects its rollouts and computes its meta-gradient; the
  meta-gradients are averaged over agents (and, inside
  `calculate_meta_gradient`, over devices) and applied with `meta_opt`.

  Keys, as in the reference: `act_rng, update_rng = split(rng)`; agent i
  acts with `act_rngs[i] = split(act_rng, num_agents)[i]` (train rollout j
  with `split(act_rngs[i], N)[j]`, the validation rollout with `act_rngs[i]`
  itself, reused as the reference does) and computes its meta-gradient with
  `split(update_rng, num_agents)[i]`.

  Logs: the meta-loss terms and the learner logs are averaged over the
  agents, where the reference's notebook logs the last agent's (its loop
  over agents overwrites them); rewards, pos_rewards and neg_rewards are
  per-agent means in both, and so is the meta-gradient.

  Args:
    update_rule_params: the rule's parameters.
    meta_opt_state: the meta-optimiser's state.
    agents_states: the population's states, stacked: leaves [num_agents,
      ...].
    rng: this device's key for the meta-step.
    agent: the (shared) agent definition.
    meta_opt: the meta-optimiser.
    config: rollout lengths, loss weights and execution options.

  Returns:
    (new rule parameters, new meta-optimiser state, new agents' states,
    learner logs [N] averaged over agents, meta logs: the meta-loss terms
    averaged over agents plus meta_grad_norm, meta_up_norm, rewards (mean
    reward per step) and pos_rewards / neg_rewards (counts per agent of
    positive / negative rewards in its train rollouts); all logs are also
    averaged over devices).
  """
  num_agents = jax.tree.leaves(agents_states)[0].shape[0]
  act_rng, update_rng = jax.random.split(rng)
  act_rngs = jax.random.split(act_rng, num_agents)
  update_rngs = jax.random.split(update_rng, num_agents)
  step_fn = functools.partial(
      _agent_meta_step, update_rule_params, agent=agent, config=config
  )
  if config.vmap_agents:
    outs = jax.vmap(step_fn)(agents_states, act_rngs, update_rngs)
  else:
    outs = utils.tree_stack([
        step_fn(jax.tree.map(lambda x, i=i: x[i], agents_states), *keys)
        for i, keys in enumerate(zip(act_rngs, update_rngs))
    ])
  meta_grads, agents_states, train_logs, meta_log, reward_log = outs
  if agent.axis_name is not None:
    # The reference averaged these over devices on the host.
    reward_log = jax.lax.pmean(reward_log, axis_name=agent.axis_name)
  mean_over_agents = functools.partial(jax.tree.map, lambda x: x.mean(0))
  meta_grads = mean_over_agents(meta_grads)
  updates, meta_opt_state = meta_opt.update(
      meta_grads, meta_opt_state, update_rule_params
  )
  update_rule_params = optax.apply_updates(update_rule_params, updates)
  meta_log = mean_over_agents(meta_log | reward_log)
  meta_log['meta_grad_norm'] = optax.tree.norm(meta_grads)
  meta_log['meta_up_norm'] = optax.tree.norm(updates)
  return (
      update_rule_params,
      meta_opt_state,
      agents_states,
      mean_over_agents(train_logs),
      meta_log,
  )
