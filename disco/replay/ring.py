"""The replay ring in pure JAX: store trajectories, draw them back.

The same first-in-first-out buffer as `host.SimpleReplayBuffer`, held in
device arrays for loops fused under `jit`, and its one draw, `sample_grid`:
uniform with replacement over the held trajectories, as rows by
environments, across devices (the trainer; discovery with one trajectory a
row).
"""

from typing import Any

import chex
import jax
import jax.numpy as jnp


@chex.dataclass(frozen=True)
class ReplayState:
  """A FIFO ring of trajectories held in device arrays.

  Attributes:
    storage: a tree whose leaves have the capacity C in place of the batch
      axis, e.g. [T, C, ...].
    size: [] int32, the number of trajectories held (at most C).
    next_slot: [] int32, the ring slot written next.
  """

  storage: chex.ArrayTree
  size: chex.Array
  next_slot: chex.Array


def _capacity(state: ReplayState, batch_axis: int) -> int:
  return jax.tree.leaves(state.storage)[0].shape[batch_axis]


def init_replay_state(
    example_batch: chex.ArrayTree, capacity: int, batch_axis: int = 1
) -> ReplayState:
  """An empty buffer for batches shaped like `example_batch`.

  Args:
    example_batch: arrays or `jax.ShapeDtypeStruct`s of one batch.
    capacity: the most trajectories held at once.
    batch_axis: the axis indexing trajectories (1 for [T, B, ...]).

  Returns:
    The empty `ReplayState`.
  """

  def _zeros(leaf: Any) -> Any:
    shape = list(leaf.shape)
    shape[batch_axis] = capacity
    return jnp.zeros(shape, leaf.dtype)

  return ReplayState(
      storage=jax.tree.map(_zeros, example_batch),
      size=jnp.zeros((), jnp.int32),
      next_slot=jnp.zeros((), jnp.int32),
  )


def add_to_replay(
    state: ReplayState, batch: chex.ArrayTree, batch_axis: int = 1
) -> ReplayState:
  """Appends the trajectories of `batch`, overwriting the oldest when full.

  Args:
    state: the buffer.
    batch: a tree shaped like the buffer's example batch, with at most
      `capacity` trajectories along `batch_axis`.
    batch_axis: the axis indexing trajectories.

  Returns:
    The new `ReplayState`.
  """
  capacity = _capacity(state, batch_axis)
  num_new = jax.tree.leaves(batch)[0].shape[batch_axis]
  if num_new > capacity:
    raise ValueError(
        f'Cannot add {num_new} trajectories to a buffer of {capacity}.'
    )
  slots = (state.next_slot + jnp.arange(num_new, dtype=jnp.int32)) % capacity
  index = (slice(None),) * batch_axis + (slots,)
  storage = jax.tree.map(
      lambda store, new: store.at[index].set(new.astype(store.dtype)),
      state.storage,
      batch,
  )
  return ReplayState(
      storage=storage,
      size=jnp.minimum(state.size + num_new, capacity),
      next_slot=(state.next_slot + num_new) % capacity,
  )


def sample_grid(
    state: ReplayState,
    key: chex.PRNGKey,
    num: int,
    num_envs: int,
    num_devices: int = 1,
    axis_name: str | None = None,
) -> chex.ArrayTree:
  """This device's share of `num` trajectories drawn from the whole buffer.

  The buffer is a grid of rows (rollouts, in ring order) by `num_envs`
  environments, filled a row at a time (`num_envs=1`: a row is one
  trajectory, for a buffer of any capacity filled from slot 0); with
  several devices each holds its environments' columns. Rows are drawn
  uniformly over the filled ones and environments over all, with one key;
  each device gathers the draws it holds, a `psum` over `axis_name` gives
  every device the whole batch [T, num, ...], and it keeps its
  `num / num_devices` [T, num / D, ...].

  Args:
    state: the buffer ([T, C / D, ...] on each device).
    key: the draw's key, the same on every device.
    num: trajectories drawn in all.
    num_envs: environments over all devices (a row's width).
    num_devices: devices sharing the buffer (1: no collective).
    axis_name: the devices' `pmap` axis, when `num_devices` > 1.

  Returns:
    The trajectories, stacked on axis 1.
  """
  num_local = num_envs // num_devices
  rows_filled = jnp.maximum(state.size // num_local, 1)
  row_key, env_key = jax.random.split(key)
  rows = jax.random.randint(row_key, (num,), 0, rows_filled)
  envs = jax.random.randint(env_key, (num,), 0, num_envs)
  if num_devices == 1:
    slots = rows * num_local + envs
    return jax.tree.map(lambda x: jnp.take(x, slots, axis=1), state.storage)
  device = jax.lax.axis_index(axis_name)
  mine = envs // num_local == device
  slots = jnp.where(mine, rows * num_local + envs % num_local, 0)

  def _gather(store: chex.Array) -> chex.Array:
    picked = jnp.take(store, slots, axis=1)
    mask = mine.reshape((1, num) + (1,) * (picked.ndim - 2))
    dtype = jnp.int32 if picked.dtype == jnp.bool_ else picked.dtype
    whole = jax.lax.psum(jnp.where(mask, picked, 0).astype(dtype), axis_name)
    share = num // num_devices
    mine_part = jax.lax.dynamic_slice_in_dim(whole, device * share, share, 1)
    return mine_part.astype(picked.dtype)

  return jax.tree.map(_gather, state.storage)
