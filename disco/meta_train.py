"""Meta-training: discovering and fine-tuning update rules.

A population of agents learns with the update rule (the meta-network), and
the rule's parameters follow the meta-gradient of how well the agents do
after a few updates (Oh et al., "Discovering state-of-the-art reinforcement
learning algorithms", Nature 648, 2025). Each meta-step, every agent

1. acts for `num_inner_steps` rollouts of `rollout_len` steps, and once more
   for a validation rollout twice as long, all with its current parameters;
2. is updated `num_inner_steps` times by the rule (a `lax.scan` of learner
   steps with gradients flowing into the rule's targets), alongside a
   separate value function that supplies advantages;
3. scores its updated policy on the validation rollout with a
   policy-gradient loss (advantages from the value function) plus
   regularisers; the gradient of that score w.r.t. the rule's parameters is
   the agent's meta-gradient.

The meta-gradients are averaged over agents and devices and applied with
Adam. This module reproduces the reference's meta-training notebook as a
library: `MetaTrainConfig` holds the notebook's settings, `MetaTrainAgent`
bundles an agent with its value function and environment,
`calculate_meta_gradient` and `meta_update` are the notebook's functions
without globals, and `run_meta_train` runs the loop over all devices with
checkpoints that resume exactly.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
import contextlib
import dataclasses
import functools
import hashlib
import logging
import math
import pathlib
import signal
import threading
from typing import Any

import chex
import distrax
import haiku as hk
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np
import optax

from disco import agent as agent_lib
from disco import checkpoint as checkpoint_lib
from disco import types
from disco import utils
from disco import weights
from disco.environments import base as base_env
from disco.environments import jittable_envs
from disco.value_fns import value_fn as value_fn_lib

# The `pmap` axis over devices (the reference's name).
_PMAP_AXIS_NAME = 'i'

# The reference notebook's meta-loss regulariser weights.
POLICY_ENTROPY_COST = 1e-2
PREDICTION_ENTROPY_COST = 1e-3
TARGET_MEAN_COST = 1e-3
TARGET_KL_COST = 1e-2

# Version of the checkpoint contents written by `run_meta_train`.
_CHECKPOINT_KIND = 'disco.meta_train'

ProgressFn = Callable[[int, Mapping[str, float]], None]


def _positive_ints(values: Sequence[int]) -> bool:
  return all(
      isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values
  )


@dataclasses.dataclass(frozen=True)
class MetaTrainConfig:
  """Settings of a meta-training run; the defaults are the reference's.

  The defaults reproduce the reference's meta-training notebook: 800
  meta-steps of 2 agents on 5x5 jittable Catch, 32 environments per device,
  2 inner updates on rollouts of 16 steps, meta-optimiser Adam(5e-4). The
  reference's program layout (a Python loop over agents, a rolled inner
  `lax.scan`) is `vmap_agents=False, unroll_inner_steps=False`.

  The fields in the "Execution" group change neither the maths nor the
  state (only float rounding, speed and memory); they and `num_steps` may
  differ when a run is resumed, all other fields must match the
  checkpoint.
  """

  # Meta-training loop.
  num_steps: int = 800
  num_agents: int = 2
  num_inner_steps: int = 2
  rollout_len: int = 16
  batch_size_per_device: int = 32
  seed: int = 4
  # `init_params(PRNGKey(random_init_seed))` starts a run from scratch.
  random_init_seed: int = 1

  # Meta-optimiser: Adam.
  meta_learning_rate: float = 5e-4

  # Environment: jittable Catch.
  catch_rows: int = 5
  catch_columns: int = 5

  # Agent: `agent.get_settings_disco()` with the notebook's network and
  # learning rate.
  agent_dense: tuple[int, ...] = (512, 512)
  agent_head_mlp_hiddens: tuple[int, ...] = (256,)
  agent_lstm_size: int = 256
  agent_head_w_init_std: float = 1e-2
  agent_learning_rate: float = 5e-4

  # Value function that provides the meta-loss's advantages.
  value_dense: tuple[int, ...] = (256, 256)
  value_head_w_init_std: float = 1e-2
  value_learning_rate: float = 1e-3
  value_max_abs_update: float = 1.0
  value_discount_factor: float = 0.99
  value_td_lambda: float = 0.96
  value_outer_value_cost: float = 1.0
  value_ema_decay: float = 0.99
  value_ema_eps: float = 1e-6

  # Meta-loss regularisers (see `calculate_meta_gradient`).
  policy_entropy_cost: float = POLICY_ENTROPY_COST
  prediction_entropy_cost: float = PREDICTION_ENTROPY_COST
  target_mean_cost: float = TARGET_MEAN_COST
  target_kl_cost: float = TARGET_KL_COST

  # Execution.
  # vmap the population (one program for all agents) instead of a Python
  # loop over agents (one copy of the program per agent, as the reference):
  # about as fast per step on CPU and much quicker to compile.
  vmap_agents: bool = True
  # Unroll the inner `lax.scan` (fast for a few inner steps).
  unroll_inner_steps: bool = True
  # Rematerialise each inner step in the backward pass (saves memory on long
  # inner scans, costs one more forward pass).
  remat: bool = False
  # Checkpoint every this many meta-steps (and at the end); 0 = only at the
  # end. Used only when `run_meta_train` gets a `checkpoint_dir`.
  checkpoint_every: int = 100
  # How many checkpoints to keep on disk.
  keep_checkpoints: int = 2

  def __post_init__(self):
    for name in ('agent_dense', 'agent_head_mlp_hiddens', 'value_dense'):
      value = getattr(self, name)
      if isinstance(value, list):
        object.__setattr__(self, name, tuple(value))
      if not isinstance(getattr(self, name), tuple) or not _positive_ints(
          getattr(self, name)
      ):
        raise ValueError(
            f'{name} must be a tuple of positive ints, got {value!r}.'
        )
    for name in (
        'num_steps',
        'num_agents',
        'num_inner_steps',
        'rollout_len',
        'batch_size_per_device',
        'catch_rows',
        'catch_columns',
        'agent_lstm_size',
        'keep_checkpoints',
    ):
      if not _positive_ints([getattr(self, name)]):
        raise ValueError(
            f'{name} must be a positive int, got {getattr(self, name)!r}.'
        )
    for name in ('seed', 'random_init_seed', 'checkpoint_every'):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f'{name} must be an int >= 0, got {value!r}.')
    if self.catch_rows < 2:
      raise ValueError(f'catch_rows must be >= 2, got {self.catch_rows}.')
    for name in (
        'meta_learning_rate',
        'agent_learning_rate',
        'value_learning_rate',
        'value_max_abs_update',
    ):
      if not getattr(self, name) > 0:
        raise ValueError(f'{name} must be > 0, got {getattr(self, name)!r}.')
    for name in (
        'agent_head_w_init_std',
        'value_head_w_init_std',
        'value_outer_value_cost',
        'value_ema_eps',
        'policy_entropy_cost',
        'prediction_entropy_cost',
        'target_mean_cost',
        'target_kl_cost',
    ):
      if not getattr(self, name) >= 0:
        raise ValueError(f'{name} must be >= 0, got {getattr(self, name)!r}.')
    for name in ('value_discount_factor', 'value_td_lambda', 'value_ema_decay'):
      if not 0 <= getattr(self, name) <= 1:
        raise ValueError(
            f'{name} must be in [0, 1], got {getattr(self, name)!r}.'
        )
    for name in ('vmap_agents', 'unroll_inner_steps', 'remat'):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f'{name} must be a bool.')

  def replace(self, **changes) -> 'MetaTrainConfig':
    """A copy with some fields changed (validated again)."""
    return dataclasses.replace(self, **changes)

  def to_dict(self) -> dict[str, Any]:
    """The fields as JSON-friendly values (tuples become lists)."""
    return {
        f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
        for f in dataclasses.fields(self)
    }

  @classmethod
  def from_dict(cls, values: Mapping[str, Any]) -> 'MetaTrainConfig':
    """Inverse of `to_dict` (unknown keys are an error)."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise ValueError(f'Unknown MetaTrainConfig fields: {unknown}.')
    return cls(**values)

  def agent_settings(self) -> config_dict.ConfigDict:
    """Settings of the population's agents (`agent.Agent`)."""
    settings = agent_lib.use_mlp_network(
        agent_lib.get_settings_disco(),
        dense=self.agent_dense,
        lstm_size=self.agent_lstm_size,
        head_mlp_hiddens=self.agent_head_mlp_hiddens,
        head_w_init_std=self.agent_head_w_init_std,
    )
    settings.learning_rate = self.agent_learning_rate
    return settings

  def value_fn_config(self) -> types.ValueFnConfig:
    """Settings of the agents' value functions."""
    return types.ValueFnConfig(
        net='mlp',
        net_args=dict(
            dense=self.value_dense,
            head_w_init_std=self.value_head_w_init_std,
            action_spec=(),
        ),
        learning_rate=self.value_learning_rate,
        max_abs_update=self.value_max_abs_update,
        discount_factor=self.value_discount_factor,
        td_lambda=self.value_td_lambda,
        outer_value_cost=self.value_outer_value_cost,
        ema_decay=self.value_ema_decay,
        ema_eps=self.value_ema_eps,
    )

  def make_env(self) -> jittable_envs.CatchJittableEnvironment:
    """One device's batch of environments."""
    return jittable_envs.CatchJittableEnvironment(
        batch_size=self.batch_size_per_device,
        env_settings=config_dict.ConfigDict(
            dict(rows=self.catch_rows, columns=self.catch_columns)
        ),
    )


