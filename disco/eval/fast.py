"""The fast path: actor, replay buffer and learner fused on the device.

The same update-rule maths as the faithful loop (the same learner step,
`learner.make_learn_fn`, with the faithful loop's key splits), with the
replay buffer on the device (`replay.ReplayState`, sampled with JAX's
generator, so its curve is a different sample of the same process), jitted
initialisation, chunks of iterations in one jitted loop (one host round
trip each), and several seeds `vmap`ped together. Two programs: one for the
iterations before learning starts (actor and replay only) and one for the
others; a chunk never mixes them. The whole carry (`LoopState`, all seeds)
is the checkpoint.
"""

from collections.abc import Callable, Mapping, Sequence
import functools
import time
from typing import Any

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from disco import acting
from disco import agent as agent_lib
from disco import checkpoint as checkpoint_lib
from disco import devices as devices_lib
from disco import learner
from disco import replay
from disco import run_checkpoints
from disco import types
from disco.eval import history as eval_history

_AXIS = devices_lib.AXIS_NAME

# (learner state, value state, actor state, replay state, rule params,
# learner key, sample key) -> (learner state, value state, scalar logs).
LearnFromReplayFn = Callable[..., tuple[Any, Any, dict[str, jax.Array]]]


@chex.dataclass(frozen=True)
class LoopState:
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


def make_learn_from_replay(setup: learner.Setup) -> LearnFromReplayFn:
  """The fast path's learner step: sample on the device, then learn.

  Per device, inside `pmap`: draws `learner_batch_size` trajectories with
  `sample_key` and takes the learner step both loops share on them.
  Jitted so that its trace is cached (`chunk` traces it once for the
  structure of its logs and then reuses that trace).
  """
  config = setup.config
  learn_fn = learner.make_learn_fn(setup)

  @jax.jit
  def learn_from_replay(
      learner_state: agent_lib.LearnerState,
      value_state: types.ValueState | None,
      actor_state: hk.State,
      replay_state: replay.ReplayState,
      update_rule_params: types.MetaParams,
      learner_rng: chex.PRNGKey,
      sample_key: chex.PRNGKey,
  ) -> tuple[Any, Any, dict[str, jax.Array]]:
    batch, _ = replay.sample_from_replay(
        replay_state, sample_key, config.learner_batch_size, batch_axis=1
    )
    return learn_fn(
        learner_rng,
        batch,
        learner_state,
        actor_state,
        update_rule_params,
        value_state,
    )

  return learn_from_replay


