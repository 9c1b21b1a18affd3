"""gymnax environments as batched, jittable `disco` environments.

`GymnaxEnvironment` makes a gymnax environment by name and drives it
through `gymnax_api.GymnaxApiEnvironment`, re-exported here with the
adapters' argument checks (`arguments`). Details and rationale:
`docs/modules.md`.
"""

from collections.abc import Mapping
import importlib
import importlib.metadata
from typing import Any

from disco.environments import arguments
from disco.environments import gymnax_api

# pylint: disable=g-importing-member,useless-import-alias
from disco.environments.arguments import check_batch_size as check_batch_size
from disco.environments.arguments import check_env_name as check_env_name
from disco.environments.arguments import replace_params as replace_params
from disco.environments.gymnax_api import EnvState as EnvState
from disco.environments.gymnax_api import (
    GymnaxApiEnvironment as GymnaxApiEnvironment,
)
from disco.environments.gymnax_api import Truncation as Truncation

# Works for a wheel and for a clone installed with `pip install -e .` alike.
_INSTALL_HINT = 'pip install "disco-jax[envs]"'


def _import_gymnax() -> tuple[Any, Any]:
  """Imports gymnax and its spaces, or says how to install them.

  Returns:
    The `gymnax` and `gymnax.environments.spaces` modules.

  Raises:
    ImportError: gymnax (or its undeclared dependency six) is missing, or
      it is older than 1.0 (whose `step` returns five values, not six).
  """
  try:
    gymnax = importlib.import_module('gymnax')
    spaces = importlib.import_module('gymnax.environments.spaces')
  except ImportError as error:
    raise ImportError(
        'gymnax environments need the optional `envs` extra of disco, which'
        f' is not installed ({error}). Install it with: {_INSTALL_HINT}'
        ' (it installs gymnax>=1.0.1 and six).'
    ) from error
  try:
    version = importlib.metadata.version('gymnax')
  except importlib.metadata.PackageNotFoundError:
    version = None  # Not installed as a distribution; trust the import.
  if version is not None and int(version.split('.')[0]) < 1:
    raise ImportError(
        f'disco needs gymnax>=1.0.1 (six-value `step`), found {version}.'
        f' Upgrade it with: {_INSTALL_HINT}'
    )
  return gymnax, spaces


class GymnaxEnvironment(gymnax_api.GymnaxApiEnvironment):
  """A batch of one gymnax environment; see the module docstring."""

  def __init__(
      self,
      env_name: str,
      batch_size: int,
      env_kwargs: Mapping[str, Any] | None = None,
      env_params: Mapping[str, Any] | None = None,
  ):
    """Makes the gymnax environment once and builds the batched functions.

    Args:
      env_name: a gymnax id, e.g. 'Breakout-MinAtar' or 'CartPole-v1' (the
        names in `gymnax.registered_envs`).
      batch_size: the number of environments.
      env_kwargs: keyword arguments of `gymnax.make`, i.e. of the
        environment's constructor (e.g. `{'size': 10}` for DeepSea).
      env_params: fields of the environment's default `EnvParams` to
        replace, e.g. `{'max_steps_in_episode': 100}`.

    Raises:
      ImportError: gymnax is not installed.
      ValueError: unknown environment name, unknown `env_params` field,
        non-positive batch size, or an environment whose action space is
        not discrete (e.g. 'Pendulum-v1').
      TypeError: an observation that is not a single array.
    """
    arguments.check_batch_size(batch_size)
    gymnax, _ = _import_gymnax()
    arguments.check_env_name(
        env_name,
        list(gymnax.registered_envs),
        'gymnax',
        'are listed by `gymnax.registered_envs`',
    )
    # gymnax's `reset` and `step` are jitted with the environment object as
    # a static argument hashed by identity: make it exactly once.
    env, params = gymnax.make(env_name, **(env_kwargs or {}))
    if env_params:
      params = arguments.replace_params(params, env_params, env_name)
    super().__init__(env, params, batch_size, name=env_name)

  @property
  def gymnax_env(self) -> Any:
    """The wrapped gymnax environment object (made once)."""
    return self._env
