"""The reference's colabs, run here: their code cells and imports.

The eval curve and the meta-gradient cases run the colabs' own loops
(`colabs/eval.ipynb`, `colabs/meta_train.ipynb` in the reference checkout),
executed from their cells with the colabs' imports taken from the
reference.
"""

import collections
from collections.abc import Mapping
import importlib
import json
from typing import Any

import chex
import distrax
import haiku as hk
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np
import optax
import rlax

from tests.parity.recorder import calls
from tests.parity.recorder import reference


def notebook_cells(ref, name: str, titles: tuple[str, ...]) -> str:
  """The source of the reference colab's code cells with these titles."""
  cells = json.loads((ref.root / 'colabs' / name).read_text())['cells']
  sources = {}
  for cell in cells:
    source = ''.join(cell['source'])
    first = source.split('\n', 1)[0]
    if cell['cell_type'] == 'code' and first.startswith('# @title '):
      sources[first[len('# @title ') :]] = source
  return '\n'.join(sources[t] for t in titles)


def namespace(ref) -> dict[str, Any]:
  """The colabs' imports, from the reference."""
  base_env = importlib.import_module(f'{reference.PACKAGE}.environments.base')
  return dict(
      Any=Any,
      config_dict=config_dict,
      optax=optax,
      chex=chex,
      distrax=distrax,
      hk=hk,
      jax=jax,
      jnp=jnp,
      np=np,
      rlax=rlax,
      collections=collections,
      types=ref.types,
      utils=ref.utils,
      base_env=base_env,
      jittable_envs=ref.jittable_envs,
      agent_lib=ref.agent,
      value_fn=ref.value_fn,
      axis_name='i',
  )


def meta_train_agent(ref, config: Mapping[str, Any]):
  """The meta-train colab's namespace and `MetaTrainAgent` for a case."""
  ns = namespace(ref)
  rows, columns = config['catch_rows'], config['catch_columns']
  ns['batch_size_per_device'] = config['batch_size_per_device']
  # The colab's get_env, with the case's grid (MANIFEST 4.7).
  ns['get_env'] = lambda batch_size: calls.catch(ref, batch_size, rows, columns)
  exec(  # pylint: disable=exec-used
      notebook_cells(
          ref,
          'meta_train.ipynb',
          (
              'Helper functions for interacting with environments.',
              'Meta training agent',
              'Calculate meta gradients for a single agent.',
          ),
      ),
      ns,
  )
  value_config = calls.tuplify(config['value_fn_config'])
  agent = ns['MetaTrainAgent'](
      batch_size_per_device=config['batch_size_per_device'],
      agent_settings=calls.agent_settings(ref, config['agent_settings']),
      value_fn_config=ref.types.ValueFnConfig(**value_config),
      axis_name=config['axis_name'],
  )
  return ns, agent
