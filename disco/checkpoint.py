"""Atomic, verified checkpoints of training state.

A checkpoint is one directory, `<root>/step_<step>/`, holding the update
rule's parameters, the run's state arrays and a metadata file with their
SHA-256 sums; it appears whole or not at all. Details and rationale:
`docs/modules.md`.
"""

from collections.abc import Callable, Mapping
import dataclasses
import io
import json
import pathlib
import re
import shutil
from typing import Any
import zipfile
import zlib

import jax
import numpy as np

from disco import files
from disco import weights

PathLike = files.PathLike

FORMAT = 'disco-checkpoint'
FORMAT_VERSION = 1
PARAMS_FILENAME = 'update_rule_params.npz'
STATE_FILENAME = 'state.npz'
METADATA_FILENAME = 'checkpoint.json'

_STEP_DIR = re.compile(r'^step_(\d+)$')
_TMP_PREFIX = '.tmp-step_'
_NPZ_ERRORS = (
    ValueError,
    EOFError,
    OSError,
    KeyError,
    zipfile.BadZipFile,
    zlib.error,
)


class CheckpointError(Exception):
  """A checkpoint cannot be written or used."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
  """There is no checkpoint where one was expected."""


class CheckpointExistsError(CheckpointError, FileExistsError):
  """Writing would replace an existing checkpoint."""


class CheckpointCorruptError(CheckpointError):
  """A checkpoint's files are missing, truncated or altered."""


class CheckpointMismatchError(CheckpointError):
  """A checkpoint does not fit the run that tries to resume from it."""


@dataclasses.dataclass(frozen=True)
class Checkpoint:
  """A loaded and verified checkpoint.

  Attributes:
    step: the step it was written at.
    path: its directory.
    update_rule_params: Haiku tree of float32 numpy arrays.
    arrays: flat `{key path: numpy array}` of everything in `state.npz`.
    metadata: the caller's metadata, as saved.
  """

  step: int
  path: pathlib.Path
  update_rule_params: weights.HostParams
  arrays: dict[str, np.ndarray]
  metadata: dict[str, Any]


def json_array(value: Any) -> np.ndarray:
  """A JSON-serialisable value as a uint8 array (kept in `state.npz`)."""
  return np.frombuffer(json.dumps(value).encode(), np.uint8).copy()


def from_json_array(array: np.ndarray) -> Any:
  """Inverse of `json_array`."""
  return json.loads(np.asarray(array, np.uint8).tobytes().decode())


# Pytrees <-> flat dicts.


def flatten_tree(tree: Any, prefix: str = '') -> dict[str, np.ndarray]:
  """`{'a/b/0': array}` for every leaf of `tree`, fetched to the host.

  Args:
    tree: a pytree of arrays (dicts, lists, tuples, chex dataclasses, ...).
    prefix: prepended to every key, joined with '/'.

  Returns:
    A flat dict from '/'-joined key paths (`disco.files.named_leaves`) to
    numpy arrays.

  Raises:
    CheckpointError: if two leaves would get the same key.
  """
  try:
    named = files.named_leaves(jax.device_get(tree), prefix)
  except files.KeyCollisionError as e:
    raise CheckpointError(str(e)) from None
  return {key: np.asarray(leaf) for key, leaf in named.items()}


def restore_tree(
    template: Any, arrays: Mapping[str, np.ndarray], prefix: str = ''
) -> Any:
  """Fills `template`'s structure with the arrays stored under `prefix`.

  Args:
    template: a pytree whose leaves have `.shape` and `.dtype` (arrays or
      `jax.ShapeDtypeStruct`s, e.g. from `jax.eval_shape`).
    arrays: flat arrays, e.g. `Checkpoint.arrays`.
    prefix: the key prefix the tree was saved under.

  Returns:
    A tree with the template's structure and the stored numpy arrays.

  Raises:
    CheckpointMismatchError: naming missing and unexpected keys and leaves
      whose shape or dtype differ from the template's.
  """
  head = prefix + '/' if prefix else ''
  stored = {k: v for k, v in arrays.items() if k.startswith(head)}
  wanted = files.named_leaves(template, prefix)
  diff = files.diff_trees(
      {k: files.shape_dtype_of(v) for k, v in stored.items()},
      {k: files.shape_dtype_of(v) for k, v in wanted.items()},
  )
  if diff:
    raise CheckpointMismatchError(
        f'The checkpoint\'s "{prefix or "state"}" arrays do not fit this run'
        f' (was it written with another configuration?): {diff.describe()}.'
    )
  treedef = jax.tree.structure(template)
  return jax.tree_util.tree_unflatten(treedef, [stored[key] for key in wanted])


