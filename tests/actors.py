"""Scripted actors for rollouts of jittable environments in tests."""

import chex
import jax
import jax.numpy as jnp

from disco import types


def timestep_of(
    timestep, actions: chex.Array, actor_state, num_actions: int
) -> tuple[types.ActorTimestep, chex.ArrayTree]:
  """What an actor step returns for `actions` [B], with uniform logits."""
  logits = jnp.zeros(actions.shape + (num_actions,), jnp.float32)
  return (
      types.ActorTimestep(
          observations=timestep.observation,
          actions=actions,
          rewards=timestep.reward,
          discounts=timestep.step_type != 2,  # dm_env.StepType.LAST
          agent_outs={'logits': logits},
          states=actor_state,
          logits=logits,
      ),
      actor_state,
  )


def random_actor(params, rng, timestep, actor_state, num_actions=3):
  """An actor step (`acting.unroll_jittable_actor`) of uniform actions."""
  del params
  actions = jax.random.randint(rng, timestep.reward.shape, 0, num_actions)
  return timestep_of(timestep, actions, actor_state, num_actions)
