"""Small helpers used throughout `disco`.

Array lookups, spec manipulation, tree stacking, a differentiable policy-gradient loss and the moving averages
that normalise advantages and TD errors; and the reference's helpers that
split a batch over devices and gather it back.
"""

from collections.abc import Sequence
from typing import Any, TypeVar

import chex
import distrax
import jax
import jax.numpy as jnp
import numpy as np
import rlax

from disco import types

_T = TypeVar('_T')
_SpecsT = TypeVar('_SpecsT')


def shard_across_devices(data: _T, devices: Sequence[jax.Device]) -> _T:
  """Splits every [B, ...] leaf into D equal parts, one per device.

  The reference's helper on current JAX (it called the removed
  `jax.device_put_sharded`): each leaf becomes a [D, B / D, ...] array
  sharded over `devices` along its first axis, which is what `pmap` over
  those devices takes (and `gather_from_devices` undoes).

  Args:
    data: a tree of arrays whose first axis B is divisible by D.
    devices: the D devices, in the order of the parts.

  Returns:
    The tree of [D, B / D, ...] device arrays.

  Raises:
    ValueError: no devices, or a leaf whose first axis D does not divide.
  """
  devices = list(devices)
  if not devices:
    raise ValueError('shard_across_devices needs at least one device.')
  num_shards = len(devices)

  def _split(path, leaf):
    x = leaf if isinstance(leaf, jax.Array) else np.asarray(leaf)
    if x.ndim == 0 or x.shape[0] % num_shards:
      raise ValueError(
          f'Cannot split the leaf {jax.tree_util.keystr(path) or "(root)"} of'
          f' shape {tuple(x.shape)} into {num_shards} equal parts along its'
          ' first axis (one per device).'
      )
    return x.reshape((num_shards, x.shape[0] // num_shards) + x.shape[1:])

  parts = jax.tree_util.tree_map_with_path(_split, data)
  mesh = jax.sharding.Mesh(np.array(devices), ('devices',))
  sharding = jax.sharding.NamedSharding(
      mesh, jax.sharding.PartitionSpec('devices')
  )
  return jax.device_put(parts, sharding)


def gather_from_devices(data: _T) -> _T:
  """Host copies of [D, B, ...] device leaves, merged to [D * B, ...]."""
  return jax.tree.map(
      lambda x: x.reshape((-1,) + tuple(x.shape[2:])), jax.device_get(data)
  )


def batch_lookup(
    table: chex.Array, index: chex.Array, num_dims: int = 2
) -> chex.Array:
  """Selects `table[..., index, ...]` independently for each batch element.

  Args:
    table: [*batch, N, ...] where `batch` has `num_dims` axes.
    index: [*batch] integer indices into the axis right after the batch.
    num_dims: how many leading axes are batch axes.

  Returns:
    [*batch, ...]: out[b] = table[b, index[b]].
  """
  batch_shape = table.shape[:num_dims]
  chex.assert_shape(index, batch_shape)
  flat_table = table.reshape((-1,) + table.shape[num_dims:])
  flat_index = index.reshape(-1).astype(jnp.int32)
  picked = jax.vmap(lambda row, i: row[i])(flat_table, flat_index)
  return picked.reshape(batch_shape + picked.shape[1:])


def broadcast_specs(specs: _SpecsT, n: int, replace: bool = False) -> _SpecsT:
  """Adds (or, with `replace`, overwrites) a leading dimension `n`.

  Args:
    specs: a tree of `dm_env` specs or `jax.ShapeDtypeStruct`s.
    n: the size of the new leading dimension.
    replace: overwrite the current first dimension instead of prepending.

  Returns:
    The tree of specs with the new shapes.
  """
  start = 1 if replace else 0

  def _broadcast(spec):
    if isinstance(spec, types.specs.Array):
      return spec.replace(shape=(n,) + tuple(spec.shape[start:]))
    if isinstance(spec, types.ArraySpec):
      return types.ArraySpec((n,) + tuple(spec.shape[start:]), spec.dtype)
    raise ValueError(f'Unsupported spec type: {type(spec)}')

  return jax.tree.map(_broadcast, specs)


def tree_stack(
    elems: Sequence[chex.ArrayTree], axis: int = 0
) -> chex.ArrayTree:
  """Stacks trees of identical structure leaf by leaf along `axis`."""
  return jax.tree.map(lambda *xs: jnp.stack(xs, axis=axis), *elems)


def cast_to_single_precision(
    tree_like: _T, cast_ints: bool = True, host_data: bool = False
) -> _T:
  """Casts floating leaves to float32 (and, on the host, int64 to int32).

  Args:
    tree_like: a tree of numpy or JAX arrays.
    cast_ints: on the host, also cast int64 leaves to int32.
    host_data: the leaves are numpy arrays (other leaves are left alone).

  Returns:
    The tree with the casts applied.
  """

  def _cast(x):
    if host_data:
      if not isinstance(x, (np.ndarray, jax.Array)):
        return x
      if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype != np.float32:
        return x.astype(np.float32)
      if cast_ints and x.dtype == np.int64:
        return x.astype(np.int32)
      return x
    if hasattr(x, 'dtype') and jnp.issubdtype(x.dtype, jnp.floating):
      return jnp.asarray(x, jnp.float32)
    return x

  return jax.tree.map(_cast, tree_like)


def get_num_actions_from_spec(spec: types.ActionSpec) -> int:
  """Number of discrete actions described by a bounded spec."""
  return int(spec.maximum - spec.minimum + 1)


def get_logits_specs(
    spec: types.ActionSpec, with_batch_dim: bool = False
) -> types.ArraySpec:
  """Spec of the logits [A] for a discrete action spec."""
  if with_batch_dim:
    spec = spec.replace(shape=spec.shape[1:])
  return types.ArraySpec((get_num_actions_from_spec(spec),), np.float32)


def zeros_like_spec(spec: Any, prepend_shape: tuple[int, ...] = ()):
  """Numpy zeros for every spec in a tree, with extra leading dimensions."""
  return jax.tree.map(
      lambda s: np.zeros(prepend_shape + tuple(s.shape), dtype=s.dtype), spec
  )


def differentiable_policy_gradient_loss(
    logits_t: chex.Array, a_t: chex.Array, adv_t: chex.Array, backprop: bool
) -> chex.Array:
  """Per-step policy-gradient loss -log pi(a_t) * adv_t.

  Unlike `rlax.policy_gradient_loss` this keeps the per-step shape and can
  let gradients flow into the advantages, which meta-gradients need.

  Args:
    logits_t: [..., A] action preferences.
    a_t: [...] actions taken.
    adv_t: [...] advantages of those actions.
    backprop: let gradients reach `adv_t` (otherwise it is a constant).

  Returns:
    [...] the loss of each step.
  """
  chex.assert_type([logits_t, a_t, adv_t], [float, int, float])
  log_pi_a = rlax.batched_index(jax.nn.log_softmax(logits_t), a_t)
  if not backprop:
    adv_t = jax.lax.stop_gradient(adv_t)
  return -log_pi_a * adv_t


def categorical_kl_divergence(
    p_logits: chex.Array, q_logits: chex.Array
) -> chex.Array:
  """KL(softmax(p_logits) || softmax(q_logits)) over the last axis.

  The computation `rlax.categorical_kl_divergence` performs, without its
  pending-deprecation warning.
  """
  return distrax.Softmax(p_logits).kl_divergence(distrax.Softmax(q_logits))


class MovingAverage:
  """Debiased exponential moving averages of a tree's mean and mean square.

  Used to normalise advantages and TD errors by running statistics, with the
  same zero-debiasing as Adam.
  """

  def __init__(
      self,
      example_tree: chex.ArrayTree,
      decay: float = 0.999,
      eps: float = 1e-6,
  ):
    """Creates the averager.

    Args:
      example_tree: a tree with the structure later given to `update_state`.
      decay: decay of the averages (the step size is `1 - decay`).
      eps: added to the standard deviation when normalising.
    """
    self._example_tree = example_tree
    self._decay = decay
    self._eps = eps

  def init_state(self) -> types.EmaState:
    zeros = jax.tree.map(
        lambda _: jnp.zeros((), jnp.float32), self._example_tree
    )
    return types.EmaState(
        moment1=zeros,
        moment2=zeros,
        decay_product=jnp.ones((), jnp.float32),
    )

  def update_state(
      self,
      tree_like: chex.ArrayTree,
      state: types.EmaState,
      pmean_axis_name: str | None,
  ) -> types.EmaState:
    """Folds the mean (and mean square) of every leaf into the averages.

    Args:
      tree_like: values with the structure of the example tree.
      state: the current averages.
      pmean_axis_name: if set, the means are also averaged over this `pmap`
        axis so that every device keeps the same statistics.

    Returns:
      The updated state.
    """

    def _fold(moment, value):
      batch_mean = jnp.mean(value)
      if pmean_axis_name is not None:
        batch_mean = jax.lax.pmean(batch_mean, axis_name=pmean_axis_name)
      return self._decay * moment + (1.0 - self._decay) * batch_mean

    squares = jax.tree.map(jnp.square, tree_like)
    return types.EmaState(
        moment1=jax.tree.map(_fold, state.moment1, tree_like),
        moment2=jax.tree.map(_fold, state.moment2, squares),
        decay_product=state.decay_product * self._decay,
    )

  def _compute_moments(
      self, state: types.EmaState
  ) -> tuple[chex.ArrayTree, chex.ArrayTree]:
    """Debiased mean and (non-negative) variance of every leaf."""
    debias = 1.0 / (1 - state.decay_product)
    mean = jax.tree.map(lambda m1: m1 * debias, state.moment1)
    variance = jax.tree.map(
        lambda m2, m: jnp.maximum(0.0, m2 * debias - jnp.square(m)),
        state.moment2,
        mean,
    )
    return mean, variance

  def normalize(
      self,
      value: chex.ArrayTree,
      state: types.EmaState,
      subtract_mean: bool = True,
      root_eps: float = 1e-12,
  ) -> chex.ArrayTree:
    """Scales `value` by the running standard deviation.

    Args:
      value: values with the structure of the example tree.
      state: the averages to normalise with.
      subtract_mean: also centre the values with the running mean.
      root_eps: added under the square root; together with `eps` outside it
        this keeps gradients through the normalisation finite.

    Returns:
      The normalised values.
    """

    def _scale(mean, var, x):
      centred = x - mean if subtract_mean else x
      return centred / (jnp.sqrt(var + root_eps) + self._eps)

    mean, variance = self._compute_moments(state)
    return jax.tree.map(_scale, mean, variance, value)