_EXECUTION_FIELDS = frozenset({
    'num_steps',
    'vmap_agents',
    'unroll_inner_steps',
    'remat',
    'checkpoint_every',
    'keep_checkpoints',
})


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
      axis_name: str | None = _PMAP_AXIS_NAME,
  ):
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
      cls, config: MetaTrainConfig, axis_name: str | None = _PMAP_AXIS_NAME
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
    return self.env.batch_size

  @property
  def update_rule(self):
    return self.agent.update_rule

  @property
  def learner_step(self):
    return self.agent.learner_step

  @property
  def actor_step(self):
    return self.agent.actor_step

  @property
  def unroll_net(self):
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
      rng: key; split into one key per step.
      rollout_len: number of steps.

    Returns:
      The state with the actor and environments moved on (the learner and
      value states are unchanged), and the rollout [rollout_len, B, ...].
    """
    params = state.learner_state.params

    def _step(carry, step_rng):
      env_state, timestep, actor_state = carry
      actor_timestep, actor_state = self.agent.actor_step(
          params, step_rng, timestep, actor_state
      )
      env_state, timestep = self.env.step(env_state, actor_timestep.actions)
      return (env_state, timestep, actor_state), actor_timestep

    (env_state, timestep, actor_state), steps = jax.lax.scan(
        _step,
        (state.env_state, state.env_timestep, state.actor_state),
        jax.random.split(rng, rollout_len),
    )
    new_state = state.replace(
        actor_state=actor_state, env_state=env_state, env_timestep=timestep
    )
    return new_state, types.ActorRollout.from_timestep(steps)


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

  def _inner_step(carry, inputs, update_rule_params):
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

  def _outer_loss(update_rule_params):
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


def _agent_meta_step(
    update_rule_params: types.MetaParams,
    state: MetaTrainState,
    act_rng: chex.PRNGKey,
    update_rng: chex.PRNGKey,
    *,
    agent: MetaTrainAgent,
    config: MetaTrainConfig,
):
  """Rollouts and the meta-gradient of one agent (the reference's key use)."""
  step_rngs = jax.random.split(act_rng, config.num_inner_steps)
  rollouts = []
  for step_rng in step_rngs:
    state, rollout = agent.unroll_actor(state, step_rng, config.rollout_len)
    rollouts.append(rollout)
  train_rollouts = utils.tree_stack(rollouts)
  state, valid_rollout = agent.unroll_actor(
      state, act_rng, 2 * config.rollout_len
  )
  meta_grads, (state, train_logs, meta_log) = calculate_meta_gradient(
      update_rule_params,
      state,
      train_rollouts,
      valid_rollout,
      update_rng,
      agent=agent,
      policy_entropy_cost=config.policy_entropy_cost,
      prediction_entropy_cost=config.prediction_entropy_cost,
      target_mean_cost=config.target_mean_cost,
      target_kl_cost=config.target_kl_cost,
      remat=config.remat,
      unroll=True if config.unroll_inner_steps else 1,
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


# ----------------------------------------------------------------------------
# The loop.


@dataclasses.dataclass(frozen=True)
class MetaTrainResult:
  """What `run_meta_train` returns.

  Attributes:
    update_rule_params: the final rule parameters (float32 numpy Haiku tree;
      save with `disco.weights.save_update_rule_params`).
    logs: per meta-step scalars, each [num_steps]: the meta-loss terms,
      meta_grad_norm, meta_up_norm, rewards, pos_rewards, neg_rewards,
      pos_reward_fraction (pos / (pos + neg): the share of episodes that
      ended with a catch; NaN if none ended) and the learner logs averaged
      over inner steps (prefixed 'agent/').
    num_steps: meta-steps done in total (including before a resume).
    checkpoint_path: the last checkpoint written, or None.
  """

  update_rule_params: dict[str, dict[str, np.ndarray]]
  logs: dict[str, np.ndarray]
  num_steps: int
  checkpoint_path: pathlib.Path | None


@dataclasses.dataclass(frozen=True)
class _LoopState:
  """The loop's state: device arrays [D_local, ...] and a host key."""

  update_rule_params: types.MetaParams
  meta_opt_state: optax.OptState
  agents_states: MetaTrainState
  rng: np.ndarray
  step: int


def _params_digest(params: weights.Params) -> str:
  digest = hashlib.sha256()
  for key, leaf in sorted(weights.flatten_params(params).items()):
    array = np.ascontiguousarray(np.asarray(leaf, np.float32))
    digest.update(key.encode())
    digest.update(str(array.shape).encode())
    digest.update(array.tobytes())
  return digest.hexdigest()


def _scalar_logs(train_logs, meta_log) -> dict[str, float]:
  logs = {k: float(v) for k, v in meta_log.items()}
  pos, neg = logs['pos_rewards'], logs['neg_rewards']
  logs['pos_reward_fraction'] = pos / (pos + neg) if pos + neg else math.nan
  for key, value in train_logs.items():
    logs[f'agent/{key}'] = float(np.mean(value))
  return logs


class _MetaTrainer:
  """The compiled functions and device layout for one config.

  Only the fields that shape the computation matter here; `_trainer_for`
  shares one instance (and its compiled code) between runs.
  """

  def __init__(self, config: MetaTrainConfig):
    self.config = config
    self.agent = MetaTrainAgent.from_config(config)
    self.meta_opt = optax.adam(learning_rate=config.meta_learning_rate)
    self.devices = jax.devices()
    self.local_devices = jax.local_devices()
    process = jax.process_index()
    # Position of each local device among all devices: its key index.
    self._key_index = np.asarray(
        [i for i, d in enumerate(self.devices) if d.process_index == process]
    )
    mesh = jax.sharding.Mesh(np.asarray(self.devices), (_PMAP_AXIS_NAME,))
    self._sharding = jax.sharding.NamedSharding(
        mesh, jax.sharding.PartitionSpec(_PMAP_AXIS_NAME)
    )
    self._update = jax.pmap(
        functools.partial(
            meta_update, agent=self.agent, meta_opt=self.meta_opt, config=config
        ),
        axis_name=_PMAP_AXIS_NAME,
        devices=self.devices,
    )
    init_agent = MetaTrainAgent.from_config(config, axis_name=None)
    self._init_agent_state = jax.jit(init_agent.init_state)
    self._init_params = jax.jit(
        lambda key: self.agent.update_rule.init_params(key)[0]
    )
    self._init_meta_opt = jax.jit(self.meta_opt.init)
    self._step_keys = jax.jit(self._split_step_keys)
    self._lock = threading.Lock()
    self._compilation = None

  def _split_step_keys(self, rng):
    rng, step_rng = jax.random.split(rng)
    return rng, jax.random.split(step_rng, len(self.devices))

  def _to_devices(self, tree, replicate: bool):
    """Places host arrays as `pmap` inputs [D_local, ...].

    This replaces the reference's `device_put_replicated`. On one host the
    inputs are committed to the sharding that the `pmap` gives its outputs
    (a mesh with axis 'i'), so that the second meta-step does not compile
    the meta-update again; with several processes `pmap` places them.

    Args:
      tree: host arrays, with a leading local-device axis unless
        `replicate`.
      replicate: give every local device a copy of every leaf.

    Returns:
      The placed tree.
    """
    num_local = len(self.local_devices)
    tree = jax.device_get(tree)
    if replicate:
      tree = jax.tree.map(
          lambda x: np.broadcast_to(x, (num_local,) + np.shape(x)), tree
      )
    if jax.process_count() > 1:
      return tree
    return jax.device_put(tree, self._sharding)

  def random_params(self) -> dict[str, dict[str, np.ndarray]]:
    """`init_params(PRNGKey(random_init_seed))`, on the host."""
    return jax.device_get(
        self._init_params(jax.random.PRNGKey(self.config.random_init_seed))
    )

  def check_params(self, params: weights.Params) -> None:
    weights.validate_params(
        params,
        jax.eval_shape(self._init_params, jax.random.PRNGKey(0)),
        what='The initial update-rule parameters',
    )

  def initial_state(self, params: weights.Params) -> _LoopState:
    """The reference's initialisation, placed on the devices."""
    rng_key = jax.random.PRNGKey(self.config.seed)
    rng, rng_key = jax.random.split(rng_key)
    agents = [
        jax.device_get(self._init_agent_state(key))
        for key in jax.random.split(rng_key, self.config.num_agents)
    ]
    agents_states = jax.tree.map(lambda *xs: np.stack(xs), *agents)
    params = jax.tree.map(lambda x: np.asarray(x, np.float32), params)
    self._step_keys(rng)  # Compiled now rather than in the first step.
    return _LoopState(
        update_rule_params=self._to_devices(params, replicate=True),
        meta_opt_state=self._to_devices(
            self._init_meta_opt(params), replicate=True
        ),
        agents_states=self._to_devices(agents_states, replicate=True),
        rng=np.asarray(rng),
        step=0,
    )

  def _abstract_inputs(self):
    """Shapes, dtypes and shardings of the meta-update's inputs."""
    num_local = len(self.local_devices)
    params = jax.eval_shape(self._init_params, jax.random.PRNGKey(0))
    agent = jax.eval_shape(self._init_agent_state, jax.random.PRNGKey(0))
    per_device = (
        params,
        jax.eval_shape(self._init_meta_opt, params),
        jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(
                (self.config.num_agents,) + x.shape, x.dtype
            ),
            agent,
        ),
        jax.ShapeDtypeStruct((2,), np.uint32),
    )
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(
            (num_local,) + x.shape, x.dtype, sharding=self._sharding
        ),
        per_device,
    )

  def compile_in_background(self) -> Callable[[], None]:
    """Starts compiling the meta-update; returns a function that waits.

    Compiling takes most of a run's start-up. It needs only the inputs'
    shapes, so it runs in a thread (XLA releases the GIL) while the caller
    initialises or restores the state, and the first meta-step finds the
    program compiled. Started once per trainer; skipped with several
    processes (where `pmap` converts process-local inputs itself).

    Returns:
      A function that blocks until the compilation is done and re-raises
      its error, if any.
    """
    if jax.process_count() > 1:
      return lambda: None
    with self._lock:
      if self._compilation is None:
        errors = []

        def _compile():
          try:
            self._update.lower(*self._abstract_inputs()).compile()
          except BaseException as e:  # pylint: disable=broad-exception-caught
            errors.append(e)

        thread = threading.Thread(target=_compile, daemon=True)
        thread.start()
        self._compilation = (thread, errors)
    thread, errors = self._compilation

    def _wait():
      thread.join()
      if errors:
        with self._lock:
          self._compilation = None  # Let a later run try again.
        raise errors[0]

    return _wait

  def step(self, state: _LoopState) -> tuple[_LoopState, dict[str, float]]:
    """One meta-step; returns the new state and its scalar logs."""
    rng, keys = self._step_keys(state.rng)
    keys = np.asarray(keys)[self._key_index]
    params, opt_state, agents_states, train_logs, meta_log = self._update(
        state.update_rule_params,
        state.meta_opt_state,
        state.agents_states,
        self._to_devices(keys, replicate=False),
    )
    # Logs are averaged over devices: read the first local copy.
    train_logs, meta_log = self._first_copy((train_logs, meta_log))
    new_state = _LoopState(
        update_rule_params=params,
        meta_opt_state=opt_state,
        agents_states=agents_states,
        rng=np.asarray(rng),
        step=state.step + 1,
    )
    return new_state, _scalar_logs(train_logs, meta_log)

  # --- Checkpoints. ---

  def _first_copy(self, tree):
    """The first local device's copy of a replicated tree, on the host."""
    return jax.tree.map(
        lambda x: np.asarray(x.addressable_shards[0].data)[0], tree
    )

  def host_params(self, state: _LoopState) -> dict[str, dict[str, np.ndarray]]:
    return self._first_copy(state.update_rule_params)

  def save(
      self,
      root: pathlib.Path,
      state: _LoopState,
      logs: Sequence[Mapping[str, float]],
      metadata: Mapping[str, Any],
      keep: int,
  ) -> pathlib.Path:
    arrays = {}
    arrays.update(
        checkpoint_lib.flatten_tree(
            self._first_copy(state.meta_opt_state), 'meta_opt_state'
        )
    )
    arrays.update(
        checkpoint_lib.flatten_tree(state.agents_states, 'agents_states')
    )
    arrays['rng'] = np.asarray(state.rng)
    for key in sorted(logs[0]) if logs else ():
      arrays[f'logs/{key}'] = np.asarray([log[key] for log in logs])
    return checkpoint_lib.save(
        root,
        state.step,
        update_rule_params=self.host_params(state),
        arrays=arrays,
        metadata=metadata,
        keep=keep,
    )

  def restore(
      self, ckpt: checkpoint_lib.Checkpoint
  ) -> tuple[_LoopState, list[dict[str, float]]]:
    params = ckpt.update_rule_params
    self.check_params(params)
    opt_template = jax.eval_shape(self._init_meta_opt, params)
    agent_template = jax.eval_shape(
        self._init_agent_state, jax.random.PRNGKey(0)
    )
    num_local = len(self.local_devices)
    agent_template = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(
            (num_local, self.config.num_agents) + x.shape, x.dtype
        ),
        agent_template,
    )
    opt_state = checkpoint_lib.restore_tree(
        opt_template, ckpt.arrays, 'meta_opt_state'
    )
    agents_states = checkpoint_lib.restore_tree(
        agent_template, ckpt.arrays, 'agents_states'
    )
    rng = ckpt.arrays.get('rng')
    if rng is None or rng.shape != (2,) or rng.dtype != np.uint32:
      raise checkpoint_lib.CheckpointMismatchError(
          f'The checkpoint at {ckpt.path} has no valid random key.'
      )
    log_arrays = {
        k[len('logs/') :]: v
        for k, v in ckpt.arrays.items()
        if k.startswith('logs/')
    }
    if any(v.shape != (ckpt.step,) for v in log_arrays.values()):
      raise checkpoint_lib.CheckpointMismatchError(
          f'The checkpoint at {ckpt.path} has logs of the wrong length.'
      )
    logs = [
        {k: float(v[i]) for k, v in log_arrays.items()}
        for i in range(ckpt.step)
    ]
    self._step_keys(rng)  # Compiled now rather than in the first step.
    state = _LoopState(
        update_rule_params=self._to_devices(params, replicate=True),
        meta_opt_state=self._to_devices(opt_state, replicate=True),
        agents_states=self._to_devices(agents_states, replicate=False),
        rng=rng,
        step=ckpt.step,
    )
    return state, logs


