"""One member of the meta-training population: an agent and what it carries.

`MetaTrainAgent` bundles an agent with the value function that supplies
the meta-loss's advantages and its batch of environments, and acts with
them; `MetaTrainState` is what one member carries between meta-steps.
Meta-training (`maths`) and discovery (`disco.discovery.maths`) share them.
"""

from typing import Any

import chex
import jax
from ml_collections import config_dict

from disco import acting
from disco import agent as agent_lib
from disco import devices
from disco import types
from disco import utils
from disco.environments import base as base_env
from disco.meta_train import config as meta_train_config
from disco.value_fns import value_fn as value_fn_lib


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
      cls,
      config: meta_train_config.MetaTrainConfig,
      axis_name: str | None = devices.AXIS_NAME,
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
