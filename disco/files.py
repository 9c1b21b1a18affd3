"""File and tree helpers shared by the weights, checkpoint and CLI modules.

Details and rationale: `docs/modules.md`.
"""

from collections.abc import Iterator, Mapping, Sequence
import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import tempfile
from typing import IO, Any, NamedTuple

import jax
import numpy as np

# A path as accepted by the functions of this module.
PathLike = str | os.PathLike[str]

# How many items an error message spells out per category.
MAX_LISTED = 5
# Permissions of files written atomically (`mkstemp` makes private files;
# these are ordinary readable data).
FILE_MODE = 0o644
_CHUNK_BYTES = 2**16


# ----------------------------------------------------------------------------
# Durable, atomic writes.


def fsync_path(path: PathLike) -> None:
  """Flushes a file's contents, or a directory's completed renames, to disk.

  Best effort where unsupported.
  """
  with contextlib.suppress(OSError):
    fd = os.open(path, os.O_RDONLY)
    try:
      os.fsync(fd)
    finally:
      os.close(fd)


@contextlib.contextmanager
def atomic_write(path: PathLike, *, text: bool = False) -> Iterator[IO[Any]]:
  """Yields a file whose contents replace `path` once the block completes.

  The file is a temporary one in `path`'s directory (so the final
  `os.replace` is atomic), opened for reading and writing (`w+b`, or `w+` in
  UTF-8 if `text`), flushed and fsynced before the rename. If the block
  raises, the temporary file is removed and any previous file at `path` is
  left untouched.

  Args:
    path: the destination; its directory must exist.
    text: open in text mode rather than binary.

  Yields:
    The open temporary file.
  """
  path = pathlib.Path(path)
  directory = path.parent
  fd, tmp_name = tempfile.mkstemp(
      dir=directory, prefix=f'.{path.name}.', suffix='.tmp'
  )
  try:
    mode = 'w+' if text else 'w+b'
    encoding = 'utf-8' if text else None
    with os.fdopen(fd, mode, encoding=encoding) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp_name, FILE_MODE)
    os.replace(tmp_name, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(tmp_name)
    raise
  fsync_path(directory)


def write_bytes_atomic(path: PathLike, data: bytes) -> None:
  """Atomically replaces `path`'s contents with `data`."""
  with atomic_write(path) as f:
    f.write(data)


def write_text_atomic(path: PathLike, text: str) -> None:
  """Atomically replaces `path`'s contents with `text` (UTF-8)."""
  with atomic_write(path, text=True) as f:
    f.write(text)


def write_json_atomic(path: PathLike, obj: Any) -> None:
  """Atomically writes `obj` as indented JSON with a final newline.

  Raises:
    TypeError, ValueError: if `obj` is not JSON-serialisable; nothing is
      written then.
  """
  write_text_atomic(path, json.dumps(obj, indent=1) + '\n')


@contextlib.contextmanager
def atomic_directory(
    path: PathLike, *, prefix: str | None = None
) -> Iterator[pathlib.Path]:
  """Yields an empty staging directory that becomes `path` on success.

  The staging directory lives next to `path` and is named `<prefix>XXXX`
  (default prefix `.<name>.tmp-`), so that a caller can recognise, and
  clean up, those left by a killed writer. Files in it should be fsynced
  by whoever writes them (`atomic_write` does). On success the directory
  is fsynced, renamed to `path` and the parent fsynced; on any failure it
  is removed.

  Args:
    path: the destination; must not exist (its parent must).
    prefix: name prefix of the staging directory.

  Yields:
    The staging directory.

  Raises:
    FileExistsError: if a non-empty `path` appeared in the meantime; it is
      left untouched.
  """
  path = pathlib.Path(path)
  if prefix is None:
    prefix = f'.{path.name}.tmp-'
  staging = pathlib.Path(tempfile.mkdtemp(dir=path.parent, prefix=prefix))
  try:
    yield staging
    fsync_path(staging)
    try:
      # Fails, rather than replacing, if a non-empty `path` exists.
      os.rename(staging, path)
    except OSError as e:
      if path.exists():
        raise FileExistsError(f'{path} already exists.') from e
      raise
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  fsync_path(path.parent)


def file_sha256(path: PathLike) -> str:
  """Hex SHA-256 of a file, as printed by `sha256sum`."""
  digest = hashlib.sha256()
  with open(path, 'rb') as f:
    while chunk := f.read(_CHUNK_BYTES):
      digest.update(chunk)
  return digest.hexdigest()


# ----------------------------------------------------------------------------
# Names of pytree leaves.


class KeyCollisionError(ValueError):
  """Two leaves of a tree would get the same '/'-joined name."""


def key_name(path: Sequence[Any]) -> str:
  """The '/'-joined name of a leaf's key path, e.g. `'mu/linear/w'` or `'1/0'`.

  Dict keys, attribute names (chex dataclasses, named tuples, optax states)
  and sequence indices each give one component, as `str` does.
  """
  return jax.tree_util.keystr(tuple(path), simple=True, separator='/')


def named_leaves(tree: Any, prefix: str = '') -> dict[str, Any]:
  """`{'<prefix>/a/b/0': leaf}` for every leaf of `tree`, in leaf order.

  Args:
    tree: any pytree.
    prefix: prepended to every name, joined with '/'; none if empty.

  Returns:
    The leaves by name, in the order of `jax.tree.leaves(tree)`.

  Raises:
    KeyCollisionError: if two leaves would get the same name (e.g. keys
      `'a/b'` and `('a', 'b')` of nested dicts).
  """
  head = prefix + '/' if prefix else ''
  named = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    name = head + key_name(path)
    if name in named:
      raise KeyCollisionError(f'Two leaves share the key {name!r}.')
    named[name] = leaf
  return named


# ----------------------------------------------------------------------------
# Reporting how two trees differ.


def listed(items: Sequence[Any], limit: int = MAX_LISTED) -> str:
  """The first `limit` items, comma-separated, then `... (N more)`."""
  shown = ', '.join(str(item) for item in items[:limit])
  if len(items) > limit:
    shown += f', ... ({len(items) - limit} more)'
  return shown


class ShapeDtype(NamedTuple):
  """A leaf's shape and dtype, shown like `float32[2, 5]`."""

  shape: tuple[int, ...]
  dtype: np.dtype

  def __str__(self) -> str:
    return f'{self.dtype}{list(self.shape)}'


def shape_of(leaf: Any) -> tuple[int, ...]:
  """The shape of an array-like leaf (arrays, `ShapeDtypeStruct`s, scalars)."""
  if hasattr(leaf, 'shape'):
    return tuple(int(d) for d in leaf.shape)
  return tuple(np.shape(leaf))


def shape_dtype_of(leaf: Any) -> ShapeDtype:
  """The shape and dtype of an array-like leaf."""
  dtype = leaf.dtype if hasattr(leaf, 'dtype') else np.asarray(leaf).dtype
  return ShapeDtype(shape_of(leaf), np.dtype(dtype))


class TreeMismatchError(ValueError):
  """A tree has missing or unexpected leaves, or leaves of another shape.

  Attributes:
    diff: how it differs (`TreeDiff`).
  """

  def __init__(self, message: str, diff: 'TreeDiff'):
    super().__init__(message)
    self.diff = diff


@dataclasses.dataclass(frozen=True)
class TreeDiff:
  """How a flat `{name: spec}` tree differs from the expected one.

  A spec is whatever is compared per leaf, e.g. a shape tuple or a
  `ShapeDtype`; it is shown with `str`.

  Attributes:
    missing: sorted names expected but absent.
    unexpected: sorted names present but not expected.
    mismatched: sorted `(name, expected_spec, actual_spec)` triples.
    num_expected: how many leaves were expected.
  """

  missing: list[str]
  unexpected: list[str]
  mismatched: list[tuple[str, Any, Any]]
  num_expected: int

  def __bool__(self) -> bool:
    """True if the trees differ."""
    return bool(self.missing or self.unexpected or self.mismatched)

  def describe(self) -> str:
    """`'2 missing: a, b; 1 unexpected: c; 1 mismatched: d (expected ...)'`.

    At most `MAX_LISTED` names per category, with a count of the rest.
    """
    problems = []
    if self.missing:
      problems.append(f'{len(self.missing)} missing: {listed(self.missing)}')
    if self.unexpected:
      problems.append(
          f'{len(self.unexpected)} unexpected: {listed(self.unexpected)}'
      )
    if self.mismatched:
      described = [
          f'{name} (expected {want}, got {got})'
          for name, want, got in self.mismatched
      ]
      problems.append(f'{len(self.mismatched)} mismatched: {listed(described)}')
    return '; '.join(problems)


def diff_trees(got: Mapping[str, Any], expected: Mapping[str, Any]) -> TreeDiff:
  """Compares two flat `{name: spec}` trees (e.g. from `named_leaves`).

  Args:
    got: the specs of the tree being checked.
    expected: the specs it should have.

  Returns:
    The differences; falsy if there are none.
  """
  return TreeDiff(
      missing=sorted(expected.keys() - got.keys()),
      unexpected=sorted(got.keys() - expected.keys()),
      mismatched=sorted(
          (name, expected[name], got[name])
          for name in expected.keys() & got.keys()
          if expected[name] != got[name]
      ),
      num_expected=len(expected),
  )
