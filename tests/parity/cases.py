"""Loading golden cases from the set the running test compares against.

`Case` reads one case (`<name>.npz`, flat `/`-joined keys, and
`<name>.json`: config, notes, tolerance) from the set `use_set` chose for
the running test (`platforms.py` picks the sets and the mode), and says
which tolerances apply (`Case.pick`). When the directory or a case is
missing the test fails under CI (`$CI` set) and is skipped, with
instructions, elsewhere. `to_haiku`, `nest` and `flatten` convert between
the goldens' flat keys and trees.
"""

from collections.abc import Mapping
import json
import os
import pathlib
from typing import Any

import jax
import numpy as np
import pytest

from tests.parity import platforms

PARITY_DIR_ENV = platforms.PARITY_DIR_ENV
# The pytest user property that names a test's cases (conftest.py, teeth.py).
CASE_PROPERTY = 'parity_case'

NATIVE = platforms.NATIVE
CROSS = platforms.CROSS

_HOW_TO_GET = (
    'The parity goldens are recorded from the reference implementation and'
    ' are not part of this repository. Point ${env} at a directory holding'
    ' them, e.g. `export {env}=../shared/parity`.'
)


def missing(message: str) -> None:
  message = message + ' ' + _HOW_TO_GET.format(env=PARITY_DIR_ENV)
  if os.environ.get('CI'):
    pytest.fail(message, pytrace=False)
  pytest.skip(message)


def root_dir() -> pathlib.Path:
  """The main goldens' directory; fails (CI) or skips (elsewhere) if unset."""
  value = os.environ.get(PARITY_DIR_ENV)
  if not value:
    missing(f'${PARITY_DIR_ENV} is not set.')
  path = pathlib.Path(value).resolve()
  if not path.is_dir():
    missing(f'${PARITY_DIR_ENV}={value} is not a directory.')
  return path


def selection() -> platforms.Selection:
  """The golden sets and mode of this run; fails if they cannot be had."""
  try:
    return platforms.select(root_dir())
  except platforms.SelectionError as e:
    pytest.fail(str(e), pytrace=False)


# The set the running test compares against: set by the `golden_set`
# fixture (tests/parity/conftest.py), which runs each test once per set.
_current: platforms.GoldenSet | None = None


def use_set(golden_set: platforms.GoldenSet | None) -> None:
  """Makes `Case` load from `golden_set` (None: no set chosen)."""
  global _current
  _current = golden_set


def current_set() -> platforms.GoldenSet:
  """The set the running test compares against."""
  if _current is not None:
    return _current
  chosen = selection()
  if len(chosen.compared) == 1:
    return chosen.compared[0]
  raise RuntimeError(
      'This run compares against several golden sets, but the test has no'
      ' `golden_set` parameter (tests/parity/conftest.py).'
  )


# Why native mode is held to cross-platform tolerances on a GPU: the
# reference recorded twice on one H100, one process after the other, differed
# in the low bits (docs/parity.md, "The reference recorded on a GPU").
GPU_NOT_REPRODUCIBLE = 'an H100 did not reproduce itself bit for bit'


def cross_reason(mode: str) -> str | None:
  """Why a case of a run in `mode` takes cross tolerances here, or None.

  Native mode promises the tolerances of a machine that reproduces the
  reference bit for bit; a GPU (an H100, with XLA's default flags) does
  not, even against its own recording.
  """
  if mode == NATIVE and jax.default_backend() == 'gpu':
    return GPU_NOT_REPRODUCIBLE
  return None


# The cases each test loaded, with their modes, for the report (conftest.py).
loaded: list[tuple[str, str, str]] = []


