"""Update-rule parameters as a flat `.npz` file: layout, checks, load, save.

Haiku trees `{module_path: {param_name: array}}` are stored with the two
levels joined by a slash (the layout of `disco_103.npz`).
"""

from collections.abc import Mapping
import io
import pathlib
from typing import Any
import zipfile
import zlib

import numpy as np

from disco import files

# A path as accepted by the functions of this module.
PathLike = files.PathLike
# A Haiku parameter tree: `{module_path: {param_name: array}}`.
Params = Mapping[str, Mapping[str, Any]]
# Such a tree of numpy arrays, as the loaders return it.
HostParams = dict[str, dict[str, np.ndarray]]

# Exceptions numpy and zipfile raise on bytes that are not a readable `.npz`.
_NPZ_READ_ERRORS = (
    ValueError,
    EOFError,
    OSError,
    KeyError,
    NotImplementedError,
    zipfile.BadZipFile,
    zlib.error,
)


class WeightsError(ValueError):
  """Parameters, or the file holding them, are not what was expected."""


class StructureError(WeightsError):
  """A parameter tree has missing or unexpected keys, or wrong shapes.

  Attributes:
    missing: sorted flat keys expected but absent.
    unexpected: sorted flat keys present but not expected.
    mismatched: sorted `(key, expected_shape, actual_shape)` triples.
  """

  def __init__(
      self,
      message: str,
      *,
      missing: list[str],
      unexpected: list[str],
      mismatched: list[tuple[str, tuple[int, ...], tuple[int, ...]]],
  ):
    super().__init__(message)
    self.missing = missing
    self.unexpected = unexpected
    self.mismatched = mismatched


class WeightsNotFoundError(FileNotFoundError):
  """A weights file does not exist where it was looked for."""


# ----------------------------------------------------------------------------
# Flat <-> tree layout.


def flatten_params(params: Params) -> dict[str, Any]:
  """Joins a Haiku tree `{module: {name: leaf}}` into `{'module/name': leaf}`.

  Leaves are passed through untouched, so this works for arrays as well as for
  trees of shapes or `jax.ShapeDtypeStruct`s.

  Args:
    params: a two-level mapping from module path to parameter name to leaf.

  Returns:
    A flat dict keyed by `'<module path>/<parameter name>'`.

  Raises:
    WeightsError: if the tree is not two levels deep, a module path is empty,
      or a parameter name is empty or contains '/' (the key could then not be
      split back unambiguously).
  """
  if not isinstance(params, Mapping):
    raise WeightsError(
        'Expected a Haiku params tree {module_path: {name: array}}, got '
        f'{type(params).__name__}.'
    )
  flat = {}
  for module, module_params in params.items():
    if not isinstance(module, str) or not module:
      raise WeightsError(f'Module paths must be non-empty strings: {module!r}.')
    if not isinstance(module_params, Mapping):
      raise WeightsError(
          f'params[{module!r}] is a {type(module_params).__name__}; expected a'
          ' mapping {param_name: array} (a Haiku params tree has two'
          ' levels).'
      )
    for name, leaf in module_params.items():
      if not isinstance(name, str) or not name or '/' in name:
        raise WeightsError(
            'Parameter names must be non-empty strings without "/": '
            f'{name!r} in module {module!r}.'
        )
      flat[f'{module}/{name}'] = leaf
  return flat


