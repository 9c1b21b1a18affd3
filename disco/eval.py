"""Training an agent with a fixed update rule and recording its learning curve.

This is the reference's evaluation loop (its `eval` colab) as library code:
an agent collects trajectories in a batch of environments, adds them to a
FIFO replay buffer, and once the buffer holds `min_buffer_size` trajectories
takes one learner step per loop iteration on a batch sampled from it, with
its update rule (Disco103 by default, or actor-critic / policy gradient).
The loop reports the average return of the episodes that ended in each
iteration's rollout.

Two implementations share the configuration and the history they return:

* the faithful loop (`EvalConfig.fast=False`, the default) follows the
  reference step by step: `pmap` over up to `num_envs` devices with axis
  'i', the same random-key splits, a host-side replay buffer sampled with
  numpy, so that with the default config it reproduces the reference's
  curve. Unlike the reference it logs scalars only and stores only the
  behaviour logits in the buffer (the only part the update rules read).
* the fast path (`EvalConfig.fast=True`) runs the same update-rule maths with
  actor, replay buffer (on the device) and learner fused in one jitted
  `lax.scan` over chunks of iterations, with jitted initialisation and,
  through `run_eval_seeds`, several seeds `vmap`ped together. Its replay
  sampling uses JAX's generator, so its curve is a different sample of the
  same process.

Example:

  history = eval.run_eval(eval.EvalConfig(num_steps=1000))
  history.first_iteration_reaching(1.0)
"""

from collections.abc import Callable, Mapping, Sequence
import dataclasses
import functools
import time
from typing import Any

import chex
import haiku as hk
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np

from disco import acting
from disco import agent as agent_lib
from disco import replay
from disco import types
from disco import utils
from disco import weights
from disco.environments import base as base_env
from disco.environments import registry
from disco.update_rules import base as update_rules_base
from disco.value_fns import value_fn as value_fn_lib

_PMAP_AXIS_NAME = 'i'

DISCO = 'disco'
ACTOR_CRITIC = 'actor_critic'
POLICY_GRADIENT = 'policy_gradient'
RULES = (DISCO, ACTOR_CRITIC, POLICY_GRADIENT)

_SETTINGS_FNS = {
    DISCO: agent_lib.get_settings_disco,
    ACTOR_CRITIC: agent_lib.get_settings_actor_critic,
    POLICY_GRADIENT: agent_lib.get_settings_policy_gradient,
}

# (number of iterations completed, scalar metrics of the last one) -> None.
ProgressFn = Callable[[int, Mapping[str, float]], None]


