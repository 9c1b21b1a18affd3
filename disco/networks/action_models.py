"""Action-conditional models that give agents per-action outputs.

The LSTM model (after Muesli/MuZero) embeds the torso output as an LSTM
state, steps an LSTM once per action with a one-hot action as input, and
applies one MLP head per output, giving [B, A, ...] predictions.
"""

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

  def _model_transition_all_actions(
      self, embedding: hk.LSTMState
  ) -> chex.Array:
    """Steps the transition LSTM once for each action: [B*A, lstm_size]."""
    num_actions = utils.get_num_actions_from_spec(self._action_spec)
    batch_size = embedding.cell.shape[0]
    one_hots = jnp.eye(num_actions, dtype=embedding.cell.dtype)  # [A, A]
    actions_in = jnp.tile(one_hots, (batch_size, 1))  # [B*A, A]
    # Row b*A + a holds the state of batch element b, stepped with action a.
    states_in = jax.tree.map(
        lambda x: jnp.repeat(x, num_actions, axis=0), embedding
    )
    output, _ = hk.LSTM(self._lstm_size, name='action_cond')(
        actions_in, states_in
    )
    return output

  def _model_head_pass(
      self, transition_output: chex.Array
  ) -> dict[str, chex.Array]:
    """Applies one MLP per output spec; outputs are [B, A, *spec.shape]."""
    num_actions = utils.get_num_actions_from_spec(self._action_spec)
    batch_size = transition_output.shape[0] // num_actions
    outputs = {}
    for key, spec in self._out_spec.items():
      sizes = self._head_mlp_hiddens + (int(np.prod(spec.shape)),)
      flat = hk.nets.MLP(sizes)(transition_output)
      outputs[key] = flat.reshape((batch_size, num_actions) + spec.shape)
    return outputs

  def model_step(self, embedding: hk.LSTMState) -> dict[str, chex.Array]:
    """Per-action outputs from a root embedding."""
    return self._model_head_pass(self._model_transition_all_actions(embedding))

  def root_embedding(self, state: chex.Array) -> hk.LSTMState:
    """Maps the torso output to an LSTM state (cell, tanh(cell))."""
    flat = hk.Flatten()(state)
    cell = hk.Linear(self._lstm_size)(flat)
    return hk.LSTMState(hidden=jnp.tanh(cell), cell=cell)
