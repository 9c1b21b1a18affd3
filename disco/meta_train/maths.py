"""Meta-training: discovering and fine-tuning update rules.

A population of agents learns with the update rule (the meta-network), and
the rule's parameters follow the meta-gradient of how well the agents do
after a few updates (Oh et al., "Discovering state-of-the-art reinforcement
learning algorithms", Nature 648, 2025). Each meta-step, every agent

Details and rationale: `docs/modules.md`.
"""

from collections.abc import Callable
import functools
from typing import Any

import chex
import distrax
import haiku as hk
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import optax

from disco import acting
from disco import agent as agent_lib
from disco import devices
from disco import types
from disco import utils
from disco.environments import base as base_env
from disco.meta_train import config as meta_train_config
from disco.value_fns import value_fn as value_fn_lib

MetaTrainConfig = meta_train_config.MetaTrainConfig
POLICY_ENTROPY_COST = meta_train_config.POLICY_ENTROPY_COST
PREDICTION_ENTROPY_COST = meta_train_config.PREDICTION_ENTROPY_COST
TARGET_MEAN_COST = meta_train_config.TARGET_MEAN_COST
TARGET_KL_COST = meta_train_config.TARGET_KL_COST


@chex.dataclass(frozen=True)
class MetaTrainState:
  """Everything one agent of the population carries between meta-steps.

  Attributes:
    learner_state: the agent's parameters, optimiser and rule state.
    actor_state: the actor's recurrent state ({} for the MLP agent).
    value_state: the value function's parameters, optimiser and EMAs.
    env_state: the environments' state [B, ...].
    env_timestep: the environments' current timestep [B, ...].
  """

  learner_state: agent_lib.LearnerState
  actor_state: types.HaikuState
  value_state: types.ValueState
  env_state: Any
  env_timestep: types.EnvironmentTimestep


class MetaTrainAgent:
  """An agent, its value function and its environments, for meta-training.

  Attributes:
    agent: the agent (its `learner_step` takes the update rule's params).
    value_fn: the value function that supplies the meta-loss's advantages.
    env: one device's batch of environments.
    axis_name: the `pmap` axis that gradients and statistics are averaged
      over, or None.
  """

  def __init__(
      self,
      *,
      env: base_env.Environment,
      agent_settings: config_dict.ConfigDict,
      value_fn_config: types.ValueFnConfig,
      axis_name: str | None = devices.AXIS_NAME,
  ) -> None:
    """Builds the agent and value function for `env`.

    Args:
      env: a jittable batched environment (its `batch_size` is the batch per
        device).
      agent_settings: e.g. `MetaTrainConfig.agent_settings()`; the update
        rule must be 'disco'.
      value_fn_config: e.g. `MetaTrainConfig.value_fn_config()`.
      axis_name: `pmap` axis to average over; None outside `pmap`.
    """
    if agent_settings.update_rule_name != 'disco':
      raise ValueError(
          'Meta-training needs a parameterised update rule (disco), got'
          f' {agent_settings.update_rule_name!r}.'
      )
    self.env = env
    self.axis_name = axis_name
    self.agent = agent_lib.Agent(
        agent_settings=agent_settings,
        single_observation_spec=env.single_observation_spec(),
        single_action_spec=env.single_action_spec(),
        batch_axis_name=axis_name,
    )
    self.value_fn = value_fn_lib.ValueFunction(
        value_fn_config, axis_name=axis_name
    )

  @classmethod
  def from_config(
      cls, config: MetaTrainConfig, axis_name: str | None = devices.AXIS_NAME
  ) -> 'MetaTrainAgent':
    """The agent a `MetaTrainConfig` describes."""
    return cls(
        env=config.make_env(),
        agent_settings=config.agent_settings(),
        value_fn_config=config.value_fn_config(),
        axis_name=axis_name,
    )

  @property
  def batch_size(self) -> int:
    """Environments per device (the learner batch)."""
    return self.env.batch_size

  @property
  def update_rule(self) -> Any:
    """The agent's update rule (`DiscoUpdateRule`)."""
    return self.agent.update_rule

  @property
  def learner_step(self) -> Any:
    """`Agent.learner_step`."""
    return self.agent.learner_step

  @property
  def actor_step(self) -> acting.ActorStepFn:
    """`Agent.actor_step`."""
    return self.agent.actor_step

  @property
  def unroll_net(self) -> Any:
    """`Agent.unroll_net`."""
    return self.agent.unroll_net

  def init_state(self, rng_key: chex.PRNGKey) -> MetaTrainState:
    """A fresh agent: the reference's key use (split in 3; reset with the key).

    Args:
      rng_key: the agent's key.

    Returns:
      The agent's initial `MetaTrainState`.
    """
    learner_key, actor_key, value_key = jax.random.split(rng_key, 3)
    dummy_obs = utils.zeros_like_spec(
        self.env.single_observation_spec(), prepend_shape=(self.batch_size,)
    )
    env_state, env_timestep = self.env.reset(rng_key)
    return MetaTrainState(
        learner_state=self.agent.initial_learner_state(learner_key),
        actor_state=self.agent.initial_actor_state(actor_key),
        value_state=self.value_fn.initial_state(value_key, dummy_obs),
        env_state=env_state,
        env_timestep=env_timestep,
    )

  def unroll_actor(
      self, state: MetaTrainState, rng: chex.PRNGKey, rollout_len: int
  ) -> tuple[MetaTrainState, types.ActorRollout]:
    """Acts for `rollout_len` steps with the current parameters.

    Args:
      state: the agent's state; its environments continue where they were.
      rng: key; step t samples with `split(rng, rollout_len)[t]`
        (`acting.unroll_jittable_actor`).
      rollout_len: number of steps.

    Returns:
      The state with the actor and environments moved on (the learner and
      value states are unchanged), and the rollout [rollout_len, B, ...].
    """
    rollout, actor_state, timestep, env_state = acting.unroll_jittable_actor(
        state.learner_state.params,
        state.actor_state,
        state.env_timestep,
        state.env_state,
        rng,
        env=self.env,
        rollout_len=rollout_len,
        actor_step_fn=self.agent.actor_step,
    )
    new_state = state.replace(
        actor_state=actor_state, env_state=env_state, env_timestep=timestep
    )
    return new_state, rollout