def _positive_ints(name: str, values: Sequence[int]) -> tuple[int, ...]:
  values = tuple(int(v) for v in values)
  if not values or any(v < 1 for v in values):
    raise ValueError(f'{name} must be a non-empty tuple of positive ints.')
  return values


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  """Settings of an evaluation run; the defaults are the reference colab's.

  Attributes:
    rule: the update rule, one of `RULES`.
    weights_path: `.npz` file of update-rule parameters for the 'disco' rule
      (e.g. saved by meta-training); None loads Disco103 through
      `disco.weights.load_disco103`. Ignored when `run_eval` is given
      parameters.
    env: environment name understood by
      `disco.environments.registry.make_environment` ('catch', 'catch-cpu',
      'gymnax:<id>').
    env_settings: overrides of the environment's settings, e.g.
      `{'rows': 5, 'columns': 5}` for Catch (stored as sorted pairs).
    num_steps: loop iterations (one actor rollout and at most one learner
      step each).
    batch_size: trajectories per learner step (per device).
    rollout_len: timesteps per actor rollout (and per trajectory).
    replay_ratio: `batch_size // replay_ratio` environments act in parallel.
    buffer_capacity: the most trajectories the replay buffer holds.
    buffer_seed: seed of the replay buffer's sampling generator.
    min_buffer_size: trajectories needed before learning starts; None means
      `batch_size`.
    seed: seed of `jax.random.PRNGKey` for initialisation, acting and
      learning (and of CPU environments' own generators).
    learning_rate: the agent optimizer's step size.
    dense: hidden sizes of the agent network's MLP torso.
    lstm_size: hidden size of the agent's action-model LSTM.
    head_mlp_hiddens: hidden sizes of the action model's output heads.
    head_w_init_std: std of the truncated-normal init of the output heads.
    value_fn_dense: hidden sizes of the value network trained alongside a
      policy-gradient agent (which has no value head of its own).
    value_fn_learning_rate: that value network's step size.
    value_fn_td_lambda: V-trace lambda of that value network's targets.
    max_devices: use at most this many devices (None: up to `num_envs`, as
      the reference does).
    store_behaviour_outs: keep every behaviour-network output in the replay
      buffer, as the reference does, instead of the logits alone (no
      effect on results; much more memory with Disco's 600-wide heads).
    record_rollouts: also return every rollout's actions, rewards and
      discounts and the sampled buffer positions (faithful loop only).
    fast: use the fused fast path instead of the faithful loop.
    steps_per_chunk: fast path: iterations per jitted `lax.scan` call (one
      host round trip each).
  """

  # Update rule.
  rule: str = DISCO
  weights_path: str | None = None
  # Environment and loop.
  env: str = registry.CATCH
  env_settings: tuple[tuple[str, Any], ...] = ()
  num_steps: int = 1000
  batch_size: int = 64
  rollout_len: int = 29
  replay_ratio: int = 32
  # Replay buffer.
  buffer_capacity: int = 1024
  buffer_seed: int = 17
  min_buffer_size: int | None = None
  # Randomness.
  seed: int = 0
  # Agent (the colab's MLP agent).
  learning_rate: float = 1e-2
  dense: tuple[int, ...] = (512, 512)
  lstm_size: int = 128
  head_mlp_hiddens: tuple[int, ...] = (128,)
  head_w_init_std: float = 1e-2
  # Value function of the policy-gradient baseline.
  value_fn_dense: tuple[int, ...] = (256, 256)
  value_fn_learning_rate: float = 1e-3
  value_fn_td_lambda: float = 0.95
  # Devices and memory.
  max_devices: int | None = None
  store_behaviour_outs: bool = False
  record_rollouts: bool = False
  # Fast path.
  fast: bool = False
  steps_per_chunk: int = 25

  def __post_init__(self):
    if self.rule not in RULES:
      raise ValueError(
          f'Unknown rule {self.rule!r}; choose one of {", ".join(RULES)}.'
      )
    if self.weights_path is not None and self.rule != DISCO:
      raise ValueError(
          f'weights_path is for the disco rule; the {self.rule} rule has no'
          ' parameters to load.'
      )
    if not (
        self.env in (registry.CATCH, registry.CATCH_CPU)
        or self.env.startswith(registry.GYMNAX_PREFIX)
    ):
      raise ValueError(
          f'Unknown environment {self.env!r}; known: '
          f'{", ".join(registry.NAMES)}.'
      )
    for name in (
        'num_steps',
        'batch_size',
        'replay_ratio',
        'buffer_capacity',
        'lstm_size',
        'steps_per_chunk',
    ):
      if int(getattr(self, name)) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}.')
    if self.rollout_len < 2:
      raise ValueError(
          'rollout_len must be >= 2 (a learner needs a transition), got'
          f' {self.rollout_len}.'
      )
    if self.batch_size < self.replay_ratio:
      raise ValueError(
          f'batch_size ({self.batch_size}) // replay_ratio'
          f' ({self.replay_ratio}) must leave at least one environment.'
      )
    if self.min_buffer_size is not None and not (
        1 <= self.min_buffer_size <= self.buffer_capacity
    ):
      raise ValueError(
          'min_buffer_size must lie in [1, buffer_capacity='
          f'{self.buffer_capacity}], got {self.min_buffer_size}.'
      )
    if self.batch_size // self.replay_ratio > self.buffer_capacity:
      raise ValueError('One rollout has more trajectories than the buffer.')
    if self.max_devices is not None and self.max_devices < 1:
      raise ValueError(f'max_devices must be >= 1, got {self.max_devices}.')
    if not self.learning_rate > 0 or not self.value_fn_learning_rate > 0:
      raise ValueError('Learning rates must be positive.')
    if self.fast and self.env == registry.CATCH_CPU:
      raise ValueError(
          'The fast path needs a jittable environment; catch-cpu steps on the'
          ' host. Use env="catch" or fast=False.'
      )
    if self.fast and self.record_rollouts:
      raise ValueError(
          'record_rollouts is only supported by the faithful loop.'
      )
    settings = self.env_settings
    if isinstance(settings, Mapping):
      settings = settings.items()
    object.__setattr__(
        self, 'env_settings', tuple(sorted((str(k), v) for k, v in settings))
    )
    for name in ('dense', 'head_mlp_hiddens', 'value_fn_dense'):
      object.__setattr__(self, name, _positive_ints(name, getattr(self, name)))

  @property
  def num_envs(self) -> int:
    """Environments acting in parallel: `batch_size // replay_ratio`."""
    return self.batch_size // self.replay_ratio

  @property
  def learning_starts(self) -> int:
    """Trajectories the buffer must hold before the first learner step."""
    if self.min_buffer_size is None:
      return self.batch_size
    return self.min_buffer_size


@dataclasses.dataclass(frozen=True)
class RolloutRecord:
  """What `EvalConfig.record_rollouts` keeps (N iterations, L learner steps).

  Attributes:
    actions: [N, T, num_envs] actions of every rollout.
    rewards: [N, T, num_envs] rewards.
    discounts: [N, T, num_envs] bool discounts.
    sample_indices: [L, batch_size] buffer positions sampled (0 = oldest).
    learner_step_index: [L] the iteration of each learner step.
  """

  actions: np.ndarray
  rewards: np.ndarray
  discounts: np.ndarray
  sample_indices: np.ndarray
  learner_step_index: np.ndarray


