"""Environments by name, for configs and command lines.

Names understood by `make_environment`:

Details and rationale: `docs/modules.md`.
"""

from collections.abc import Mapping
from typing import Any

from ml_collections import config_dict

from disco.environments import base
from disco.environments import catch
from disco.environments import craftax_env
from disco.environments import crafter_env
from disco.environments import envpool_env
from disco.environments import gymnasium_env
from disco.environments import gymnax_env
from disco.environments import jittable_envs
from disco.environments import xminigrid_env
from disco.environments.wrappers import batched_env

CATCH = 'catch'
CATCH_CPU = 'catch-cpu'
GYMNAX_PREFIX = 'gymnax:'
CRAFTAX_PREFIX = 'craftax:'
XMINIGRID_PREFIX = 'xminigrid:'
GYMNASIUM_PREFIX = gymnasium_env.PREFIX
ENVPOOL_PREFIX = envpool_env.PREFIX
# The Craftax names in full (the adapter takes symbolic observations only).
CRAFTAX_NAMES = tuple(CRAFTAX_PREFIX + name for name in craftax_env.ENV_NAMES)
NAMES = (
    CATCH,
    CATCH_CPU,
    GYMNAX_PREFIX + '<env id>',
    *CRAFTAX_NAMES,
    XMINIGRID_PREFIX + '<env id>',
    GYMNASIUM_PREFIX + '<env id>',
    ENVPOOL_PREFIX + '<task id>',
    crafter_env.NAME,
)
# Prefixes followed by a package's own environment id.
_ID_PREFIXES = (
    GYMNAX_PREFIX,
    XMINIGRID_PREFIX,
    GYMNASIUM_PREFIX,
    ENVPOOL_PREFIX,
)
# Environments that step on the host, not in JAX: names and prefixes.
_HOST_NAMES = (CATCH_CPU, crafter_env.NAME)
_HOST_PREFIXES = (GYMNASIUM_PREFIX, ENVPOOL_PREFIX)


class UnknownEnvironmentError(ValueError):
  """The environment name is not one `make_environment` understands."""


def _catch_settings(
    defaults: config_dict.ConfigDict, overrides: Mapping[str, Any] | None
) -> config_dict.ConfigDict:
  settings = defaults
  for key, value in (overrides or {}).items():
    if key not in settings:
      raise ValueError(
          f'Unknown Catch setting {key!r}; known: {sorted(settings)}.'
      )
    settings[key] = value
  return settings


def _package_id(name: str, prefix: str, package: str, example: str) -> str:
  """The package's own environment id after `prefix` in `name`.

  Args:
    name: an environment name that starts with `prefix` (e.g. 'gymnax:').
    prefix: one of `_ID_PREFIXES`.
    package: the package, as the error message names it (e.g. 'gymnax').
    example: an id of the package, for the error message.

  Raises:
    UnknownEnvironmentError: `name` is `prefix` alone.
  """
  env_id = name[len(prefix) :]
  if not env_id:
    raise UnknownEnvironmentError(
        f'{name!r} names no {package} environment; use e.g. {prefix}{example}.'
    )
  return env_id