class Case:
  """One golden case: its arrays (`npz`) and its JSON sidecar (`meta`).

  Attributes:
    name: the case.
    mode: NATIVE or CROSS: which tolerances apply (see `pick`).
    set_name: the name of the set it was loaded from.
    directory: that set's directory.
    arrays: {key: array}.
    meta: the JSON sidecar.
  """

  def __init__(
      self,
      name: str,
      *,
      directory: pathlib.Path | None = None,
      cross: str | None = None,
      record: bool = True,
  ):
    """Loads `name` from this run's set (or from `directory`).

    Args:
      name: the case.
      directory: a set to load from instead of this run's (e.g. another
        platform's, to measure the reference's own spread).
      cross: force cross-platform tolerances against this run's set,
        saying why (e.g. a program that XLA compiles differently from the
        reference's, which changes rounding as another machine does).
      record: list the case in the report as one this test checks (False
        for cases used only as input data, e.g. the Disco103 weights).
    """
    chosen = selection()
    golden_set = current_set()
    set_mode = chosen.mode_of(golden_set)
    cross = cross or cross_reason(set_mode)
    self.name = name
    self.set_name = golden_set.name
    self.mode = CROSS if cross else set_mode
    self.why_cross = cross or ''
    if directory is not None:
      golden_set = next(
          (s for s in chosen.sets if s.directory == directory), None
      )
      self.set_name = golden_set.name if golden_set else 'other'
    else:
      directory = golden_set.directory
    self.directory = directory
    if golden_set is not None and golden_set.recorded is not None:
      self.set_backend = golden_set.recorded.fields.get('backend', 'cpu')
    npz_path = directory / f'{name}.npz'
    json_path = directory / f'{name}.json'
    for path in (npz_path, json_path):
      if not path.is_file():
        missing(f'Golden case file {path} is missing.')
    with np.load(npz_path, allow_pickle=False) as npz:
      self.arrays: dict[str, np.ndarray] = {k: npz[k] for k in npz.files}
    self.meta: dict[str, Any] = json.loads(json_path.read_text())
    if record:
      label = self.mode if not cross else f'{CROSS} ({cross})'
      loaded.append((name, label, self.set_name))

  @property
  def cross(self) -> bool:
    return self.mode == CROSS

  # What the compared set was recorded on (PLATFORM.json's backend).
  set_backend = 'cpu'
  why_cross = ''

  @property
  def accelerator(self) -> bool:
    """Whether JAX computes on an accelerator against a CPU's set."""
    return jax.default_backend() != 'cpu' and self.set_backend == 'cpu'

  def pick(self, *, native: Any, cross: Any, accelerator: Any = None) -> Any:
    """The tolerance (or anything) of this case's mode.

    Args:
      native: against this machine's own set.
      cross: against another CPU's set.
      accelerator: on a GPU or TPU against a CPU's set (always
        cross-platform), where it differs from `cross`: their elementary
        functions (exp, log, sqrt, division) are other float32
        approximations than XLA's CPU ones, which changes even forward maths
        by tens of ulps. None: `cross`.
    """
    if not self.cross:
      return native
    if accelerator is not None and self.accelerator:
      return accelerator
    return cross

  @property
  def config(self) -> dict[str, Any]:
    return self.meta['config']

  def __getitem__(self, key: str) -> np.ndarray:
    return self.arrays[key]

  def subtree(self, prefix: str) -> dict[str, np.ndarray]:
    """{relative key: array} of every key under `prefix/`."""
    prefix = prefix.rstrip('/') + '/'
    return {
        k[len(prefix) :]: v
        for k, v in self.arrays.items()
        if k.startswith(prefix)
    }

  def haiku(self, prefix: str) -> dict[str, dict[str, np.ndarray]]:
    """The Haiku params/state tree stored under `prefix/`."""
    return to_haiku(self.subtree(prefix))

  def count(self, prefix: str) -> int:
    """How many indexed items `prefix/0`, `prefix/1`, ... the case holds."""
    indices = {k.split('/', 1)[0] for k in self.subtree(prefix)}
    assert all(i.isdigit() for i in indices), sorted(indices)[:5]
    assert indices == {str(i) for i in range(len(indices))}, sorted(indices)
    return len(indices)


def to_haiku(flat: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
  """{'mod/~/lin/w': a} -> {'mod/~/lin': {'w': a}} (split on the last '/')."""
  tree: dict[str, dict[str, Any]] = {}
  for key, value in flat.items():
    module, name = key.rsplit('/', 1)
    tree.setdefault(module, {})[name] = value
  return tree


def nest(flat: Mapping[str, np.ndarray]) -> dict[str, Any]:
  """{'a/b': x, 'c': y} -> {'a': {'b': x}, 'c': y} (plain nested dicts)."""
  tree: dict[str, Any] = {}
  for key, value in flat.items():
    *parents, name = key.split('/')
    node = tree
    for parent in parents:
      node = node.setdefault(parent, {})
    node[name] = value
  return tree


def flatten(tree: Any) -> dict[str, np.ndarray]:
  """Flattens a pytree with the goldens' key convention ('/'-joined)."""
  return {
      jax.tree_util.keystr(path, simple=True, separator='/'): np.asarray(leaf)
      for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
  }
