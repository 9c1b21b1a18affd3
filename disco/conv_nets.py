"""A convolutional agent network: IMPALA-style residual sections, then MLP.

`ConvNet` is the kind of agent the paper evaluated Disco103 with: residual
convolutional sections (a 3x3 convolution, a 3x3 max-pool of stride 2 and
two residual blocks each; Espeholt et al., 2018), a dense layer, and the
reference's heads and action-conditional LSTM model (`nets.MLPHeadNet`).
Its sizes are arguments; `disco.train`'s agents `conv`, `conv_frames` and
`paper` name three sets of them (docs/training.md).

Observation leaves of rank 3 or more (per environment: [..., H, W, C]) are
images: their leading axes (stacked frames, [K, H, W, C]) go onto the
channels, [H, W, K C], and uint8 leaves are scaled to [0, 1]. Leaves of
lower rank are flattened and join the convolutions' output ahead of the
dense layers.

With `frame_embedding` > 0 and stacked frames, each frame goes through the
convolutions and a linear+ReLU embedding of that width alone, and the
dense layers read the K embeddings side by side: over an unroll of
consecutive stacks each distinct frame is embedded once
(`frame_nets.embed_consecutive`), T + K - 1 frames per trajectory instead
of T K, which is what makes 32 stacked frames affordable on a CPU.
"""

from collections.abc import Collection, Iterable
from typing import Any

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from disco import frame_nets
from disco.networks import nets

NAME = 'conv'
_TORSO = '__torso__'  # `unroll` hands `__call__` its torso under this key.
_UINT8_SCALE = 1.0 / 255.0


def as_float(x: chex.Array) -> chex.Array:
  """An observation leaf as float32; uint8 pixels scaled to [0, 1]."""
  if x.dtype == jnp.uint8:
    return x.astype(jnp.float32) * _UINT8_SCALE
  return x.astype(jnp.float32)


def is_image(leaf_rank: int) -> bool:
  """Whether a leaf of this rank (per environment) is an image."""
  return leaf_rank >= 3


def shifted_matmuls_default() -> bool:
  """Whether convolutions run as matrix products: on a CPU backend."""
  return jax.default_backend() == 'cpu'


class Conv3x3(hk.Module):
  """A 3x3 convolution of stride 1, SAME padding, with `hk.Conv2D`'s parameters.

  `w` [3, 3, C, O] and `b` [O], initialised as `hk.Conv2D` does. With
  `shifted_matmuls` it is computed as one matrix product of the nine
  shifted copies of the input, [N, H, W, 9 C] x [9 C, O], instead of XLA's
  convolution: the same values up to float rounding, and on a CPU much
  faster inside the trainer's loops, where XLA's CPU convolutions (their
  gradients above all) run several times slower than outside a loop
  (jax-ml/jax#12868; docs/training.md).
  """

  def __init__(
      self, channels: int, shifted_matmuls: bool, name: str | None = None
  ):
    super().__init__(name=name)
    self._channels = channels
    self._shifted_matmuls = shifted_matmuls

  def __call__(self, x: chex.Array) -> chex.Array:
    """[N, H, W, C] -> [N, H, W, channels]."""
    in_channels = x.shape[-1]
    # `hk.Conv2D`'s default: a truncated normal of std 1 / sqrt(fan-in).
    w_init = hk.initializers.TruncatedNormal(1.0 / np.sqrt(9 * in_channels))
    w = hk.get_parameter(
        'w', (3, 3, in_channels, self._channels), x.dtype, init=w_init
    )
    b = hk.get_parameter('b', (self._channels,), x.dtype, init=jnp.zeros)
    if not self._shifted_matmuls:
      out = jax.lax.conv_general_dilated(
          x, w, (1, 1), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC')
      )
      return out + b
    _, height, width, _ = x.shape
    padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    shifted = [
        padded[:, i : i + height, j : j + width]
        for i in range(3)
        for j in range(3)
    ]
    patches = jnp.concatenate(shifted, axis=-1)  # [N, H, W, 9 C]
    return patches @ w.reshape(9 * in_channels, self._channels) + b


