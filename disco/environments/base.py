"""The interface every `disco` environment implements.

Environments are always batched: `reset` and `step` act on `batch_size`
independent copies at once and return an `EnvironmentTimestep` whose leaves
have a leading batch axis.
"""

import abc
from typing import Any, Generic, TypeVar

import chex

from disco import types
from disco import utils

_EnvState = TypeVar('_EnvState')


class Environment(abc.ABC, Generic[_EnvState]):
  """A batch of environments driven by actions of shape [B, ...]."""

  batch_size: int

  @abc.abstractmethod
  def step(
      self, states: _EnvState, actions: chex.ArrayTree
  ) -> tuple[_EnvState, types.EnvironmentTimestep]:
    """Applies one action per environment; returns the next state and step."""

  @abc.abstractmethod
  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[Any, types.EnvironmentTimestep]:
    """Starts new episodes in every environment."""

  @abc.abstractmethod
  def single_observation_spec(self) -> types.Specs:
    """The observation spec of one environment (no batch axis)."""

  @abc.abstractmethod
  def single_action_spec(self) -> types.ActionSpec:
    """The action spec of one environment (no batch axis)."""

  def batched_action_spec(self) -> types.ActionSpec:
    return utils.broadcast_specs(self.single_action_spec(), self.batch_size)

  def batched_observation_spec(self) -> types.Specs:
    return utils.broadcast_specs(
        self.single_observation_spec(), self.batch_size
    )
