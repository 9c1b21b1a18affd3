"""The agent network for stacked frames: a shared frame embedding, then MLP.

`FrameEmbeddingMLP` embeds each of the K stacked frames with one linear
layer and a ReLU shared by all frames, and runs the colabs' MLP torso over
the K embeddings side by side; the heads and the action model are the
reference's (`nets.MLPHeadNet`). Its first layer costs K x frame size x
embedding instead of K x frame size x the torso's width (why it was chosen
for Craftax-Classic: docs/training.md).

Over an unroll of consecutive stacks ([T, B, K, ...], as
`frame_stack.FrameStackEnvironment` makes them and the learner reads them)
a frame sits in up to K stacks; `unroll` embeds it once, T + K - 1 frames
per trajectory instead of T K (docs/training.md has the cost).
"""

from collections.abc import Collection
from typing import Any

import chex
import haiku as hk
import jax
import jax.numpy as jnp

from disco.networks import nets

NAME = 'frame_mlp'
_TORSO = '__torso__'  # `unroll` hands `__call__` its torso under this key.


def _frames(inputs: chex.ArrayTree, num_lead: int) -> chex.Array:
  """[*lead, K, ...] leaves -> [*lead, K, F], each frame's leaves side by side."""
  leaves = jax.tree.leaves(inputs)
  lead = leaves[0].shape[: num_lead + 1]
  return jnp.concatenate([x.reshape(lead + (-1,)) for x in leaves], axis=-1)


def embed_consecutive(
    embed: Any, frames: chex.Array
) -> tuple[chex.Array, chex.Array]:
  """Embeds an unroll of consecutive stacks, each distinct frame once.

  Stack t's frame k is stack t-1's frame k+1, or all zeros (before the
  episode's first frame), so the T + K - 1 frames of the first stack and
  of each later stack's newest frame hold every other one. That is
  checked on each stack's second-newest frame only (against the stack
  before's newest): a stack that passes it with other older frames gets
  wrong embeddings.

  Args:
    embed: the per-frame embedding, [N, F] -> [N, E].
    frames: stacks [T, B, K, F], consecutive along T.

  Returns:
    The embeddings [T, B, K, E], as `embed` applied to each frame gives
    them, and whether each stack [T, B] continues the one before it (or is
    the first) by that check; where it does not, its embeddings are NaN.
  """
  t, _, k, _ = frames.shape
  # [B, K + T - 1, F]: the first stack's frames, then each newest frame.
  distinct = jnp.concatenate(
      [frames[0], jnp.swapaxes(frames[1:, :, -1], 0, 1)], axis=1
  )
  embedded = embed(distinct)  # [B, K + T - 1, E]
  # Static slices, not a gather: their gradient is a sum, not a scatter.
  embedded = jnp.stack([embedded[:, i : i + k] for i in range(t)])
  zero = jnp.max(jnp.abs(frames), axis=-1) == 0  # [T, B, K]
  blank = embed(jnp.zeros_like(frames[:1, 0, 0]))  # [1, E]: a zero frame's
  embedded = jnp.where(zero[..., None], blank, embedded)  # [T, B, K, E]
  # Stack t's second-newest frame must be stack t-1's newest, or zeros (a
  # restart). Checking it alone costs 1/K of checking every frame, and it
  # catches steps out of order, repeated or skipped.
  shifted = jnp.all(frames[1:, :, -2] == frames[:-1, :, -1], axis=-1)
  follows = shifted | zero[1:, :, -2]  # [T - 1, B]
  follows = jnp.concatenate([jnp.ones((1,) + follows.shape[1:], bool), follows])
  return jnp.where(follows[..., None, None], embedded, jnp.nan), follows


class FrameEmbeddingMLP(nets.MLP):
  """An MLP over a shared embedding of each stacked frame ([B, K, ...])."""

  def __init__(
      self,
      *args: Any,
      frame_embedding: int,
      embed_each_frame_once: bool = True,
      **kwargs: Any,
  ):
    """`nets.MLP`'s arguments, and the width of the frame embedding.

    `embed_each_frame_once` False embeds every frame of every stack in
    `unroll` too: the same values, K times the cost (a baseline).
    """
    super().__init__(*args, **kwargs)
    self._frame_embedding = frame_embedding
    self._once = embed_each_frame_once

  def _embedding_pass(
      self,
      inputs: chex.ArrayTree,
      should_reset: chex.Array | None = None,
      consecutive: bool = False,
  ) -> chex.Array:
    """[B, K, ...] -> [B, D]; [T, B, K, ...] -> [T, B, D] if `consecutive`."""
    del should_reset  # No recurrent state.
    if isinstance(inputs, dict) and _TORSO in inputs:
      return inputs[_TORSO]  # [B, D], from `unroll`.
    frames = _frames(inputs, 2 if consecutive else 1)
    linear = hk.Linear(self._frame_embedding, name='frame_embedding')

    def embed(x: chex.Array) -> chex.Array:
      return jax.nn.relu(linear(x))

    if consecutive and self._once:
      embedded, _ = embed_consecutive(embed, frames)
    else:
      embedded = embed(frames)
    torso_in = embedded.reshape(embedded.shape[:-2] + (-1,))
    return hk.nets.MLP(self._dense, name='torso')(torso_in)

  def unroll(
      self,
      inputs: chex.ArrayTree,
      should_reset: chex.Array | None = None,
      taken_actions: chex.Array | None = None,
      taken_only: Collection[str] = (),
  ) -> dict[str, chex.Array]:
    """`MLPHeadNet.unroll` over stacks [T, B, K, ...], consecutive along T.

    Each distinct frame is embedded once (`embed_consecutive`); a stack
    that does not continue the one before it gets NaN outputs. The heads
    and the action model then run in `__call__`, as for one step, so their
    parameters keep their names.
    """
    torso = self._embedding_pass(inputs, consecutive=True)  # [T, B, D]
    return super().unroll(
        {_TORSO: torso}, should_reset, taken_actions, taken_only
    )


def use_frame_network(settings: Any, frame_embedding: int) -> Any:
  """Switches agent settings from the colabs' MLP to `FrameEmbeddingMLP`."""
  settings.net_settings.name = NAME
  settings.net_settings.net_args = dict(
      settings.net_settings.net_args, frame_embedding=frame_embedding
  )
  return settings


nets.register_network(NAME, FrameEmbeddingMLP)
