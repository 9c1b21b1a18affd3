"""The reference's evaluation loop, iteration by iteration.

`pmap` over up to `num_envs` devices, the reference's key splits and a
host-side numpy replay buffer, so that the default config reproduces the
reference's curve; checkpoints (through `disco.runtime`) resume exactly.
"""

from collections.abc import Callable
import dataclasses
import functools
from typing import Any

import chex
import haiku as hk
import jax
import numpy as np

from disco import acting
from disco import agent as agent_lib
from disco import checkpoint as checkpoint_lib
from disco import devices as devices_lib
from disco import learner
from disco import replay
from disco import reward_scale
from disco import run_checkpoints
from disco import runtime
from disco import types
from disco.eval import history as eval_history

_AXIS = devices_lib.AXIS_NAME


@dataclasses.dataclass(frozen=True)
class FaithfulFns:
  """The faithful loop's `pmap`ped functions, reusable across seeds."""

  learn: Callable[..., Any]
  act: Callable[..., Any] | None  # Jittable environments.
  actor_step: Callable[..., Any] | None  # Host environments.
  accumulate: Callable[..., Any] | None  # Host environments.

  @classmethod
  def build(cls, setup: learner.Setup) -> 'FaithfulFns':
    config, agent, devices = setup.config, setup.agent, setup.devices
    learn = jax.pmap(
        learner.make_learn_fn(setup),
        axis_name=_AXIS,
        devices=devices,
        donate_argnums=(2, 5),
    )
    if not setup.jittable:
      return cls(
          learn=learn,
          act=None,
          actor_step=jax.pmap(
              agent.actor_step, axis_name=_AXIS, devices=devices
          ),
          accumulate=jax.jit(jax.vmap(acting.accumulate_rewards)),
      )

    unroll = learner.unroll_fn(setup)

    def act(
        params: hk.Params,
        actor_state: hk.State,
        timestep: types.EnvironmentTimestep,
        env_state: Any,
        rng: chex.PRNGKey,
        acc_rewards: chex.Array,
    ) -> tuple[Any, ...]:
      rollout, actor_state, timestep, env_state = unroll(
          params, actor_state, timestep, env_state, rng
      )
      acc_rewards, returns = acting.accumulate_rewards(
          acc_rewards, rollout.rewards, rollout.discounts
      )
      rollout = learner.behaviour_outs(config, rollout)
      return rollout, actor_state, timestep, env_state, acc_rewards, returns

    return cls(
        learn=learn,
        act=jax.pmap(act, axis_name=_AXIS, devices=devices),
        actor_step=None,
        accumulate=None,
    )


@dataclasses.dataclass
class _State:
  """The loop's state between iterations.

  Attributes:
    devices: learner, actor and value states [D, ...] (replicated by the
      reference, though each device's actor state holds its own
      environments'), and the environments' state, timestep and
      accumulated rewards [D, B / D, ...] (host arrays for host
      environments).
    rng: the loop's key.
    buffer: the replay buffer.
    step: iterations done.
  """

  devices: dict[str, Any]
  rng: chex.PRNGKey
  buffer: replay.SimpleReplayBuffer
  step: int = 0


def _initial_state(setup: learner.Setup) -> _State:
  """A fresh run's state: one key for the environment, learner and actor."""
  config, env, agent = setup.config, setup.env, setup.agent
  rng = jax.random.PRNGKey(config.seed)
  if setup.jittable:
    env_state, timestep = jax.jit(env.reset)(rng)
  else:
    env_state, timestep = env.reset(rng)
  replicated = dict(
      learner_state=jax.jit(agent.initial_learner_state)(rng),
      actor_state=jax.jit(agent.initial_actor_state)(rng),
      value_state=jax.jit(functools.partial(learner.init_value_state, setup))(
          rng
      ),
  )
  acc_rewards = np.zeros((config.num_envs,), np.float32)
  if setup.jittable:
    sharded = devices_lib.split_over_devices(
        dict(env_state=env_state, timestep=timestep, acc_rewards=acc_rewards),
        setup.num_devices,
    )
    replicated, sharded = devices_lib.place_like_pmap(
        setup.devices, replicated=replicated, sharded=sharded
    )
  else:
    # The host environment steps its whole batch [B, ...] at once.
    replicated, _ = devices_lib.place_like_pmap(
        setup.devices, replicated=replicated
    )
    sharded = dict(
        env_state=env_state,
        timestep=timestep,
        acc_rewards=devices_lib.split_over_devices(
            acc_rewards, setup.num_devices
        ),
    )
  buffer = replay.SimpleReplayBuffer(
      capacity=config.buffer_capacity, seed=config.buffer_seed, batch_axis=2
  )
  return _State(devices=replicated | sharded, rng=rng, buffer=buffer)


def _state_arrays(state: _State) -> dict[str, np.ndarray]:
  """The state as flat checkpoint arrays."""
  buffer = state.buffer.get_state()
  arrays = checkpoint_lib.flatten_tree(state.devices, 'loop')
  arrays['loop/rng'] = np.asarray(state.rng)
  if buffer['storage'] is not None:
    arrays.update(checkpoint_lib.flatten_tree(buffer['storage'], 'buffer'))
  arrays['buffer_size'] = np.int64(buffer['size'])
  arrays['buffer_next_slot'] = np.int64(buffer['next_slot'])
  arrays['buffer_rng_state'] = checkpoint_lib.json_array(buffer['rng_state'])
  return arrays