# Listing.


def list_steps(root: PathLike) -> list[int]:
  """Steps of the complete checkpoints under `root`, ascending."""
  root = pathlib.Path(root)
  if not root.is_dir():
    return []
  steps = []
  for entry in root.iterdir():
    match = _STEP_DIR.match(entry.name)
    if match and entry.is_dir():
      steps.append(int(match.group(1)))
  return sorted(steps)


def latest_step(root: PathLike) -> int | None:
  """The newest checkpoint's step under `root`, or None if there is none."""
  steps = list_steps(root)
  return steps[-1] if steps else None


def step_path(root: PathLike, step: int) -> pathlib.Path:
  """The directory of the checkpoint of `step` under `root`."""
  return pathlib.Path(root) / f'step_{step:08d}'


# Writing.


def _exists(path: pathlib.Path) -> CheckpointExistsError:
  return CheckpointExistsError(
      f'A checkpoint already exists at {path}; refusing to overwrite it.'
  )


def save(
    root: PathLike,
    step: int,
    *,
    update_rule_params: weights.Params,
    arrays: Mapping[str, np.ndarray],
    metadata: Mapping[str, Any],
    keep: int | None = None,
) -> pathlib.Path:
  """Writes the checkpoint of `step` under `root`, atomically.

  Args:
    root: the run's checkpoint directory (created if needed).
    step: the step; names the checkpoint `step_<step>`.
    update_rule_params: Haiku tree of floating-point arrays.
    arrays: flat `{key: array}` (see `flatten_tree`) of the other state.
    metadata: JSON-serialisable information stored alongside.
    keep: if set, delete all but the newest `keep` checkpoints afterwards
      (only once the new one is in place). Staging directories of writers
      that were killed are removed too: one run per `root`.

  Returns:
    The new checkpoint's directory.

  Raises:
    CheckpointExistsError: a checkpoint of `step` already exists; it is left
      untouched.
    CheckpointError: for an invalid `step` or `keep`, or unserialisable
      metadata (nothing is written then).
  """
  if step < 0:
    raise CheckpointError(f'step must be >= 0, got {step}.')
  if keep is not None and keep < 1:
    raise CheckpointError(f'keep must be >= 1 or None, got {keep}.')
  root = pathlib.Path(root).expanduser()
  root.mkdir(parents=True, exist_ok=True)
  final = step_path(root, step)
  if final.exists():
    raise _exists(final)
  try:
    user_metadata = json.loads(json.dumps(dict(metadata)))
  except (TypeError, ValueError) as e:
    raise CheckpointError(f'Metadata is not JSON-serialisable: {e}') from e
  try:
    with files.atomic_directory(
        final, prefix=f'{_TMP_PREFIX}{step:08d}-'
    ) as staging:
      weights.save_update_rule_params(
          update_rule_params, staging / PARAMS_FILENAME
      )
      with files.atomic_write(staging / STATE_FILENAME) as f:
        np.savez(f, **arrays)
      record = dict(
          format=FORMAT,
          format_version=FORMAT_VERSION,
          step=int(step),
          files={
              name: files.file_sha256(staging / name)
              for name in (PARAMS_FILENAME, STATE_FILENAME)
          },
          metadata=user_metadata,
      )
      files.write_text_atomic(
          staging / METADATA_FILENAME,
          json.dumps(record, indent=1, sort_keys=True),
      )
  except FileExistsError as e:
    raise _exists(final) from e
  # Staging directories left by writers that were killed mid-way.
  for stale in root.glob(f'{_TMP_PREFIX}*'):
    shutil.rmtree(stale, ignore_errors=True)
  if keep is not None:
    for old in list_steps(root)[:-keep]:
      shutil.rmtree(step_path(root, old), ignore_errors=True)
  return final


# Reading.


def _corrupt(path: pathlib.Path, what: str) -> CheckpointCorruptError:
  return CheckpointCorruptError(
      f'The checkpoint at {path} is corrupt: {what}. It was left as it is;'
      ' delete that directory to fall back to an earlier checkpoint, if any.'
  )


