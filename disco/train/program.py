"""The trainer's per-device program: initialisation, chunks, evaluation.

Functions of one device and one seed, run inside `pmap` over
`devices.AXIS_NAME` (and `vmap` over seeds) by `disco.train.loop.Trainer`.
Every random draw is tied to a global index, never to a device, so that D
devices compute what one does, up to float rounding.
"""

from collections.abc import Callable
import functools
import math
from typing import Any

import chex
import dm_env
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from disco import acting
from disco import agent as agent_lib
from disco import devices as devices_lib
from disco import frame_stack
from disco import learner
from disco import precision
from disco import replay as replay_lib
from disco import truncation as truncation_lib
from disco import types
from disco import unrolling
from disco.environments import base as base_env
from disco.train.config import TrainConfig

_AXIS = devices_lib.AXIS_NAME


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


def spread_fresh_slots(num_envs: int, num_steps: int) -> np.ndarray:
  """[K, S] the rollout trajectory each learner step's fresh slot s takes.

  Trajectory j goes to step floor(j K / N), so N trajectories spread evenly
  over K steps, each getting floor or ceil of N / K; -1 marks a slot left
  to a replayed trajectory. S = ceil(N / K).
  """
  steps = np.arange(num_envs) * num_steps // num_envs
  slots = np.full((num_steps, math.ceil(num_envs / num_steps)), -1, np.int32)
  for j, k in enumerate(steps):
    slots[k, np.argmin(slots[k] >= 0)] = j
  return slots


def achievement_names(env: base_env.Environment) -> tuple[str, ...]:
  """The achievements `env` counts (Craftax-Classic's), else ()."""
  if not hasattr(env, 'achievement_counts'):
    return ()
  return tuple(getattr(env, 'achievement_names', ()))


