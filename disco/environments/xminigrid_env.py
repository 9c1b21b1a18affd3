"""XLand-MiniGrid environments as batched, jittable `disco` environments.

`XMinigridEnvironment` wraps one environment made by `xminigrid.make(id)`
(the `xminigrid` package, the optional `xminigrid` extra), e.g.
'MiniGrid-Empty-8x8' or 'MiniGrid-DoorKey-5x5'. It is a
`disco.environments.gymnax_env.GymnaxApiEnvironment` and follows its
conventions (see that module's docstring): auto-reset, LAST on termination
or truncation, one key per environment in the state, float32 observations,
scalar int32 actions, strongly typed outputs; everything works under `jit`,
`vmap` and `lax.scan`.

xminigrid's API differs from gymnax's (`reset(params, key)` and
`step(params, timestep, action)` on its own `TimeStep`, with no key for
`step`), so the adapter overrides the base class's hooks: the state of each
environment is xminigrid's `TimeStep`, and the adapter restarts finished
episodes itself (xminigrid's `step` does not), with a fresh key from the
environment's own stream, not from the key kept in xminigrid's state.

Observations are xminigrid's egocentric view, [view, view, 2] (7x7 by
default): per cell, the tile id and the colour id, converted to float32 as
they are (categorical values, not one-hot). There are 6 actions. An episode
terminates (on reaching its goal, with reward `1 - 0.9 * steps /
max_steps`, or e.g. on Memory's wrong choice, with reward 0) or is
truncated after `max_steps` steps (MiniGrid's default, e.g. 4 * height *
width) with reward 0; both are LAST.

The XLand-MiniGrid ids ('XLand-MiniGrid-R1-9x9', ...) need a ruleset
(`env_params={'ruleset': ...}`, e.g. one of `xminigrid.load_benchmark(...)`,
which downloads the benchmark); without one their goal can never be reached,
so they are refused.

xminigrid is imported only when an environment is built, so importing this
module (or `disco`) does not need it.
"""

from collections.abc import Mapping
import difflib
import importlib
from typing import Any

import chex

from disco.environments import gymnax_env

_INSTALL_HINT = 'pip install -e ".[xminigrid]"'
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
        f' {_INSTALL_HINT} (from the repository root; it installs'
        ' xminigrid).'
    ) from error


class XMinigridEnvironment(gymnax_env.GymnaxApiEnvironment):
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
    gymnax_env.check_batch_size(batch_size)
    xminigrid = _import_xminigrid()
    known_names = list(xminigrid.registered_environments())
    if env_name not in known_names:
      close = difflib.get_close_matches(str(env_name), known_names, n=3)
      suggestion = f' Did you mean {close}?' if close else ''
      raise ValueError(
          f'Unknown xminigrid environment {env_name!r}.{suggestion} Valid'
          ' names are listed by `xminigrid.registered_environments()`:'
          f' {sorted(known_names)}.'
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
      params = gymnax_env.replace_params(params, env_params, env_name)
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

  def _env_step(
      self, rng_key: chex.PRNGKey, state: Any, action: chex.Array
  ) -> tuple[chex.Array, Any, chex.Array, chex.Array]:
    del rng_key  # xminigrid's transitions are deterministic.
    timestep = self._env.step(self._params, state, action)
    return (
        timestep.observation,
        timestep,
        timestep.reward,
        timestep.last(),
    )