def make_fast_fns(
    setup: learner.Setup,
) -> tuple[Callable[..., LoopState], Callable[..., Any]]:
  """The fast path's per-device, per-seed `init` and `chunk` functions."""
  config, env, agent = setup.config, setup.env, setup.agent
  num_devices = setup.num_devices
  learn_from_replay = make_learn_from_replay(setup)
  unroll = learner.unroll_fn(setup)

  def init(seed_key: chex.PRNGKey, sample_key: chex.PRNGKey) -> LoopState:
    env_state, timestep = devices_lib.device_slice(
        env.reset(seed_key), num_devices
    )
    learner_state = agent.initial_learner_state(seed_key)
    actor_state = agent.initial_actor_state(seed_key)
    example, *_ = jax.eval_shape(
        unroll, learner_state.params, actor_state, timestep, env_state, seed_key
    )
    example = learner.behaviour_outs(config, example)
    return LoopState(
        learner_state=learner_state,
        value_state=learner.init_value_state(setup, seed_key),
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

  def one_iteration(
      state: LoopState, update_rule_params: types.MetaParams, learn: bool
  ) -> tuple[LoopState, dict[str, Any]]:
    index = jax.lax.axis_index(_AXIS)
    # The faithful loop's splits, each device taking its own keys.
    rng, actor_rngs, learner_rngs = acting.split_loop_keys(
        state.rng, num_devices
    )
    rollout, actor_state, timestep, env_state = unroll(
        state.learner_state.params,
        state.actor_state,
        state.timestep,
        state.env_state,
        actor_rngs[index],
    )
    acc_rewards, returns = acting.accumulate_rewards(
        state.acc_rewards, rollout.rewards, rollout.discounts
    )
    total, count = acting.episode_statistics(returns, rollout.discounts)
    replay_state = replay.add_to_replay(
        state.replay, learner.behaviour_outs(config, rollout), batch_axis=1
    )
    sample_rng, sample_key = jax.random.split(state.sample_rng)
    outputs = dict(
        total_return=jax.lax.psum(total.astype(jnp.float32), _AXIS),
        num_episodes=jax.lax.psum(count.astype(jnp.float32), _AXIS),
    )
    learner_state, value_state = state.learner_state, state.value_state
    if learn:
      learner_state, value_state, logs = learn_from_replay(
          learner_state,
          value_state,
          actor_state,
          replay_state,
          update_rule_params,
          learner_rngs[index],
          sample_key,
      )
      outputs['logs'] = jax.lax.pmean(logs, _AXIS)
    new_state = LoopState(
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
      state: LoopState,
      update_rule_params: types.MetaParams,
      num_iterations: chex.Array,
      *,
      learn: bool,
  ) -> tuple[LoopState, dict[str, Any]]:
    """Runs `num_iterations` (traced, <= steps_per_chunk) iterations."""
    shapes = dict(total_return=jnp.float32, num_episodes=jnp.float32)
    if learn:
      *_, log_shapes = jax.eval_shape(
          learn_from_replay,
          state.learner_state,
          state.value_state,
          state.actor_state,
          state.replay,
          update_rule_params,
          state.rng,
          state.sample_rng,
      )
      shapes['logs'] = jax.tree.map(lambda s: s.dtype, log_shapes)
    # One row per iteration of the chunk; rows past `num_iterations` stay 0.
    buffers = jax.tree.map(
        lambda dtype: jnp.zeros((config.steps_per_chunk,), dtype), shapes
    )

    def body(i: chex.Array, carry: tuple[LoopState, Any]) -> tuple[Any, Any]:
      state, buffers = carry
      state, outputs = one_iteration(state, update_rule_params, learn)
      buffers = jax.tree.map(
          lambda buffer, value: buffer.at[i].set(value), buffers, outputs
      )
      return state, buffers

    # A traced trip count (not `scan` over a fixed length): chunks of any
    # length, e.g. the last one, share one compiled program, and no `cond`
    # is needed (a `cond` around the learner doubles the compile time).
    return jax.lax.fori_loop(0, num_iterations, body, (state, buffers))

  return init, chunk


class FastRun:
  """The fast path's programs for `seeds` (vmapped when there are several)."""

  def __init__(self, setup: learner.Setup, seeds: Sequence[int]):
    self.setup = setup
    self.seeds = [int(s) for s in seeds]
    self._batched = len(self.seeds) > 1
    init, chunk = make_fast_fns(setup)
    self._init = jax.pmap(
        jax.vmap(init) if self._batched else init,
        axis_name=_AXIS,
        devices=setup.devices,
    )
    self._chunks = {
        learn: self._chunk_program(chunk, learn) for learn in (False, True)
    }

  def _chunk_program(self, chunk: Callable[..., Any], learn: bool) -> Any:
    fn = functools.partial(chunk, learn=learn)
    if self._batched:
      fn = jax.vmap(fn, in_axes=(0, None, None))
    return jax.pmap(
        fn,
        axis_name=_AXIS,
        devices=self.setup.devices,
        in_axes=(0, 0, None),
        donate_argnums=(0,),
    )

  def _keys(self) -> tuple[np.ndarray, np.ndarray]:
    """Per device (and seed): the seeds' keys and their sampling keys."""
    buffer_key = jax.random.PRNGKey(self.setup.config.buffer_seed)

    def _stack(key_fn: Callable[[int], jax.Array]) -> np.ndarray:
      keys = np.stack([np.asarray(key_fn(s)) for s in self.seeds])
      if not self._batched:
        keys = keys[0]
      return np.broadcast_to(keys, (self.setup.num_devices,) + keys.shape)

    return _stack(jax.random.PRNGKey), _stack(
        lambda s: jax.random.fold_in(buffer_key, s)
    )

  def initial_state(self) -> LoopState:
    return self._init(*self._keys())

  def restore_state(self, arrays: Mapping[str, np.ndarray]) -> LoopState:
    """The `LoopState` saved under 'loop', placed as `initial_state` is."""
    template = jax.eval_shape(self._init, *self._keys())
    restored = checkpoint_lib.restore_tree(template, arrays, 'loop')
    _, placed = devices_lib.place_like_pmap(
        self.setup.devices, sharded=restored
    )
    return placed

  def num_warmup_iterations(self) -> int:
    """How many iterations only act, before the first learner step.

    After iteration i (from 0) the buffer holds (i + 1) * B / D
    trajectories, and the iteration learns if that is at least
    `learning_starts`.
    """
    config = self.setup.config
    first = -(-config.learning_starts // self.setup.envs_per_device) - 1
    return min(config.num_steps, first)

  def run(
      self,
      recorders: Sequence[eval_history.Recorder],
      checkpoints: run_checkpoints.RunCheckpoints,
      *,
      resume: bool,
      interrupted: Callable[[], bool],
  ) -> list[eval_history.EvalHistory]:
    """Runs (or resumes) the seeds up to `num_steps`; their histories.

    Checkpoints at the first chunk end at or after each multiple of
    `checkpoint_every` and at the end; when `interrupted()` turns True,
    checkpoints after the chunk and raises `KeyboardInterrupt`.
    """
    config = self.setup.config
    ckpt = checkpoints.latest(resume)
    step = 0
    if ckpt is None:
      state = self.initial_state()
    else:
      state = self.restore_state(ckpt.arrays)
      for i, recorder in enumerate(recorders):
        recorder.restore(ckpt.arrays, f'history/{i}')
      step = ckpt.step
    update_rule_params, _ = devices_lib.place_like_pmap(
        self.setup.devices, replicated=self.setup.update_rule_params
    )

    def _arrays() -> dict[str, np.ndarray]:
      arrays = checkpoint_lib.flatten_tree(state, 'loop')
      for i, recorder in enumerate(recorders):
        arrays.update(recorder.to_arrays(f'history/{i}'))
      return arrays

    warmup = self.num_warmup_iterations()
    while step < config.num_steps:
      learn = step >= warmup
      num = min(
          config.steps_per_chunk, (config.num_steps if learn else warmup) - step
      )
      state, outputs = self._chunks[learn](
          state, update_rule_params, np.int32(num)
      )
      self._record(recorders, outputs, step, num, learn)
      previous, step = step, step + num
      if interrupted():
        checkpoints.save(step, _arrays)
        raise KeyboardInterrupt
      checkpoints.save(step, _arrays, due_since=previous)
    checkpoints.save(step, _arrays)

    params = devices_lib.first_copy(state.learner_state.params)
    return [
        recorder.history(
            jax.tree.map(lambda x, s=s: x[s], params)
            if self._batched
            else params
        )
        for s, recorder in enumerate(recorders)
    ]

  def _record(
      self,
      recorders: Sequence[eval_history.Recorder],
      outputs: Mapping[str, Any],
      step: int,
      num: int,
      learn: bool,
  ) -> None:
    """Records a chunk's `num` iterations, from iteration `step` + 1 on."""
    outputs = devices_lib.first_copy(outputs)
    now = time.perf_counter()
    if not self._batched:
      outputs = jax.tree.map(lambda x: x[None], outputs)
    steps_per_iteration = (
        self.setup.config.rollout_len * self.setup.config.num_envs
    )
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
            now=now,
        )