@functools.lru_cache(maxsize=4)
def _cached_trainer(
    config: MetaTrainConfig, devices: tuple[jax.Device, ...]
) -> _MetaTrainer:
  del devices  # Part of the cache key only.
  return _MetaTrainer(config)


def _trainer_for(config: MetaTrainConfig) -> _MetaTrainer:
  """A trainer for `config`, shared by runs that compute the same thing."""
  key = config.replace(num_steps=1, checkpoint_every=0, keep_checkpoints=1)
  return _cached_trainer(key, tuple(jax.devices()))


def random_init_params(
    config: MetaTrainConfig,
) -> dict[str, dict[str, np.ndarray]]:
  """The rule a run starts from without `init_params` (as numpy arrays).

  The reference's `update_rule.init_params(PRNGKey(1))`, with the seed
  `config.random_init_seed`.

  Args:
    config: the run's settings.

  Returns:
    The update rule's parameters.
  """
  return _trainer_for(config).random_params()


def _metadata(
    config: MetaTrainConfig, init_digest: str, num_local_devices: int
) -> dict[str, Any]:
  return dict(
      kind=_CHECKPOINT_KIND,
      config=config.to_dict(),
      init_params_sha256=init_digest,
      num_local_devices=num_local_devices,
      num_processes=jax.process_count(),
      jax_version=jax.__version__,
  )


