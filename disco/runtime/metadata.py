"""What a run's checkpoints record about it, and the check before a resume.

One schema for every loop (`run_metadata`), one digest of the update rule
(`params_digest`) and one reader (`read_metadata`) that also reads the two
schemas of release 0.2 (evaluation and training; meta-training and
discovery), for one release.
"""

from collections.abc import Mapping, Sequence, Set
import hashlib
from typing import Any

import jax
import numpy as np

from disco import checkpoint as checkpoint_lib
from disco import configs
from disco import types
from disco import weights

SCHEMA = 2
# How `params_digest` hashes; the readers of older schemas use their own.
DIGEST = 'sha256-v2'
EVAL_DIGEST_V1 = 'sha256-eval-v1'
META_DIGEST_V1 = 'sha256-meta-v1'


def params_digest(params: types.MetaParams, scheme: str = DIGEST) -> str:
  """SHA-256 of a parameter tree: key paths, shapes, dtypes and values.

  Floating leaves are hashed as float32, so a tree and its float32 copy
  have one digest. `scheme` names an older release's digest (for reading
  its checkpoints).
  """
  if scheme == META_DIGEST_V1:
    return _meta_digest_v1(params)
  digest = hashlib.sha256()
  for key, array in sorted(checkpoint_lib.flatten_tree(params).items()):
    if scheme == DIGEST and np.issubdtype(array.dtype, np.floating):
      array = array.astype(np.float32)
    elif scheme not in (DIGEST, EVAL_DIGEST_V1):
      raise ValueError(f'Unknown digest scheme {scheme!r}.')
    array = np.ascontiguousarray(array)
    digest.update(f'{key}:{array.dtype}:{array.shape}'.encode())
    digest.update(array.tobytes())
  return digest.hexdigest()


def _meta_digest_v1(params: weights.Params) -> str:
  digest = hashlib.sha256()
  for key, leaf in sorted(weights.flatten_params(params).items()):
    array = np.ascontiguousarray(np.asarray(leaf, np.float32))
    digest.update(key.encode())
    digest.update(str(array.shape).encode())
    digest.update(array.tobytes())
  return digest.hexdigest()


def run_metadata(
    kind: str,
    config: configs.ConfigBase,
    rule_sha256: str,
    num_local_devices: int,
    *,
    seeds: Sequence[int] | None = None,
    rule_digest: str = DIGEST,
) -> dict[str, Any]:
  """The metadata a run's checkpoints carry.

  Args:
    kind: the loop that writes them (e.g. 'disco-eval').
    config: the run's config.
    rule_sha256: `params_digest` of the rule the run started from.
    num_local_devices: the devices of this process the run uses.
    seeds: the run's seeds, where a run has several.
    rule_digest: the scheme `rule_sha256` was computed with.

  Returns:
    A JSON-friendly dict.
  """
  return dict(
      schema=SCHEMA,
      kind=kind,
      config=config.to_dict(),
      seeds=None if seeds is None else [int(s) for s in seeds],
      rule_sha256=rule_sha256,
      rule_digest=rule_digest,
      num_local_devices=int(num_local_devices),
      num_processes=jax.process_count(),
      jax_version=jax.__version__,
  )


def read_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
  """A checkpoint's metadata in the current schema (older ones converted)."""
  if meta.get('schema') == SCHEMA:
    return dict(meta)
  if 'update_rule_params_sha256' in meta:  # Evaluation and training, 0.2.
    return dict(
        schema=SCHEMA,
        kind=meta.get('kind'),
        config=meta.get('config'),
        seeds=meta.get('seeds'),
        rule_sha256=meta.get('update_rule_params_sha256'),
        rule_digest=EVAL_DIGEST_V1,
        num_local_devices=meta.get('num_devices'),
        num_processes=1,
        jax_version=meta.get('jax_version'),
    )
  return dict(  # Meta-training and discovery, 0.2.
      schema=SCHEMA,
      kind=meta.get('kind'),
      config=meta.get('config'),
      seeds=None,
      rule_sha256=meta.get('init_params_sha256'),
      rule_digest=META_DIGEST_V1,
      num_local_devices=meta.get('num_local_devices'),
      num_processes=meta.get('num_processes'),
      jax_version=meta.get('jax_version'),
  )


def check_metadata(
    meta: Mapping[str, Any],
    where: str,
    *,
    kind: str,
    config: configs.ConfigBase,
    num_local_devices: int,
    execution_fields: Set[str] = frozenset(),
    seeds: Sequence[int] | None = None,
    rule_params: types.MetaParams | None = None,
) -> dict[str, Any]:
  """Raises `CheckpointMismatchError` unless `meta` belongs to this run.

  Args:
    meta: the checkpoint's metadata (any schema `read_metadata` reads).
    where: names the checkpoint in messages.
    kind: the loop that must have written it.
    config: the run's config; fields other than `execution_fields` (and
      `seed`, when `seeds` are compared) must be equal.
    num_local_devices: must be equal (and the process count).
    execution_fields: config fields a resumed run may change.
    seeds: compared when given.
    rule_params: the rule the run starts from, compared when given.

  Returns:
    The metadata in the current schema.
  """
  meta = read_metadata(meta)
  mismatch = checkpoint_lib.CheckpointMismatchError
  if meta['kind'] != kind:
    raise mismatch(f'{where} was written by {meta["kind"]!r}, not {kind!r}.')
  try:
    saved = type(config).from_dict(meta['config'])
  except (KeyError, TypeError, ValueError) as e:
    raise mismatch(f'{where} has an unreadable config: {e}') from e
  skipped = set(execution_fields) | ({'seed'} if seeds is not None else set())
  differ = [
      f'{name} (checkpoint {getattr(saved, name)!r}, now'
      f' {getattr(config, name)!r})'
      for name in config.field_names()
      if name not in skipped and getattr(saved, name) != getattr(config, name)
  ]
  if seeds is not None and meta['seeds'] != [int(s) for s in seeds]:
    differ.append(f'seeds (checkpoint {meta["seeds"]}, now {list(seeds)})')
  layout = (meta['num_local_devices'], meta['num_processes'])
  if layout != (num_local_devices, jax.process_count()):
    differ.append(
        f'devices (checkpoint {layout[0]} device(s) on {layout[1]}'
        f' process(es), now {num_local_devices} device(s) on'
        f' {jax.process_count()}; resume on the same layout)'
    )
  if rule_params is not None:
    digest = params_digest(rule_params, meta['rule_digest'])
    if digest != meta['rule_sha256']:
      differ.append(
          'initial update-rule parameters (SHA-256 checkpoint'
          f' {meta["rule_sha256"]}, now {digest})'
      )
  if differ:
    raise mismatch(
        f'{where} belongs to another run; it differs in: '
        + '; '.join(differ)
        + '.'
    )
  return meta
