"""Action-conditional models that give agents per-action outputs.

The LSTM model (after Muesli/MuZero) embeds the torso output as an LSTM
state, steps an LSTM once per action with a one-hot action as input, and
applies one MLP head per output, giving [B, A, ...] predictions.

An addition (`share_state_gates`): the LSTM's gates read the root state the
same way for every action, so that part can be computed once per state.
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


class _SharedStateLSTM(hk.LSTM):
  """`hk.LSTM` (the same parameters) that can step a state with every input.

  An input x and a state h give gates x @ W_x + h @ W_h + b: for every
  input from every state, the state's part is computed once per state.
  """

  def __call__(
      self,
      inputs: chex.Array,
      prev_state: hk.LSTMState,
      *,
      every_input: bool = False,
  ) -> chex.Array | tuple[chex.Array, hk.LSTMState]:
    """`hk.LSTM`'s step; with `every_input`, each state with each input.

    Args:
      inputs: [B, I] inputs; with `every_input`, [N, I] inputs for every
        state (one-hot actions: W_x's rows, exactly).
      prev_state: [B, H] states.
      every_input: step each state with each input and return only the
        outputs [B, N, H]: the state's part of the gates, h @ W_h + b, is
        computed for B rows, not B * N. The same values as stepping the
        repeated states up to float rounding.
    """
    if not every_input:
      return super().__call__(inputs, prev_state)
    batch_size, input_size = prev_state.hidden.shape[0], inputs.shape[-1]
    linear = hk.Linear(4 * self.hidden_size)  # `hk.LSTM`'s, by its name.
    no_input = jnp.zeros((batch_size, input_size), prev_state.hidden.dtype)
    state_gates = linear(jnp.concatenate([no_input, prev_state.hidden], -1))
    (w,) = (v for k, v in linear.params_dict().items() if k.endswith('/w'))
    # [N, 4H], a few rows: in full precision on any backend, so that one-hot
    # inputs read W_x's rows exactly.
    input_gates = jnp.dot(
        inputs,
        w[:input_size].astype(inputs.dtype),
        precision=jax.lax.Precision.HIGHEST,
    )
    gated = state_gates[:, None, :] + input_gates.astype(state_gates.dtype)
    # As `hk.LSTM.__call__`, with the cell broadcast over inputs.
    i, g, f, o = jnp.split(gated, indices_or_sections=4, axis=-1)
    f = jax.nn.sigmoid(f + 1)
    c = f * prev_state.cell[:, None, :] + jax.nn.sigmoid(i) * jnp.tanh(g)
    return jax.nn.sigmoid(o) * jnp.tanh(c)  # [B, N, H]


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
      share_state_gates: bool = False,
  ) -> None:
    """Configures the model.

    Args:
      action_spec: the discrete action spec (gives the number of actions).
      out_spec: one spec per output; creation order of the heads follows the
        dict's order.
      head_mlp_hiddens: hidden sizes of each head's MLP.
      lstm_size: the LSTM's width.
      share_state_gates: compute the part of the transition's gates that
        reads the root state once per state instead of once per action (an
        addition): the same parameters and, up to float rounding, the same
        outputs, with about a third of the action model's work saved at
        widths of 256 and more. Off: the reference's program and rounding.
    """
    self._out_spec = out_spec
    self._action_spec = action_spec
    self._head_mlp_hiddens = tuple(head_mlp_hiddens)
    self._lstm_size = lstm_size
    self._share_state_gates = share_state_gates

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
    lstm_class = _SharedStateLSTM if self._share_state_gates else hk.LSTM
    lstm = lstm_class(self._lstm_size, name='action_cond')
    heads = {
        key: hk.nets.MLP(self._head_mlp_hiddens + (int(np.prod(spec.shape)),))
        for key, spec in self._out_spec.items()
    }
    if self._share_state_gates:
      one_hots = jnp.eye(num_actions, dtype=embedding.cell.dtype)  # [A, A]
      transitions = lstm(one_hots, embedding, every_input=True).reshape(
          (batch_size * num_actions, self._lstm_size)
      )  # Row b*A + a: state b stepped with action a.
    else:
      # Row b*A + a: state b stepped with action a.
      all_actions = jnp.tile(jnp.arange(num_actions), batch_size)  # [B*A]
      states = jax.tree.map(
          lambda x: jnp.repeat(x, num_actions, axis=0), embedding
      )
      transitions = self._transition(lstm, states, all_actions)
    outputs = self._heads(heads, transitions)
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