class ResidualSection(hk.Module):
  """A 3x3 convolution, a 3x3 max-pool of stride 2, two residual blocks."""

  def __init__(
      self,
      channels: int,
      shifted_matmuls: bool = False,
      name: str | None = None,
  ):
    super().__init__(name=name)
    self._channels = channels
    self._shifted_matmuls = shifted_matmuls

  def __call__(self, x: chex.Array) -> chex.Array:
    """[N, H, W, C] -> [N, ceil(H / 2), ceil(W / 2), channels]."""

    def conv(name: str) -> Conv3x3:
      return Conv3x3(self._channels, self._shifted_matmuls, name=name)

    x = conv('conv')(x)
    x = hk.max_pool(x, window_shape=(1, 3, 3, 1), strides=(1, 2, 2, 1),
                    padding='SAME')  # fmt: skip
    for i in range(2):
      y = jax.nn.relu(x)
      y = conv(f'block_{i}_conv_0')(y)
      y = jax.nn.relu(y)
      y = conv(f'block_{i}_conv_1')(y)
      x = x + y
    return x


class ConvNet(nets.MLPHeadNet):
  """Residual convolutional sections, dense layers, the reference's heads."""

  def __init__(
      self,
      out_spec: chex.ArrayTree,
      dense: Iterable[int],
      action_spec: Any,
      head_w_init_std: float | None,
      conv_channels: Iterable[int] = (16, 32, 32),
      frame_embedding: int = 0,
      shifted_matmuls: bool | None = None,
      model_out_spec: chex.ArrayTree | None = None,
      model_arch_name: str | None = None,
      model_kwargs: Any = None,
      module_name: str | None = None,
  ) -> None:
    """Configures the network.

    Args:
      out_spec: specs of the flat outputs (`nets.MLPHeadNet`).
      dense: sizes of the dense layers after the convolutions.
      action_spec: the discrete action spec.
      head_w_init_std: std of the flat heads' init.
      conv_channels: channels of each residual section, in order.
      frame_embedding: 0 puts stacked frames on the channels; > 0 embeds
        each frame alone to this width (see the module docstring).
      shifted_matmuls: compute the convolutions as matrix products
        (`Conv3x3`); None: on a CPU backend only.
      model_out_spec: specs of the per-action outputs.
      model_arch_name: the action model's name ('lstm').
      model_kwargs: the action model's keyword arguments.
      module_name: the Haiku module name (default 'conv_net').
    """
    super().__init__(
        out_spec,
        action_spec=action_spec,
        head_w_init_std=head_w_init_std,
        model_out_spec=model_out_spec,
        model_arch_name=model_arch_name,
        model_kwargs=model_kwargs,
        module_name=module_name,
    )
    self._dense = tuple(dense)
    self._channels = tuple(conv_channels)
    self._frame_embedding = int(frame_embedding)
    if shifted_matmuls is None:
      shifted_matmuls = shifted_matmuls_default()
    self._shifted_matmuls = bool(shifted_matmuls)
    if not self._channels:
      raise ValueError('ConvNet needs at least one residual section.')

  def _convolve(self, images: chex.Array) -> chex.Array:
    """[N, H, W, C] float -> [N, F], the sections' flattened output."""
    x = images
    for i, channels in enumerate(self._channels):
      x = ResidualSection(channels, self._shifted_matmuls, name=f'section_{i}')(
          x
      )
    return hk.Flatten()(jax.nn.relu(x))

  def _split(
      self, inputs: chex.ArrayTree, num_lead: int
  ) -> tuple[list[chex.Array], list[chex.Array]]:
    """The image leaves and the flat leaves (as float32) of `inputs`."""
    images, flat = [], []
    for leaf in jax.tree.leaves(inputs):
      (images if is_image(leaf.ndim - num_lead) else flat).append(leaf)
    if not images:
      raise ValueError(
          'ConvNet needs an image observation (a leaf of rank 3 or more per'
          ' environment, [..., H, W, C]); got leaves of shapes'
          f' {[x.shape for x in jax.tree.leaves(inputs)]}.'
      )
    return images, flat

  def _embedding_pass(
      self,
      inputs: chex.ArrayTree,
      should_reset: chex.Array | None = None,
      consecutive: bool = False,
  ) -> chex.Array:
    """[B, ...] -> [B, D]; [T, B, K, ...] -> [T, B, D] if `consecutive`."""
    del should_reset  # No recurrent state.
    if isinstance(inputs, dict) and _TORSO in inputs:
      return inputs[_TORSO]  # From `unroll`.
    num_lead = 2 if consecutive else 1
    images, flat = self._split(inputs, num_lead)
    if self._frame_embedding:
      torso_in = self._per_frame(images, flat, num_lead, consecutive)
    else:
      torso_in = self._on_channels(images, flat, num_lead)
    return hk.nets.MLP(self._dense, name='torso')(torso_in)

  def _on_channels(
      self, images: list[chex.Array], flat: list[chex.Array], num_lead: int
  ) -> chex.Array:
    """Stacked frames on the channels, [*K, H, W, C] -> [H, W, K C]."""
    lead = images[0].shape[:num_lead]
    parts = []
    for x in images:
      x = as_float(x).reshape((-1,) + x.shape[num_lead:])  # [N, *K, H, W, C]
      stack_axes = tuple(range(1, x.ndim - 3))
      x = jnp.moveaxis(x, stack_axes, [a + 2 for a in stack_axes])
      parts.append(x.reshape(x.shape[:3] + (-1,)))  # [N, H, W, K C]
    features = [self._convolve(jnp.concatenate(parts, axis=-1))]
    features += [as_float(x).reshape((features[0].shape[0], -1)) for x in flat]
    return jnp.concatenate(features, axis=-1).reshape(lead + (-1,))

  def _per_frame(
      self,
      images: list[chex.Array],
      flat: list[chex.Array],
      num_lead: int,
      consecutive: bool,
  ) -> chex.Array:
    """Each frame embedded alone, the K embeddings side by side."""
    if len(images) != 1 or images[0].ndim - num_lead != 4:
      raise ValueError(
          'frame_embedding needs one image leaf of stacked frames [K, H, W,'
          f' C] per environment; got shapes {[x.shape for x in images]}.'
      )
    stacks = images[0]
    frame_shape = stacks.shape[num_lead + 1 :]  # [H, W, C]
    linear = hk.Linear(self._frame_embedding, name='frame_embedding')

    def embed(frames: chex.Array) -> chex.Array:
      """[..., H W C] -> [..., E]."""
      lead = frames.shape[:-1]
      x = as_float(frames).reshape((-1,) + frame_shape)
      return jax.nn.relu(linear(self._convolve(x))).reshape(lead + (-1,))

    frames = stacks.reshape(stacks.shape[: num_lead + 1] + (-1,))
    if consecutive:
      embedded, _ = frame_nets.embed_consecutive(embed, frames)
    else:
      embedded = embed(frames)  # [B, K, E]
    lead = stacks.shape[:num_lead]
    features = [embedded.reshape(lead + (-1,))]
    features += [as_float(x).reshape(lead + (-1,)) for x in flat]
    return jnp.concatenate(features, axis=-1)

  def unroll(
      self,
      inputs: chex.ArrayTree,
      should_reset: chex.Array | None = None,
      taken_actions: chex.Array | None = None,
      taken_only: Collection[str] = (),
  ) -> dict[str, chex.Array]:
    """`MLPHeadNet.unroll`; with `frame_embedding`, each frame embedded once.

    Stacks [T, B, K, ...] must then be consecutive along T (a stack that
    does not continue the one before it gets NaN outputs, as in
    `frame_nets.FrameEmbeddingMLP`).
    """
    if not self._frame_embedding:
      return super().unroll(inputs, should_reset, taken_actions, taken_only)
    torso = self._embedding_pass(inputs, consecutive=True)  # [T, B, D]
    return super().unroll(
        {_TORSO: torso}, should_reset, taken_actions, taken_only
    )


def use_conv_network(
    settings: Any, conv_channels: Iterable[int], frame_embedding: int
) -> Any:
  """Switches agent settings from the colabs' MLP to `ConvNet`."""
  settings.net_settings.name = NAME
  settings.net_settings.net_args = dict(
      settings.net_settings.net_args,
      conv_channels=tuple(conv_channels),
      frame_embedding=int(frame_embedding),
  )
  return settings


nets.register_network(NAME, ConvNet)
