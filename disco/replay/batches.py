"""Learner batches made of fresh and replayed trajectories.

The trainer's three mixes (`TrainConfig` says which): each learner step's
share of the newest rollout then draws from the buffer
(`fresh_then_replayed`); the rollout's trajectories spread evenly over the
steps, draws filling the empty slots (`spread_fresh`); or every slot a
draw with probability `replay_fraction`, else a fresh trajectory
(`each_slot_drawn`). Trajectories are stacked on axis 1 ([T, B, ...]).
"""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np

from disco.replay import ring


def _concatenate(*trees: chex.ArrayTree) -> chex.ArrayTree:
  return jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=1), *trees)


def fresh_then_replayed(
    fresh: chex.ArrayTree | None,
    state: ring.ReplayState,
    key: chex.PRNGKey,
    num_replayed: int,
    num_envs: int,
    num_devices: int = 1,
    axis_name: str | None = None,
) -> chex.ArrayTree:
  """[T, F + R / D, ...]: `fresh` [T, F, ...] (None: F = 0), then draws.

  The R draws are `ring.sample_grid`'s (this device's share of them).
  """
  parts = [] if fresh is None else [fresh]
  if num_replayed:
    parts.append(
        ring.sample_grid(
            state, key, num_replayed, num_envs, num_devices, axis_name
        )
    )
  return _concatenate(*parts)


def each_slot_drawn(
    rollout: chex.ArrayTree,
    state: ring.ReplayState,
    key: chex.PRNGKey,
    batch_size: int,
    replay_fraction: float,
    num_envs: int,
) -> chex.ArrayTree:
  """[T, B, ...]: each slot a draw with probability `replay_fraction`.

  Else a trajectory of `rollout` [T, N, ...] (one device's N = `num_envs`
  environments), picked uniformly; the buffer's rows are N wide.
  """
  draw_key, pick_key, coin_key = jax.random.split(key, 3)
  draws = ring.sample_grid(state, draw_key, batch_size, num_envs)
  picks = jax.random.randint(pick_key, (batch_size,), 0, num_envs)
  fresh_draws = jax.tree.map(lambda x: jnp.take(x, picks, axis=1), rollout)
  replayed_slot = jax.random.bernoulli(coin_key, replay_fraction, (batch_size,))

  def merge(fresh_x: chex.Array, draw_x: chex.Array) -> chex.Array:
    mask = replayed_slot.reshape((1, -1) + (1,) * (draw_x.ndim - 2))
    return jnp.where(mask, draw_x, fresh_x)

  return jax.tree.map(merge, fresh_draws, draws)


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


def spread_replayed(slots: np.ndarray, batch_size: int) -> int:
  """Draws a spread batch takes: all but the fresh slots every step fills."""
  return batch_size - int(np.min(np.sum(slots >= 0, axis=1)))


def spread_fresh(
    rollout: chex.ArrayTree,
    state: ring.ReplayState,
    key: chex.PRNGKey,
    slots: np.ndarray,
    k: chex.Array,
    batch_size: int,
    num_envs: int,
) -> chex.ArrayTree:
  """[T, B, ...]: step k's fresh slots of `rollout` [T, N, ...], then draws.

  `slots` is `spread_fresh_slots(N, K)` (N = `num_envs`, one device's); a
  step's slots that take no trajectory take the next draws instead.
  """
  whole = batch_size - spread_replayed(slots, batch_size)
  draws = ring.sample_grid(
      state, key, spread_replayed(slots, batch_size), num_envs
  )
  mine = jnp.asarray(slots)[k]  # [S]
  picked = jax.tree.map(
      lambda x: jnp.take(x, jnp.maximum(mine, 0), axis=1), rollout
  )
  # Slots past `whole` take the next draws where they are empty; the draws
  # they displace are not used.
  extra = slots.shape[1] - whole

  def merge(fresh_x: chex.Array, draw_x: chex.Array) -> chex.Array:
    taken = (mine >= 0).reshape((1, -1) + (1,) * (fresh_x.ndim - 2))
    head = jnp.where(taken[:, whole:], fresh_x[:, whole:], draw_x[:, :extra])
    return jnp.concatenate(
        [fresh_x[:, :whole], head, draw_x[:, extra:]], axis=1
    )

  return jax.tree.map(merge, picked, draws)
