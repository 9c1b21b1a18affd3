"""Training agents with a fixed update rule on any jittable environment.

The generalisation of the evaluation loop's fast path (`disco.eval.fast`):
`num_envs` environments act in parallel on the device, their trajectories
go to an on-device replay buffer, and each learner batch mixes
`fresh_per_batch` trajectories of the newest rollout with
`replay_per_batch` replayed ones (`TrainConfig`). Chunks of iterations run
as one jitted program; several seeds are `vmap`ped together; the work is
split over devices with `pmap` (gradients averaged over
`devices.AXIS_NAME`, the axis the agent already takes).

The same call on D devices computes what it computes on one, up to float
rounding: every random draw is tied to a global index, never to a device.
Environments are reset for all `num_envs` at once and sliced; each one
samples its actions with its own key (`fold_in` of its global index);
replay positions are drawn for the whole learner batch with one key and
each device gathers the ones it holds (a masked `psum`, so every device
sees the whole replayed batch and keeps its share). Each learner step's
fresh part takes the environments whose index is k modulo
`learner_steps_per_step`, which every device holds an equal share of.

Evaluation episodes run on separate environment instances with the same
policy (actions sampled), and are reported apart from training returns.

Two things make it faster than the fast path at the same settings: the
agent differentiates the per-action outputs that the rule reads at the
taken actions only there (`Agent(taken_action_gradients=True)`: the same
gradient, up to float rounding, for less work), and the learning program
compiles in a background thread while the acting-only iterations run.
"""

from collections.abc import Callable, Mapping, Sequence
import dataclasses
import functools
import pathlib
import threading
import time
from typing import Any

import chex
import dm_env
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from disco import acting
from disco import agent as agent_lib
from disco import checkpoint as checkpoint_lib
from disco import devices as devices_lib
from disco import files
from disco import interrupts
from disco import learner
from disco import precision
from disco import progress
from disco import replay as replay_lib
from disco import run_checkpoints
from disco import types
from disco.environments import registry
from disco.train.config import AGENTS
from disco.train.config import EXECUTION_FIELDS
from disco.train.config import PRESETS
from disco.train.config import TrainConfig
from disco.train.config import agent_fields
from disco.train.config import preset

__all__ = [
    'AGENTS',
    'PRESETS',
    'TrainConfig',
    'TrainResult',
    'TrainState',
    'Trainer',
    'agent_fields',
    'preset',
    'run_train',
]

_AXIS = devices_lib.AXIS_NAME
CHECKPOINT_KIND = 'disco-train'

# (seed, row) -> None: one log row per seed and chunk.
LogFn = Callable[[int, Mapping[str, float]], None]


@chex.dataclass(frozen=True)
class TrainState:
  """The trainer's carry, per device and seed (the whole checkpoint)."""

  learner_state: agent_lib.LearnerState
  value_state: types.ValueState | None
  actor_state: hk.State
  env_state: Any
  timestep: types.EnvironmentTimestep
  episode_returns: chex.Array  # [N / D] returns of the running episodes.
  replay: replay_lib.ReplayState
  rng: chex.PRNGKey