def per_device_fns(
    config: TrainConfig, setup: learner.Setup, eval_env: base_env.Environment
) -> tuple[Callable[..., Any], ...]:
  """(init, chunk, evaluate) of one device and seed, in `compute_dtype`."""
  env, agent = setup.env, setup.agent
  num_devices = len(setup.devices)
  num_envs = config.num_envs
  num_local = num_envs // num_devices
  fresh = config.fresh_per_batch // num_devices
  replayed = config.replay_per_batch
  num_learner_steps = config.learner_steps_per_step
  stacked = config.frame_stack > 1
  learn_fn = learner.make_learn_fn(
      setup,
      final_observations=frame_stack.final_observations if stacked else None,
  )
  if config.unroll_inner_scans:
    learn_fn = unrolling.unroll_scans(learn_fn)
  achievements = achievement_names(env)
  pack = frame_stack.pack if stacked else lambda rollout: rollout
  # A batch's final stacks are made where the learner reads them.
  unpack = (
      functools.partial(frame_stack.unpack, final_stacks=False)
      if stacked
      else lambda rollout: rollout
  )
  if config.replay_per_slot and num_devices != 1:
    raise ValueError('replay_per_slot runs on one device per seed.')
  if config.spread_fresh:
    if num_devices != 1:
      raise ValueError('spread_fresh runs on one device per seed.')
    # [K, S] fresh slots; the first `whole` of each step's are always taken.
    slots = spread_fresh_slots(num_envs, num_learner_steps)
    whole = int(np.min(np.sum(slots >= 0, axis=1)))
    replayed = config.learner_batch_size - whole

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
      truncation=(
          config.truncation == truncation_lib.BOOTSTRAP
          and truncation_lib.reports_truncation(env)
      ),
      unroll_inner_scans=config.unroll_inner_scans,
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
            jax.eval_shape(pack, acting.trim_agent_outs(example)),
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
    """The iteration's learner steps, each on its fresh part + replay.

    `rollout` and the replay hold stacked frames packed (each frame once);
    a batch is put together packed and its stacks unpacked once.
    """
    if not (config.spread_fresh or config.replay_per_slot):
      # [T, N / D, ...] -> [T, N / (D K), K, ...]: step k takes [:, :, k].
      grouped = jax.tree.map(
          lambda x: x.reshape(
              x.shape[:1] + (-1, num_learner_steps) + x.shape[2:]
          ),
          rollout,
      )

    def batch_of(k: chex.Array, sample_key: chex.PRNGKey) -> Any:
      """Step k's batch: its fresh part, then replayed trajectories."""
      if config.spread_fresh:
        return unpack(spread_batch_of(k, sample_key))
      if config.replay_per_slot:
        return unpack(drawn_batch(sample_key))
      parts = []
      if fresh:
        parts.append(jax.tree.map(lambda x: x[:, :, k], grouped))
      if replayed:
        parts.append(
            _gather_replayed(
                replay, sample_key, replayed, num_envs, num_devices
            )
        )
      return unpack(
          jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=1), *parts)
      )

    def drawn_batch(sample_key: chex.PRNGKey) -> Any:
      """Each slot replayed with probability `replay_fraction`, else fresh."""
      batch_size = config.learner_batch_size
      draw_key, pick_key, coin_key = jax.random.split(sample_key, 3)
      draws = _gather_replayed(replay, draw_key, batch_size, num_envs, 1)
      picks = jax.random.randint(pick_key, (batch_size,), 0, num_envs)
      fresh_draws = jax.tree.map(lambda x: jnp.take(x, picks, axis=1), rollout)
      replayed_slot = jax.random.bernoulli(
          coin_key, config.replay_fraction, (batch_size,)
      )

      def merge(fresh_x: chex.Array, draw_x: chex.Array) -> chex.Array:
        mask = replayed_slot.reshape((1, -1) + (1,) * (draw_x.ndim - 2))
        return jnp.where(mask, draw_x, fresh_x)

      return jax.tree.map(merge, fresh_draws, draws)

    def spread_batch_of(k: chex.Array, sample_key: chex.PRNGKey) -> Any:
      """Step k's spread batch: fresh slots, a replayed one where empty."""
      draws = _gather_replayed(replay, sample_key, replayed, num_envs, 1)
      mine = jnp.asarray(slots)[k]  # [S]
      picked = jax.tree.map(
          lambda x: jnp.take(x, jnp.maximum(mine, 0), axis=1), rollout
      )
      # Slots past `whole` take the next draws where they are empty; the
      # draws they displace are not used.
      extra = slots.shape[1] - whole

      def merge(fresh_x: chex.Array, draw_x: chex.Array) -> chex.Array:
        taken = (mine >= 0).reshape((1, -1) + (1,) * (fresh_x.ndim - 2))
        head = jnp.where(
            taken[:, whole:], fresh_x[:, whole:], draw_x[:, :extra]
        )
        return jnp.concatenate(
            [fresh_x[:, :whole], head, draw_x[:, extra:]], axis=1
        )

      return jax.tree.map(merge, picked, draws)

    def step(carry: tuple[Any, Any], k: chex.Array) -> tuple[Any, Any]:
      learner_state, value_state = carry
      step_key = jax.random.fold_in(key, k)
      sample_key, learner_key = jax.random.split(step_key)
      batch = batch_of(k, sample_key)
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
    packed = pack(rollout)
    replay = replay_lib.add_to_replay(state.replay, packed)
    outputs = dict(
        total_return=jax.lax.psum(total.astype(jnp.float32), _AXIS),
        num_episodes=jax.lax.psum(count.astype(jnp.float32), _AXIS),
    )
    if achievements:
      # [A] the episodes ended in this rollout that unlocked each.
      unlocked = env.achievement_counts(env_state) - env.achievement_counts(
          state.env_state
      )
      outputs['unlocked'] = jax.lax.psum(jnp.sum(unlocked, axis=0), _AXIS)
    learner_state, value_state = state.learner_state, state.value_state
    if learn_now:
      learner_state, value_state, outputs['logs'] = learn(
          state, packed, replay, rule_params, learner_key
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
      rows: int,
  ) -> tuple[TrainState, dict[str, Any]]:
    """Runs `num_iterations` (traced) iterations.

    With `rows` 0 their outputs are summed; otherwise each iteration's are
    kept, in leaves [rows] (entries past `num_iterations` stay 0).
    """
    _, example = jax.eval_shape(
        functools.partial(iteration, learn_now=learn), state, rule_params
    )
    if rows:
      buffers = jax.tree.map(
          lambda s: jnp.zeros((rows,) + s.shape, s.dtype), example
      )

      def keep(i: chex.Array, carry: tuple[Any, Any]) -> tuple[Any, Any]:
        state, buffers = carry
        state, outputs = iteration(state, rule_params, learn)
        return state, jax.tree.map(
            lambda buffer, x: buffer.at[i].set(x), buffers, outputs
        )

      return jax.lax.fori_loop(0, num_iterations, keep, (state, buffers))
    sums = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), example)

    def body(_: chex.Array, carry: tuple[Any, Any]) -> tuple[Any, Any]:
      state, sums = carry
      state, outputs = iteration(state, rule_params, learn)
      return state, jax.tree.map(jnp.add, sums, outputs)

    # A traced trip count: chunks of any length share one program.
    return jax.lax.fori_loop(0, num_iterations, body, (state, sums))

  eval_local = config.eval_envs // num_devices
  eval_step = eval_env.step
  if config.unroll_inner_scans:
    eval_step = unrolling.unroll_scans(eval_step)

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
      env_state, timestep = eval_step(env_state, actor_timestep.actions)
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
