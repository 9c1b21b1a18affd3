"""The reference's objects for a case's config, and its outputs flattened.

Shared by the recipes (`cases_*.py`) and by the builtin spec, which runs
the same objects to produce its inputs. `ref` is the namespace of
`reference.load_reference`.
"""

from collections.abc import Mapping
import re
from typing import Any

from dm_env import specs
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np

from tests.parity import golden
from tests.parity.recorder import reference


def flat(prefix: str, tree: Any) -> dict[str, np.ndarray]:
  """`tree` flattened with the goldens' keys, under `prefix/`.

  A Python scalar leaf (a `ValueOuts` field left at its default 0.0) takes
  JAX's dtype for it (float32), as the goldens store it.
  """
  out = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    key = jax.tree_util.keystr(path, simple=True, separator='/')
    if isinstance(leaf, (bool, int, float)):
      leaf = jnp.asarray(leaf)
    out[f'{prefix}/{key}' if key else prefix] = np.asarray(leaf)
  return out


def checksums(prefix: str, tree: Any) -> dict[str, np.ndarray]:
  """Per leaf: shape, sum and sum of squares, first 8 values.

  The sums are taken in float64; the goldens store them, and the first
  values (of integer leaves too), as float32.
  """
  out = {}
  for key, leaf in flat(prefix, tree).items():
    values = np.asarray(leaf)
    as_float = values.astype(np.float64)
    out[f'{key}/shape'] = np.asarray(values.shape, np.int32)
    out[f'{key}/sum'] = np.float32(np.sum(as_float))
    out[f'{key}/sumsq'] = np.float32(np.sum(as_float**2))
    out[f'{key}/head'] = values.ravel()[:8].astype(np.float32)
  return out


def tuplify(value: Any) -> Any:
  """JSON lists -> tuples (the reference's configs use tuples)."""
  if isinstance(value, Mapping):
    return {k: tuplify(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return tuple(tuplify(v) for v in value)
  return value


def _jsonable(value: Any) -> Any:
  """`value` as JSON would hold it (dicts and lists), to compare configs."""
  if hasattr(value, 'to_dict'):
    value = value.to_dict()
  if hasattr(value, '__dataclass_fields__') and not isinstance(value, type):
    value = {k: getattr(value, k) for k in value.__dataclass_fields__}
  if isinstance(value, Mapping):
    return {k: _jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  return value


def agent_settings(ref, config: Mapping[str, Any]) -> config_dict.ConfigDict:
  """The reference's `ConfigDict` for a case's `agent_settings`."""
  settings = tuplify(config)
  net = settings['update_rule'].get('net')
  if net is not None:
    option = ref.disco.get_input_option()
    if _jsonable(net['input_option']) != _jsonable(option):
      raise ValueError('The case input option is not get_input_option().')
    net['input_option'] = option
  return config_dict.ConfigDict(settings)


def subtree(arrays: Mapping[str, Any], prefix: str) -> dict[str, Any]:
  """The entries under `prefix/`, keyed by the rest of their keys."""
  prefix = prefix.rstrip('/') + '/'
  return {
      k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)
  }


def count(arrays: Mapping[str, Any], prefix: str) -> int:
  """How many items `prefix/0`, `prefix/1`, ... `arrays` holds."""
  return len({k.split('/', 1)[0] for k in subtree(arrays, prefix)})


def stack(trees: list[Any]) -> Any:
  """The trees' leaves stacked on a new first axis."""
  return jax.tree.map(lambda *xs: np.stack(xs), *trees)


def fill(template: Any, flat_tree: Mapping[str, np.ndarray]) -> Any:
  """`template`'s structure holding the leaves of `flat_tree` (same keys)."""
  keys = list(golden.flatten(template))
  if set(keys) != set(flat_tree):
    raise KeyError(sorted(set(keys) ^ set(flat_tree))[:5])
  return jax.tree.unflatten(
      jax.tree.structure(template), [flat_tree[k] for k in keys]
  )


def ema_state(ref, flat_state: Mapping[str, np.ndarray]):
  """The reference's `EmaState` of a case's stored one."""
  return ref.types.EmaState(
      moment1=flat_state['moment1'],
      moment2=flat_state['moment2'],
      decay_product=flat_state['decay_product'],
  )


def actor_rollout(ref, flat_rollout: Mapping[str, np.ndarray]):
  """The reference's `ActorRollout` of a case's stored one."""
  return ref.types.ActorRollout(
      observations=flat_rollout['observations'],
      actions=flat_rollout['actions'],
      rewards=flat_rollout['rewards'],
      discounts=flat_rollout['discounts'],
      agent_outs=subtree(flat_rollout, 'agent_outs'),
      states={},
      logits=flat_rollout['logits'],
  )


def disco103(ref) -> dict[str, dict[str, np.ndarray]]:
  """The Disco103 weights shipped with the reference."""
  path = (
      ref.root
      / reference.PACKAGE
      / 'update_rules'
      / 'weights'
      / 'disco_103.npz'
  )
  with np.load(path) as npz:
    return golden.to_haiku({k: npz[k] for k in npz.files})


def catch(ref, batch: int, rows: int, columns: int):
  """The reference's jittable Catch."""
  return ref.jittable_envs.CatchJittableEnvironment(
      batch_size=batch,
      env_settings=config_dict.ConfigDict(dict(rows=rows, columns=columns)),
  )


def spec_agent(ref, config: Mapping[str, Any]):
  """The Agent of a case whose config gives observation spec and actions."""
  return ref.agent.Agent(
      single_observation_spec={
          'observation': specs.Array(
              tuple(config['single_observation_spec']['observation']),
              np.float32,
          )
      },
      single_action_spec=specs.BoundedArray(
          (), np.int32, 0, config['num_actions'] - 1
      ),
      agent_settings=agent_settings(ref, config['agent_settings']),
      batch_axis_name=None,
  )


def make_agent(ref, config: Mapping[str, Any], batch_axis_name=None):
  """The Agent of a case on its Catch grid, and its update-rule params."""
  settings = agent_settings(ref, config['agent_settings'])
  env = catch(
      ref, config['batch'], config['catch_rows'], config['catch_columns']
  )
  agent = ref.agent.Agent(
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      agent_settings=settings,
      batch_axis_name=batch_axis_name,
  )
  if settings.update_rule_name == 'disco':
    return agent, disco103(ref)
  return agent, {'dummy': 0.0}


def seed_of(text: str) -> int:
  """The seed of a config's 'PRNGKey(seed)' (or '...PRNGKey(seed)...')."""
  match = re.search(r'PRNGKey\((\d+)\)', text)
  if not match:
    raise ValueError(f'No PRNGKey(seed) in {text!r}.')
  return int(match.group(1))
