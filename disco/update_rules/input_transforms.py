"""Named transformations applied to the meta-network's inputs.

Every entry of `TRANSFORMS` is a zero-argument builder returning a callable
`fn(x, actions, policy, axis_name)`, so that plain functions and Haiku
modules share one interface. Shapes: x is [T(+1), B, ...], actions [T, B],
policy [T(+1), B, A].
"""

from collections.abc import Callable, Sequence
import functools

import chex
import haiku as hk
import immutabledict
import jax
import jax.numpy as jnp
import rlax

from disco import utils


class InputTransform:
  """Interface of a transform: (x, actions, policy, axis_name) -> array."""

  def __call__(
      self, x, actions: chex.Array, policy: chex.Array, axis: str | None
  ) -> chex.Array:
    raise NotImplementedError


class SelectByAction(InputTransform):
  """x[t, b, actions[t, b]]: the entry of the action taken."""

  def __call__(self, x, actions, policy, axis):
    del policy, axis
    chex.assert_rank(actions, 2)
    chex.assert_tree_shape_prefix([x, actions], actions.shape)
    return utils.batch_lookup(x, actions)


class PiWeightedAvg(InputTransform):
  """sum_a policy[t, b, a] * x[t, b, a, :]: the expectation under the policy."""

  def __call__(self, x, actions, policy, axis):
    del actions, axis
    chex.assert_rank([x, policy], [4, 3])
    chex.assert_tree_shape_prefix([x, policy], policy.shape)
    return jnp.sum(x * policy[..., None], axis=2)


class Normalize(InputTransform, hk.Module):
  """Normalises x by moving averages of its [T, B] mean and variance."""

  def __call__(self, x, actions, policy, axis):
    del actions, policy
    if x.ndim < 2:
      raise ValueError(f'normalize needs [T, B, ...] inputs, got {x.shape}.')
    return EmaNorm(
        decay_rate=0.99, eps=1e-6, axis=(0, 1), cross_replica_axis=axis
    )(x)


class EmaNorm(hk.Module):
  """Like batch normalisation, but always using moving-average statistics.

  The batch statistics update two `hk.ExponentialMovingAverage`s (of the mean
  and the mean square), and the input is normalised with those averages, in
  training and evaluation alike.
  """

  def __init__(
      self,
      decay_rate: float,
      eps: float = 1e-6,
      eps_root: float = 1e-12,
      axis: Sequence[int] | None = None,
      cross_replica_axis: str | Sequence[str] | None = None,
      cross_replica_axis_index_groups: Sequence[Sequence[int]] | None = None,
      data_format: str = 'channels_last',
      name: str | None = None,
  ):
    """Configures the normaliser.

    Args:
      decay_rate: decay of the moving averages.
      eps: added to the standard deviation.
      eps_root: added to the variance under the square root, which keeps
        meta-gradients through the normalisation finite.
      axis: axes to compute statistics over; by default all but the channel
        axis.
      cross_replica_axis: named axis (or axes) of a `pmap`/`vmap` to also
        average the statistics over.
      cross_replica_axis_index_groups: device groups for that average.
      data_format: where the channel axis is, as in `hk.BatchNorm`.
      name: module name.
    """
    super().__init__(name=name)
    self.eps = eps
    self.eps_root = eps_root
    self.axis = axis
    self.cross_replica_axis = cross_replica_axis
    self.cross_replica_axis_index_groups = cross_replica_axis_index_groups
    self.channel_index = hk.get_channel_index(data_format)
    self.m1_ema = hk.ExponentialMovingAverage(decay_rate, name='m1_ema')
    self.m2_ema = hk.ExponentialMovingAverage(decay_rate, name='m2_ema')

  def __call__(self, inputs: jax.Array) -> jax.Array:
    """Updates the averages with this batch and returns normalised inputs."""
    if self.axis is not None:
      axis = self.axis
    else:
      channel = self.channel_index % inputs.ndim
      axis = [i for i in range(inputs.ndim) if i != channel]

    mean = jnp.mean(inputs, axis, keepdims=True)
    mean_sq = jnp.mean(jnp.square(inputs), axis, keepdims=True)
    if self.cross_replica_axis:
      mean, mean_sq = jax.lax.pmean(
          (mean, mean_sq),
          axis_name=self.cross_replica_axis,
          axis_index_groups=self.cross_replica_axis_index_groups,
      )
    self.m1_ema(mean)
    self.m2_ema(mean_sq)
    avg_mean = self.m1_ema.average.astype(inputs.dtype)
    avg_mean_sq = self.m2_ema.average.astype(inputs.dtype)
    variance = jnp.maximum(avg_mean_sq - jnp.square(avg_mean), 0.0)
    eps = jnp.asarray(self.eps, variance.dtype)
    eps_root = jnp.asarray(self.eps_root, variance.dtype)
    return (inputs - avg_mean) / (jnp.sqrt(variance + eps_root) + eps)


def td_pair(x: chex.Array) -> chex.Array:
  """Concatenates x[t] and x[t+1] on the last axis: [T+1, ...] -> [T, ...]."""
  return jnp.concatenate([x[:-1], x[1:]], axis=-1)


def _clip(x: chex.Array) -> chex.Array:
  # The reference called jnp.clip with the `a_min`/`a_max` keywords, which
  # JAX 0.10 removed (the call raises TypeError); this is the intended
  # clip to [-2, 2]. Disco103 does not use it.
  return jnp.clip(x, -2.0, 2.0)


def tx_factory(
    tx_call: Callable[[chex.Array], chex.Array],
) -> Callable[[], Callable[..., chex.Array]]:
  """Gives a one-argument function the builder interface of `TRANSFORMS`."""

  def builder():
    def transform(x, actions, policy, axis):
      del actions, policy, axis
      return tx_call(x)

    return transform

  return builder


_TRANSFORM_FNS = immutabledict.immutabledict({
    'identity': lambda x: x,
    'softmax': jax.nn.softmax,
    'max_a': functools.partial(jnp.max, axis=2),
    'stop_grad': jax.lax.stop_gradient,
    'clip': _clip,
    'sign': jnp.sign,
    'drop_last': lambda x: x[:-1],
    'td_pair': td_pair,
    'sign_log': rlax.signed_logp1,
    'sign_hyp': rlax.signed_hyperbolic,
    'masks_to_discounts': lambda x: 1.0 - x,
})

TRANSFORMS = immutabledict.immutabledict({
    'select_a': SelectByAction,
    'pi_weighted_avg': PiWeightedAvg,
    'normalize': Normalize,
    **{name: tx_factory(fn) for name, fn in _TRANSFORM_FNS.items()},
})
