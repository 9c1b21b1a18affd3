"""XLand-MiniGrid environments as batched, jittable `disco` environments.

Details and rationale: `docs/modules.md`.
"""

from collections.abc import Mapping
import importlib
from typing import Any

import chex
import jax.numpy as jnp

from disco.environments import arguments
from disco.environments import gymnax_api

_INSTALL_HINT = 'pip install "disco-jax[xminigrid]"'
_XLAND_PREFIX = 'XLand-MiniGrid'


def _import_xminigrid() -> Any:
  """Imports xminigrid, or says how to install it.

  Returns:
    The `xminigrid` module.

  Raises:
    ImportError: xminigrid (or one of its dependencies) is missing.
  """
  try:
    return importlib.import_module('xminigrid')
  except ImportError as error:
    raise ImportError(
        'XLand-MiniGrid environments need the optional `xminigrid` extra of'
        f' disco, which is not installed ({error}). Install it with:'
        f' {_INSTALL_HINT} (it installs xminigrid).'
    ) from error


class XMinigridEnvironment(gymnax_api.GymnaxApiEnvironment):
  """A batch of one xminigrid environment; see the module docstring."""

  def __init__(
      self,
      env_name: str,
      batch_size: int,
      env_params: Mapping[str, Any] | None = None,
  ):
    """Makes the xminigrid environment once and builds the batched functions.

    Args:
      env_name: an xminigrid id, e.g. 'MiniGrid-Empty-8x8' (the names in
        `xminigrid.registered_environments()`).
      batch_size: the number of environments.
      env_params: fields of the environment's default `EnvParams` to
        replace, e.g. `{'max_steps': 100}` or `{'view_size': 5}`.

    Raises:
      ImportError: xminigrid is not installed.
      ValueError: unknown environment name, unknown `env_params` field,
        non-positive batch size, or an XLand-MiniGrid id without a ruleset.
    """
    arguments.check_batch_size(batch_size)
    xminigrid = _import_xminigrid()
    arguments.check_env_name(
        env_name,
        list(xminigrid.registered_environments()),
        'xminigrid',
        'are listed by `xminigrid.registered_environments()`',
    )
    if env_name.startswith(_XLAND_PREFIX) and 'ruleset' not in (
        env_params or {}
    ):
      raise ValueError(
          f'{env_name!r} needs a ruleset: pass env_params={{"ruleset": ...}}'
          ' (e.g. from `xminigrid.load_benchmark`); with its default empty'
          ' ruleset no goal can ever be reached. The MiniGrid-* ids need'
          ' none.'
      )
    env, params = xminigrid.make(env_name)
    if env_params:
      params = arguments.replace_params(params, env_params, env_name)
    super().__init__(env, params, batch_size, name=env_name, auto_resets=False)

  @property
  def xminigrid_env(self) -> Any:
    """The wrapped xminigrid environment object (made once)."""
    return self._env

  def _num_actions(self) -> int:
    return int(self._env.num_actions(self._params))

  def _env_reset(self, rng_key: chex.PRNGKey) -> tuple[chex.Array, Any]:
    timestep = self._env.reset(self._params, rng_key)
    return timestep.observation, timestep

  def _env_step(self, rng_key: chex.PRNGKey, state: Any, action: chex.Array):
    del rng_key  # xminigrid's transitions are deterministic.
    timestep = self._env.step(self._params, state, action)
    is_last = timestep.last()
    # xminigrid's discount is 0 at a termination and 1 at its step limit.
    truncated = jnp.logical_and(is_last, timestep.discount > 0)
    return (
        timestep.observation,
        timestep,
        timestep.reward,
        is_last,
        truncated,
        timestep.observation,
    )
