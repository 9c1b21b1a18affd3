"""The pieces the faithful evaluation loop and the trainer are built from.

`build` makes the run's environment, agent, value function (for policy
gradient), devices and update-rule parameters (`Setup`); `make_learn_fn` is
the learner step both take (the agent's, plus the value function's), and
`unroll_fn` the faithful loop's jittable actor unroll.
"""

from collections.abc import Callable, Mapping
import dataclasses
import functools
from typing import Any

import chex
import jax
import jax.numpy as jnp
from ml_collections import config_dict

from disco import acting
from disco import agent as agent_lib
from disco import configs
from disco import conv_nets
from disco import devices as devices_lib
from disco import files
from disco import frame_nets
from disco import frame_stack
from disco import rule_diagnostics
from disco import rules
from disco import schedules
from disco import truncation
from disco import truncation_values
from disco import types
from disco import utils
from disco import weights
from disco.environments import base as base_env
from disco.environments import registry
from disco.update_rules import base as update_rules_base
from disco.value_fns import value_fn as value_fn_lib

_SETTINGS_FNS = {
    rules.DISCO: agent_lib.get_settings_disco,
    rules.ACTOR_CRITIC: agent_lib.get_settings_actor_critic,
    rules.POLICY_GRADIENT: agent_lib.get_settings_policy_gradient,
}

# Per device: (rng, rollout [T, B, ...], learner state, actor state,
# update-rule params, value state) -> (learner state, value state, logs).
LearnFn = Callable[
    [
        chex.PRNGKey,
        types.ActorRollout,
        agent_lib.LearnerState,
        Any,
        types.MetaParams,
        types.ValueState | None,
    ],
    tuple[agent_lib.LearnerState, types.ValueState | None, dict[str, Any]],
]

# A run's config: an `EvalConfig` or a `TrainConfig` (their rule, environment,
# agent and value function fields); typed loosely so that the learner imports
# neither run kind.
RunConfig = Any


def make_agent_settings(config: RunConfig) -> config_dict.ConfigDict:
  """The agent settings of `config.rule` with the config's network and step.

  As in the reference colab, the rule's settings get the colab's MLP agent
  network and learning rate, whatever the rule.
  """
  settings = configs.agent_settings(_SETTINGS_FNS[config.rule](), config)
  # The trainer's protocol fields (`TrainConfig`); other configs keep the
  # reference's values.
  settings.hyper_params.discount_factor = getattr(
      config, 'discount', settings.hyper_params.discount_factor
  )
  settings.max_abs_update = getattr(
      config, 'agent_max_abs_update', settings.max_abs_update
  )
  network = getattr(config, 'agent_network', 'mlp')
  embedding = getattr(config, 'agent_frame_embedding', 0)
  if network == conv_nets.NAME:
    conv_nets.use_conv_network(settings, config.agent_conv_channels, embedding)
  elif embedding:
    frame_nets.use_frame_network(settings, embedding)
  elif network != 'mlp':
    # A registered network of the user's, with the MLP's arguments.
    settings.net_settings.name = network
  return settings


def make_value_function(
    config: RunConfig, settings: config_dict.ConfigDict
) -> value_fn_lib.ValueFunction:
  """The state-value function trained alongside a policy-gradient agent."""
  value_config = configs.value_fn_config(
      config,
      max_abs_update=settings.max_abs_update,
      discount_factor=settings.hyper_params.discount_factor,
      outer_value_cost=1.0,
  )
  return value_fn_lib.ValueFunction(
      value_config, axis_name=devices_lib.AXIS_NAME
  )


def default_update_rule_params(
    config: RunConfig, update_rule: update_rules_base.UpdateRule
) -> types.MetaParams:
  """`config.update_rule_params` for 'disco'; placeholders otherwise.

  Args:
    config: the run's settings.
    update_rule: the agent's update rule (`Agent.update_rule`).

  Returns:
    A parameter tree of host arrays.
  """
  if config.rule == rules.DISCO:
    return weights.load_update_rule_params_from(
        config.update_rule_params or configs.DISCO103
    )
  # The baselines have no meta-parameters: their rules return a placeholder.
  params, _ = update_rule.init_params(jax.random.PRNGKey(0))
  return jax.device_get(params)