def _check_resumable(
    ckpt: checkpoint_lib.Checkpoint,
    config: MetaTrainConfig,
    init_digest: str | None,
    num_local_devices: int,
) -> None:
  """Raises `CheckpointMismatchError` unless `ckpt` belongs to this run."""
  meta = ckpt.metadata
  where = f'The checkpoint at {ckpt.path}'
  if meta.get('kind') != _CHECKPOINT_KIND:
    raise checkpoint_lib.CheckpointMismatchError(
        f'{where} was not written by run_meta_train.'
    )
  try:
    saved = MetaTrainConfig.from_dict(meta['config'])
  except (KeyError, TypeError, ValueError) as e:
    raise checkpoint_lib.CheckpointMismatchError(
        f'{where} has an unreadable config: {e}'
    ) from e
  differ = [
      f'{f.name} (checkpoint {getattr(saved, f.name)!r}, now'
      f' {getattr(config, f.name)!r})'
      for f in dataclasses.fields(config)
      if f.name not in _EXECUTION_FIELDS
      and getattr(saved, f.name) != getattr(config, f.name)
  ]
  if differ:
    raise checkpoint_lib.CheckpointMismatchError(
        f'{where} was written with a different config: ' + '; '.join(differ)
    )
  if (
      meta.get('num_local_devices') != num_local_devices
      or meta.get('num_processes') != jax.process_count()
  ):
    raise checkpoint_lib.CheckpointMismatchError(
        f'{where} was written on {meta.get("num_processes")} process(es) with'
        f' {meta.get("num_local_devices")} device(s) each; this run has'
        f' {jax.process_count()} with {num_local_devices}. Each device has'
        ' its own agents, so resume on the same layout.'
    )
  if init_digest is not None and meta.get('init_params_sha256') != init_digest:
    raise checkpoint_lib.CheckpointMismatchError(
        f'{where} started from other initial update-rule parameters than'
        ' the ones given now (pass init_params=None to resume it as it is).'
    )