@dataclasses.dataclass(frozen=True)
class TrainResult:
  """What `run_train` returns.

  Attributes:
    config: the run's settings.
    seeds: the seeds, in the order of `params` and of the logs' 'seed'.
    logs: one row per seed and chunk (and per evaluation at step 0), as
      columns: 'seed', 'step' (iterations done), 'env_steps',
      'learner_steps', 'train_return' (mean return of the training episodes
      that ended in the chunk; NaN if none), 'train_episodes',
      'eval_return' (mean return of the evaluation episodes run at the
      chunk's end; NaN when none ran), 'eval_episodes', 'elapsed' (seconds
      since the run started or resumed) and the learner's logs averaged
      over the chunk ('logs/<name>', NaN before learning starts).
    params: the agents' final network parameters, one tree per seed.
    num_devices: the devices the run used.
  """

  config: TrainConfig
  seeds: tuple[int, ...]
  logs: dict[str, np.ndarray]
  params: list[hk.Params]
  num_devices: int

  def curve(self, seed: int, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(env_steps, values) of `column` for `seed`, without NaN rows."""
    rows = self.logs['seed'] == seed
    x, y = self.logs['env_steps'][rows], self.logs[column][rows]
    keep = ~np.isnan(y)
    return x[keep], y[keep]


def select_devices(config: TrainConfig) -> tuple[jax.Device, ...]:
  """The first D devices, D the most that split every batch evenly.

  D is at most `config.max_devices` and divides the environments, both
  parts of the learner batch and the evaluation environments.
  """
  available = jax.devices()
  limit = min(len(available), config.max_devices or len(available))
  sizes = (
      config.num_envs,
      config.fresh_per_batch,
      config.replay_per_batch,
      config.eval_envs,
  )
  count = max(d for d in range(1, limit + 1) if all(s % d == 0 for s in sizes))
  return tuple(available[:count])


def _lane_keys(key: chex.PRNGKey, lanes: chex.Array) -> chex.Array:
  """One key per environment: `fold_in(key, global index)` [n]."""
  return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, lanes)


def _local_lanes(num_local: int) -> chex.Array:
  """This device's environments' global indices [num_local] (in `pmap`)."""
  start = jax.lax.axis_index(_AXIS) * num_local
  return start + jnp.arange(num_local, dtype=jnp.int32)


def _gather_replayed(
    state: replay_lib.ReplayState,
    key: chex.PRNGKey,
    num: int,
    num_envs: int,
    num_devices: int,
) -> chex.ArrayTree:
  """This device's share of `num` trajectories drawn from the whole buffer.

  The buffer is a grid of rows (iterations, in ring order) by `num_envs`
  environments, each device holding its environments' columns. Positions
  are drawn uniformly over the filled rows and all environments with one
  key; each device gathers the ones it holds, a `psum` gives every device
  the whole batch [T, num, ...], and it keeps its `num / D` [T, num / D].
  """
  num_local = num_envs // num_devices
  rows_filled = jnp.maximum(state.size // num_local, 1)
  row_key, env_key = jax.random.split(key)
  rows = jax.random.randint(row_key, (num,), 0, rows_filled)
  envs = jax.random.randint(env_key, (num,), 0, num_envs)
  if num_devices == 1:
    slots = rows * num_local + envs
    return jax.tree.map(lambda x: jnp.take(x, slots, axis=1), state.storage)
  device = jax.lax.axis_index(_AXIS)
  mine = envs // num_local == device
  slots = jnp.where(mine, rows * num_local + envs % num_local, 0)

  def _gather(store: chex.Array) -> chex.Array:
    picked = jnp.take(store, slots, axis=1)
    mask = mine.reshape((1, num) + (1,) * (picked.ndim - 2))
    dtype = jnp.int32 if picked.dtype == jnp.bool_ else picked.dtype
    whole = jax.lax.psum(jnp.where(mask, picked, 0).astype(dtype), _AXIS)
    share = num // num_devices
    mine_part = jax.lax.dynamic_slice_in_dim(whole, device * share, share, 1)
    return mine_part.astype(picked.dtype)

  return jax.tree.map(_gather, state.storage)


class Trainer:
  """The jitted programs of one run's settings, for some seeds.

  Attributes:
    config: the run's settings.
    setup: its environment, agent, value function, devices and rule
      parameters (`learner.Setup`).
    seeds: the seeds trained together (`vmap`ped when there are several).
  """

  def __init__(
      self,
      config: TrainConfig,
      seeds: Sequence[int],
      update_rule_params: types.MetaParams | None = None,
  ):
    self.config = config
    self.seeds = tuple(int(s) for s in seeds)
    if not self.seeds:
      raise ValueError('Give at least one seed.')
    if len(set(self.seeds)) != len(self.seeds):
      raise ValueError(f'Seeds must differ, got {list(self.seeds)}.')
    # Gradients through the taken actions only: the trainer need not keep
    # the reference's rounding, and a learner step is cheaper.
    setup = learner.build(
        config, update_rule_params, taken_action_gradients=True
    )
    self.setup = dataclasses.replace(setup, devices=select_devices(config))
    self.eval_env = registry.make_environment(
        config.env,
        batch_size=config.eval_envs,
        settings=dict(config.env_settings),
    )
    self._batched = len(self.seeds) > 1
    init, chunk, evaluate = self._per_device_fns()
    seeds_axis = jax.vmap if self._batched else lambda f, **_: f
    devices = self.setup.devices
    self._init = jax.pmap(seeds_axis(init), axis_name=_AXIS, devices=devices)
    self._chunks = {
        learn: jax.pmap(
            seeds_axis(
                functools.partial(chunk, learn=learn), in_axes=(0, None, None)
            ),
            axis_name=_AXIS,
            devices=devices,
            in_axes=(0, 0, None),
            donate_argnums=(0,),
        )
        for learn in (False, True)
    }
    self._evaluate = jax.pmap(
        seeds_axis(evaluate, in_axes=(0, 0)), axis_name=_AXIS, devices=devices
    )
    # Background compilations of the chunk programs: learn -> (thread,
    # errors).
    self._compilations: dict[bool, tuple[threading.Thread, list]] = {}

  @property
  def num_devices(self) -> int:
    return len(self.setup.devices)

  # The per-device, per-seed functions.

  def _per_device_fns(self) -> tuple[Callable[..., Any], ...]:
    config, setup = self.config, self.setup
    env, agent = setup.env, setup.agent
    num_devices = len(setup.devices)
    num_envs = config.num_envs
    num_local = num_envs // num_devices
    fresh = config.fresh_per_batch // num_devices
    replayed = config.replay_per_batch
    num_learner_steps = config.learner_steps_per_step
    learn_fn = learner.make_learn_fn(setup)

    def actor_step(
        params: hk.Params, key: chex.PRNGKey, timestep: Any, state: Any
    ) -> Any:
      keys = _lane_keys(key, _local_lanes(timestep.reward.shape[0]))
      return agent.actor_step(params, keys, timestep, state)

    unroll = functools.partial(
        acting.unroll_jittable_actor,
        env=env,
        rollout_len=config.rollout_len,
        actor_step_fn=actor_step,
    )

    def init(seed_key: chex.PRNGKey) -> TrainState:
      env_key, agent_key, loop_key = jax.random.split(seed_key, 3)
      env_state, timestep = devices_lib.device_slice(
          env.reset(env_key), num_devices
      )
      learner_state = agent.initial_learner_state(agent_key)
      actor_state = agent.initial_actor_state(agent_key)
      example, *_ = jax.eval_shape(
          unroll, learner_state.params, actor_state, timestep, env_state,
          loop_key,
      )  # fmt: skip
      return TrainState(
          learner_state=learner_state,
          value_state=learner.init_value_state(setup, agent_key),
          actor_state=actor_state,
          env_state=env_state,
          timestep=timestep,
          episode_returns=jnp.zeros((num_local,), jnp.float32),
          replay=replay_lib.init_replay_state(
              acting.trim_agent_outs(example),
              config.buffer_capacity // num_devices,
          ),
          rng=loop_key,
      )

    def learn(
        state: TrainState,
        rollout: types.ActorRollout,
        replay: replay_lib.ReplayState,
        rule_params: types.MetaParams,
        key: chex.PRNGKey,
    ) -> tuple[Any, Any, dict[str, jax.Array]]:
      """The iteration's learner steps, each on its fresh part + replay."""
      # [T, N / D, ...] -> [T, N / (D K), K, ...]: step k takes [:, :, k].
      grouped = jax.tree.map(
          lambda x: x.reshape(
              x.shape[:1] + (-1, num_learner_steps) + x.shape[2:]
          ),
          rollout,
      )

      def step(carry: tuple[Any, Any], k: chex.Array) -> tuple[Any, Any]:
        learner_state, value_state = carry
        step_key = jax.random.fold_in(key, k)
        sample_key, learner_key = jax.random.split(step_key)
        parts = []
        if fresh:
          parts.append(jax.tree.map(lambda x: x[:, :, k], grouped))
        if replayed:
          parts.append(
              _gather_replayed(
                  replay, sample_key, replayed, num_envs, num_devices
              )
          )
        batch = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=1), *parts)
        learner_state, value_state, logs = learn_fn(
            learner_key,
            batch,
            learner_state,
            state.actor_state,
            rule_params,
            value_state,
        )
        return (learner_state, value_state), logs

      (learner_state, value_state), logs = jax.lax.scan(
          step,
          (state.learner_state, state.value_state),
          jnp.arange(num_learner_steps),
      )
      logs = jax.tree.map(lambda x: jnp.mean(x, axis=0), logs)
      return learner_state, value_state, jax.lax.pmean(logs, _AXIS)

    def iteration(
        state: TrainState, rule_params: types.MetaParams, learn_now: bool
    ) -> tuple[TrainState, dict[str, Any]]:
      rng, rollout_key, learner_key = jax.random.split(state.rng, 3)
      rollout, actor_state, timestep, env_state = unroll(
          state.learner_state.params,
          state.actor_state,
          state.timestep,
          state.env_state,
          rollout_key,
      )
      episode_returns, returns = acting.accumulate_rewards(
          state.episode_returns, rollout.rewards, rollout.discounts
      )
      total, count = acting.episode_statistics(returns, rollout.discounts)
      rollout = acting.trim_agent_outs(rollout)
      replay = replay_lib.add_to_replay(state.replay, rollout)
      outputs = dict(
          total_return=jax.lax.psum(total.astype(jnp.float32), _AXIS),
          num_episodes=jax.lax.psum(count.astype(jnp.float32), _AXIS),
      )
      learner_state, value_state = state.learner_state, state.value_state
      if learn_now:
        learner_state, value_state, outputs['logs'] = learn(
            state, rollout, replay, rule_params, learner_key
        )
      new_state = TrainState(
          learner_state=learner_state,
          value_state=value_state,
          actor_state=actor_state,
          env_state=env_state,
          timestep=timestep,
          episode_returns=episode_returns,
          replay=replay,
          rng=rng,
      )
      return new_state, outputs

    def chunk(
        state: TrainState,
        rule_params: types.MetaParams,
        num_iterations: chex.Array,
        *,
        learn: bool,
    ) -> tuple[TrainState, dict[str, Any]]:
      """Runs `num_iterations` (traced) iterations; sums their outputs."""
      _, example = jax.eval_shape(
          functools.partial(iteration, learn_now=learn), state, rule_params
      )
      sums = jax.tree.map(lambda s: jnp.zeros((), s.dtype), example)

      def body(_: chex.Array, carry: tuple[Any, Any]) -> tuple[Any, Any]:
        state, sums = carry
        state, outputs = iteration(state, rule_params, learn)
        return state, jax.tree.map(jnp.add, sums, outputs)

      # A traced trip count: chunks of any length share one program.
      return jax.lax.fori_loop(0, num_iterations, body, (state, sums))

    eval_env = self.eval_env
    eval_local = config.eval_envs // num_devices

    def evaluate(params: hk.Params, key: chex.PRNGKey) -> dict[str, Any]:
      """One episode in each evaluation environment: return sum and count."""
      reset_key, act_key = jax.random.split(key)
      env_state, timestep = devices_lib.device_slice(
          eval_env.reset(reset_key), num_devices
      )
      lanes = _local_lanes(eval_local)
      zeros = jnp.zeros((eval_local,), jnp.float32)

      def cond(carry: tuple[Any, ...]) -> chex.Array:
        t, *_, done, _ = carry
        return (t < config.eval_max_steps) & ~jnp.all(done)

      def body(carry: tuple[Any, ...]) -> tuple[Any, ...]:
        t, env_state, timestep, actor_state, acc, done, returns = carry
        keys = _lane_keys(jax.random.fold_in(act_key, t), lanes)
        actor_timestep, actor_state = agent.actor_step(
            params, keys, timestep, actor_state
        )
        env_state, timestep = eval_env.step(env_state, actor_timestep.actions)
        acc = acc + jnp.where(done, 0.0, timestep.reward)
        ended = ~done & (timestep.step_type == dm_env.StepType.LAST)
        returns = jnp.where(ended, acc, returns)
        return (
            t + 1,
            env_state,
            timestep,
            actor_state,
            acc,
            done | ended,
            returns,
        )

      actor_state = agent.initial_actor_state(act_key)
      carry = (
          jnp.int32(0),
          env_state,
          timestep,
          actor_state,
          zeros,
          zeros > 1,
          zeros,
      )
      *_, done, returns = jax.lax.while_loop(cond, body, carry)
      return dict(
          total_return=jax.lax.psum(jnp.sum(returns * done), _AXIS),
          num_episodes=jax.lax.psum(jnp.sum(done.astype(jnp.float32)), _AXIS),
      )

    dtype = config.compute_dtype
    return tuple(
        precision.compute_in(dtype, fn) for fn in (init, chunk, evaluate)
    )

  # Keys, state and checkpoints.

  def _seed_keys(self, offset: int = 0) -> np.ndarray:
    """Per device (and seed): `fold_in(PRNGKey(seed), offset)` (0: none)."""

    def key(seed: int) -> np.ndarray:
      k = jax.random.PRNGKey(seed)
      return np.asarray(jax.random.fold_in(k, offset) if offset else k)

    keys = np.stack([key(s) for s in self.seeds])
    if not self._batched:
      keys = keys[0]
    return np.broadcast_to(keys, (self.num_devices,) + keys.shape)

  def initial_state(self) -> TrainState:
    return self._init(self._seed_keys())

  def restore_state(self, arrays: Mapping[str, np.ndarray]) -> TrainState:
    """The `TrainState` saved under 'state', placed as `initial_state` is."""
    template = jax.eval_shape(self._init, self._seed_keys())
    restored = checkpoint_lib.restore_tree(template, arrays, 'state')
    _, placed = devices_lib.place_like_pmap(
        self.setup.devices, sharded=restored
    )
    return placed

  def num_warmup_steps(self) -> int:
    """Iterations that only act: the buffer holds (i + 1) N after i + 1."""
    config = self.config
    return -(-config.learning_starts // config.num_envs) - 1

  def evaluate(self, state: TrainState, step: int) -> dict[str, np.ndarray]:
    """[S] total return and count of one evaluation episode per instance."""
    # Keys tied to the step, so a resumed run evaluates as a straight one.
    outputs = self._evaluate(
        state.learner_state.params, self._seed_keys(offset=1 + step)
    )
    return jax.tree.map(np.atleast_1d, devices_lib.first_copy(outputs))

  def run(
      self,
      config: TrainConfig,
      *,
      checkpoints: run_checkpoints.RunCheckpoints,
      resume: bool,
      log_fn: LogFn | None,
      progress_fn: progress.ProgressFn | None,
      interrupted: Callable[[], bool],
  ) -> TrainResult:
    """Runs (or resumes) the seeds up to `config.num_steps`.

    `config` may differ from the trainer's in the fields its programs do not
    depend on (`num_steps`, `eval_every`, checkpointing, chunking).
    """
    if _program_config(config) != _program_config(self.config):
      raise ValueError('config needs other programs than this trainer has.')
    ckpt = checkpoints.latest(resume)
    warmup = min(config.num_steps, self.num_warmup_steps())
    if config.num_steps > max(warmup, 0 if ckpt is None else ckpt.step):
      # The learning program, the largest, compiles while the state is
      # built and the acting-only iterations run: on two cores that hides
      # most of the acting program's compilation and of the evaluation's.
      self._compile_in_background(learn=True)
    rows: list[dict[str, float]] = []
    step = 0
    if ckpt is None:
      state = self.initial_state()
    else:
      state = self.restore_state(ckpt.arrays)
      rows = _rows_from_arrays(ckpt.arrays)
      step = ckpt.step
    rule_params, _ = devices_lib.place_like_pmap(
        self.setup.devices, replicated=self.setup.update_rule_params
    )
    start = time.perf_counter()

    def add_rows(
        outputs: Mapping[str, Any], eval_outputs: Mapping[str, Any] | None
    ) -> None:
      for s, seed in enumerate(self.seeds):
        row = self._row(seed, s, step, outputs, eval_outputs)
        row['elapsed'] = time.perf_counter() - start
        rows.append(row)
        if log_fn is not None:
          log_fn(seed, row)
      if progress_fn is not None:
        progress_fn(step, rows[-len(self.seeds)])

    def arrays() -> dict[str, np.ndarray]:
      out = checkpoint_lib.flatten_tree(state, 'state')
      out.update(_rows_to_arrays(rows))
      return out

    if step == 0 and config.eval_every:
      add_rows({}, self.evaluate(state, 0))
    while step < config.num_steps:
      learn = step >= warmup
      end = config.num_steps if learn else warmup
      num = min(config.steps_per_chunk, end - step)
      self._wait_for_compilation(learn)
      state, outputs = self._chunks[learn](state, rule_params, np.int32(num))
      outputs = jax.tree.map(np.atleast_1d, devices_lib.first_copy(outputs))
      outputs['num_iterations'] = num
      previous, step = step, step + num
      eval_outputs = None
      every = config.eval_every
      if every and (
          step // every > previous // every or step == config.num_steps
      ):
        eval_outputs = self.evaluate(state, step)
      add_rows(outputs, eval_outputs)
      if interrupted():
        checkpoints.save(step, arrays)
        raise KeyboardInterrupt
      checkpoints.save(step, arrays, due_since=previous)
    checkpoints.save(step, arrays)

    params = devices_lib.first_copy(state.learner_state.params)
    per_seed = [
        jax.tree.map(lambda x, s=s: np.asarray(x[s]), params)
        if self._batched
        else jax.device_get(params)
        for s in range(len(self.seeds))
    ]
    return TrainResult(
        config=config,
        seeds=self.seeds,
        logs=_columns(rows),
        params=per_seed,
        num_devices=self.num_devices,
    )

  def _abstract_chunk_inputs(self) -> tuple[Any, Any]:
    """Shapes, dtypes and shardings of a chunk's (state, rule parameters).

    Both are `pmap` outputs (`initial_state`, `restore_state`,
    `place_like_pmap`): [D, ...] leaves split over a mesh of the devices
    with the `pmap` axis.
    """
    devices = self.setup.devices
    sharding = jax.sharding.NamedSharding(
        jax.sharding.Mesh(np.asarray(devices), (_AXIS,)),
        jax.sharding.PartitionSpec(_AXIS),
    )
    state = jax.eval_shape(self._init, self._seed_keys())
    rule_params = jax.eval_shape(
        lambda tree: jax.tree.map(
            lambda x: jnp.broadcast_to(x, (len(devices),) + x.shape), tree
        ),
        self.setup.update_rule_params,
    )
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(
            x.shape, x.dtype, sharding=sharding, weak_type=x.weak_type
        ),
        (state, rule_params),
    )

  def _compile_in_background(self, learn: bool) -> None:
    """Starts compiling chunk program `learn`, once per trainer.

    XLA releases the GIL while it compiles, so the caller goes on;
    `_wait_for_compilation` joins the thread before the program's first
    call, which finds it compiled (same shapes, dtypes and shardings)
    rather than compiling it again.
    """
    if learn in self._compilations:
      return
    errors = []

    def _compile() -> None:
      try:
        state, rule_params = self._abstract_chunk_inputs()
        self._chunks[learn].lower(state, rule_params, np.int32(1)).compile()
      except Exception as e:  # pylint: disable=broad-exception-caught
        errors.append(e)

    thread = threading.Thread(target=_compile, daemon=True)
    thread.start()
    self._compilations[learn] = (thread, errors)

  def _wait_for_compilation(self, learn: bool) -> None:
    """Joins a background compilation of program `learn`, if one ran."""
    if learn not in self._compilations:
      return
    thread, errors = self._compilations[learn]
    thread.join()
    if errors:
      # The call compiles in the foreground instead, and raises there if
      # the program is broken.
      del self._compilations[learn]

  def _row(
      self,
      seed: int,
      s: int,
      step: int,
      outputs: Mapping[str, Any],
      eval_outputs: Mapping[str, Any] | None,
  ) -> dict[str, float]:
    """Seed `s`'s log row of a chunk ending at iteration `step`."""
    config = self.config
    warmup = self.num_warmup_steps()
    nan = float('nan')
    # Counts are ints, so that the CSV shows them as such.
    row = dict(
        seed=seed,
        step=step,
        env_steps=step * config.env_steps_per_step,
        learner_steps=max(0, step - warmup) * config.learner_steps_per_step,
        train_return=nan,
        train_episodes=0,
        eval_return=nan,
        eval_episodes=0,
    )
    if 'total_return' in outputs:
      count = int(outputs['num_episodes'][s])
      row['train_episodes'] = count
      row['train_return'] = (
          float(outputs['total_return'][s]) / count if count else nan
      )
    if eval_outputs is not None:
      count = int(eval_outputs['num_episodes'][s])
      row['eval_episodes'] = count
      row['eval_return'] = (
          float(eval_outputs['total_return'][s]) / count if count else nan
      )
    for name, value in outputs.get('logs', {}).items():
      row[f'logs/{name}'] = float(value[s]) / outputs['num_iterations']
    return row


