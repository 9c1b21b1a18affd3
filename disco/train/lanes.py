"""Random keys tied to environments, never to devices.

Every environment has a global index (its lane); keys folded with it make
D devices draw what one does.
"""

import chex
import jax
import jax.numpy as jnp

from disco import devices as devices_lib


def lane_keys(key: chex.PRNGKey, lanes: chex.Array) -> chex.Array:
  """One key per environment: `fold_in(key, global index)` [n]."""
  return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, lanes)


def local_lanes(num_local: int) -> chex.Array:
  """This device's environments' global indices [num_local] (in `pmap`)."""
  start = jax.lax.axis_index(devices_lib.AXIS_NAME) * num_local
  return start + jnp.arange(num_local, dtype=jnp.int32)
