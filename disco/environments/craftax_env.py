"""Craftax as batched, jittable `disco` environments.

Details and rationale: `docs/modules.md`.
"""

from collections.abc import Mapping
import importlib
from typing import Any

import chex
import jax.numpy as jnp

from disco.environments import gymnax_env

_INSTALL_HINT = 'pip install "disco-jax[craftax]"'

CLASSIC_SYMBOLIC = 'Craftax-Classic-Symbolic-v1'
SYMBOLIC = 'Craftax-Symbolic-v1'
# The Craftax ids this adapter accepts (symbolic observations only).
ENV_NAMES = (CLASSIC_SYMBOLIC, SYMBOLIC)


def _import_craftax() -> Any:
  """Imports `craftax.craftax_env`, or says how to install craftax.

  Returns:
    The `craftax.craftax_env` module.

  Raises:
    ImportError: craftax (or one of its dependencies) is missing.
  """
  try:
    return importlib.import_module('craftax.craftax_env')
  except ImportError as error:
    raise ImportError(
        'Craftax environments need the optional `craftax` extra of disco,'
        f' which is not installed ({error}). Install it with:'
        f' {_INSTALL_HINT} (it installs craftax).'
    ) from error


class CraftaxEnvironment(gymnax_env.GymnaxApiEnvironment):
  """A batch of one symbolic Craftax environment; see the module docstring."""

  def __init__(
      self,
      env_name: str,
      batch_size: int,
      env_params: Mapping[str, Any] | None = None,
  ):
    """Makes the Craftax environment once and builds the batched functions.

    Args:
      env_name: one of `ENV_NAMES`: 'Craftax-Classic-Symbolic-v1' or
        'Craftax-Symbolic-v1'.
      batch_size: the number of environments.
      env_params: fields of the environment's default `EnvParams` to
        replace, e.g. `{'max_timesteps': 1000}`.

    Raises:
      ImportError: craftax is not installed.
      ValueError: unknown environment name, unknown `env_params` field or
        non-positive batch size.
    """
    gymnax_env.check_batch_size(batch_size)
    gymnax_env.check_env_name(
        env_name, ENV_NAMES, 'Craftax', '(symbolic observations only)'
    )
    craftax_env = _import_craftax()
    # The `...NoAutoReset` class: the adapter restarts finished episodes.
    env = craftax_env.make_craftax_env_from_name(env_name, auto_reset=False)
    params = env.default_params
    if env_params:
      params = gymnax_env.replace_params(params, env_params, env_name)
    super().__init__(env, params, batch_size, name=env_name, auto_resets=False)

  def _env_step(self, rng_key: chex.PRNGKey, state: Any, action: chex.Array):
    obs, state, reward, is_last, _, final_obs = super()._env_step(
        rng_key, state, action
    )
    # Craftax's game ends at `max_timesteps` as it ends on death: the step
    # is a truncation where the game would go on without the time limit.
    no_limit = self._params.replace(max_timesteps=jnp.iinfo(jnp.int32).max)
    truncated = jnp.logical_and(
        is_last, jnp.logical_not(self._env.is_terminal(state, no_limit))
    )
    return obs, state, reward, is_last, truncated, final_obs

  @property
  def craftax_env(self) -> Any:
    """The wrapped Craftax environment object (a `...NoAutoReset` class)."""
    return self._env
