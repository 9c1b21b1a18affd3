"""The reference evaluation loop's replay buffer, on the host (numpy).

A first-in-first-out ring of trajectories: the same samples for a given
seed as the reference colab's buffer, so the faithful loop keeps parity.
"""

import copy
from typing import Any

import chex
import jax
import numpy as np


class SimpleReplayBuffer:
  """FIFO replay of trajectories split along a batch axis.

  Attributes:
    capacity: the most trajectories held at once.
    batch_axis: the axis of each leaf that indexes trajectories.
  """

  def __init__(self, capacity: int, seed: int, batch_axis: int = 2):
    """Creates an empty buffer.

    Args:
      capacity: the most trajectories held at once.
      seed: seed of the numpy generator that draws sample positions.
      batch_axis: the axis along which added batches are split and sampled
        batches are stacked. 2 suits the `pmap` layout [D, T, B, ...] of the
        eval loop; use 1 for plain [T, B, ...] rollouts.

    Raises:
      ValueError: for a non-positive capacity or a negative axis.
    """
    if capacity < 1:
      raise ValueError(f'capacity must be positive, got {capacity}.')
    if batch_axis < 0:
      raise ValueError(f'batch_axis must be >= 0, got {batch_axis}.')
    self.capacity = capacity
    self.batch_axis = batch_axis
    self._np_rng = np.random.default_rng(seed)
    self._treedef = None
    self._storage: list[np.ndarray] = []
    self._size = 0
    self._next = 0  # Ring slot the next trajectory is written to.

  def __len__(self) -> int:
    """The number of trajectories held."""
    return self._size

  def _allocate(self, leaves: list[np.ndarray]) -> None:
    self._storage = []
    for leaf in leaves:
      shape = list(leaf.shape)
      shape[self.batch_axis] = self.capacity
      self._storage.append(np.zeros(shape, dtype=leaf.dtype))

  def add(self, batch: chex.ArrayTree) -> None:
    """Appends every trajectory of `batch` (fetched to the host first).

    Args:
      batch: a tree (e.g. an `ActorRollout`) whose leaves all have the same
        size along `batch_axis`; the other axes and the structure must match
        earlier additions.

    Raises:
      ValueError: on a structure, shape or batch-size mismatch.
    """
    leaves, treedef = jax.tree.flatten(jax.device_get(batch))
    leaves = [np.asarray(leaf) for leaf in leaves]
    if not leaves:
      raise ValueError('Cannot add an empty tree to the replay buffer.')
    for leaf in leaves:
      if leaf.ndim <= self.batch_axis:
        raise ValueError(
            f'Leaves need a batch axis {self.batch_axis}; got a leaf of shape'
            f' {leaf.shape}.'
        )
    sizes = {leaf.shape[self.batch_axis] for leaf in leaves}
    if len(sizes) != 1:
      raise ValueError(
          f'Leaves disagree on the batch size along axis {self.batch_axis}:'
          f' {sorted(sizes)}.'
      )
    (num_new,) = sizes
    if self._treedef is None:
      self._treedef = treedef
      self._allocate(leaves)
    elif treedef != self._treedef:
      raise ValueError(
          f"Tree structure {treedef} differs from the buffer's {self._treedef}."
      )
    # Only the newest `capacity` trajectories can survive this addition.
    first = max(0, num_new - self.capacity)
    slots = (self._next + np.arange(first, num_new)) % self.capacity
    for store, leaf in zip(self._storage, leaves, strict=True):
      expected = (
          store.shape[: self.batch_axis] + store.shape[self.batch_axis + 1 :]
      )
      got = leaf.shape[: self.batch_axis] + leaf.shape[self.batch_axis + 1 :]
      if got != expected:
        raise ValueError(
            f"Trajectory shape {got} differs from the buffer's {expected}."
        )
      new = np.take(leaf, np.arange(first, num_new), axis=self.batch_axis)
      index = (slice(None),) * self.batch_axis + (slots,)
      store[index] = new
    self._next = (self._next + num_new) % self.capacity
    self._size = min(self.capacity, self._size + num_new)

  def sample_indices(self, batch_size: int) -> np.ndarray:
    """Draws `batch_size` positions (0 = oldest) uniformly with replacement.

    Raises:
      ValueError: if the buffer is empty.
    """
    if not self._size:
      raise ValueError('Cannot sample from an empty replay buffer.')
    return self._np_rng.integers(self._size, size=batch_size)

  def gather(self, indices: np.ndarray) -> Any:
    """The trajectories at `indices`, stacked along `batch_axis`."""
    indices = np.asarray(indices)
    if indices.ndim != 1:
      raise ValueError(f'indices must be 1-D, got shape {indices.shape}.')
    if np.any((indices < 0) | (indices >= self._size)):
      raise IndexError(
          f'Indices must lie in [0, {self._size}); got {indices.tolist()}.'
      )
    oldest = (self._next - self._size) % self.capacity
    slots = (oldest + indices) % self.capacity
    leaves = [
        np.take(store, slots, axis=self.batch_axis) for store in self._storage
    ]
    return jax.tree.unflatten(self._treedef, leaves)

  def sample(self, batch_size: int) -> Any:
    """`batch_size` trajectories drawn uniformly, stacked along the axis."""
    return self.gather(self.sample_indices(batch_size))

  def get_state(self) -> dict[str, Any]:
    """Everything that determines later additions and samples (copies).

    Returns:
      `storage`: the ring as a tree of arrays with the capacity in place of
      the batch axis (None while nothing was added), `size` and `next_slot`
      (ints), and `rng_state`: the sampling generator's
      `bit_generator.state` (a dict with 128-bit ints, JSON-serialisable).
    """
    storage = None
    if self._treedef is not None:
      storage = jax.tree.unflatten(
          self._treedef, [np.array(store) for store in self._storage]
      )
    return dict(
        storage=storage,
        size=self._size,
        next_slot=self._next,
        rng_state=copy.deepcopy(self._np_rng.bit_generator.state),
    )

  def set_state(self, state: dict[str, Any]) -> None:
    """Continues exactly from a `get_state` of a buffer of the same capacity.

    Raises:
      ValueError: if the storage does not hold `capacity` trajectories along
        `batch_axis`, or `size` or `next_slot` are out of range.
    """
    size, next_slot = int(state['size']), int(state['next_slot'])
    if not (0 <= size <= self.capacity and 0 <= next_slot < self.capacity):
      raise ValueError(
          f'size {size} and next_slot {next_slot} do not fit a buffer of'
          f' {self.capacity}.'
      )
    storage = state['storage']
    if storage is None:
      if size:
        raise ValueError(f'A buffer of size {size} needs its storage.')
      self._treedef, self._storage = None, []
    else:
      leaves, treedef = jax.tree.flatten(storage)
      for leaf in leaves:
        if np.ndim(leaf) <= self.batch_axis or (
            np.shape(leaf)[self.batch_axis] != self.capacity
        ):
          raise ValueError(
              f'Storage leaves need {self.capacity} trajectories along axis'
              f' {self.batch_axis}; got shape {np.shape(leaf)}.'
          )
      self._treedef = treedef
      self._storage = [np.array(leaf) for leaf in leaves]
    self._size, self._next = size, next_slot
    self._np_rng.bit_generator.state = copy.deepcopy(state['rng_state'])


# ----------------------------------------------------------------------------