@dataclasses.dataclass(frozen=True)
class Setup:
  """Everything a loop needs that does not change while it runs."""

  config: RunConfig
  env: base_env.Environment
  agent: agent_lib.Agent
  value_fn: value_fn_lib.ValueFunction | None
  devices: tuple[jax.Device, ...]
  update_rule_params: types.MetaParams

  @property
  def num_devices(self) -> int:
    return len(self.devices)

  @property
  def envs_per_device(self) -> int:
    return self.config.num_envs // self.num_devices

  @property
  def jittable(self) -> bool:
    return registry.is_jittable(self.env)

  def for_seed(self, seed: int) -> 'Setup':
    """This setup for a run with another seed (sharing the agent)."""
    config = self.config.replace(seed=seed)
    env = self.env
    if not self.jittable:
      # Host environments are seeded when built.
      env = _make_env(config)
    return dataclasses.replace(self, config=config, env=env)


def make_env(config: RunConfig, batch_size: int) -> base_env.Environment:
  """`config.env` for `batch_size` environments, frames stacked if asked."""
  env = registry.make_environment(
      config.env,
      batch_size=batch_size,
      seed=config.seed,
      settings=dict(config.env_settings),
  )
  return frame_stack.stack_frames(env, getattr(config, 'frame_stack', 1))


def _make_env(config: RunConfig) -> base_env.Environment:
  return make_env(config, config.num_envs)


def build(
    config: RunConfig,
    update_rule_params: types.MetaParams | None,
    taken_action_gradients: bool = False,
    forward_once: bool = False,
    share_meta_inputs: bool = False,
    share_state_gates: bool = False,
) -> Setup:
  """The run's pieces; `update_rule_params` None loads the default ones.

  `taken_action_gradients`, `forward_once`, `share_meta_inputs` and
  `share_state_gates` are the `Agent`'s options
  (off: the reference's program and rounding, which the faithful loop
  keeps and the trainer keeps on request).

  Raises:
    files.TreeMismatchError: if the update-rule parameters do not fit the
      rule.
  """
  env = _make_env(config)
  settings = make_agent_settings(config)
  agent = agent_lib.Agent(
      agent_settings=settings,
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      batch_axis_name=devices_lib.AXIS_NAME,
      taken_action_gradients=taken_action_gradients,
      forward_once=forward_once,
      share_meta_inputs=share_meta_inputs,
      share_state_gates=share_state_gates,
      optimizer=(
          schedules.config_optimizer(config)
          if hasattr(config, 'agent_lr_schedule')
          else None
      ),
  )
  what = 'The update-rule parameters'
  if update_rule_params is None:
    update_rule_params = default_update_rule_params(config, agent.update_rule)
    if config.rule == rules.DISCO:
      what += f' in {config.update_rule_params or configs.DISCO103}'
  # Fail here, with names, rather than inside the compiler.
  update_rules_base.check_meta_params(
      agent.update_rule, update_rule_params, what
  )
  value_fn = None
  if config.rule == rules.POLICY_GRADIENT:
    value_fn = make_value_function(config, settings)
  return Setup(
      config=config,
      env=env,
      agent=agent,
      value_fn=value_fn,
      devices=devices_lib.select_devices(config.num_envs, config.max_devices),
      update_rule_params=update_rule_params,
  )


def init_value_state(
    setup: Setup, rng: chex.PRNGKey
) -> types.ValueState | None:
  """The value function's initial state (None unless policy gradient)."""
  if setup.value_fn is None:
    return None
  dummy_obs = utils.zeros_like_spec(
      setup.env.single_observation_spec(), prepend_shape=(1,)
  )
  # A key of its own, so that the agent's random stream is the same for
  # every rule.
  return setup.value_fn.initial_state(jax.random.fold_in(rng, 1), dummy_obs)


