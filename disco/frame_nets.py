"""The agent network for stacked frames: a shared frame embedding, then MLP.

`FrameEmbeddingMLP` embeds each of the K stacked frames with one linear
layer and a ReLU shared by all frames, and runs the colabs' MLP torso over
the K embeddings side by side; the heads and the action model are the
reference's (`nets.MLPHeadNet`). Its first layer costs K x frame size x
embedding instead of K x frame size x the torso's width (why it was chosen
for Craftax-Classic: docs/training.md).
"""

from typing import Any

import chex
import haiku as hk
import jax
import jax.numpy as jnp

from disco.networks import nets

NAME = 'frame_mlp'


class FrameEmbeddingMLP(nets.MLP):
  """An MLP over a shared embedding of each stacked frame ([B, K, ...])."""

  def __init__(self, *args: Any, frame_embedding: int, **kwargs: Any):
    """`nets.MLP`'s arguments, and the width of the frame embedding."""
    super().__init__(*args, **kwargs)
    self._frame_embedding = frame_embedding

  def _embedding_pass(
      self, inputs: chex.ArrayTree, should_reset: chex.Array | None = None
  ) -> chex.Array:
    del should_reset  # No recurrent state.
    leaves = jax.tree.leaves(inputs)
    batch, num_frames = leaves[0].shape[:2]
    # [B, K, F]: each frame's leaves flattened side by side.
    frames = jnp.concatenate(
        [x.reshape((batch, num_frames, -1)) for x in leaves], axis=-1
    )
    embedded = jax.nn.relu(
        hk.Linear(self._frame_embedding, name='frame_embedding')(frames)
    )
    torso_in = embedded.reshape((batch, num_frames * self._frame_embedding))
    return hk.nets.MLP(self._dense, name='torso')(torso_in)


def use_frame_network(settings: Any, frame_embedding: int) -> Any:
  """Switches agent settings from the colabs' MLP to `FrameEmbeddingMLP`."""
  settings.net_settings.name = NAME
  settings.net_settings.net_args = dict(
      settings.net_settings.net_args, frame_embedding=frame_embedding
  )
  return settings


nets.register_network(NAME, FrameEmbeddingMLP)
