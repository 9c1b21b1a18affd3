"""Craftax as batched, jittable `disco` environments.

`CraftaxEnvironment` wraps Craftax-Classic or Craftax with symbolic
observations (flat float32 vectors), from the `craftax` package (the
optional `craftax` extra). Craftax's environments have gymnax's functional
API, so this is a `disco.environments.gymnax_env.GymnaxApiEnvironment` and
follows its conventions (see that module's docstring): auto-reset, LAST on
termination or truncation, one key per environment in the state, float32
observations, scalar int32 actions, strongly typed outputs; everything works
under `jit`, `vmap` and `lax.scan`.

Episodes end when the player dies, or are truncated at
`EnvParams.max_timesteps` steps (10,000 by default); both are LAST. Rewards
are Craftax's own: +1 for each achievement unlocked for the first time in
the episode, plus 0.1 times the change in health.

Automatic resets. Craftax's `...AutoReset` classes generate a new world on
every step and keep it only where the episode ended, and world generation
costs about 30 times a step. The adapter therefore wraps Craftax's
`...NoAutoReset` classes and generates a world only for the environments
whose episode ended (`auto_resets=False` of the base class). Its keys are
split exactly as the `...AutoReset` classes split theirs, so the results are
those of driving those classes one environment at a time, only cheaper.
(Not always bit for bit those of a `vmap`ped `...AutoReset` class: world
generation thresholds float noise, and XLA may compute the entries of a
batch slightly differently, which moves a few tiles of some worlds.)

Compilation. Craftax's step is a large program: compiling a batched step
takes tens of seconds of CPU (the full Craftax more than Classic). Compile
once, e.g. a whole `lax.scan` rollout, rather than many small functions.

craftax is imported only when an environment is built, so importing this
module (or `disco`) does not need it.
"""

from collections.abc import Mapping
import difflib
import importlib
from typing import Any

from disco.environments import gymnax_env

_INSTALL_HINT = 'pip install -e ".[craftax]"'

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
        f' {_INSTALL_HINT} (from the repository root; it installs craftax).'
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
    if env_name not in ENV_NAMES:
      close = difflib.get_close_matches(str(env_name), ENV_NAMES, n=2)
      suggestion = f' Did you mean {close}?' if close else ''
      raise ValueError(
          f'Unknown Craftax environment {env_name!r}.{suggestion} Valid'
          f' names (symbolic observations only): {list(ENV_NAMES)}.'
      )
    craftax_env = _import_craftax()
    # The `...NoAutoReset` class: the adapter restarts finished episodes.
    env = craftax_env.make_craftax_env_from_name(env_name, auto_reset=False)
    params = env.default_params
    if env_params:
      params = gymnax_env.replace_params(params, env_params, env_name)
    super().__init__(env, params, batch_size, name=env_name, auto_resets=False)

  @property
  def craftax_env(self) -> Any:
    """The wrapped Craftax environment object (a `...NoAutoReset` class)."""
    return self._env