def unflatten_params(flat: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
  """Splits flat `'module/name'` keys on the last '/' into a Haiku tree.

  Args:
    flat: a mapping such as the `np.load`ed contents of `disco_103.npz`; any
      parameter names are allowed, not only `w` and `b`.

  Returns:
    `{module_path: {param_name: value}}`, in the order of `flat`.

  Raises:
    WeightsError: if a key has no '/' or an empty module path or name.
  """
  params = {}
  for key in flat:
    if not isinstance(key, str):
      raise WeightsError(f'Keys must be strings, got {key!r}.')
    module, sep, name = key.rpartition('/')
    if not sep or not module or not name:
      raise WeightsError(
          f'Key {key!r} is not of the form "<module path>/<parameter name>".'
      )
    params.setdefault(module, {})[name] = flat[key]
  return params


# ----------------------------------------------------------------------------
# Structure checks.


def _reference_shape(leaf: Any) -> tuple[int, ...]:
  """Shape of an array-like reference leaf, or the leaf if it is a shape."""
  if isinstance(leaf, tuple) and all(
      isinstance(d, int) and not isinstance(d, bool) for d in leaf
  ):
    return leaf
  return files.shape_of(leaf)


def validate_params(
    params: Params, reference: Params, *, what: str = 'Parameters'
) -> None:
  """Checks that `params` has exactly the keys and shapes of `reference`.

  Use it to check loaded update-rule parameters against a rule's
  `init_params` before training or evaluating with them: a mismatch would
  otherwise surface as an obscure shape error deep inside a jitted function.

  Args:
    params: the Haiku tree to check.
    reference: a Haiku tree of the same layout whose leaves are arrays (or
      anything with `.shape`) or shape tuples, e.g.
      `unflatten_params(DISCO103_SHAPES)`.
    what: how to name `params` in the error message.

  Raises:
    StructureError: naming the first missing keys, unexpected keys and shape
      mismatches (expected vs got).
    WeightsError: if either tree is not a two-level Haiku params tree.
  """
  got = {k: files.shape_of(v) for k, v in flatten_params(params).items()}
  want = {k: _reference_shape(v) for k, v in flatten_params(reference).items()}
  diff = files.diff_trees(got, want)
  if diff:
    raise StructureError(
        f'{what} do not match the expected structure'
        f' ({diff.num_expected} tensors): '
        f'{diff.describe()}.',
        missing=diff.missing,
        unexpected=diff.unexpected,
        mismatched=diff.mismatched,
    )


# ----------------------------------------------------------------------------
# Reading and writing `.npz` files.


def _is_float_dtype(dtype: np.dtype) -> bool:
  """True for numpy floats and ml_dtypes floats such as bfloat16."""
  return dtype.kind == 'f' or (dtype.kind == 'V' and 'float' in dtype.name)


def read_file_bytes(path: pathlib.Path, where: str) -> bytes:
  """Reads a whole file, turning absence into `WeightsNotFoundError`."""
  try:
    return path.read_bytes()
  except FileNotFoundError:
    raise WeightsNotFoundError(f'No such file: {where}.') from None
  except IsADirectoryError:
    raise WeightsError(f'Not a file but a directory: {where}.') from None


def params_from_npz_bytes(data: bytes, where: str) -> dict[str, dict[str, Any]]:
  """Decodes the bytes of a flat `.npz` into a float32 Haiku tree."""
  try:
    archive = np.load(io.BytesIO(data), allow_pickle=False)
    if not isinstance(archive, np.lib.npyio.NpzFile):
      raise ValueError('it holds a single .npy array, not an archive')
    with archive:
      flat = {key: archive[key] for key in archive.files}
  except _NPZ_READ_ERRORS as e:
    raise WeightsError(
        f'{where} is not a valid .npz file ({type(e).__name__}: {e}); it may '
        'be truncated or corrupt.'
    ) from e
  if not flat:
    raise WeightsError(f'{where} holds no arrays.')
  for key, array in flat.items():
    if array.dtype.kind != 'f':
      raise WeightsError(
          f'{where}: {key!r} has dtype {array.dtype}; update-rule parameters '
          'must be floating point.'
      )
  try:
    params = unflatten_params(flat)
  except WeightsError as e:
    raise WeightsError(f'{where}: {e}') from None
  return {
      module: {name: a.astype(np.float32, copy=False) for name, a in m.items()}
      for module, m in params.items()
  }


def load_update_rule_params(path: PathLike) -> HostParams:
  """Loads any update-rule parameters saved in the flat `.npz` layout.

  No checksum is involved, so this serves meta-trained rules as well as
  Disco103 (for which `load_disco103` adds the published checks).

  Args:
    path: the `.npz` file.

  Returns:
    A Haiku tree `{module_path: {name: float32 numpy array}}`.

  Raises:
    WeightsNotFoundError: if there is no file at `path`.
    WeightsError: if the file is not a readable `.npz` of floating-point
      arrays under `'<module path>/<name>'` keys.
  """
  path = pathlib.Path(path).expanduser()
  return params_from_npz_bytes(read_file_bytes(path, str(path)), str(path))


def save_update_rule_params(params: Params, path: PathLike) -> pathlib.Path:
  """Atomically writes a Haiku tree as a flat, compressed `.npz`.

  Leaves are stored as float32 under sorted `'<module path>/<name>'` keys,
  which is the layout of `disco_103.npz`, so the file loads back with
  `load_update_rule_params` bit for bit, and equal parameters always give
  equal bytes. Readers never see a partly written file: the data goes to a
  temporary file in the same directory which is renamed over `path` only
  once complete.

  Args:
    params: `{module_path: {name: array}}` with floating-point leaves (numpy
      or JAX arrays).
    path: destination; its directory must exist. Written exactly as given
      (no `.npz` suffix is added).

  Returns:
    The destination path.

  Raises:
    WeightsError: if `params` is not a two-level tree of floating-point
      arrays; nothing is written then.
  """
  path = pathlib.Path(path).expanduser()
  flat = {}
  for key, leaf in sorted(flatten_params(params).items()):
    array = np.asarray(leaf)
    if not _is_float_dtype(array.dtype):
      raise WeightsError(
          f'{key!r} has dtype {array.dtype}; update-rule parameters must be '
          'floating point.'
      )
    flat[key] = array.astype(np.float32, copy=False)
  if not flat:
    raise WeightsError('Refusing to save an empty parameter tree.')
  with files.atomic_write(path) as f:
    np.savez_compressed(f, **flat)
  return path