def _read_npz(
    path: pathlib.Path,
    directory: pathlib.Path,
    wanted: Callable[[str], bool] | None = None,
):
  try:
    if wanted is not None:  # Members are read one by one, from the file.
      with np.load(path, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files if wanted(key)}
    data = path.read_bytes()
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
      return {key: archive[key] for key in archive.files}
  except _NPZ_ERRORS as e:
    raise _corrupt(
        directory, f'{path.name} is unreadable ({type(e).__name__}: {e})'
    ) from e


def _locate(root: PathLike, step: int | None) -> tuple[int, pathlib.Path]:
  """(step, directory) of a checkpoint (by default the newest) under `root`."""
  root = pathlib.Path(root).expanduser()
  if step is None:
    step = latest_step(root)
    if step is None:
      raise CheckpointNotFoundError(f'No checkpoint found under {root}.')
  directory = step_path(root, step)
  if not directory.is_dir():
    raise CheckpointNotFoundError(
        f'No checkpoint of step {step} under {root} (have: {list_steps(root)}).'
    )
  return step, directory


def _read_record(directory: pathlib.Path, step: int) -> dict[str, Any]:
  """The checked `checkpoint.json` record of the checkpoint in `directory`."""
  try:
    record = json.loads((directory / METADATA_FILENAME).read_text())
  except FileNotFoundError:
    raise _corrupt(directory, f'{METADATA_FILENAME} is missing') from None
  except (OSError, UnicodeDecodeError, ValueError) as e:
    raise _corrupt(directory, f'{METADATA_FILENAME} is unreadable ({e})') from e
  if not isinstance(record, dict) or record.get('format') != FORMAT:
    raise _corrupt(directory, f'{METADATA_FILENAME} is not a {FORMAT} record')
  if record.get('format_version') != FORMAT_VERSION:
    raise CheckpointMismatchError(
        f'The checkpoint at {directory} has format version'
        f' {record.get("format_version")}; this version of disco reads'
        f' version {FORMAT_VERSION}.'
    )
  if record.get('step') != step:
    raise _corrupt(
        directory,
        f'it records step {record.get("step")} but is named for step {step}',
    )
  return record


def read_metadata(root: PathLike, step: int | None = None) -> dict[str, Any]:
  """A checkpoint's caller metadata, without reading or verifying its arrays.

  Args:
    root: the run's checkpoint directory.
    step: which checkpoint; None for the newest.

  Returns:
    The metadata, as saved (`Checkpoint.metadata` once loaded).

  Raises:
    CheckpointNotFoundError: there is no (such) checkpoint under `root`.
    CheckpointCorruptError: its `checkpoint.json` is missing or unreadable.
    CheckpointMismatchError: it has another format version.
  """
  step, directory = _locate(root, step)
  return _read_record(directory, step).get('metadata', {})


def load(
    root: PathLike,
    step: int | None = None,
    *,
    arrays: Callable[[str], bool] | None = None,
) -> Checkpoint:
  """Loads and verifies a checkpoint (by default the newest) under `root`.

  Args:
    root: the run's checkpoint directory.
    step: which checkpoint; None for the newest.
    arrays: which of its arrays to read, by name (None: all). Reading a
      few (e.g. the logs) costs their memory only, not the whole state's.

  Returns:
    The verified `Checkpoint`.

  Raises:
    CheckpointNotFoundError: there is no (such) checkpoint under `root`.
    CheckpointCorruptError: a file is missing, unreadable, or does not have
      the digest recorded when it was written.
  """
  step, directory = _locate(root, step)
  record = _read_record(directory, step)
  digests = record.get('files')
  if not isinstance(digests, dict):
    raise _corrupt(directory, 'the file digests are missing')
  for name in (PARAMS_FILENAME, STATE_FILENAME):
    path = directory / name
    if not path.is_file():
      raise _corrupt(directory, f'{name} is missing')
    actual = files.file_sha256(path)
    if actual != digests.get(name):
      raise _corrupt(
          directory,
          f'{name} has SHA-256 {actual}, but {digests.get(name)} was recorded'
          ' when it was written (truncated or modified)',
      )
  try:
    params = weights.load_update_rule_params(directory / PARAMS_FILENAME)
  except weights.WeightsError as e:
    raise _corrupt(directory, str(e)) from e
  return Checkpoint(
      step=step,
      path=directory,
      update_rule_params=params,
      arrays=_read_npz(directory / STATE_FILENAME, directory, arrays),
      metadata=record.get('metadata', {}),
  )
