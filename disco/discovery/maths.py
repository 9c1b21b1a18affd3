"""Discovery as the paper does it: the maths of one meta-step.

A population of members, each an agent with its own environments, replay
buffer, meta-value function, lifetime and meta-optimiser state
(`MemberState`), learns with the update rule. One meta-step
(`discovery_step`, one device's share inside `pmap`), for every member:

Details and rationale: `docs/modules.md`.
"""

from collections.abc import Sequence
import functools
from typing import Any

import chex
import jax
import jax.numpy as jnp
import optax

from disco import acting
from disco import devices
from disco import replay as replay_lib
from disco import reward_scale
from disco import types
from disco import utils
from disco.discovery import config as discovery_config
from disco.meta_train import meta_agent
from disco.meta_train import meta_gradient

DiscoveryConfig = discovery_config.DiscoveryConfig
_AXIS = devices.AXIS_NAME


@chex.dataclass(frozen=True)
class MemberState:
  """Everything one member carries between meta-steps.

  Attributes:
    agent: agent, actor, meta-value and acting environments' states.
    valid_env_state: state of the validation environments.
    valid_timestep: their current timestep [V, ...].
    replay: the member's replay buffer.
    meta_opt_state: the member's meta-optimiser state.
    index: [] int32, the member's place in the population.
    lifetime_steps: [] int32, environment steps taken this lifetime.
    lifetime_budget: [] int32, environment steps this lifetime may take.
    lifetimes: [] int32, lifetimes started (1 for the first).
    episode_returns: [B] running returns of the acting environments.
  """

  agent: meta_agent.MetaTrainState
  valid_env_state: Any
  valid_timestep: types.EnvironmentTimestep
  replay: replay_lib.ReplayState
  meta_opt_state: optax.OptState
  index: chex.Array
  lifetime_steps: chex.Array
  lifetime_budget: chex.Array
  lifetimes: chex.Array
  episode_returns: chex.Array


def meta_optimizer(config: DiscoveryConfig) -> optax.GradientTransformation:
  """Each member's meta-optimiser: global-norm clipping, then Adam."""
  return optax.chain(
      optax.clip_by_global_norm(config.meta_max_grad_norm),
      optax.adam(config.meta_learning_rate),
  )


def sample_budget(rng: chex.PRNGKey, budgets: Sequence[int]) -> chex.Array:
  """A lifetime budget, drawn with weight proportional to 1 / budget.

  Each budget then gets the same share of the population's experience.
  """
  budgets = jnp.asarray(budgets, jnp.int32)
  logits = -jnp.log(budgets.astype(jnp.float32))
  return budgets[jax.random.categorical(rng, logits)]


