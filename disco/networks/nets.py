"""Agent networks and the factory that Haiku-transforms them.

Module and method names matter here: Haiku derives parameter names (and the
order of random initialisation) from them, and they reproduce the
reference's parameter tree, e.g. `mlp/~_embedding_pass/torso/~/linear_0`.
"""

from collections.abc import Collection, Iterable, Mapping
import functools
from typing import Any

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from disco import types
from disco.networks import action_models

_NETWORKS = ('mlp',)
# Networks added around the reference's (`register_network`).
_ADDED_NETWORKS: dict[str, type['MLPHeadNet']] = {}


def register_network(name: str, network_class: type['MLPHeadNet']) -> None:
  """Makes `get_network(name, ...)` build `network_class` (an addition)."""
  if name in _NETWORKS:
    raise ValueError(f'{name!r} is one of the reference networks.')
  _ADDED_NETWORKS[name] = network_class


def network_names() -> tuple[str, ...]:
  """The names `get_network` builds: the reference's, then the added ones."""
  return _NETWORKS + tuple(sorted(_ADDED_NETWORKS))


def get_network(name: str, *args, **kwargs) -> types.PolicyNetwork:
  """Builds the agent network `name` and returns its transformed functions.

  Args:
    name: the network's name: 'mlp', or one given to `register_network`.
    *args: positional arguments of the network class.
    **kwargs: keyword arguments of the network class.

  Returns:
    A `PolicyNetwork` with `init`, `one_step` ([B, ...] inputs) and `unroll`
    ([T, B, ...] inputs); all take and return (params, state).

  Raises:
    ValueError: for an unknown network name.
  """
  if name not in _NETWORKS and name not in _ADDED_NETWORKS:
    raise ValueError(
        f'Unknown network: {name!r}; available networks:'
        f' {list(_NETWORKS) + sorted(_ADDED_NETWORKS)}.'
    )
  network_class = _ADDED_NETWORKS.get(name, MLP)

  def _one_step(*call_args, **call_kwargs):
    return network_class(*args, **kwargs)(*call_args, **call_kwargs)

  def _unroll(*call_args, **call_kwargs):
    return network_class(*args, **kwargs).unroll(*call_args, **call_kwargs)

  init_fn, one_step_fn = hk.without_apply_rng(
      hk.transform_with_state(_one_step)
  )
  _, unroll_fn = hk.without_apply_rng(hk.transform_with_state(_unroll))
  return types.PolicyNetwork(
      init=init_fn, one_step=one_step_fn, unroll=unroll_fn
  )


class MLPHeadNet(hk.Module):
  """Linear heads for the flat outputs plus an optional action model.

  Subclasses define `_embedding_pass`, the torso.
  """

  def __init__(
      self,
      out_spec: chex.ArrayTree,
      action_spec: types.Specs,
      head_w_init_std: float | None,
      model_out_spec: chex.ArrayTree | None = None,
      model_arch_name: str | None = None,
      model_kwargs: Mapping[str, Any] | None = None,
      module_name: str | None = None,
  ):
    """Configures the heads.

    Args:
      out_spec: specs of the flat (per-state) outputs, e.g. logits and y.
      action_spec: the discrete action spec.
      head_w_init_std: std of the truncated-normal init of the flat heads
        (Haiku's default init when falsy).
      model_out_spec: specs of the per-action outputs; none if empty.
      model_arch_name: the action model's name ('lstm').
      model_kwargs: the action model's keyword arguments.
      module_name: the Haiku module name (default 'mlp' for `MLP`).
    """
    super().__init__(name=module_name)
    self._out_spec = out_spec
    self._action_spec = action_spec
    self._model = None
    if model_out_spec:
      self._model = action_models.get_action_model(
          model_arch_name,
          action_spec=action_spec,
          out_spec=model_out_spec,
          **(model_kwargs or {}),
      )
    self._head_w_init = None
    if head_w_init_std:
      self._head_w_init = hk.initializers.TruncatedNormal(head_w_init_std)

  def _embedding_pass(
      self, inputs: chex.ArrayTree, should_reset: chex.Array | None = None
  ) -> chex.Array:
    raise NotImplementedError

  def _head_pass(self, embedding: chex.Array) -> dict[str, chex.Array]:
    """One linear layer per flat output (created in sorted key order)."""
    embedding = hk.Flatten()(embedding)

    def _head(spec: types.ArraySpec) -> chex.Array:
      out = hk.nets.MLP(
          output_sizes=(int(np.prod(spec.shape)),),
          w_init=self._head_w_init,
          name='torso_head',
      )(embedding)
      return out.reshape((embedding.shape[0],) + tuple(spec.shape))

    return jax.tree.map(_head, self._out_spec)

  def unroll(
      self,
      inputs: chex.ArrayTree,
      should_reset: chex.Array | None = None,
      taken_actions: chex.Array | None = None,
      taken_only: Collection[str] = (),
  ) -> dict[str, chex.Array]:
    """Applies the network to [T, B, ...] inputs by merging T and B.

    Without `taken_actions` and `taken_only` it calls `__call__(inputs,
    should_reset)` as the reference did, so subclasses written for the
    reference (whose `__call__` takes only those two) keep working.
    """
    if taken_actions is None and not taken_only:
      return hk.BatchApply(self.__call__)(inputs, should_reset)
    call = functools.partial(self.__call__, taken_only=taken_only)
    return hk.BatchApply(call)(inputs, should_reset, taken_actions)

  def __call__(
      self,
      inputs: chex.ArrayTree,
      should_reset: chex.Array | None = None,
      taken_actions: chex.Array | None = None,
      taken_only: Collection[str] = (),
  ) -> dict[str, chex.Array]:
    """The flat outputs [B, ...] and the per-action ones [B, A, ...].

    Args:
      inputs: observations [B, ...].
      should_reset: unused by this (stateless) network.
      taken_actions: the actions taken [B], for `taken_only`.
      taken_only: per-action outputs whose gradient is wanted at the taken
        actions only (see `LSTMModel.model_step`); values are unchanged.
    """
    torso = self._embedding_pass(inputs)
    out = self._head_pass(torso)
    if self._model is not None:
      root = self._model.root_embedding(torso)
      out.update(
          self._model.model_step(
              root, taken_actions=taken_actions, taken_only=taken_only
          )
      )
    return out


class MLP(MLPHeadNet):
  """An MLP torso over all observation leaves, flattened and concatenated."""

  def __init__(
      self,
      out_spec: chex.ArrayTree,
      dense: Iterable[int],
      action_spec: types.Specs,
      head_w_init_std: float | None,
      model_out_spec: chex.ArrayTree | None = None,
      model_arch_name: str | None = None,
      model_kwargs: Mapping[str, Any] | None = None,
      module_name: str | None = None,
  ) -> None:
    """Configures the network; `dense` are the torso's layer sizes."""
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

  def _embedding_pass(
      self, inputs: chex.ArrayTree, should_reset: chex.Array | None = None
  ) -> chex.Array:
    del should_reset  # The MLP has no recurrent state.
    flat_inputs = [hk.Flatten()(x) for x in jax.tree.leaves(inputs)]
    torso_in = jnp.concatenate(flat_inputs, axis=-1)
    return hk.nets.MLP(self._dense, name='torso')(torso_in)
