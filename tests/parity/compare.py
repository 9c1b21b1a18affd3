"""Comparing results with golden arrays, and reporting each comparison.

`assert_close` compares every expected leaf (element by element, or
norm-wise for a case in cross-platform mode), `as_steps` turns states into
the steps they took, `assert_scalar` bounds one derived statistic and
`checks` collects several failures into one. Each comparison is appended
to `$DISCO_PARITY_REPORT` (JSON lines) when it is set.
"""

from collections.abc import Callable, Iterator, Mapping
import contextlib
import json
import os
from typing import Any

import numpy as np

from tests.parity import cases

REPORT_ENV = 'DISCO_PARITY_REPORT'
MUTATION_ENV = 'DISCO_PARITY_MUTATION'


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
    case: str | cases.Case = '',
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
  mode = case.mode if isinstance(case, cases.Case) else ''
  why_cross = case.why_cross if isinstance(case, cases.Case) else ''
  if norm is None:
    norm = mode == cases.CROSS
  golden_set = case.set_name if isinstance(case, cases.Case) else ''
  case = case.name if isinstance(case, cases.Case) else case
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
    case: cases.Case,
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
