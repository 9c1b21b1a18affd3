"""Loading and comparing the reference's golden parity cases.

The goldens live outside the repository (see ../shared/parity/MANIFEST.md),
in the directory named by `$DISCO_PARITY_DIR`. Each case is `<name>.npz`
(flat `/`-joined keys) plus `<name>.json` (config, notes, tolerance). When
the directory or a case is missing the test fails under CI (`$CI` set) and
is skipped, with instructions, elsewhere.
"""

from collections.abc import Callable, Iterator, Mapping
import contextlib
import json
import os
import pathlib
from typing import Any

import jax
import numpy as np
import pytest

PARITY_DIR_ENV = 'DISCO_PARITY_DIR'
REPORT_ENV = 'DISCO_PARITY_REPORT'

_HOW_TO_GET = (
    'The parity goldens are recorded from the reference implementation and'
    ' are not part of this repository. Point ${env} at a directory holding'
    ' them, e.g. `export {env}=../shared/parity`.'
)


def _missing(message: str) -> None:
  message = message + ' ' + _HOW_TO_GET.format(env=PARITY_DIR_ENV)
  if os.environ.get('CI'):
    pytest.fail(message, pytrace=False)
  pytest.skip(message)


def parity_dir() -> pathlib.Path:
  """The goldens' directory; fails (CI) or skips (elsewhere) if unset."""
  value = os.environ.get(PARITY_DIR_ENV)
  if not value:
    _missing(f'${PARITY_DIR_ENV} is not set.')
  path = pathlib.Path(value)
  if not path.is_dir():
    _missing(f'${PARITY_DIR_ENV}={value} is not a directory.')
  return path


class Case:
  """One golden case: its arrays (`npz`) and its JSON sidecar (`meta`)."""

  def __init__(self, name: str):
    directory = parity_dir()
    npz_path = directory / f'{name}.npz'
    json_path = directory / f'{name}.json'
    for path in (npz_path, json_path):
      if not path.is_file():
        _missing(f'Golden case file {path} is missing.')
    with np.load(npz_path, allow_pickle=False) as npz:
      self.arrays: dict[str, np.ndarray] = {k: npz[k] for k in npz.files}
    self.meta: dict[str, Any] = json.loads(json_path.read_text())
    self.name = name

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


def to_haiku(flat: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
  """{'mod/~/lin/w': a} -> {'mod/~/lin': {'w': a}} (split on the last '/')."""
  tree: dict[str, dict[str, Any]] = {}
  for key, value in flat.items():
    module, name = key.rsplit('/', 1)
    tree.setdefault(module, {})[name] = value
  return tree


def _key_name(entry: Any) -> str:
  for attribute in ('key', 'name', 'idx'):
    if hasattr(entry, attribute):
      return str(getattr(entry, attribute))
  raise TypeError(f'Unexpected tree path entry {entry!r}.')


def flatten(tree: Any) -> dict[str, np.ndarray]:
  """Flattens a pytree with the goldens' key convention ('/'-joined)."""
  return {
      '/'.join(_key_name(e) for e in path): np.asarray(leaf)
      for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
  }


def _record(case: str, label: str, max_abs: float, max_rel: float) -> None:
  """Appends the largest errors seen to `$DISCO_PARITY_REPORT` (JSON lines)."""
  path = os.environ.get(REPORT_ENV)
  if not path:
    return
  with open(path, 'a') as f:
    f.write(
        json.dumps(
            dict(
                case=case, check=label, max_abs_err=max_abs, max_rel_err=max_rel
            )
        )
        + '\n'
    )


def assert_close(
    got: Mapping[str, Any],
    expected: Mapping[str, np.ndarray],
    *,
    rtol: float,
    atol: float | Mapping[str, float],
    case: str = '',
    label: str = '',
    allow_extra: bool = False,
) -> float:
  """Compares every expected leaf; integers and booleans must be equal.

  Args:
    got: flat {key: array} from our implementation (see `flatten`).
    expected: flat {key: array} from the golden.
    rtol: relative tolerance for floating leaves.
    atol: absolute tolerance for floating leaves, or one per expected key
      (e.g. for checksums whose scale differs from leaf to leaf).
    case: the case's name, for messages and the report.
    label: what is being compared, for messages and the report.
    allow_extra: accept keys in `got` that the golden does not have.

  Returns:
    The largest absolute error over floating leaves.
  """
  problems = []
  max_abs = 0.0
  max_rel = 0.0
  missing = sorted(set(expected) - set(got))
  if missing:
    problems.append(f'missing leaves: {missing[:10]}')
  extra = sorted(set(got) - set(expected))
  if extra and not allow_extra:
    problems.append(f'unexpected leaves: {extra[:10]}')
  for key in sorted(set(expected) & set(got)):
    want = np.asarray(expected[key])
    have = np.asarray(got[key])
    if have.shape != want.shape:
      problems.append(f'{key}: shape {have.shape} != expected {want.shape}')
      continue
    if want.dtype.kind in 'biuV' or have.dtype.kind in 'biu':
      if not np.array_equal(have, want):
        bad = int(np.sum(have != want))
        problems.append(f'{key}: {bad} of {want.size} entries differ (exact)')
      continue
    if not want.size:
      continue
    diff = np.abs(have.astype(np.float64) - want.astype(np.float64))
    max_abs = max(max_abs, float(np.max(diff)))
    scale = np.abs(want.astype(np.float64))
    rel = diff / np.maximum(scale, 1e-30)
    max_rel = max(max_rel, float(np.max(np.where(diff > 0, rel, 0.0))))
    leaf_atol = atol[key] if isinstance(atol, Mapping) else atol
    ok = diff <= leaf_atol + rtol * scale
    if not np.all(ok):
      worst = np.unravel_index(np.argmax(diff - rtol * scale), diff.shape)
      problems.append(
          f'{key}: {int(np.sum(~ok))} of {want.size} entries out of tolerance;'
          f' worst at {tuple(int(i) for i in worst)}: got {have[worst]},'
          f' expected {want[worst]}'
      )
  _record(case, label, max_abs, max_rel)
  if problems:
    atol_text = 'per leaf' if isinstance(atol, Mapping) else atol
    raise AssertionError(
        f'[{case}] {label}: rtol={rtol}, atol={atol_text}\n  '
        + '\n  '.join(problems)
    )
  return max_abs


@contextlib.contextmanager
def checks() -> Iterator[Callable[..., float]]:
  """Runs several `assert_close` comparisons and reports all failures.

  For cases whose comparisons share one expensive computation (e.g. a
  compiled learner step): one test, every failing comparison listed.

      with golden.checks() as check:
        check(got_a, want_a, rtol=..., atol=..., case=..., label=...)
        check(got_b, want_b, rtol=..., atol=..., case=..., label=...)

  Yields:
    A function with the arguments of `assert_close`.
  """
  failures = []

  def check(*args, **kwargs) -> float:
    try:
      return assert_close(*args, **kwargs)
    except AssertionError as e:
      failures.append(str(e))
      return float('nan')

  yield check
  if failures:
    raise AssertionError(
        f'{len(failures)} comparison(s) failed:\n' + '\n'.join(failures)
    )
