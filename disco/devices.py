"""Devices and data placement for the `pmap`ped loops.

Both loops `pmap` over devices with the axis name `AXIS_NAME` ('i', the
reference's). Inputs are placed exactly where `pmap` puts its own outputs,
so that every call after the first finds the same input layout and nothing
compiles twice: `place_like_pmap` passes trees through a `pmap`ped identity
(the evaluation loops), `PmapLayout` commits host arrays to the sharding
over a mesh with the same axis name (meta-training, which also runs on
several processes).
"""

from collections.abc import Sequence
from typing import Any, TypeVar

import jax
import numpy as np

# The `pmap` axis over devices, as the reference names it.
AXIS_NAME = 'i'

_T = TypeVar('_T')


def select_devices(
    num_envs: int, max_devices: int | None = None
) -> tuple[jax.Device, ...]:
  """The devices to run on: the first D of `jax.devices()`.

  D is at most `num_envs` (as in the reference) and `max_devices`, lowered
  if needed so that it divides `num_envs` (every device gets the same number
  of environments).
  """
  available = jax.devices()
  limit = min(len(available), num_envs, max_devices or num_envs)
  count = max(d for d in range(1, limit + 1) if num_envs % d == 0)
  return tuple(available[:count])


def split_over_devices(tree: _T, num_devices: int) -> _T:
  """[B, ...] host leaves as [D, B / D, ...]."""
  return jax.tree.map(
      lambda x: np.asarray(x).reshape((num_devices, -1) + np.shape(x)[1:]),
      tree,
  )


def place_like_pmap(
    devices: Sequence[jax.Device],
    *,
    replicated: Any = None,
    sharded: Any = None,
) -> tuple[Any, Any]:
  """Puts trees on `devices` in the layout `pmap` gives its own outputs.

  Args:
    devices: the devices.
    replicated: a tree to copy to every device, gaining a leading [D] axis.
    sharded: a tree of [D, ...] arrays, one slice per device (see
      `split_over_devices`).

  Returns:
    (replicated tree, sharded tree) on the devices.
  """
  identity = jax.pmap(
      lambda r, s, _: (r, s),
      axis_name=AXIS_NAME,
      devices=devices,
      in_axes=(None, 0, 0),
  )
  # The last argument gives `pmap` a mapped axis even if `sharded` is empty.
  return identity(replicated, sharded, np.zeros((len(devices),), np.int32))


def first_copy(tree: _T) -> _T:
  """The first local device's slice of a [D, ...] tree, on the host."""
  return jax.tree.map(
      lambda x: np.asarray(x.addressable_shards[0].data)[0], tree
  )


def mean_over_devices(tree: _T) -> _T:
  """A [D, ...] tree averaged over its device axis, on the host."""
  return jax.tree.map(lambda x: np.mean(x, axis=0), jax.device_get(tree))


class PmapLayout:
  """`pmap` inputs [D_local, ...] committed where `pmap` keeps its outputs.

  On one host, host arrays are committed to the sharding of a mesh over
  all devices with axis `AXIS_NAME`, which is how `pmap` lays out its
  outputs, so the second call does not compile again; with several
  processes `pmap` converts process-local inputs itself. This replaces the
  reference's `jax.device_put_replicated`.

  Attributes:
    devices: all devices (`jax.devices()`).
    local_devices: this process's devices.
    sharding: the `NamedSharding` over `devices`.
    key_index: the position of each local device among `devices`.
  """

  def __init__(self, devices: Sequence[jax.Device] | None = None):
    self.devices = tuple(devices or jax.devices())
    process = jax.process_index()
    self.local_devices = tuple(
        d for d in self.devices if d.process_index == process
    )
    self.key_index = np.asarray(
        [i for i, d in enumerate(self.devices) if d.process_index == process]
    )
    mesh = jax.sharding.Mesh(np.asarray(self.devices), (AXIS_NAME,))
    self.sharding = jax.sharding.NamedSharding(
        mesh, jax.sharding.PartitionSpec(AXIS_NAME)
    )

  @property
  def num_local(self) -> int:
    return len(self.local_devices)

  def put(self, tree: _T, *, replicate: bool) -> _T:
    """Places host arrays as `pmap` inputs [D_local, ...].

    Args:
      tree: arrays, with a leading local-device axis unless `replicate`.
      replicate: give every local device a copy of every leaf.

    Returns:
      The placed tree.
    """
    tree = jax.device_get(tree)
    if replicate:
      tree = jax.tree.map(
          lambda x: np.broadcast_to(x, (self.num_local,) + np.shape(x)), tree
      )
    if jax.process_count() > 1:
      return tree
    return jax.device_put(tree, self.sharding)

  def abstract(self, tree: Any) -> Any:
    """`ShapeDtypeStruct`s of `put(tree)` for per-device shapes `tree`."""
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(
            (self.num_local,) + x.shape, x.dtype, sharding=self.sharding
        ),
        tree,
    )


def device_slice(tree: _T, num_devices: int) -> _T:
  """This device's share of a tree of [B, ...] leaves (inside `pmap`).

  Leaf x becomes x.reshape(D, B / D, ...)[d] on device d of `AXIS_NAME`.
  """
  index = jax.lax.axis_index(AXIS_NAME)
  return jax.tree.map(
      lambda x: x.reshape((num_devices, -1) + x.shape[1:])[index], tree
  )
