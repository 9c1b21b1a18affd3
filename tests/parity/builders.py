"""Rebuilding the goldens' inputs (and configs) as `disco` objects.

The goldens store flat `/`-joined keys (see MANIFEST.md section 2). These
helpers turn them back into the containers the code takes: rollouts,
timesteps, moving-average states, agent settings and trees shaped like one
of our own (e.g. a `LearnerState`).
"""

from collections.abc import Mapping
import dataclasses
import functools
import os
from typing import Any

import jax
from ml_collections import config_dict
import numpy as np
import pytest

from disco import types
from disco.update_rules import disco as disco_rule
from tests.parity import golden

WEIGHTS_ENV = 'DISCO_WEIGHTS'


def tuplify(value: Any) -> Any:
  """JSON lists -> tuples, recursively (the reference's configs use tuples)."""
  if isinstance(value, Mapping):
    return {k: tuplify(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return tuple(tuplify(v) for v in value)
  return value


def jsonable(value: Any) -> Any:
  """A config value as the goldens' JSON sidecars write it."""
  if isinstance(value, config_dict.ConfigDict):
    value = value.to_dict()
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
  if isinstance(value, Mapping):
    return {k: jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [jsonable(v) for v in value]
  return value


def agent_settings(config: Mapping[str, Any]) -> config_dict.ConfigDict:
  """The `ConfigDict` of a case's `config['agent_settings']`.

  The JSON holds the Disco input option as plain data; it must equal ours,
  and is then replaced by `disco_rule.get_input_option()`.

  Args:
    config: the `agent_settings` entry of a case's config.

  Returns:
    Settings for `disco.agent.Agent`.
  """
  settings = tuplify(config)
  net = settings['update_rule'].get('net')
  if net is not None:
    option = disco_rule.get_input_option()
    assert jsonable(net['input_option']) == jsonable(
        option
    ), 'The golden input option differs from get_input_option().'
    net['input_option'] = option
  return config_dict.ConfigDict(settings)


def ema_state(flat: Mapping[str, np.ndarray]) -> types.EmaState:
  """An `EmaState` from {decay_product, moment1, moment2}."""
  assert set(flat) == {'decay_product', 'moment1', 'moment2'}, sorted(flat)
  return types.EmaState(
      moment1=flat['moment1'],
      moment2=flat['moment2'],
      decay_product=flat['decay_product'],
  )


def actor_rollout(flat: Mapping[str, np.ndarray]) -> types.ActorRollout:
  """An `ActorRollout` (bare observations, no recurrent states)."""
  agent_outs = {
      k[len('agent_outs/') :]: v
      for k, v in flat.items()
      if k.startswith('agent_outs/')
  }
  return types.ActorRollout(
      observations=flat['observations'],
      actions=flat['actions'],
      rewards=flat['rewards'],
      discounts=flat['discounts'],
      agent_outs=agent_outs,
      states={},
      logits=flat['logits'],
  )


def env_timestep(flat: Mapping[str, np.ndarray]) -> types.EnvironmentTimestep:
  """An `EnvironmentTimestep` with a bare observation array."""
  assert set(flat) == {'observation', 'reward', 'step_type'}, sorted(flat)
  return types.EnvironmentTimestep(
      observation=flat['observation'],
      step_type=flat['step_type'],
      reward=flat['reward'],
  )


def like(template: Any, flat: Mapping[str, np.ndarray]) -> Any:
  """A tree with `template`'s structure, its leaves read from `flat`.

  Args:
    template: a tree, e.g. our own `LearnerState`.
    flat: golden leaves keyed by their `/`-joined paths.

  Returns:
    The template's structure holding the golden arrays.
  """
  ours = golden.flatten(template)
  assert set(ours) == set(flat), (
      f'Tree paths differ: only ours {sorted(set(ours) - set(flat))[:5]},'
      f' only golden {sorted(set(flat) - set(ours))[:5]}'
  )
  # `flatten` keeps the tree's leaf order.
  leaves = [flat[key] for key in ours]
  return jax.tree.unflatten(jax.tree.structure(template), leaves)


@functools.cache
def disco103() -> dict[str, dict[str, np.ndarray]]:
  """The Disco103 parameters stored with the goldens (input data)."""
  return golden.Case('disco103_meta_params', record=False).haiku('params')


def weights_path() -> str:
  """`$DISCO_WEIGHTS`; fails under CI, skips elsewhere, when unset."""
  path = os.environ.get(WEIGHTS_ENV, '')
  if not path:
    message = f'${WEIGHTS_ENV} is not set (the published disco_103.npz).'
    if os.environ.get('CI'):
      pytest.fail(message, pytrace=False)
    pytest.skip(message)
  return path