def _mean_entropy(logits: chex.Array) -> chex.Array:
  return distrax.Softmax(logits).entropy().mean()


def calculate_meta_gradient(
    update_rule_params: types.MetaParams,
    agent_state: MetaTrainState,
    train_rollouts: types.ActorRollout,
    valid_rollout: types.ActorRollout,
    rng: chex.PRNGKey,
    *,
    agent: MetaTrainAgent,
    policy_entropy_cost: float = POLICY_ENTROPY_COST,
    prediction_entropy_cost: float = PREDICTION_ENTROPY_COST,
    target_mean_cost: float = TARGET_MEAN_COST,
    target_kl_cost: float = TARGET_KL_COST,
    remat: bool = False,
    unroll: int | bool = 1,
) -> tuple[
    types.MetaParams, tuple[MetaTrainState, types.LogDict, types.LogDict]
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
  ) -> tuple[chex.Array, tuple[MetaTrainState, types.LogDict, types.LogDict]]:
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
        MetaTrainState,
        types.ActorRollout,
        types.ActorRollout,
        chex.PRNGKey,
    ],
    tuple[
        types.MetaParams, tuple[MetaTrainState, types.LogDict, types.LogDict]
    ],
]


def configured_meta_gradient(
    agent: MetaTrainAgent, config: Any
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


def _agent_meta_step(
    update_rule_params: types.MetaParams,
    state: MetaTrainState,
    act_rng: chex.PRNGKey,
    update_rng: chex.PRNGKey,
    *,
    agent: MetaTrainAgent,
    config: MetaTrainConfig,
) -> tuple[
    types.MetaParams,
    MetaTrainState,
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
  meta_gradient = configured_meta_gradient(agent, config)
  meta_grads, (state, train_logs, meta_log) = meta_gradient(
      update_rule_params, state, train_rollouts, valid_rollout, update_rng
  )
  rewards = train_rollouts.rewards  # [N, T, B]
  reward_log = dict(
      rewards=rewards.mean(),
      pos_rewards=(rewards > 0).sum().astype(jnp.float32),
      neg_rewards=(rewards < 0).sum().astype(jnp.float32),
  )
  return meta_grads, state, train_logs, meta_log, reward_log


def meta_update(
    update_rule_params: types.MetaParams,
    meta_opt_state: optax.OptState,
    agents_states: MetaTrainState,
    rng: chex.PRNGKey,
    *,
    agent: MetaTrainAgent,
    meta_opt: optax.GradientTransformation,
    config: MetaTrainConfig,
) -> tuple[
    types.MetaParams,
    optax.OptState,
    MetaTrainState,
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
