"""Checks of the arguments every adapter takes: batch size, name, settings.

The gymnax, Craftax and xminigrid adapters share them, so that a mistyped
environment id or setting reads the same whichever package it is for.
"""

from collections.abc import Mapping, Sequence
import difflib
from typing import Any

import numpy as np


def check_batch_size(batch_size: Any) -> int:
  """`batch_size` as an int, or a ValueError if it is not a positive int."""
  if isinstance(batch_size, bool) or not isinstance(
      batch_size, (int, np.integer)
  ):
    raise ValueError(f'batch_size must be an int, got {batch_size!r}.')
  if batch_size < 1:
    raise ValueError(f'batch_size must be positive, got {batch_size}.')
  return int(batch_size)


def check_env_name(
    env_name: str, known_names: Sequence[str], package: str, valid_names: str
) -> None:
  """A ValueError naming the closest known names, unless `env_name` is known.

  The message of the adapters (gymnax, Craftax, xminigrid) for a mistyped
  id: 'Unknown {package} environment {env_name!r}. Did you mean [...]? Valid
  names {valid_names}: [the known names, sorted].'

  Args:
    env_name: the id asked for.
    known_names: the ids the package (or adapter) accepts.
    package: the package, as the message names it (e.g. 'gymnax').
    valid_names: what the message says of the valid names before listing
      them (e.g. 'are listed by `gymnax.registered_envs`').

  Raises:
    ValueError: `env_name` is not in `known_names`.
  """
  if env_name in known_names:
    return
  close = difflib.get_close_matches(str(env_name), known_names, n=3)
  suggestion = f' Did you mean {close}?' if close else ''
  raise ValueError(
      f'Unknown {package} environment {env_name!r}.{suggestion} Valid names'
      f' {valid_names}: {sorted(known_names)}.'
  )


def replace_params(params: Any, overrides: Mapping[str, Any], name: str):
  """`params.replace(**overrides)` for a dataclass, naming unknown fields.

  Args:
    params: a (flax or chex) dataclass of environment parameters.
    overrides: field names and their new values.
    name: the environment's name, for the error message.

  Returns:
    The parameters with the fields replaced.

  Raises:
    ValueError: a field that `params` does not have.
  """
  fields = sorted(getattr(params, '__dataclass_fields__', {}))
  unknown = sorted(set(overrides) - set(fields))
  if unknown:
    raise ValueError(
        f'Unknown setting(s) {", ".join(map(repr, unknown))} for {name!r}:'
        f' its settings are the fields of its {type(params).__name__}:'
        f' {", ".join(fields)}.'
    )
  return params.replace(**overrides)