@contextlib.contextmanager
def progress_bar(total: int, *, initial: int = 0) -> Iterator[ProgressFn]:
  """A tqdm progress bar to pass as `run_meta_train`'s `progress_fn`.

  Shows the step and, as postfix, the meta-loss and the share of positive
  rewards (`tqdm.auto`: a widget in notebooks, text in terminals).

      with meta_train.progress_bar(config.num_steps) as progress:
        result = meta_train.run_meta_train(config, progress_fn=progress)

  Args:
    total: the run's `num_steps`.
    initial: the step a resumed run starts from.

  Yields:
    A `progress_fn`.
  """
  import tqdm.auto  # pylint: disable=g-import-not-at-top

  bar = tqdm.auto.tqdm(total=total, initial=initial, unit='meta-step')

  def _update(step: int, logs: Mapping[str, float]) -> None:
    bar.update(step - bar.n)
    bar.set_postfix(
        meta_loss=f'{logs["meta_loss"]:.3f}',
        positive=f'{logs["pos_reward_fraction"]:.2f}',
        refresh=False,
    )

  try:
    yield _update
  finally:
    bar.close()


@contextlib.contextmanager
def _deferred_interrupts() -> Iterator[Callable[[], bool]]:
  """Turns the first Ctrl-C into a flag checked between meta-steps.

  A second Ctrl-C interrupts at once. Outside the main thread (where
  signal handlers cannot be installed) interrupts are left alone.
  """
  received = []
  if threading.current_thread() is not threading.main_thread():
    yield lambda: False
    return
  previous = signal.getsignal(signal.SIGINT)

  def _handler(signum, frame):
    if received:
      signal.signal(signal.SIGINT, previous)
      raise KeyboardInterrupt
    received.append(signum)
    logging.warning(
        'Interrupted: stopping after this meta-step (and checkpointing if a'
        ' checkpoint directory is set). Press Ctrl-C again to abort now.'
    )
    del frame

  signal.signal(signal.SIGINT, _handler)
  try:
    yield lambda: bool(received)
  finally:
    signal.signal(signal.SIGINT, previous)