def _columns(rows: Sequence[Mapping[str, float]]) -> dict[str, np.ndarray]:
  """Rows as columns (NaN where a row lacks a column)."""
  names = list(dict.fromkeys(k for row in rows for k in row))
  return {
      k: np.asarray([row.get(k, np.nan) for row in rows], np.float64)
      for k in names
  }


def _rows_to_arrays(rows: Sequence[Mapping[str, float]]) -> dict[str, Any]:
  return {f'logs/{k}': v for k, v in _columns(rows).items()} | {
      'log_columns': run_checkpoints.json_array(list(_columns(rows)))
  }


def _rows_from_arrays(arrays: Mapping[str, np.ndarray]) -> list[dict]:
  names = run_checkpoints.from_json_array(arrays['log_columns'])
  columns = {k: arrays[f'logs/{k}'] for k in names}
  num = len(columns[names[0]]) if names else 0
  rows = []
  for i in range(num):
    rows.append(
        {k: float(v[i]) for k, v in columns.items() if not np.isnan(v[i])}
    )
  return rows


def _program_config(config: TrainConfig) -> TrainConfig:
  """`config` with the fields the programs do not depend on reset."""
  defaults = TrainConfig()
  return config.replace(
      num_steps=defaults.num_steps,
      checkpoint_every=defaults.checkpoint_every,
      keep_checkpoints=defaults.keep_checkpoints,
      steps_per_chunk=defaults.steps_per_chunk,
      eval_every=defaults.eval_every,
  )


