"""The trainer's per-device program: initialisation, chunks, evaluation.

Functions of one device and one seed, run inside `pmap` over
`devices.AXIS_NAME` (and `vmap` over seeds) by `disco.train.loop.Trainer`.
Every random draw is tied to a global index, never to a device, so that D
devices compute what one does, up to float rounding.
"""

from collections.abc import Callable, Sequence
import functools
from typing import Any

import chex
import haiku as hk
import jax
import jax.numpy as jnp

from disco import acting
from disco import devices as devices_lib
from disco import frame_stack
from disco import learner
from disco import precision
from disco import replay as replay_lib
from disco import reward_scale as reward_scale_lib
from disco import truncation as truncation_lib
from disco import types
from disco import unrolling
from disco.environments import base as base_env
from disco.train import evaluation
from disco.train import lanes
from disco.train.config import TrainConfig
from disco.train.state import TrainState
from disco.train.state import achievement_names

_AXIS = devices_lib.AXIS_NAME


class Program:
  """One device's and seed's training program, as named steps.

  An iteration acts (`act`: a rollout of every environment), stores it
  (`store`), and, past the warm-up, updates the agent (`update`: learner
  steps, each on a batch that `sample` puts together); `chunk` runs
  iterations in a loop and `evaluate` plays evaluation episodes. Each
  step is a pure function of arrays, traced inside `pmap` and `vmap`.
  """

  def __init__(
      self,
      config: TrainConfig,
      setup: learner.Setup,
      eval_env: base_env.Environment,
  ):
    self.config = config
    self.setup = setup
    self.env, self.agent = setup.env, setup.agent
    self.eval_env = eval_env
    self.num_devices = len(setup.devices)
    self.num_local = config.num_envs // self.num_devices
    self.num_learner_steps = config.learner_steps_per_step
    self.achievements = achievement_names(self.env)
    stacked = config.frame_stack > 1
    learn_fn = learner.make_learn_fn(
        setup,
        final_observations=frame_stack.final_observations if stacked else None,
    )
    unrolled = unroll_on(config.unroll_inner_scans, setup.devices)
    if unrolled:
      learn_fn = unrolling.unroll_scans(learn_fn)
    self.learn_fn = learn_fn
    self.pack = frame_stack.pack if stacked else _identity
    # A batch's final stacks are made where the learner reads them.
    self.unpack = (
        functools.partial(frame_stack.unpack, final_stacks=False)
        if stacked
        else _identity
    )
    if config.replay_per_slot and self.num_devices != 1:
      raise ValueError('replay_per_slot runs on one device per seed.')
    self.slots = None
    if config.spread_fresh:
      if self.num_devices != 1:
        raise ValueError('spread_fresh runs on one device per seed.')
      self.slots = replay_lib.spread_fresh_slots(
          config.num_envs, self.num_learner_steps
      )
    self.unroll = functools.partial(
        acting.unroll_jittable_actor,
        env=self.env,
        rollout_len=config.rollout_len,
        actor_step_fn=self.actor_step,
        truncation=(
            config.truncation == truncation_lib.BOOTSTRAP
            and truncation_lib.reports_truncation(self.env)
        ),
        unroll_inner_scans=unrolled,
    )
    self.eval_step = eval_env.step
    if unrolled:
      self.eval_step = unrolling.unroll_scans(self.eval_step)

  def actor_step(
      self, params: hk.Params, key: chex.PRNGKey, timestep: Any, state: Any
  ) -> Any:
    """The agent's step, each environment with its own key."""
    keys = lanes.lane_keys(key, lanes.local_lanes(timestep.reward.shape[0]))
    return self.agent.actor_step(params, keys, timestep, state)

  def init(self, seed_key: chex.PRNGKey) -> TrainState:
    """The state before the first iteration: reset, fresh agent, no replay."""
    env_key = jax.random.split(seed_key, 3)[0]
    env_state, timestep = devices_lib.device_slice(
        self.env.reset(env_key), self.num_devices
    )
    return self.init_with(seed_key, env_state, timestep, self.unroll)

  def init_with(
      self, seed_key: chex.PRNGKey, env_state: Any, timestep: Any, unroll: Any
  ) -> TrainState:
    """`init` with its episodes given; `unroll`'s rollout shapes the replay."""
    _, agent_key, loop_key = jax.random.split(seed_key, 3)
    learner_state = self.agent.initial_learner_state(agent_key)
    actor_state = self.agent.initial_actor_state(agent_key)
    example, *_ = jax.eval_shape(
        unroll, learner_state.params, actor_state, timestep, env_state,
        loop_key,
    )  # fmt: skip
    return TrainState(
        learner_state=learner_state,
        value_state=learner.init_value_state(self.setup, agent_key),
        actor_state=actor_state,
        env_state=env_state,
        timestep=timestep,
        episode_returns=jnp.zeros((self.num_local,), jnp.float32),
        replay=replay_lib.init_replay_state(
            jax.eval_shape(self.pack, acting.trim_agent_outs(example)),
            self.config.buffer_capacity // self.num_devices,
        ),
        rng=loop_key,
    )

  def act(self, state: TrainState, key: chex.PRNGKey) -> tuple[Any, ...]:
    """A rollout of every environment with the current parameters.

    Returns:
      (rollout [T, N / D, ...], actor state, timestep, environment state).
    """
    return self.unroll(
        state.learner_state.params,
        state.actor_state,
        state.timestep,
        state.env_state,
        key,
    )

  def account(
      self, state: TrainState, rollout: types.ActorRollout
  ) -> tuple[Any, chex.Array, tuple[chex.Array, chex.Array]]:
    """The rollout's returns, in the environment's units, then its scale.

    Returns:
      (rollout, its agent outputs trimmed and rewards scaled; the running
      episodes' returns [N / D]; the total return and count of the
      episodes that ended).
    """
    episode_returns, returns = acting.accumulate_rewards(
        state.episode_returns, rollout.rewards, rollout.discounts
    )
    ended = acting.episode_statistics(returns, rollout.discounts)
    rollout = acting.trim_agent_outs(rollout)
    rollout = reward_scale_lib.scale_rewards(rollout, self.config.reward_scale)
    return rollout, episode_returns, ended

  def store(
      self, replay: replay_lib.ReplayState, rollout: types.ActorRollout
  ) -> tuple[Any, replay_lib.ReplayState]:
    """(the rollout packed: stacked frames once each, the buffer with it)."""
    packed = self.pack(rollout)
    return packed, replay_lib.add_to_replay(replay, packed)

  def fresh_source(self, rollout: Any) -> Any:
    """What `sample` takes fresh trajectories from.

    For the default mix, [T, N / D, ...] -> [T, N / (D K), K, ...]: step k
    takes [:, :, k]; the other mixes pick from the rollout itself.
    """
    config = self.config
    if config.spread_fresh or config.replay_per_slot:
      return rollout
    return jax.tree.map(
        lambda x: x.reshape(
            x.shape[:1] + (-1, self.num_learner_steps) + x.shape[2:]
        ),
        rollout,
    )

  def sample(
      self,
      source: Any,
      replay: replay_lib.ReplayState,
      k: chex.Array,
      key: chex.PRNGKey,
  ) -> Any:
    """Learner step k's batch [T, B / D, ...], its stacks unpacked.

    `source` is `fresh_source(packed rollout)`; the mix is the config's
    (`disco.replay.batches`).
    """
    config = self.config
    batch_size, num_envs = config.learner_batch_size, config.num_envs
    if config.spread_fresh:
      batch = replay_lib.spread_fresh(
          source, replay, key, self.slots, k, batch_size, num_envs
      )
    elif config.replay_per_slot:
      batch = replay_lib.each_slot_drawn(
          source, replay, key, batch_size, config.replay_fraction, num_envs
      )
    else:
      fresh = config.fresh_per_batch // self.num_devices
      batch = replay_lib.fresh_then_replayed(
          jax.tree.map(lambda x: x[:, :, k], source) if fresh else None,
          replay,
          key,
          config.replay_per_batch,
          num_envs,
          self.num_devices,
          _AXIS,
      )
    return self.unpack(batch)

  def update(
      self,
      state: TrainState,
      rollout: Any,
      replay: replay_lib.ReplayState,
      rule_params: types.MetaParams,
      key: chex.PRNGKey,
  ) -> tuple[Any, Any, dict[str, jax.Array]]:
    """The iteration's learner steps, each on a batch from `sample`.

    `rollout` (packed) and the replay hold stacked frames once each; a
    batch is put together packed and its stacks unpacked once.

    Returns:
      (learner state, value state, the steps' mean logs over devices).
    """
    source = self.fresh_source(rollout)

    def step(carry: tuple[Any, Any], k: chex.Array) -> tuple[Any, Any]:
      learner_state, value_state = carry
      step_key = jax.random.fold_in(key, k)
      sample_key, learner_key = jax.random.split(step_key)
      batch = self.sample(source, replay, k, sample_key)
      learner_state, value_state, logs = self.learn_fn(
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
        jnp.arange(self.num_learner_steps),
    )
    logs = jax.tree.map(lambda x: jnp.mean(x, axis=0), logs)
    return learner_state, value_state, jax.lax.pmean(logs, _AXIS)

  def iteration(
      self, state: TrainState, rule_params: types.MetaParams, learn_now: bool
  ) -> tuple[TrainState, dict[str, Any]]:
    """act, store, and with `learn_now` update; outputs summed over devices."""
    _, rollout_key, _ = jax.random.split(state.rng, 3)
    acted = self.act(state, rollout_key)
    return self.absorb(state, *acted, rule_params, learn_now)

  def absorb(
      self,
      state: TrainState,
      rollout: types.ActorRollout,
      actor_state: Any,
      timestep: Any,
      env_state: Any,
      rule_params: types.MetaParams,
      learn_now: bool,
  ) -> tuple[TrainState, dict[str, Any]]:
    """The rest of an iteration, given what `act` returns (or a host's)."""
    rng, _, learner_key = jax.random.split(state.rng, 3)
    rollout, episode_returns, (total, count) = self.account(state, rollout)
    packed, replay = self.store(state.replay, rollout)
    outputs = dict(
        total_return=jax.lax.psum(total.astype(jnp.float32), _AXIS),
        num_episodes=jax.lax.psum(count.astype(jnp.float32), _AXIS),
    )
    if self.achievements:
      # [A] the episodes ended in this rollout that unlocked each.
      unlocked = self.env.achievement_counts(
          env_state
      ) - self.env.achievement_counts(state.env_state)
      outputs['unlocked'] = jax.lax.psum(jnp.sum(unlocked, axis=0), _AXIS)
    learner_state, value_state = state.learner_state, state.value_state
    if learn_now:
      learner_state, value_state, outputs['logs'] = self.update(
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
      self,
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
        functools.partial(self.iteration, learn_now=learn), state, rule_params
    )
    if rows:
      buffers = jax.tree.map(
          lambda s: jnp.zeros((rows,) + s.shape, s.dtype), example
      )

      def keep(i: chex.Array, carry: tuple[Any, Any]) -> tuple[Any, Any]:
        state, buffers = carry
        state, outputs = self.iteration(state, rule_params, learn)
        return state, jax.tree.map(
            lambda buffer, x: buffer.at[i].set(x), buffers, outputs
        )

      return jax.lax.fori_loop(0, num_iterations, keep, (state, buffers))
    sums = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), example)

    def body(_: chex.Array, carry: tuple[Any, Any]) -> tuple[Any, Any]:
      state, sums = carry
      state, outputs = self.iteration(state, rule_params, learn)
      return state, jax.tree.map(jnp.add, sums, outputs)

    # A traced trip count: chunks of any length share one program.
    return jax.lax.fori_loop(0, num_iterations, body, (state, sums))

  def evaluate(self, params: hk.Params, key: chex.PRNGKey) -> dict[str, Any]:
    """One episode in each evaluation environment: return sum and count."""
    return evaluation.play_episodes(
        self.agent,
        self.eval_env.reset,
        self.eval_step,
        params,
        key,
        num_local=self.config.eval_envs // self.num_devices,
        num_devices=self.num_devices,
        max_steps=self.config.eval_max_steps,
    )


def unroll_on(unroll_inner_scans: bool | None, devices: Sequence[Any]) -> bool:
  """`TrainConfig.unroll_inner_scans` on `devices`: None unrolls off CPUs.

  On a GPU unrolling cut a `crafter` update of Disco103 from 5.58 to 2.30 ms
  (H200); on a CPU it neither saves nor costs (docs/results/gpu.md).
  """
  if unroll_inner_scans is not None:
    return unroll_inner_scans
  return any(device.platform != 'cpu' for device in devices)


def _identity(tree: Any) -> Any:
  return tree


def per_device_fns(
    config: TrainConfig, setup: learner.Setup, eval_env: base_env.Environment
) -> tuple[Callable[..., Any], ...]:
  """(init, chunk, evaluate) of one device and seed, in `compute_dtype`."""
  program = Program(config, setup, eval_env)
  return tuple(
      precision.compute_in(config.compute_dtype, fn)
      for fn in (program.init, program.chunk, program.evaluate)
  )
