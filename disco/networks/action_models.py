"""Action-conditional models that give agents per-action outputs.

The LSTM model (after Muesli/MuZero) embeds the torso output as an LSTM
state, steps an LSTM once per action with a one-hot action as input, and
applies one MLP head per output, giving [B, A, ...] predictions.
"""

from collections.abc import Collection

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from disco import types
from disco import utils


def get_action_model(name: str, *args, **kwargs) -> 'LSTMModel':
  """Builds the action model called `name` ('lstm')."""
  if name == 'lstm':
    return LSTMModel(*args, **kwargs)
  raise ValueError(f'Invalid model network name {name!r}; expected "lstm".')


class LSTMModel:
  """A one-step LSTM transition for every action, then per-output MLPs.

  Not a Haiku module itself: its layers are created in the caller's module
  (the agent network), which is what gives them their parameter names.
  """

  def __init__(
      self,
      action_spec: types.ActionSpec,
      out_spec: types.Specs,
      head_mlp_hiddens: tuple[int, ...],
      lstm_size: int,
  ) -> None:
    """Configures the model.

    Args:
      action_spec: the discrete action spec (gives the number of actions).
      out_spec: one spec per output; creation order of the heads follows the
        dict's order.
      head_mlp_hiddens: hidden sizes of each head's MLP.
      lstm_size: the LSTM's width.
    """
    self._out_spec = out_spec
    self._action_spec = action_spec
    self._head_mlp_hiddens = tuple(head_mlp_hiddens)
    self._lstm_size = lstm_size

  def _transition(
      self,
      lstm: hk.LSTM,
      embedding: hk.LSTMState,
      actions: chex.Array,
  ) -> chex.Array:
    """Steps the transition LSTM from each state with its action [N, H].

    Args:
      lstm: the transition LSTM.
      embedding: root states [N, H].
      actions: int actions [N].
    """
    num_actions = utils.get_num_actions_from_spec(self._action_spec)
    one_hots = jax.nn.one_hot(actions, num_actions, dtype=embedding.cell.dtype)
    output, _ = lstm(one_hots, embedding)
    return output

  def _heads(
      self, heads: dict[str, hk.Module], transition_output: chex.Array
  ) -> dict[str, chex.Array]:
    """Each output's MLP on [N, H] transition outputs: [N, *spec.shape]."""
    return {
        key: (
            heads[key](transition_output).reshape(
                (-1,) + tuple(self._out_spec[key].shape)
            )
        )
        for key in self._out_spec
    }

  def model_step(
      self,
      embedding: hk.LSTMState,
      taken_actions: chex.Array | None = None,
      taken_only: Collection[str] = (),
  ) -> dict[str, chex.Array]:
    """Per-action outputs [B, A, ...] from root embeddings [B, H].

    Args:
      embedding: the root states [B, H].
      taken_actions: the actions taken from each state [B], or None.
      taken_only: outputs whose gradient is wanted at `taken_actions` only
        (a loss that reads them nowhere else). Their per-action values are
        unchanged and carry no gradient; `outputs[types.TAKEN][key]` [B,
        ...] holds their values at the taken actions, with the gradient of
        the transition and heads applied once more, to those actions alone.
        The backward pass then costs one action's worth instead of A, and
        no [B, A, ...] cotangent is formed.
    """
    num_actions = utils.get_num_actions_from_spec(self._action_spec)
    batch_size = embedding.cell.shape[0]
    # Creation order (LSTM, then one MLP per output in the spec's order) is
    # what names the parameters: action_cond, mlp, mlp_1, ...
    lstm = hk.LSTM(self._lstm_size, name='action_cond')
    heads = {
        key: hk.nets.MLP(self._head_mlp_hiddens + (int(np.prod(spec.shape)),))
        for key, spec in self._out_spec.items()
    }
    # Row b*A + a: state b stepped with action a.
    all_actions = jnp.tile(jnp.arange(num_actions), batch_size)  # [B*A]
    states = jax.tree.map(
        lambda x: jnp.repeat(x, num_actions, axis=0), embedding
    )
    outputs = self._heads(heads, self._transition(lstm, states, all_actions))
    outputs = {
        key: x.reshape((batch_size, num_actions) + x.shape[1:])
        for key, x in outputs.items()
    }
    taken_only = [key for key in self._out_spec if key in taken_only]
    if taken_actions is None or not taken_only:
      return outputs
    chex.assert_shape(taken_actions, (batch_size,))
    taken = self._heads(heads, self._transition(lstm, embedding, taken_actions))
    at_taken = {}
    for key in taken_only:
      outputs[key] = jax.lax.stop_gradient(outputs[key])
      # The value of `outputs[key]` at the taken action, the gradient of
      # `taken[key]` (x - stop_gradient(x) is 0 with x's gradient).
      at_taken[key] = utils.batch_lookup(
          outputs[key], taken_actions, num_dims=1
      ) + (
          taken[key] - jax.lax.stop_gradient(taken[key])
      )  # [B, ...]
    outputs[types.TAKEN] = at_taken
    return outputs

  def root_embedding(self, state: chex.Array) -> hk.LSTMState:
    """Maps the torso output to an LSTM state (cell, tanh(cell))."""
    flat = hk.Flatten()(state)
    cell = hk.Linear(self._lstm_size)(flat)
    return hk.LSTMState(hidden=jnp.tanh(cell), cell=cell)