def make_environment(
    name: str,
    batch_size: int,
    seed: int = 1,
    settings: Mapping[str, Any] | None = None,
) -> base.Environment:
  """Builds the batched environment called `name`.

  Args:
    name: one of `NAMES` (see the module docstring).
    batch_size: the number of environments in the batch.
    seed: seed of the host-side environments' own random streams (CPU
      Catch; a `random_seed` in `settings` takes precedence). Jittable
      environments draw their randomness from the key given to `reset`, so
      they ignore it.
    settings: overrides of the environment's settings, e.g.
      `{'rows': 5, 'columns': 5}` for Catch; for gymnax, Craftax and
      xminigrid environments, fields of the environment's parameters
      (`EnvParams`) to replace, e.g. `{'max_steps_in_episode': 100}` for a
      gymnax environment.

  Returns:
    The environment.

  Raises:
    UnknownEnvironmentError: if the name is not recognised.
    ImportError: if a gymnax, Craftax or xminigrid environment is asked for
      without its extra (`[envs]`, `[craftax]`, `[xminigrid]`) installed.
    ValueError: for a non-positive batch size or unknown settings.
  """
  if batch_size < 1:
    raise ValueError(f'batch_size must be positive, got {batch_size}.')
  if name == CATCH:
    return jittable_envs.CatchJittableEnvironment(
        batch_size=batch_size,
        env_settings=_catch_settings(
            jittable_envs.get_config_catch(), settings
        ),
    )
  if name == CATCH_CPU:
    env_settings = catch.get_config()
    env_settings.random_seed = seed
    env_settings = _catch_settings(env_settings, settings)
    return catch.CatchEnvironment(
        batch_size=batch_size, env_settings=env_settings
    )
  if name.startswith(GYMNAX_PREFIX):
    env_id = _package_id(name, GYMNAX_PREFIX, 'gymnax', 'CartPole-v1')
    return gymnax_env.GymnaxEnvironment(env_id, batch_size, env_params=settings)
  if name.startswith(CRAFTAX_PREFIX):
    if name not in CRAFTAX_NAMES:
      raise UnknownEnvironmentError(
          f'Unknown Craftax environment {name!r}; known:'
          f' {", ".join(CRAFTAX_NAMES)}.'
      )
    return craftax_env.CraftaxEnvironment(
        name[len(CRAFTAX_PREFIX) :], batch_size, env_params=settings
    )
  if name.startswith(XMINIGRID_PREFIX):
    env_id = _package_id(
        name, XMINIGRID_PREFIX, 'xminigrid', 'MiniGrid-Empty-8x8'
    )
    return xminigrid_env.XMinigridEnvironment(
        env_id, batch_size, env_params=settings
    )
  if name == crafter_env.NAME:
    return crafter_env.CrafterEnvironment(batch_size, settings)
  if name.startswith(ENVPOOL_PREFIX):
    task_id = _package_id(name, ENVPOOL_PREFIX, 'envpool', 'Pong-v5')
    return envpool_env.make(task_id, batch_size, settings)
  if name.startswith(GYMNASIUM_PREFIX):
    env_id = _package_id(name, GYMNASIUM_PREFIX, 'Gymnasium', 'CartPole-v1')
    return gymnasium_env.make(env_id, batch_size, settings)
  raise UnknownEnvironmentError(
      f'Unknown environment {name!r}; known: {", ".join(NAMES)}.'
  )


def is_known_name(name: str) -> bool:
  """Whether `make_environment` understands `name`, without building it.

  Nothing is imported: a `gymnax:` or `xminigrid:` name only needs a
  non-empty id here (`make_environment` checks the id against the package's
  list, and needs the package installed).

  Args:
    name: an environment name.
  """
  if not isinstance(name, str):
    return False
  if name in (CATCH, CATCH_CPU, crafter_env.NAME) or name in CRAFTAX_NAMES:
    return True
  return any(
      name.startswith(prefix) and len(name) > len(prefix)
      for prefix in _ID_PREFIXES
  )


def is_jittable_name(name: str) -> bool:
  """Whether `name` is known and its environment is pure JAX.

  The same as `is_jittable(make_environment(name, ...))` for every known
  name, without building the environment: all but `'catch-cpu'`,
  `'crafter'` and `gymnasium:<id>`.

  Args:
    name: an environment name.
  """
  return (
      is_known_name(name)
      and name not in _HOST_NAMES
      and not name.startswith(_HOST_PREFIXES)
  )


def is_jittable(env: base.Environment) -> bool:
  """Whether `env.step` and `env.reset` are pure JAX (can run under jit).

  Host-side environments are the batched single-stream ones; every other
  `disco` environment is written in JAX.
  """
  return not isinstance(
      env,
      (
          batched_env.BatchedSingleStreamEnvironment,
          gymnasium_env.GymnasiumEnvironment,
          crafter_env.CrafterEnvironment,
      ),
  )
