"""The trainer's evaluation: one episode in each evaluation environment."""

from collections.abc import Callable
from typing import Any

import chex
import dm_env
import haiku as hk
import jax
import jax.numpy as jnp

from disco import agent as agent_lib
from disco import devices as devices_lib
from disco.train import lanes


def play_episodes(
    agent: agent_lib.Agent,
    reset: Callable[[chex.PRNGKey], Any],
    step: Callable[[Any, chex.Array], Any],
    params: hk.Params,
    key: chex.PRNGKey,
    *,
    num_local: int,
    num_devices: int,
    max_steps: int,
) -> dict[str, Any]:
  """One episode in each of this device's `num_local` environments.

  Inside `pmap` over `devices.AXIS_NAME`: `reset(key)` makes every
  device's environments, each device plays its slice with `agent` at
  `params` for at most `max_steps` steps.

  Returns:
    {'total_return', 'num_episodes'} of the episodes that ended, summed
    over devices.
  """
  reset_key, act_key = jax.random.split(key)
  env_state, timestep = devices_lib.device_slice(reset(reset_key), num_devices)
  lane_ids = lanes.local_lanes(num_local)
  zeros = jnp.zeros((num_local,), jnp.float32)

  def cond(carry: tuple[Any, ...]) -> chex.Array:
    t, *_, done, _ = carry
    return (t < max_steps) & ~jnp.all(done)

  def body(carry: tuple[Any, ...]) -> tuple[Any, ...]:
    t, env_state, timestep, actor_state, acc, done, returns = carry
    keys = lanes.lane_keys(jax.random.fold_in(act_key, t), lane_ids)
    actor_timestep, actor_state = agent.actor_step(
        params, keys, timestep, actor_state
    )
    env_state, timestep = step(env_state, actor_timestep.actions)
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
      total_return=jax.lax.psum(jnp.sum(returns * done), devices_lib.AXIS_NAME),
      num_episodes=jax.lax.psum(
          jnp.sum(done.astype(jnp.float32)), devices_lib.AXIS_NAME
      ),
  )
