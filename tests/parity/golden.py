"""Loading and comparing the reference's golden parity cases.

The goldens live outside the repository (see ../shared/parity/MANIFEST.md),
in the directory named by `$DISCO_PARITY_DIR`, one set per kind of machine
they were recorded on (`platforms.py` picks the sets and the mode; each
test runs once per set compared, see conftest.py). Each
case is `<name>.npz` (flat `/`-joined keys) plus `<name>.json` (config,
notes, tolerance). When the directory or a case is missing the test fails
under CI (`$CI` set) and is skipped, with instructions, elsewhere.
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

from tests.parity import platforms

PARITY_DIR_ENV = platforms.PARITY_DIR_ENV
REPORT_ENV = 'DISCO_PARITY_REPORT'
MUTATION_ENV = 'DISCO_PARITY_MUTATION'
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


def skip_in_cross_run(why: str) -> None:
  """Skips a test in a run asked for cross-platform mode (`DISCO_PARITY_MODE=
  cross`, CI's run against other machines' sets), saying `why`."""
  if os.environ.get(platforms.MODE_ENV) == CROSS:
    pytest.skip(f"{why}; not rerun against other machines' sets")


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
    cross = cross or cross_reason(chosen.mode)
    self.name = name
    self.set_name = golden_set.name
    self.mode = CROSS if cross else chosen.mode
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


def _record(**fields: Any) -> None:
  """Appends one comparison to `$DISCO_PARITY_REPORT` (JSON lines)."""
  path = os.environ.get(REPORT_ENV)
  if not path or not fields.get('case'):
    return
  fields.setdefault('mutation', os.environ.get(MUTATION_ENV, ''))
  with open(path, 'a') as f:
    f.write(json.dumps(fields) + '\n')


def _ratio(error: float, allowed: float) -> float:
  """error / allowed, with 0/0 = 0 (a leaf that must be, and is, exact)."""
  if error == 0.0:
    return 0.0
  return error / allowed if allowed > 0.0 else float('inf')


def ema_mean_floor(
    want: Mapping[str, np.ndarray], rtol: float, atol: float = 0.0
) -> dict[str, float]:
  """Per key: `atol`, and for a moving average's first moment, its scale.

  An `EmaState`'s `moment1` is (1 - decay_product) times a mean of signed
  values, which can pass near zero; its rounding error follows the values'
  size, which `moment2` holds: sqrt((1 - decay_product) moment2), the first
  moment's RMS scale. So `moment1` gets the floor `rtol` times that scale
  (the TD mean of a Disco103 unroll: 3e-4, scale 8e-3).
  """
  out = {}
  for key in want:
    out[key] = atol
    if not key.endswith('moment1'):
      continue
    stem = key[: -len('moment1')]
    if f'{stem}moment2' in want and f'{stem}decay_product' in want:
      weight = 1.0 - np.asarray(want[f'{stem}decay_product'], np.float64)
      moment2 = np.asarray(want[f'{stem}moment2'], np.float64)
      scale = float(np.sqrt(np.max(weight * np.maximum(moment2, 0.0))))
      out[key] = max(atol, rtol * scale)
  return out


def assert_close(
    got: Mapping[str, Any],
    expected: Mapping[str, np.ndarray],
    *,
    rtol: float,
    atol: float | Mapping[str, float],
    norm: bool | None = None,
    case: str | Case = '',
    label: str = '',
    allow_extra: bool = False,
) -> float:
  """Compares every expected leaf; integers and booleans must be equal.

  Floating leaves are compared element by element,
  |x - ref| <= atol + rtol |ref|, or with `norm=True` as a whole,
  ||x - ref|| <= rtol ||ref|| + atol sqrt(n) (2-norms; atol is then a
  root-mean-square error). The norm-wise test is for outputs whose elements
  are sums of large cancelling terms: their absolute error follows the
  terms, not the (possibly tiny) result, so single elements can be far off
  relatively while the leaf as a whole is not. That is what another
  platform's rounding does to any output (a difference q - v, a value near
  zero), so by default a case in cross-platform mode is compared norm-wise
  and one in native mode element by element.

  Args:
    got: flat {key: array} from our implementation (see `flatten`).
    expected: flat {key: array} from the golden.
    rtol: relative tolerance for floating leaves.
    atol: absolute tolerance for floating leaves, or one per expected key
      (e.g. for checksums whose scale differs from leaf to leaf; elementwise,
      it may be an array shaped like the leaf).
    norm: compare each floating leaf norm-wise (True) or elementwise
      (False); None: norm-wise for a `Case` in cross-platform mode.
    case: the case (or its name), for messages and the report.
    label: what is being compared, for messages and the report.
    allow_extra: accept keys in `got` that the golden does not have.

  Returns:
    The largest error over floating leaves relative to what is allowed
    (above 1 fails).
  """
  mode = case.mode if isinstance(case, Case) else ''
  why_cross = case.why_cross if isinstance(case, Case) else ''
  if norm is None:
    norm = mode == CROSS
  golden_set = case.set_name if isinstance(case, Case) else ''
  case = case.name if isinstance(case, Case) else case
  problems = []
  worst = 0.0
  missing = sorted(set(expected) - set(got))
  if missing:
    problems.append(f'missing leaves: {missing[:10]}')
  extra = sorted(set(got) - set(expected))
  if extra and not allow_extra:
    problems.append(f'unexpected leaves: {extra[:10]}')
  for key in sorted(set(expected) & set(got)):
    want = np.asarray(expected[key])
    have = np.asarray(got[key])
    record = dict(
        case=case, set=golden_set, check=label, mode=mode, leaf=key,
        why_cross=why_cross,
    )  # fmt: skip
    if have.shape != want.shape:
      problems.append(f'{key}: shape {have.shape} != expected {want.shape}')
      _record(**record, measure='shape', ratio=float('inf'))
      continue
    if want.dtype.kind in 'biuV' or have.dtype.kind in 'biu':
      bad = int(np.sum(have != want))
      if bad:
        problems.append(f'{key}: {bad} of {want.size} entries differ (exact)')
      _record(**record, measure='exact', ratio=float('inf') if bad else 0.0)
      continue
    if not want.size:
      continue
    want64 = want.astype(np.float64)
    diff = np.abs(have.astype(np.float64) - want64)
    scale = np.abs(want64)
    leaf_atol = atol[key] if isinstance(atol, Mapping) else atol
    error_norm = float(np.linalg.norm(diff.ravel()))
    want_norm = float(np.linalg.norm(want64.ravel()))
    stats = dict(
        max_abs=float(np.max(diff)) if np.all(np.isfinite(diff)) else None,
        rel_norm=_ratio(error_norm, want_norm),
        error_norm=error_norm,
        ref_norm=want_norm,
        size=int(want.size),
    )
    if norm:
      allowed = rtol * want_norm + leaf_atol * np.sqrt(want.size)
      ratio = _ratio(error_norm, allowed)
      ok = ratio <= 1.0
      if not ok:
        problems.append(
            f'{key}: ||x - ref|| = {error_norm:.3g} > {rtol} * ||ref||'
            f' ({want_norm:.3g}) + {leaf_atol} * sqrt({want.size})'
        )
    else:
      allowed = leaf_atol + rtol * scale
      with np.errstate(divide='ignore', invalid='ignore'):
        ratios = np.where(diff > 0, diff / allowed, 0.0)
      ratios = np.where(np.isnan(diff), np.inf, ratios)
      ratio = float(np.max(ratios))
      ok = ratio <= 1.0
      if not ok:
        at = np.unravel_index(np.argmax(ratios), diff.shape)
        problems.append(
            f'{key}: {int(np.sum(ratios > 1.0))} of {want.size} entries out'
            f' of tolerance; worst at {tuple(int(i) for i in at)}: got'
            f' {have[at]}, expected {want[at]}'
        )
    worst = max(worst, ratio)
    _record(
        **record,
        measure='norm' if norm else 'elementwise',
        rtol=rtol,
        atol=float(np.max(leaf_atol)),
        ratio=ratio,
        **stats,
    )
  if problems:
    atol_text = 'per leaf' if isinstance(atol, Mapping) else atol
    measure = 'norm-wise' if norm else 'elementwise'
    raise AssertionError(
        f'[{case}] {label}: {measure} rtol={rtol}, atol={atol_text}\n  '
        + '\n  '.join(problems)
    )
  return worst


# Parameter-like trees of a learner state: compared as a whole (see
# `as_steps`).
_STEP_GROUPS = ('params', 'target_params', 'mu', 'nu')


def step_group(key: str) -> str:
  """The part of a state `key` belongs to: a parameter-like tree, or itself.

  'params/mlp/linear/w' -> 'params', 'opt_state/0/mu/mlp/linear/b' ->
  'opt_state/0/mu', 'meta_state/rnn_state/lstm/hidden' -> itself.
  """
  parts = key.split('/')
  for i, part in enumerate(parts):
    if part in _STEP_GROUPS:
      return '/'.join(parts[: i + 1])
  return key


def as_steps(
    got: Mapping[str, Any],
    expected: Mapping[str, np.ndarray],
    before: Mapping[str, np.ndarray],
    *,
    rtol: float,
    value_rtol: float,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
  """States compared as the steps they took from the golden `before`.

  After an update, parameters and optimizer moments differ from the state
  before it by a small step; compared as values, an error in that step
  hides below the values' size. Compared as steps, norm-wise:

    ||(x - before) - (ref - before)|| <= rtol ||ref - before||
                                         + value_rtol ||ref||,

  where the second term allows for the rounding of the values the step is
  added to (and for steps that are zero). A parameter-like tree (the
  parameters, the target parameters, each of Adam's moments; see
  `step_group`) is compared as one vector: Adam's first steps are
  sign-like, +-lr for most entries, but tiny and unstable where a gradient
  entry is near zero, and a few such entries would dominate the error of a
  small leaf (a bias) while saying nothing about the update as a whole.
  Other leaves, and leaves missing from `before`, are compared one by one;
  integer leaves exactly.

  Args:
    got: flat {key: array}, ours.
    expected: flat {key: array}, the golden's after the step.
    before: flat {key: array}, the golden's before the step.
    rtol: tolerance relative to the step's norm.
    value_rtol: tolerance relative to the values' norm.

  Returns:
    (got steps, expected steps, keyword arguments for `assert_close`), the
    steps keyed by group.
  """

  def grouped(flat, subtract: bool) -> dict[str, np.ndarray]:
    """{group: leaves concatenated}, minus `before` if `subtract`."""
    groups: dict[str, list[np.ndarray]] = {}
    for key in sorted(flat):
      value = np.asarray(flat[key])
      if value.dtype.kind == 'f' and key in before:
        value = value.astype(np.float64)
        if subtract:
          value = value - before[key].astype(np.float64)
        groups.setdefault(step_group(key), []).append(value.ravel())
      else:
        groups.setdefault(key, []).append(value)
    return {
        k: np.concatenate(v) if len(v) > 1 else v[0] for k, v in groups.items()
    }

  atol = {
      k: value_rtol * float(np.sqrt(np.mean(np.square(v, dtype=np.float64))))
      for k, v in grouped(expected, subtract=False).items()
  }
  return (
      grouped(got, subtract=True),
      grouped(expected, subtract=True),
      dict(rtol=rtol, atol=atol, norm=True),
  )


def assert_scalar(
    name: str,
    value: float,
    *,
    at_most: float | None = None,
    at_least: float | None = None,
    case: Case,
    label: str,
) -> None:
  """A single derived statistic (a cosine, an iteration count) in bounds."""
  record = dict(
      case=case.name, set=case.set_name, check=label, mode=case.mode,
      leaf=name, why_cross=case.why_cross,
  )  # fmt: skip
  if at_most is not None:
    ratio = _ratio(value, at_most)
    bound = f'<= {at_most:.4g}'
  else:
    ratio = _ratio(at_least, value) if value > 0 else float('inf')
    bound = f'>= {at_least:.4g}'
  _record(**record, measure='scalar', value=value, ratio=ratio)
  assert (
      ratio <= 1.0
  ), f'[{case.name}] {label}: {name} = {value:.4g}, not {bound}'


@contextlib.contextmanager
def checks() -> Iterator[Callable[..., float]]:
  """Runs several `assert_close` comparisons and reports all failures.

  For cases whose comparisons share one expensive computation (e.g. a
  compiled learner step): one test, every failing comparison listed.

      with golden.checks() as check:
        check(got_a, want_a, rtol=..., atol=..., case=..., label=...)
        check.scalar('cosine', c, at_least=0.99, case=..., label=...)

  Yields:
    A function with the arguments of `assert_close`; its attribute `scalar`
    takes those of `assert_scalar`.
  """
  failures = []

  def collecting(assertion):
    def run(*args, **kwargs):
      try:
        return assertion(*args, **kwargs)
      except AssertionError as e:
        failures.append(str(e))
        return float('nan')

    return run

  check = collecting(assert_close)
  check.scalar = collecting(assert_scalar)
  yield check
  if failures:
    raise AssertionError(
        f'{len(failures)} comparison(s) failed:\n' + '\n'.join(failures)
    )