def value_fn_rollout(rollout: types.ActorRollout) -> types.ActorRollout:
  """Re-aligns rewards and discounts for `ValueFunction`.

  `ValueFunction` pairs timestep t with the reward and discount stored at t
  (and drops the last ones), while the reward and termination of the
  transition from t are those stored at t+1, which is what the agent's
  update rule sees. Shifting them one step earlier makes the value targets
  and advantages line up with the rule's transitions; the padding at the end
  is dropped by the value function.
  """

  def _shift(x: chex.Array) -> chex.Array:
    return jnp.concatenate([x[1:], x[-1:]], axis=0)

  return rollout.replace(
      rewards=_shift(rollout.rewards), discounts=_shift(rollout.discounts)
  )


def scalar_logs(logs: Mapping[str, Any]) -> dict[str, jax.Array]:
  """Nested logs as '/'-joined names of means, without `meta_out`."""
  named = files.named_leaves({k: v for k, v in logs.items() if k != 'meta_out'})
  return {name: jnp.mean(leaf) for name, leaf in named.items()}


# How the run's rule values a state, for bootstrapping at time limits.
truncation_values_fn = truncation_values.truncation_values_fn


def make_learn_fn(
    setup: Setup,
    final_observations: (
        Callable[[types.ActorRollout, chex.ArrayTree], chex.ArrayTree] | None
    ) = None,
) -> LearnFn:
  """One learner step (plus the value function's, for policy gradient).

  The returned function runs per device, inside `pmap` over
  `devices.AXIS_NAME` (see `LearnFn`); its logs are scalars. Given a
  `truncation.TruncatedRollout`, it first adds the bootstrap to the rewards
  of the truncated steps (`truncation.bootstrap_if_truncated`, with the
  values of `truncation_values_fn`). `final_observations(rollout,
  rollout.final_observations)`, if given, makes the observations of the
  latter (e.g. `frame_stack.final_observations` stacks frames), only
  where some step was truncated.
  """
  agent = setup.agent
  value_fn = setup.value_fn

  def learn(
      rng: chex.PRNGKey,
      rollout: types.ActorRollout,
      learner_state: agent_lib.LearnerState,
      actor_state: Any,
      update_rule_params: types.MetaParams,
      value_state: types.ValueState | None,
  ) -> tuple[
      agent_lib.LearnerState, types.ValueState | None, dict[str, jax.Array]
  ]:
    extra_logs = {}
    kwargs = {}
    if isinstance(rollout, truncation.TruncatedRollout):
      values_fn, discount = truncation_values_fn(
          setup, learner_state, actor_state, value_state
      )
      if final_observations is not None:
        values_of = values_fn

        def values_fn(finals, rollout=rollout):
          return values_of(final_observations(rollout, finals))

      rollout = truncation.bootstrap_if_truncated(rollout, values_fn, discount)
    if value_fn is not None:
      agent_out, _ = agent.unroll_net(
          learner_state.params, actor_state, rollout
      )
      target_logits = jax.lax.stop_gradient(agent_out['logits'])
      value_state, value_out, value_logs = value_fn.update(
          value_state, value_fn_rollout(rollout), target_logits
      )
      kwargs['value_out'] = value_out
      extra_logs = {f'value_fn/{k}': v for k, v in value_logs.items()}
    learner_state, _, logs = agent.learner_step(
        rng,
        rollout,
        learner_state,
        actor_state,
        update_rule_params,
        False,
        **kwargs,
    )
    extra_logs |= rule_diagnostics.rule_logs(
        logs.get('meta_out'), rollout.rewards
    )
    return learner_state, value_state, scalar_logs(logs | extra_logs)

  return learn


def behaviour_outs(
    config: RunConfig, rollout: types.ActorRollout
) -> types.ActorRollout:
  """What the replay buffer keeps of a rollout (see `store_behaviour_outs`)."""
  if config.store_behaviour_outs:
    return rollout
  return acting.trim_agent_outs(rollout)


def unroll_fn(setup: Setup) -> Callable[..., acting.UnrollOutput]:
  """(params, actor state, timestep, env state, rng) -> a rollout and more.

  The jittable actor unroll of both loops, bound to the run's environment,
  rollout length and agent.
  """
  return functools.partial(
      acting.unroll_jittable_actor,
      env=setup.env,
      rollout_len=setup.config.rollout_len,
      actor_step_fn=setup.agent.actor_step,
  )
