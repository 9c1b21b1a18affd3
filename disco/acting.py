"""Actor unrolls and episode-return accounting for training loops.

`unroll_jittable_actor` steps a JAX environment inside one `lax.scan`;
`unroll_cpu_actor` steps a host-side one from Python. Both return an
`ActorRollout`; `accumulate_rewards` and `episode_statistics` track returns.
"""

from collections.abc import Callable, Sequence
import functools
from typing import Any, TypeVar

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from disco import truncation as truncation_lib
from disco import types
from disco import unrolling
from disco.environments import base

_ArrayT = TypeVar('_ArrayT', np.ndarray, jax.Array)

# (params, rng, timestep, actor_state) -> (actor timestep, new actor state),
# e.g. `Agent.actor_step` or a `pmap` of it.
ActorStepFn = Callable[
    [hk.Params, chex.PRNGKey, types.EnvironmentTimestep, hk.State],
    tuple[types.ActorTimestep, hk.State],
]
UnrollOutput = tuple[
    types.ActorRollout, hk.State, types.EnvironmentTimestep, Any
]


def unroll_jittable_actor(
    params: hk.Params,
    actor_state: hk.State,
    timestep: types.EnvironmentTimestep,
    env_state: Any,
    rng: chex.PRNGKey,
    *,
    env: base.Environment,
    rollout_len: int,
    actor_step_fn: ActorStepFn,
    truncation: bool = False,
    unroll_inner_scans: bool = False,
) -> UnrollOutput:
  """Runs the actor and a jittable environment for `rollout_len` steps.

  Pure: wrap it in `jit` or `pmap` (with `env`, `rollout_len` and
  `actor_step_fn` bound, e.g. by `functools.partial`).

  Args:
    params: the agent network's parameters.
    actor_state: the actor's recurrent state.
    timestep: the environment's current timestep [B, ...].
    env_state: the environment's current state.
    rng: key; step t samples its actions with `split(rng, rollout_len)[t]`.
    env: a jittable batched environment.
    rollout_len: the number of steps T to collect.
    actor_step_fn: the unbatched actor step, e.g. `Agent.actor_step`.
    truncation: return a `truncation.TruncatedRollout`, which tells the
      environment's time limits apart from terminations (the environment
      must have `step_with_truncation`, see `truncation.reports_truncation`);
      the other fields are the same as without.
    unroll_inner_scans: unroll the `lax.scan` loops inside one step (the
      actor's and the environment's; `unrolling.unroll_scans`): the same
      values, fewer kernels one after another on a GPU.

  Returns:
    (rollout [T, B, ...], actor state, timestep and environment state after
    the last step).

  Raises:
    ValueError: `truncation` for an environment that does not report it.
  """
  if truncation and not truncation_lib.reports_truncation(env):
    raise ValueError(
        f'{type(env).__name__} does not report time limits'
        ' (no `step_with_truncation`).'
    )

  def _one_step(
      carry: tuple[Any, Any, Any], step_rng: chex.PRNGKey
  ) -> tuple[tuple[Any, Any, Any], Any]:
    env_state, timestep, actor_state = carry
    actor_timestep, actor_state = actor_step_fn(
        params, step_rng, timestep, actor_state
    )
    if not truncation:
      env_state, timestep = env.step(env_state, actor_timestep.actions)
      return (env_state, timestep, actor_state), actor_timestep
    env_state, timestep, step_truncation = env.step_with_truncation(
        env_state, actor_timestep.actions
    )
    return (env_state, timestep, actor_state), (actor_timestep, step_truncation)

  (env_state, timestep, actor_state), outputs = jax.lax.scan(
      unrolling.unroll_scans(_one_step) if unroll_inner_scans else _one_step,
      (env_state, timestep, actor_state),
      jax.random.split(rng, rollout_len),
  )
  if not truncation:
    return (
        types.ActorRollout.from_timestep(outputs),
        actor_state,
        timestep,
        env_state,
    )
  actor_timesteps, step_truncations = outputs
  # Step t's truncation is reported by the environment step that led to it
  # (the scan's step t - 1); the first step of the rollout starts no
  # transition of its own rollout, so what led to it is not needed.
  rollout = truncation_lib.TruncatedRollout(
      **{
          name: getattr(actor_timesteps, name)
          for name in types.ActorTimestep.__dataclass_fields__
      },
      truncated=_after_first(
          jnp.zeros_like(step_truncations.truncated[:1]),
          step_truncations.truncated,
      ),
      final_observations=jax.tree.map(
          lambda first, rest: _after_first(first[:1], rest),
          actor_timesteps.observations,
          step_truncations.final_observation,
      ),
  )
  return rollout, actor_state, timestep, env_state


def _after_first(first: chex.Array, rest: chex.Array) -> chex.Array:
  """[first[0], rest[0], ..., rest[T - 2]]: `rest` one step later."""
  return jnp.concatenate([first, rest[:-1]], axis=0)