@dataclasses.dataclass(frozen=True)
class EvalHistory:
  """The learning curve of one run; one entry per loop iteration (N).

  Attributes:
    rule: the update rule's name.
    seed: the run's seed.
    steps: [N] environment steps taken so far, at the end of each iteration.
    avg_returns: [N] average return of the episodes that ended during the
      iteration's rollout (NaN if none did).
    total_returns: [N] sum of those returns.
    num_episodes: [N] how many episodes ended.
    logs: {name: [N]} scalar learner logs (means over devices), NaN for the
      iterations before learning starts.
    elapsed: [N] seconds from the start of `run_eval` to the end of each
      iteration (fast path: to the end of its chunk).
    params: the agent network's final parameters (host arrays).
    rollouts: the recorded rollouts, if requested.
  """

  rule: str
  seed: int
  steps: np.ndarray
  avg_returns: np.ndarray
  total_returns: np.ndarray
  num_episodes: np.ndarray
  logs: Mapping[str, np.ndarray]
  elapsed: np.ndarray
  params: hk.Params | None = None
  rollouts: RolloutRecord | None = None

  def __len__(self) -> int:
    return len(self.steps)

  def columns(self) -> dict[str, np.ndarray]:
    """The per-iteration curve as named columns (e.g. for a CSV file)."""
    return dict(
        iteration=np.arange(1, len(self) + 1),
        steps=self.steps,
        avg_returns=self.avg_returns,
        total_returns=self.total_returns,
        num_episodes=self.num_episodes,
        elapsed=self.elapsed,
        **{k: self.logs[k] for k in sorted(self.logs)},
    )

  def first_iteration_reaching(self, threshold: float) -> int | None:
    """The first iteration (1-based) with average return >= `threshold`."""
    hits = np.flatnonzero(
        np.nan_to_num(self.avg_returns, nan=-np.inf) >= threshold
    )
    return int(hits[0]) + 1 if hits.size else None


# ----------------------------------------------------------------------------
# Building the pieces.


def make_agent_settings(config: EvalConfig) -> config_dict.ConfigDict:
  """The agent settings of `config.rule` with the config's network and step.

  As in the reference colab, the rule's settings get the colab's MLP agent
  network and learning rate, whatever the rule.
  """
  settings = agent_lib.use_mlp_network(
      _SETTINGS_FNS[config.rule](),
      dense=config.dense,
      lstm_size=config.lstm_size,
      head_mlp_hiddens=config.head_mlp_hiddens,
      head_w_init_std=config.head_w_init_std,
  )
  settings.learning_rate = config.learning_rate
  return settings


def make_value_function(
    config: EvalConfig, settings: config_dict.ConfigDict
) -> value_fn_lib.ValueFunction:
  """The state-value function trained alongside a policy-gradient agent."""
  value_config = types.ValueFnConfig(
      net='mlp',
      net_args=dict(
          dense=config.value_fn_dense,
          head_w_init_std=config.head_w_init_std,
          action_spec=(),
      ),
      learning_rate=config.value_fn_learning_rate,
      max_abs_update=settings.max_abs_update,
      discount_factor=settings.hyper_params.discount_factor,
      td_lambda=config.value_fn_td_lambda,
      outer_value_cost=1.0,
  )
  return value_fn_lib.ValueFunction(value_config, axis_name=_PMAP_AXIS_NAME)


def select_devices(
    num_envs: int, max_devices: int | None = None
) -> tuple[jax.Device, ...]:
  """The devices to run on: the first D of `jax.devices()`.

  D is at most `num_envs` (as in the reference) and `max_devices`, lowered
  if needed so that it divides `num_envs` (every device gets the same number
  of environments).
  """
  available = jax.devices()
  limit = min(len(available), num_envs, max_devices or num_envs)
  count = max(d for d in range(1, limit + 1) if num_envs % d == 0)
  return tuple(available[:count])


def default_update_rule_params(
    config: EvalConfig, update_rule: update_rules_base.UpdateRule
) -> types.MetaParams:
  """Disco103 (or `config.weights_path`) for 'disco'; placeholders otherwise.

  Args:
    config: the run's settings.
    update_rule: the agent's update rule (`Agent.update_rule`).

  Returns:
    A parameter tree of host arrays.
  """
  if config.rule == DISCO:
    if config.weights_path is not None:
      return weights.load_update_rule_params(config.weights_path)
    return weights.load_disco103()
  # The baselines have no meta-parameters: their rules return a placeholder.
  params, _ = update_rule.init_params(jax.random.PRNGKey(0))
  return jax.device_get(params)


@dataclasses.dataclass(frozen=True)
class _Setup:
  """Everything a loop needs that does not change while it runs."""

  config: EvalConfig
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


def _build(
    config: EvalConfig, update_rule_params: types.MetaParams | None
) -> _Setup:
  devices = select_devices(config.num_envs, config.max_devices)
  env = registry.make_environment(
      config.env,
      batch_size=config.num_envs,
      seed=config.seed,
      settings=dict(config.env_settings),
  )
  settings = make_agent_settings(config)
  agent = agent_lib.Agent(
      agent_settings=settings,
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      batch_axis_name=_PMAP_AXIS_NAME,
  )
  if update_rule_params is None:
    update_rule_params = default_update_rule_params(config, agent.update_rule)
  # Fail here, with names, rather than inside the compiler.
  update_rules_base.check_meta_params(agent.update_rule, update_rule_params)
  value_fn = None
  if config.rule == POLICY_GRADIENT:
    value_fn = make_value_function(config, settings)
  return _Setup(
      config=config,
      env=env,
      agent=agent,
      value_fn=value_fn,
      devices=devices,
      update_rule_params=update_rule_params,
  )