def _restore_state(
    setup: learner.Setup, fns: FaithfulFns, ckpt: checkpoint_lib.Checkpoint
) -> _State:
  """The state saved in `ckpt`, on the devices as a fresh run places it."""
  fresh = _initial_state(setup)
  arrays = ckpt.arrays
  restored = checkpoint_lib.restore_tree(
      dict(fresh.devices, rng=fresh.rng), arrays, 'loop'
  )
  rng = restored.pop('rng')
  _, placed = devices_lib.place_like_pmap(setup.devices, sharded=restored)
  storage = None
  if int(arrays['buffer_size']):
    d = fresh.devices
    example, *_ = jax.eval_shape(
        fns.act,
        d['learner_state'].params,
        d['actor_state'],
        d['timestep'],
        d['env_state'],
        jax.random.split(rng, setup.num_devices),
        d['acc_rewards'],
    )
    template = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(
            x.shape[:2] + (setup.config.buffer_capacity,) + x.shape[3:], x.dtype
        ),
        example,
    )
    storage = checkpoint_lib.restore_tree(template, arrays, 'buffer')
  fresh.buffer.set_state(
      dict(
          storage=storage,
          size=int(arrays['buffer_size']),
          next_slot=int(arrays['buffer_next_slot']),
          rng_state=checkpoint_lib.from_json_array(arrays['buffer_rng_state']),
      )
  )
  return _State(devices=placed, rng=rng, buffer=fresh.buffer, step=ckpt.step)


def _iteration(
    setup: learner.Setup,
    fns: FaithfulFns,
    state: _State,
    update_rule_params: types.MetaParams,
    recorder: eval_history.Recorder,
) -> None:
  """One actor rollout and, once the buffer is full enough, a learner step."""
  config, d = setup.config, state.devices
  state.rng, rng_actor, learner_rngs = acting.split_loop_keys(
      state.rng, setup.num_devices, split_actor_key=setup.jittable
  )
  if setup.jittable:
    (
        rollout,
        d['actor_state'],
        d['timestep'],
        d['env_state'],
        d['acc_rewards'],
        returns,
    ) = fns.act(
        d['learner_state'].params,
        d['actor_state'],
        d['timestep'],
        d['env_state'],
        rng_actor,
        d['acc_rewards'],
    )
    rollout, returns = jax.device_get((rollout, returns))
  else:
    rollout, d['actor_state'], d['timestep'], d['env_state'] = (
        acting.unroll_cpu_actor(
            d['learner_state'].params,
            d['actor_state'],
            d['timestep'],
            d['env_state'],
            rng_actor,
            env=setup.env,
            rollout_len=config.rollout_len,
            actor_step_fn=fns.actor_step,
            devices=setup.devices,
        )
    )
    rollout = learner.behaviour_outs(config, rollout)
    d['acc_rewards'], returns = fns.accumulate(
        d['acc_rewards'], rollout.rewards, rollout.discounts
    )
    returns = jax.device_get(returns)
  total, count = acting.episode_statistics(returns, rollout.discounts)
  if config.record_rollouts:
    recorder.actions.append(acting.merge_device_axis(rollout.actions))
    recorder.rewards.append(acting.merge_device_axis(rollout.rewards))
    recorder.discounts.append(acting.merge_device_axis(rollout.discounts))
  # Returns and the recorded rewards above are in the environment's units.
  rollout = reward_scale.scale_rewards(rollout, config.reward_scale)
  state.buffer.add(rollout)  # [D, T, B / D, ...]

  logs = None
  if len(state.buffer) >= config.learning_starts:
    indices = state.buffer.sample_indices(config.learner_batch_size)
    d['learner_state'], d['value_state'], logs = fns.learn(
        learner_rngs,
        state.buffer.gather(indices),
        d['learner_state'],
        d['actor_state'],
        update_rule_params,
        d['value_state'],
    )
    logs = {k: float(v) for k, v in devices_lib.mean_over_devices(logs).items()}
    if config.record_rollouts:
      recorder.sample_indices.append(indices)
      recorder.learner_steps.append(state.step)
  state.step += 1
  env_steps = state.step * config.rollout_len * config.num_envs
  recorder.add(env_steps, float(total), float(count), logs)


def run_faithful(
    setup: learner.Setup,
    fns: FaithfulFns,
    recorder: eval_history.Recorder,
    checkpoints: run_checkpoints.RunCheckpoints,
    *,
    resume: bool,
    interrupted: Callable[[], int],
) -> eval_history.EvalHistory:
  """Runs (or resumes) one seed's loop up to `num_steps` iterations.

  Checkpoints every `checkpoint_every` iterations and at the end; when
  `interrupted()` returns a signal, checkpoints after the iteration and
  raises `interrupts.Interrupted`.
  """
  ckpt = checkpoints.latest(resume)
  if ckpt is None:
    state = _initial_state(setup)
  else:
    state = _restore_state(setup, fns, ckpt)
    recorder.restore(ckpt.arrays, 'history')
  update_rule_params, _ = devices_lib.place_like_pmap(
      setup.devices, replicated=setup.update_rule_params
  )

  def _arrays() -> dict[str, np.ndarray]:
    return _state_arrays(state) | recorder.to_arrays('history')

  stop_if_interrupted = runtime.stopper(interrupted)
  while state.step < setup.config.num_steps:
    _iteration(setup, fns, state, update_rule_params, recorder)
    stop_if_interrupted(lambda: checkpoints.save(state.step, _arrays))
    checkpoints.save(state.step, _arrays, due_since=state.step - 1)
  checkpoints.save(state.step, _arrays)
  learner_state: agent_lib.LearnerState = state.devices['learner_state']
  return recorder.history(devices_lib.first_copy(learner_state.params))