@functools.lru_cache(maxsize=4)
def _trainer_for(config: TrainConfig, seeds: tuple[int, ...]) -> Trainer:
  """A `Trainer` (its compiled programs) shared by runs of one setting.

  E.g. a run and its resumption with a larger `num_steps` compile once.
  """
  return Trainer(config, seeds)


def run_train(
    config: TrainConfig,
    *,
    num_seeds: int = 1,
    update_rule_params: types.MetaParams | None = None,
    progress_fn: progress.ProgressFn | None = None,
    log_fn: LogFn | None = None,
    checkpoint_dir: files.PathLike | None = None,
    resume: bool = False,
    handle_interrupts: bool = False,
) -> TrainResult:
  """Trains `num_seeds` agents (seeds `config.seed`, `config.seed + 1`, ...).

  Args:
    config: the run's settings, e.g. `preset('paper', env=...)`.
    num_seeds: agents trained together, `vmap`ped in one program.
    update_rule_params: the rule's parameters; None loads them from
      `config.update_rule_params` (Disco103 by default; placeholders for
      the baselines).
    progress_fn: called after each chunk with the iterations done and the
      first seed's log row.
    log_fn: called as `log_fn(seed, row)` with each seed's row of each chunk
      (see `TrainResult.logs`). Not called for rows restored from a
      checkpoint.
    checkpoint_dir: if set, checkpoints go there (see
      `config.checkpoint_every`).
    resume: continue from the newest checkpoint in `checkpoint_dir` (or
      start afresh if there is none). Only `train_config.EXECUTION_FIELDS`
      may differ from the checkpoint's config.
    handle_interrupts: the first Ctrl-C finishes the current chunk,
      checkpoints and raises `KeyboardInterrupt`.

  Returns:
    The `TrainResult`, rows restored from a checkpoint included.

  Raises:
    ValueError: `resume` without `checkpoint_dir`, or update-rule
      parameters that do not fit the rule (`files.TreeMismatchError`,
      naming the leaves).
    checkpoint.CheckpointError: checkpoints present without `resume`, of
      another run, or corrupt.
  """
  if resume and checkpoint_dir is None:
    raise ValueError('resume=True needs a checkpoint_dir.')
  seeds = tuple(config.seed + i for i in range(int(num_seeds)))
  if update_rule_params is None:
    trainer = _trainer_for(_program_config(config), seeds)
  else:
    trainer = Trainer(config, seeds, update_rule_params)
  root = None
  if checkpoint_dir is not None:
    root = pathlib.Path(checkpoint_dir).expanduser()
  checkpoints = run_checkpoints.RunCheckpoints(
      root,
      config,
      seeds,
      trainer.setup.update_rule_params,
      trainer.num_devices,
      kind=CHECKPOINT_KIND,
      execution_fields=EXECUTION_FIELDS,
  )
  with interrupts.deferred_interrupts(
      'chunk', enabled=handle_interrupts
  ) as interrupted:
    return trainer.run(
        config,
        checkpoints=checkpoints,
        resume=resume,
        log_fn=log_fn,
        progress_fn=progress_fn,
        interrupted=interrupted,
    )