def _init_value_state(
    setup: _Setup, rng: chex.PRNGKey
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


def _value_fn_rollout(rollout: types.ActorRollout) -> types.ActorRollout:
  """Re-aligns rewards and discounts for `ValueFunction`.

  `ValueFunction` pairs timestep t with the reward and discount stored at t
  (and drops the last ones), while the reward and termination of the
  transition from t are those stored at t+1, which is what the agent's
  update rule sees. Shifting them one step earlier makes the value targets
  and advantages line up with the rule's transitions; the padding at the end
  is dropped by the value function.
  """

  def _shift(x):
    return jnp.concatenate([x[1:], x[-1:]], axis=0)

  return rollout.replace(
      rewards=_shift(rollout.rewards), discounts=_shift(rollout.discounts)
  )


def _scalar_logs(logs: Mapping[str, Any]) -> dict[str, jax.Array]:
  """Flattens nested logs into '/'-joined scalars (means), without meta_out."""
  scalars = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(
      {k: v for k, v in logs.items() if k != 'meta_out'}
  ):
    name = '/'.join(str(getattr(p, 'key', getattr(p, 'name', p))) for p in path)
    scalars[name] = jnp.mean(leaf)
  return scalars


def _make_learn_fn(setup: _Setup):
  """One learner step (plus the value function's, for policy gradient).

  The returned function is per device: (rng, rollout [T, B, ...], learner
  state, actor state, update-rule params, value state) -> (learner state,
  value state, scalar logs).
  """
  agent = setup.agent
  value_fn = setup.value_fn

  def learn(rng, rollout, learner_state, actor_state, rule_params, value_st):
    extra_logs = {}
    kwargs = {}
    if value_fn is not None:
      agent_out, _ = agent.unroll_net(
          learner_state.params, actor_state, rollout
      )
      target_logits = jax.lax.stop_gradient(agent_out['logits'])
      value_st, value_out, value_logs = value_fn.update(
          value_st, _value_fn_rollout(rollout), target_logits
      )
      kwargs['value_out'] = value_out
      extra_logs = {f'value_fn/{k}': v for k, v in value_logs.items()}
    learner_state, _, logs = agent.learner_step(
        rng, rollout, learner_state, actor_state, rule_params, False, **kwargs
    )
    return learner_state, value_st, _scalar_logs(logs | extra_logs)

  return learn


def _behaviour_outs(config: EvalConfig, rollout: types.ActorRollout):
  return (
      rollout
      if config.store_behaviour_outs
      else acting.trim_agent_outs(rollout)
  )


# ----------------------------------------------------------------------------
# The faithful loop.


def _place_on_devices(
    devices: Sequence[jax.Device],
    *,
    replicated: Any = None,
    sharded: Any = None,
) -> tuple[Any, Any]:
  """Puts trees on `devices` in the layout `pmap` gives its own outputs.

  Passing them through a `pmap`ped identity (rather than placing them with
  another sharding) means the loop's `pmap`ped functions see the same input
  layout at the first call as at every later one, so each compiles once.

  Args:
    devices: the devices.
    replicated: a tree to copy to every device, gaining a leading [D] axis.
    sharded: a tree of [B, ...] arrays to split into [D, B / D, ...].

  Returns:
    (replicated tree, sharded tree) on the devices.
  """
  num_devices = len(devices)
  sharded = jax.tree.map(
      lambda x: np.asarray(x).reshape((num_devices, -1) + np.shape(x)[1:]),
      sharded,
  )
  identity = jax.pmap(
      lambda r, s, _: (r, s),
      axis_name=_PMAP_AXIS_NAME,
      devices=devices,
      in_axes=(None, 0, 0),
  )
  # The last argument gives `pmap` a mapped axis even if `sharded` is empty.
  return identity(replicated, sharded, np.zeros((num_devices,), np.int32))


class _Recorder:
  """Collects the per-iteration scalars (and optional rollouts) of a run."""

  def __init__(self, config: EvalConfig, start_time: float):
    self._config = config
    self._start = start_time
    self.steps, self.totals, self.counts, self.elapsed = [], [], [], []
    self.logs: list[dict[str, float] | None] = []
    self.actions, self.rewards, self.discounts = [], [], []
    self.sample_indices, self.learner_steps = [], []

  def add(
      self,
      env_steps: int,
      total: float,
      count: float,
      logs: Mapping[str, float] | None,
      progress_fn: ProgressFn | None,
      now: float | None = None,
  ) -> None:
    self.steps.append(env_steps)
    self.totals.append(total)
    self.counts.append(count)
    self.logs.append(None if logs is None else dict(logs))
    self.elapsed.append(
        (time.perf_counter() if now is None else now) - self._start
    )
    if progress_fn is not None:
      metrics = dict(
          env_steps=float(env_steps),
          avg_return=float(acting.average_return(total, count)),
          num_episodes=float(count),
      )
      metrics.update(logs or {})
      progress_fn(len(self.steps), metrics)

  def history(
      self, rule: str, seed: int, params: hk.Params | None
  ) -> EvalHistory:
    num = len(self.steps)
    names = sorted({k for logs in self.logs if logs for k in logs})
    columns = {k: np.full((num,), np.nan) for k in names}
    for i, logs in enumerate(self.logs):
      for k, v in (logs or {}).items():
        columns[k][i] = v
    totals = np.asarray(self.totals, np.float64)
    counts = np.asarray(self.counts, np.float64)
    rollouts = None
    if self._config.record_rollouts:
      batch = self._config.batch_size
      rollouts = RolloutRecord(
          actions=np.asarray(self.actions),
          rewards=np.asarray(self.rewards),
          discounts=np.asarray(self.discounts),
          sample_indices=np.asarray(self.sample_indices, np.int64).reshape(
              -1, batch
          ),
          learner_step_index=np.asarray(self.learner_steps, np.int64),
      )
    return EvalHistory(
        rule=rule,
        seed=seed,
        steps=np.asarray(self.steps, np.int64),
        avg_returns=acting.average_return(totals, counts),
        total_returns=totals,
        num_episodes=counts,
        logs=columns,
        elapsed=np.asarray(self.elapsed, np.float64),
        params=params,
        rollouts=rollouts,
    )


def _mean_over_devices(logs: Mapping[str, Any]) -> dict[str, float]:
  return {k: float(np.mean(v, axis=0)) for k, v in jax.device_get(logs).items()}


def _unroll_fn(setup: _Setup):
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


@dataclasses.dataclass(frozen=True)
class _FaithfulFns:
  """The faithful loop's `pmap`ped functions, reusable across seeds."""

  learn: Callable[..., Any]
  act: Callable[..., Any] | None  # Jittable environments.
  actor_step: Callable[..., Any] | None  # Host environments.
  accumulate: Callable[..., Any] | None  # Host environments.

  @classmethod
  def build(cls, setup: _Setup) -> '_FaithfulFns':
    config, env, agent = setup.config, setup.env, setup.agent
    devices = setup.devices
    learn = jax.pmap(
        _make_learn_fn(setup),
        axis_name=_PMAP_AXIS_NAME,
        devices=devices,
        donate_argnums=(2, 5),
    )
    if not registry.is_jittable(env):
      return cls(
          learn=learn,
          act=None,
          actor_step=jax.pmap(
              agent.actor_step, axis_name=_PMAP_AXIS_NAME, devices=devices
          ),
          accumulate=jax.jit(jax.vmap(acting.accumulate_rewards)),
      )

    unroll = _unroll_fn(setup)

    def act(params, actor_state, timestep, env_state, rng, acc_rewards):
      rollout, actor_state, timestep, env_state = unroll(
          params, actor_state, timestep, env_state, rng
      )
      acc_rewards, returns = acting.accumulate_rewards(
          acc_rewards, rollout.rewards, rollout.discounts
      )
      rollout = _behaviour_outs(config, rollout)
      return rollout, actor_state, timestep, env_state, acc_rewards, returns

    return cls(
        learn=learn,
        act=jax.pmap(act, axis_name=_PMAP_AXIS_NAME, devices=devices),
        actor_step=None,
        accumulate=None,
    )


def _run_faithful(
    setup: _Setup,
    progress_fn: ProgressFn | None,
    start_time: float,
    fns: _FaithfulFns | None = None,
) -> EvalHistory:
  """The reference's loop, iteration by iteration (see the module doc)."""
  config, env, agent = setup.config, setup.env, setup.agent
  devices, num_devices = setup.devices, setup.num_devices
  jittable = registry.is_jittable(env)
  recorder = _Recorder(config, start_time)

  # Initial states: one key for the environment, the learner and the actor.
  rng = jax.random.PRNGKey(config.seed)
  if jittable:
    env_state, timestep = jax.jit(env.reset)(rng)
  else:
    env_state, timestep = env.reset(rng)
  learner_state = jax.jit(agent.initial_learner_state)(rng)
  actor_state = jax.jit(agent.initial_actor_state)(rng)
  value_state = jax.jit(functools.partial(_init_value_state, setup))(rng)
  acc_rewards = np.zeros((config.num_envs,), np.float32)
  if jittable:
    env_state, timestep, acc_rewards = _place_on_devices(
        devices, sharded=(env_state, timestep, acc_rewards)
    )[1]
  else:
    acc_rewards = acc_rewards.reshape((num_devices, -1))
  learner_state, actor_state, rule_params, value_state = _place_on_devices(
      devices,
      replicated=(
          learner_state,
          actor_state,
          setup.update_rule_params,
          value_state,
      ),
  )[0]
  buffer = replay.SimpleReplayBuffer(
      capacity=config.buffer_capacity, seed=config.buffer_seed, batch_axis=2
  )

  fns = fns or _FaithfulFns.build(setup)

  env_steps = 0
  for iteration in range(config.num_steps):
    rng, rng_actor, learner_rngs = acting.split_loop_keys(
        rng, num_devices, split_actor_key=jittable
    )
    if jittable:
      rollout, actor_state, timestep, env_state, acc_rewards, returns = fns.act(
          learner_state.params,
          actor_state,
          timestep,
          env_state,
          rng_actor,
          acc_rewards,
      )
      rollout, returns = jax.device_get((rollout, returns))
    else:
      rollout, actor_state, timestep, env_state = acting.unroll_cpu_actor(
          learner_state.params,
          actor_state,
          timestep,
          env_state,
          rng_actor,
          env=env,
          rollout_len=config.rollout_len,
          actor_step_fn=fns.actor_step,
          devices=devices,
      )
      rollout = _behaviour_outs(config, rollout)
      acc_rewards, returns = fns.accumulate(
          acc_rewards, rollout.rewards, rollout.discounts
      )
      returns = jax.device_get(returns)
    buffer.add(rollout)  # [D, T, B / D, ...]
    env_steps += int(np.prod(rollout.rewards.shape))
    total, count = acting.episode_statistics(returns, rollout.discounts)
    if config.record_rollouts:
      recorder.actions.append(acting.merge_device_axis(rollout.actions))
      recorder.rewards.append(acting.merge_device_axis(rollout.rewards))
      recorder.discounts.append(acting.merge_device_axis(rollout.discounts))

    logs = None
    if len(buffer) >= config.learning_starts:
      indices = buffer.sample_indices(config.batch_size)
      learner_state, value_state, logs = fns.learn(
          learner_rngs,
          buffer.gather(indices),
          learner_state,
          actor_state,
          rule_params,
          value_state,
      )
      logs = _mean_over_devices(logs)
      if config.record_rollouts:
        recorder.sample_indices.append(indices)
        recorder.learner_steps.append(iteration)
    recorder.add(env_steps, float(total), float(count), logs, progress_fn)

  params = jax.tree.map(lambda x: x[0], jax.device_get(learner_state.params))
  return recorder.history(config.rule, config.seed, params)


# ----------------------------------------------------------------------------
# The fast path.


@chex.dataclass(frozen=True)
class _LoopState:
  """The fast path's carry, per device and seed."""

  learner_state: agent_lib.LearnerState
  value_state: types.ValueState | None
  actor_state: hk.State
  env_state: Any
  timestep: types.EnvironmentTimestep
  acc_rewards: chex.Array  # [B / D]
  replay: replay.ReplayState
  rng: chex.PRNGKey
  sample_rng: chex.PRNGKey


def _device_slice(tree: Any, num_devices: int) -> Any:
  """This device's share of a [B, ...] tree, inside `pmap`."""
  index = jax.lax.axis_index(_PMAP_AXIS_NAME)
  return jax.tree.map(
      lambda x: x.reshape((num_devices, -1) + x.shape[1:])[index], tree
  )


def _make_fast_fns(setup: _Setup):
  """The fast path's per-device, per-seed init and chunk functions."""
  config, env, agent = setup.config, setup.env, setup.agent
  num_devices = setup.num_devices
  learn_fn = _make_learn_fn(setup)

  unroll = _unroll_fn(setup)

  def init(seed_key, sample_key):
    env_state, timestep = _device_slice(env.reset(seed_key), num_devices)
    learner_state = agent.initial_learner_state(seed_key)
    actor_state = agent.initial_actor_state(seed_key)
    example, *_ = jax.eval_shape(
        unroll,
        learner_state.params,
        actor_state,
        timestep,
        env_state,
        seed_key,
    )
    example = _behaviour_outs(config, example)
    return _LoopState(
        learner_state=learner_state,
        value_state=_init_value_state(setup, seed_key),
        actor_state=actor_state,
        env_state=env_state,
        timestep=timestep,
        acc_rewards=jnp.zeros((setup.envs_per_device,), jnp.float32),
        replay=replay.init_replay_state(
            example, config.buffer_capacity, batch_axis=1
        ),
        rng=seed_key,
        sample_rng=sample_key,
    )

  # Jitted so that its trace is cached: `chunk` traces it once for the
  # structure of its logs and then reuses that trace.
  @jax.jit
  def learn_from_replay(
      learner_state,
      value_state,
      actor_state,
      replay_state,
      rule_params,
      learner_rng,
      sample_key,
  ):
    batch, _ = replay.sample_from_replay(
        replay_state, sample_key, config.batch_size, batch_axis=1
    )
    return learn_fn(
        learner_rng,
        batch,
        learner_state,
        actor_state,
        rule_params,
        value_state,
    )

  def one_iteration(state: _LoopState, rule_params, learn: bool):
    rng, rng_actor, rng_learner = jax.random.split(state.rng, 3)
    index = jax.lax.axis_index(_PMAP_AXIS_NAME)
    actor_rng = jax.random.split(rng_actor, num_devices)[index]
    learner_rng = jax.random.split(rng_learner, num_devices)[index]
    rollout, actor_state, timestep, env_state = unroll(
        state.learner_state.params,
        state.actor_state,
        state.timestep,
        state.env_state,
        actor_rng,
    )
    acc_rewards, returns = acting.accumulate_rewards(
        state.acc_rewards, rollout.rewards, rollout.discounts
    )
    total, count = acting.episode_statistics(returns, rollout.discounts)
    replay_state = replay.add_to_replay(
        state.replay, _behaviour_outs(config, rollout), batch_axis=1
    )
    sample_rng, sample_key = jax.random.split(state.sample_rng)
    outputs = dict(
        total_return=jax.lax.psum(total.astype(jnp.float32), _PMAP_AXIS_NAME),
        num_episodes=jax.lax.psum(count.astype(jnp.float32), _PMAP_AXIS_NAME),
    )
    learner_state, value_state = state.learner_state, state.value_state
    if learn:
      learner_state, value_state, logs = learn_from_replay(
          learner_state,
          value_state,
          actor_state,
          replay_state,
          rule_params,
          learner_rng,
          sample_key,
      )
      outputs['logs'] = jax.lax.pmean(logs, _PMAP_AXIS_NAME)
    new_state = _LoopState(
        learner_state=learner_state,
        value_state=value_state,
        actor_state=actor_state,
        env_state=env_state,
        timestep=timestep,
        acc_rewards=acc_rewards,
        replay=replay_state,
        rng=rng,
        sample_rng=sample_rng,
    )
    return new_state, outputs

  def chunk(
      state: _LoopState,
      rule_params,
      num_iterations: chex.Array,
      *,
      learn: bool,
  ):
    """Runs `num_iterations` (traced, <= steps_per_chunk) iterations."""
    shapes = dict(total_return=jnp.float32, num_episodes=jnp.float32)
    if learn:
      *_, log_shapes = jax.eval_shape(
          learn_from_replay,
          state.learner_state,
          state.value_state,
          state.actor_state,
          state.replay,
          rule_params,
          state.rng,
          state.sample_rng,
      )
      shapes['logs'] = jax.tree.map(lambda s: s.dtype, log_shapes)
    # One row per iteration of the chunk; rows past `num_iterations` stay 0.
    buffers = jax.tree.map(
        lambda dtype: jnp.zeros((config.steps_per_chunk,), dtype), shapes
    )

    def body(i, carry):
      state, buffers = carry
      state, outputs = one_iteration(state, rule_params, learn)
      buffers = jax.tree.map(
          lambda buffer, value: buffer.at[i].set(value), buffers, outputs
      )
      return state, buffers

    # A traced trip count (not `scan` over a fixed length): chunks of any
    # length, e.g. the last one, share one compiled program, and no `cond`
    # is needed (a `cond` around the learner doubles the compile time).
    return jax.lax.fori_loop(0, num_iterations, body, (state, buffers))

  return init, chunk


def _run_fast(
    setup: _Setup,
    seeds: Sequence[int],
    progress_fn: ProgressFn | None,
    start_time: float,
) -> list[EvalHistory]:
  """The fused loop for `seeds` (vmapped when there are several).

  Two programs: one for the iterations before learning starts (actor and
  replay only) and one for the others; each is called on chunks of up to
  `steps_per_chunk` iterations.
  """
  config = setup.config
  devices = setup.devices
  init, chunk = _make_fast_fns(setup)
  batched = len(seeds) > 1

  def _chunk_program(learn: bool):
    fn = functools.partial(chunk, learn=learn)
    if batched:
      fn = jax.vmap(fn, in_axes=(0, None, None))
    return jax.pmap(
        fn,
        axis_name=_PMAP_AXIS_NAME,
        devices=devices,
        in_axes=(0, 0, None),
        donate_argnums=(0,),
    )

  init_fn = jax.pmap(
      jax.vmap(init) if batched else init,
      axis_name=_PMAP_AXIS_NAME,
      devices=devices,
  )
  chunk_fns = {False: _chunk_program(False), True: _chunk_program(True)}

  def _keys(base_key_fn):
    keys = np.stack([np.asarray(base_key_fn(s)) for s in seeds])
    if not batched:
      keys = keys[0]
    return np.broadcast_to(keys, (len(devices),) + keys.shape)

  seed_keys = _keys(jax.random.PRNGKey)
  sample_keys = _keys(
      lambda s: jax.random.fold_in(jax.random.PRNGKey(config.buffer_seed), s)
  )
  state = init_fn(seed_keys, sample_keys)
  rule_params, _ = _place_on_devices(
      devices, replicated=setup.update_rule_params
  )
  _, histories = _fast_chunks(
      setup, seeds, state, rule_params, chunk_fns, progress_fn, start_time
  )
  return histories


def _num_warmup_iterations(setup: _Setup) -> int:
  """How many iterations only act, before the first learner step.

  After iteration i (from 0) the buffer holds (i + 1) * B / D trajectories,
  and the iteration learns if that is at least `learning_starts`.
  """
  config = setup.config
  first_learning = -(-config.learning_starts // setup.envs_per_device) - 1
  return min(config.num_steps, first_learning)


def _fast_chunks(
    setup: _Setup,
    seeds: Sequence[int],
    state: _LoopState,
    rule_params: types.MetaParams,
    chunk_fns: Mapping[bool, Any],
    progress_fn: ProgressFn | None,
    start_time: float,
) -> tuple[_LoopState, list[EvalHistory]]:
  """Runs the fast path's chunks from `state`; returns the histories.

  `chunk_fns[learn]` is the acting-only (False) or learning (True) program.
  """
  config = setup.config
  batched = len(seeds) > 1

  recorders = [_Recorder(config, start_time) for _ in seeds]
  steps_per_iteration = config.rollout_len * config.num_envs
  warmup = _num_warmup_iterations(setup)
  step = 0
  while step < config.num_steps:
    learn = step >= warmup
    stop = config.num_steps if learn else warmup
    num = min(config.steps_per_chunk, stop - step)
    state, outputs = chunk_fns[learn](state, rule_params, np.int32(num))
    outputs = jax.tree.map(lambda x: x[0], jax.device_get(outputs))
    now = time.perf_counter()
    if not batched:
      outputs = jax.tree.map(lambda x: x[None], outputs)
    for i in range(num):
      for s, recorder in enumerate(recorders):
        logs = None
        if learn:
          logs = {k: float(v[s, i]) for k, v in outputs['logs'].items()}
        recorder.add(
            (step + i + 1) * steps_per_iteration,
            float(outputs['total_return'][s, i]),
            float(outputs['num_episodes'][s, i]),
            logs,
            progress_fn if s == 0 else None,
            now=now,
        )
    step += num

  params = jax.tree.map(
      lambda x: x[0], jax.device_get(state.learner_state.params)
  )
  histories = []
  for s, (seed, recorder) in enumerate(zip(seeds, recorders, strict=True)):
    seed_params = (
        jax.tree.map(lambda x, s=s: x[s], params) if batched else params
    )
    histories.append(recorder.history(config.rule, seed, seed_params))
  return state, histories


# ----------------------------------------------------------------------------
# Entry points.


class ProgressBar:
  """A tqdm bar usable as `progress_fn`, showing the latest average return.

  Use it as a context manager (or call `close`) to finish the bar.
  """

  def __init__(self, total: int, description: str = '', enabled: bool = True):
    self._bar = None
    if enabled:
      # pylint: disable-next=g-import-not-at-top
      import tqdm

      self._bar = tqdm.tqdm(total=total, desc=description, unit='it')

  def __call__(self, step: int, metrics: Mapping[str, float]) -> None:
    if self._bar is None:
      return
    self._bar.update(step - self._bar.n)
    self._bar.set_postfix(avg_return=f'{metrics["avg_return"]:.2f}')

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()

  def __enter__(self) -> 'ProgressBar':
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()


def run_eval(
    config: EvalConfig,
    *,
    update_rule_params: types.MetaParams | None = None,
    progress_fn: ProgressFn | None = None,
) -> EvalHistory:
  """Trains an agent with `config.rule` and returns its learning curve.

  Args:
    config: the run's settings.
    update_rule_params: parameters of the update rule; None loads them as
      `default_update_rule_params(config)` does (Disco103 for 'disco').
    progress_fn: called after every iteration with the number of
      iterations done and that iteration's scalar metrics ('env_steps',
      'avg_return', 'num_episodes' and, once learning has started, the
      learner's logs). The fast path calls it after each chunk, for each of
      the chunk's iterations.

  Returns:
    The run's `EvalHistory`.
  """
  start_time = time.perf_counter()
  setup = _build(config, update_rule_params)
  if config.fast:
    (history,) = _run_fast(setup, [config.seed], progress_fn, start_time)
    return history
  return _run_faithful(setup, progress_fn, start_time)


def _offset_progress(
    progress_fn: ProgressFn,
    offset: int,
    step: int,
    metrics: Mapping[str, float],
) -> None:
  progress_fn(offset + step, metrics)


def run_eval_seeds(
    config: EvalConfig,
    seeds: Sequence[int],
    *,
    update_rule_params: types.MetaParams | None = None,
    progress_fn: ProgressFn | None = None,
) -> list[EvalHistory]:
  """`run_eval` for several seeds (`config.seed` is replaced by each).

  The fast path trains all seeds at once, `vmap`ped in one program; the
  faithful loop runs them one after the other.

  Args:
    config: the runs' settings.
    seeds: the seeds, one run each.
    update_rule_params: as in `run_eval`.
    progress_fn: as in `run_eval`. The fast path reports the first seed's
      metrics; the faithful loop reports every seed's in turn, counting the
      iterations of all seeds so far (up to `len(seeds) * num_steps`).

  Returns:
    One `EvalHistory` per seed, in the order of `seeds`.
  """
  seeds = [int(s) for s in seeds]
  if not seeds:
    raise ValueError('Give at least one seed.')
  start_time = time.perf_counter()
  setup = _build(config, update_rule_params)
  if config.fast:
    return _run_fast(setup, seeds, progress_fn, start_time)
  fns = _FaithfulFns.build(setup)
  histories = []
  for i, seed in enumerate(seeds):
    seed_config = dataclasses.replace(config, seed=seed)
    seed_setup = dataclasses.replace(setup, config=seed_config)
    if not registry.is_jittable(setup.env):
      # Host environments are seeded when built.
      seed_setup = dataclasses.replace(
          seed_setup,
          env=registry.make_environment(
              config.env,
              batch_size=config.num_envs,
              seed=seed,
              settings=dict(config.env_settings),
          ),
      )
    seed_progress_fn = None
    if progress_fn is not None:
      seed_progress_fn = functools.partial(
          _offset_progress, progress_fn, i * config.num_steps
      )
    histories.append(
        _run_faithful(seed_setup, seed_progress_fn, time.perf_counter(), fns)
    )
  return histories