class Group:
  """Members that share an environment: agent, environments and functions.

  Attributes:
    member: the environment and its member count.
    agent: the members' `MetaTrainAgent` (acting environments
      `fresh_per_batch`, no `pmap` axis: members are independent).
    valid_env: the validation environments (`valid_envs` of them).
  """

  def __init__(
      self, member: discovery_config.Member, config: DiscoveryConfig
  ) -> None:
    self.member = member
    self.config = config
    self.agent = meta_agent.MetaTrainAgent(
        env=member.make_env(config.fresh_per_batch),
        agent_settings=config.agent_settings(),
        value_fn_config=config.value_fn_config(),
        axis_name=None,
    )
    self.valid_env = member.make_env(config.valid_envs)
    self.meta_opt = meta_optimizer(config)

  @property
  def label(self) -> str:
    return self.member.label

  def _unroll(
      self, state: meta_agent.MetaTrainState, env: Any, env_state: Any,
      timestep: Any, rng: chex.PRNGKey, rollout_len: int,
  ) -> tuple[types.ActorRollout, Any, Any]:  # fmt: skip
    rollout, _, timestep, env_state = acting.unroll_jittable_actor(
        state.learner_state.params,
        state.actor_state,
        timestep,
        env_state,
        rng,
        env=env,
        rollout_len=rollout_len,
        actor_step_fn=self.agent.actor_step,
    )
    return rollout, env_state, timestep

  def _new_lifetime(
      self, rng: chex.PRNGKey, env_state: Any, env_timestep: Any
  ) -> meta_agent.MetaTrainState:
    """A fresh agent and meta-value function; the environments go on."""
    fresh = self.agent.init_state(rng)
    return fresh.replace(env_state=env_state, env_timestep=env_timestep)

  def init_member(
      self, rng: chex.PRNGKey, index: chex.Array, update_rule_params: Any
  ) -> MemberState:
    """Member `index` of the population, from the run's key `rng`."""
    key = jax.random.fold_in(rng, index)
    agent_key, valid_key, budget_key = jax.random.split(key, 3)
    agent_state = self.agent.init_state(agent_key)
    valid_env_state, valid_timestep = self.valid_env.reset(valid_key)
    example = jax.eval_shape(
        lambda: acting.trim_agent_outs(
            self._unroll(
                agent_state,
                self.agent.env,
                agent_state.env_state,
                agent_state.env_timestep,
                key,
                self.config.rollout_len,
            )[0]
        )
    )
    return MemberState(
        agent=agent_state,
        valid_env_state=valid_env_state,
        valid_timestep=valid_timestep,
        replay=replay_lib.init_replay_state(
            example, self.config.buffer_capacity
        ),
        meta_opt_state=self.meta_opt.init(update_rule_params),
        index=jnp.asarray(index, jnp.int32),
        lifetime_steps=jnp.zeros((), jnp.int32),
        lifetime_budget=sample_budget(budget_key, self.config.lifetime_budgets),
        lifetimes=jnp.ones((), jnp.int32),
        episode_returns=jnp.zeros((self.config.fresh_per_batch,), jnp.float32),
    )

  def member_step(
      self,
      update_rule_params: types.MetaParams,
      state: MemberState,
      rng: chex.PRNGKey,
  ) -> tuple[Any, MemberState, types.LogDict]:
    """One meta-step of one member; returns (update, state, logs)."""
    config = self.config
    key = jax.random.fold_in(rng, state.index)
    act_key, valid_key, sample_key, update_key, reset_key = jax.random.split(
        key, 5
    )
    agent_state = state.agent
    replay = state.replay
    rollouts = []
    for act_rng in jax.random.split(act_key, config.num_inner_steps):
      rollout, env_state, timestep = self._unroll(
          agent_state,
          self.agent.env,
          agent_state.env_state,
          agent_state.env_timestep,
          act_rng,
          config.rollout_len,
      )
      agent_state = agent_state.replace(
          env_state=env_state, env_timestep=timestep
      )
      rollout = acting.trim_agent_outs(rollout)
      replay = replay_lib.add_to_replay(replay, rollout)
      rollouts.append(rollout)
    fresh = utils.tree_stack(rollouts)  # [K, T, B, ...]
    # The K rollouts one after the other: [K * T, B].
    rewards, discounts = (
        x.reshape((-1,) + x.shape[2:]) for x in (fresh.rewards, fresh.discounts)
    )
    episode_returns, returns = acting.accumulate_rewards(
        state.episode_returns, rewards, discounts
    )
    total, count = acting.episode_statistics(returns, discounts)
    if config.replay_per_batch:
      # One trajectory a row (num_envs=1): any capacity, uniform over the
      # trajectories held, as the trainer's draws.
      replayed = jax.vmap(
          lambda k: replay_lib.sample_grid(
              replay, k, config.replay_per_batch, num_envs=1
          )
      )(jax.random.split(sample_key, config.num_inner_steps))
      train_rollouts = jax.tree.map(
          lambda x, y: jnp.concatenate([x, y], axis=2), fresh, replayed
      )
    else:
      train_rollouts = fresh
    valid_rollout, valid_env_state, valid_timestep = self._unroll(
        agent_state,
        self.valid_env,
        state.valid_env_state,
        state.valid_timestep,
        valid_key,
        2 * config.rollout_len,
    )
    # The rule and the meta-loss read the member's scaled rewards; its
    # returns and logs stay in the environment's units.
    train_rollouts, valid_rollout = (
        reward_scale.scale_rewards(rollout, self.member.reward_scale)
        for rollout in (train_rollouts, valid_rollout)
    )
    meta_gradient_fn = meta_gradient.configured_meta_gradient(
        self.agent, config
    )
    meta_grads, (agent_state, train_logs, meta_log) = meta_gradient_fn(
        update_rule_params,
        agent_state,
        train_rollouts,
        valid_rollout,
        update_key,
    )
    del train_logs
    update, meta_opt_state = self.meta_opt.update(
        meta_grads, state.meta_opt_state, update_rule_params
    )

    # Lifetimes: renew the agent once its budget is spent.
    steps = state.lifetime_steps + config.env_steps_per_step
    ended = steps >= state.lifetime_budget
    renewed = self._new_lifetime(
        reset_key, agent_state.env_state, agent_state.env_timestep
    )
    agent_state = jax.tree.map(
        lambda new, old: jnp.where(ended, new, old), renewed, agent_state
    )
    replay = replay.replace(
        size=jnp.where(ended, 0, replay.size),
        next_slot=jnp.where(ended, 0, replay.next_slot),
    )
    new_state = state.replace(
        agent=agent_state,
        valid_env_state=valid_env_state,
        valid_timestep=valid_timestep,
        replay=replay,
        meta_opt_state=meta_opt_state,
        lifetime_steps=jnp.where(ended, 0, steps),
        lifetime_budget=jnp.where(
            ended,
            sample_budget(
                jax.random.fold_in(reset_key, 1), config.lifetime_budgets
            ),
            state.lifetime_budget,
        ),
        lifetimes=state.lifetimes + ended.astype(jnp.int32),
        episode_returns=episode_returns,
    )
    logs = dict(
        meta_loss=meta_log['meta_loss'],
        pg_loss=meta_log['pg_loss'],
        entropy=meta_log['entropy'],
        rewards=fresh.rewards.mean(),
        total_return=total.astype(jnp.float32),
        num_episodes=count.astype(jnp.float32),
        lifetimes_ended=ended.astype(jnp.float32),
        meta_grad_norm=optax.tree.norm(meta_grads),
    )
    return update, new_state, logs