def _checkpoint_root(checkpoint_dir: str | pathlib.Path) -> pathlib.Path:
  root = pathlib.Path(checkpoint_dir).expanduser()
  if jax.process_count() > 1:
    # Every process keeps the agents of its own devices.
    root = root / f'process_{jax.process_index()}'
  return root


def run_meta_train(
    config: MetaTrainConfig,
    *,
    init_params: weights.Params | None = None,
    progress_fn: ProgressFn | None = None,
    checkpoint_dir: str | pathlib.Path | None = None,
    resume: bool = False,
) -> MetaTrainResult:
  """Meta-trains an update rule on all devices (the reference's loop).

  The meta-update is `pmap`ped over `jax.devices()` with axis name 'i';
  every device runs the whole population on its own batch of environments
  and the meta-gradients and logs are averaged across devices. As in the
  reference, all devices start from the same agents' states and differ by
  their random keys.

  Args:
    config: the run's settings.
    init_params: the rule to start from (e.g. `weights.load_disco103()` to
      fine-tune); None starts from `init_params(PRNGKey(random_init_seed))`.
    progress_fn: called as `progress_fn(step, logs)` after every meta-step,
      `step` counting from 1 and `logs` the step's scalars.
    checkpoint_dir: if set, checkpoints are written there every
      `config.checkpoint_every` meta-steps, at the end and on Ctrl-C (the
      first Ctrl-C finishes the current meta-step, checkpoints and raises
      `KeyboardInterrupt`).
    resume: continue from the newest checkpoint in `checkpoint_dir` (which
      must exist and match `config`) up to `config.num_steps`. Without it, a
      `checkpoint_dir` that already holds checkpoints is an error, so that
      nothing is overwritten.

  Returns:
    A `MetaTrainResult` with the final rule and the logs of all meta-steps.

  Raises:
    ValueError: `resume` without `checkpoint_dir`.
    weights.WeightsError: `init_params` do not fit the rule.
    checkpoint.CheckpointError: no checkpoint to resume, checkpoints already
      present without `resume`, a corrupt checkpoint, or one that belongs to
      another config or device layout.
  """
  if resume and checkpoint_dir is None:
    raise ValueError('resume=True needs a checkpoint_dir.')
  trainer = _trainer_for(config)
  root = _checkpoint_root(checkpoint_dir) if checkpoint_dir else None
  num_local = len(trainer.local_devices)
  init_digest = None
  if init_params is not None:
    trainer.check_params(init_params)
    init_digest = _params_digest(init_params)
  if resume:
    ckpt = checkpoint_lib.load(root)
    _check_resumable(ckpt, config, init_digest, num_local)
    init_digest = ckpt.metadata['init_params_sha256']
  elif root is not None and checkpoint_lib.list_steps(root):
    raise checkpoint_lib.CheckpointExistsError(
        f'{root} already holds checkpoints (latest step'
        f' {checkpoint_lib.latest_step(root)}); pass resume=True to continue'
        ' that run, or use another directory.'
    )

  # Initialise (or restore) while the meta-update compiles.
  wait_for_compilation = trainer.compile_in_background()
  if resume:
    state, logs = trainer.restore(ckpt)
    last_saved = ckpt.path
    logging.info('Resuming meta-training from %s.', ckpt.path)
  else:
    if init_params is None:
      init_params = trainer.random_params()
      init_digest = _params_digest(init_params)
    state = trainer.initial_state(init_params)
    logs = []
    last_saved = None
  metadata = _metadata(config, init_digest, num_local)
  wait_for_compilation()

  def _save(state):
    return trainer.save(
        root, state, logs, metadata, keep=config.keep_checkpoints
    )

  with _deferred_interrupts() as interrupted:
    while state.step < config.num_steps:
      new_state, step_logs = trainer.step(state)
      state = new_state
      logs.append(step_logs)
      if progress_fn is not None:
        progress_fn(state.step, step_logs)
      if interrupted():
        if root is not None:
          path = _save(state)
          logging.warning('Wrote checkpoint %s.', path)
        raise KeyboardInterrupt
      every = config.checkpoint_every
      if root is not None and every and state.step % every == 0:
        last_saved = _save(state)
    if root is not None and (
        last_saved is None or checkpoint_lib.latest_step(root) != state.step
    ):
      last_saved = _save(state)

  keys = sorted(logs[0]) if logs else []
  return MetaTrainResult(
      update_rule_params=trainer.host_params(state),
      logs={k: np.asarray([log[k] for log in logs]) for k in keys},
      num_steps=state.step,
      checkpoint_path=last_saved,
  )