def unroll_cpu_actor(
    params: hk.Params,
    actor_state: hk.State,
    timestep: types.EnvironmentTimestep,
    env_state: Any,
    rng: chex.PRNGKey,
    *,
    env: base.Environment,
    rollout_len: int,
    actor_step_fn: ActorStepFn,
    devices: Sequence[jax.Device],
) -> UnrollOutput:
  """Runs the actor against a host-side environment for `rollout_len` steps.

  Uses the `pmap` layout: `params` and `actor_state` carry a leading device
  axis, and `actor_step_fn` is mapped over `devices`. The environment's
  batch is split evenly across the devices at every step.

  Args:
    params: the agent network's parameters, [D, ...].
    actor_state: the actor's recurrent state, [D, ...].
    timestep: the environment's current timestep [B, ...] (host arrays).
    env_state: the environment's state (unused by host environments).
    rng: key; each step splits off one key and gives every device its own.
    env: a host-side batched environment.
    rollout_len: the number of steps T to collect.
    actor_step_fn: the actor step mapped over `devices`, taking and
      returning per-device [D, B / D, ...] batches.
    devices: the devices `actor_step_fn` runs on.

  Returns:
    (rollout [D, T, B / D, ...] as host arrays, actor state [D, ...], host
    timestep and environment state after the last step).
  """
  actor_timesteps = []
  for _ in range(rollout_len):
    rng, step_rng = jax.random.split(rng)
    device_rngs = jax.random.split(step_rng, len(devices))
    # Host arrays reshaped to [D, B / D, ...]: `pmap` places them itself, and
    # their layout is the same at every call, so it compiles once.
    sharded_timestep = jax.tree.map(
        lambda x: np.asarray(x).reshape((len(devices), -1) + x.shape[1:]),
        timestep,
    )
    actor_timestep, actor_state = actor_step_fn(
        params, device_rngs, sharded_timestep, actor_state
    )
    actor_timestep = jax.device_get(actor_timestep)
    actions = actor_timestep.actions.reshape(
        (-1,) + actor_timestep.actions.shape[2:]
    )
    env_state, timestep = env.step(env_state, actions)
    actor_timesteps.append(actor_timestep)
  stacked = jax.tree.map(
      lambda *xs: np.stack(xs, axis=1), *actor_timesteps
  )  # [D, T, B / D, ...]
  rollout = types.ActorRollout.from_timestep(stacked)
  return rollout, actor_state, timestep, env_state


def accumulate_rewards(
    acc_rewards: chex.Array, rewards: chex.Array, discounts: chex.Array
) -> tuple[chex.Array, chex.Array]:
  """Running undiscounted returns along a rollout.

  At each step the reward is added to the accumulator, the sum is emitted,
  and the accumulator is then multiplied by the discount, so it restarts
  from zero after a LAST step (discount 0). Emitted at a LAST step, the sum
  is that episode's return.

  Args:
    acc_rewards: [B] return accumulated so far in each environment's current
      episode (zeros at the start of training).
    rewards: [T, B] rewards of a rollout.
    discounts: [T, B] discounts of the same steps (bool or float).

  Returns:
    (the accumulator after the rollout [B], the running returns [T, B]).
  """
  chex.assert_rank([acc_rewards, rewards, discounts], [1, 2, 2])
  chex.assert_equal_shape([rewards, discounts])

  def _step(
      acc: chex.Array, reward_and_discount: tuple[chex.Array, chex.Array]
  ) -> tuple[chex.Array, chex.Array]:
    reward, discount = reward_and_discount
    acc = acc + reward
    return acc * discount, acc

  return jax.lax.scan(_step, acc_rewards, (rewards, discounts))


def episode_statistics(
    returns: _ArrayT, discounts: _ArrayT
) -> tuple[_ArrayT, _ArrayT]:
  """Sum and count of the returns of episodes that ended in a rollout.

  Works on numpy arrays (on the host, in the precision numpy picks) and on
  JAX arrays (inside `jit`) alike; leaves may have any matching shape, e.g.
  [T, B] or [D, T, B].

  Args:
    returns: running returns from `accumulate_rewards`.
    discounts: the rollout's discounts (0 or False at LAST steps).

  Returns:
    (sum of the returns emitted at LAST steps, number of LAST steps).
  """
  ended = 1 - discounts
  return (returns * ended).sum(), ended.sum()


def average_return(total_return: Any, num_episodes: Any) -> np.ndarray:
  """`total_return / num_episodes` on the host; NaN when no episode ended."""
  with np.errstate(invalid='ignore', divide='ignore'):
    return np.asarray(total_return) / np.asarray(num_episodes)


@functools.partial(jax.jit, static_argnames=('num_devices', 'split_actor_key'))
def split_loop_keys(
    rng: chex.PRNGKey, num_devices: int, split_actor_key: bool = True
) -> tuple[chex.PRNGKey, chex.PRNGKey, chex.PRNGKey]:
  """The keys of one loop iteration, drawn as the reference's eval loop does.

  Args:
    rng: the loop's key.
    num_devices: the number of devices D.
    split_actor_key: give every device its own actor key ([D, 2]), as a
      `pmap`ped jittable unroll needs; otherwise return the one actor key
      (`unroll_cpu_actor` splits it itself).

  Returns:
    (the loop's next key, actor key(s), [D] learner keys).
  """
  rng, rng_actor, rng_learner = jax.random.split(rng, 3)
  if split_actor_key:
    rng_actor = jax.random.split(rng_actor, num_devices)
  return rng, rng_actor, jax.random.split(rng_learner, num_devices)


def trim_agent_outs(rollout: types.ActorRollout) -> types.ActorRollout:
  """Keeps only the behaviour logits of `rollout.agent_outs`.

  Update rules read nothing else of the behaviour outputs, and the other
  heads (Disco's 601-bin action values, 600-dim predictions) make up almost
  all of a rollout's bytes.
  """
  return rollout.replace(agent_outs={'logits': rollout.agent_outs['logits']})


def merge_device_axis(x: _ArrayT) -> _ArrayT:
  """[D, T, B / D, ...] -> [T, B, ...], device-major along the batch."""
  x = (
      jnp.moveaxis(x, 0, 1)
      if isinstance(x, jax.Array)
      else np.moveaxis(x, 0, 1)
  )
  return x.reshape(x.shape[:1] + (-1,) + x.shape[3:])