def _mean_return(total: chex.Array, count: chex.Array) -> chex.Array:
  """Mean return of the episodes that ended; NaN when none did."""
  return jnp.where(count > 0, total / jnp.maximum(count, 1.0), jnp.nan)


def discovery_step(
    update_rule_params: types.MetaParams,
    members: tuple[MemberState, ...],
    rng: chex.PRNGKey,
    *,
    groups: Sequence[Group],
    num_members: int,
    axis_name: str | None = _AXIS,
) -> tuple[types.MetaParams, tuple[MemberState, ...], types.LogDict]:
  """One meta-step of this device's members (inside `pmap` over `axis_name`).

  Args:
    update_rule_params: the rule's parameters (the same on every device).
    members: per group, this device's members stacked [n_g / D, ...].
    rng: the meta-step's key (the same on every device).
    groups: the population's groups.
    num_members: members in the whole population (all devices).
    axis_name: the devices' `pmap` axis, or None on one device.

  Returns:
    (new rule parameters, the members' new states, logs: per group
    '<label>/<name>' and over the population 'meta_loss', 'meta_up_norm',
    'return' (mean return of the episodes that ended), 'lifetimes_ended').
  """
  total_update = jax.tree.map(jnp.zeros_like, update_rule_params)
  new_members, logs = [], {}
  sums = dict(meta_loss=0.0, total_return=0.0, num_episodes=0.0,
              lifetimes_ended=0.0)  # fmt: skip
  for group, group_members in zip(groups, members, strict=True):
    step = functools.partial(group.member_step, update_rule_params, rng=rng)
    updates, group_members, group_logs = jax.vmap(step)(group_members)
    total_update = jax.tree.map(
        lambda t, u: t + u.sum(0), total_update, updates
    )
    new_members.append(group_members)
    group_sums = jax.tree.map(lambda x: x.sum(0), group_logs)
    for name in sums:
      sums[name] += group_sums[name]
    group_sums['count'] = jnp.asarray(group_members.index.shape[0], jnp.float32)
    if axis_name is not None:
      group_sums = jax.lax.psum(group_sums, axis_name)
    count = group_sums.pop('count')
    for name, value in group_sums.items():
      if name not in ('total_return', 'num_episodes'):
        logs[f'{group.label}/{name}'] = value / count
    logs[f'{group.label}/return'] = _mean_return(
        group_sums['total_return'], group_sums['num_episodes']
    )
    logs[f'{group.label}/num_episodes'] = group_sums['num_episodes']
  if axis_name is not None:
    total_update, sums = jax.lax.psum((total_update, sums), axis_name)
  update = jax.tree.map(lambda t: t / num_members, total_update)
  update_rule_params = optax.apply_updates(update_rule_params, update)
  logs['meta_loss'] = sums['meta_loss'] / num_members
  logs['return'] = _mean_return(sums['total_return'], sums['num_episodes'])
  logs['lifetimes_ended'] = sums['lifetimes_ended']
  logs['meta_up_norm'] = optax.tree.norm(update)
  return update_rule_params, tuple(new_members), logs
