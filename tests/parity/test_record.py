"""The recorder of golden sets (tests/parity/record.py, recorder/).

* On a machine of a shipped set's kind, recording that set's cases with the
  reference gives that set back, leaf for leaf and bit for bit.
* The recorder runs the reference and nothing else: it refuses this
  project's `disco_rl` alias (and any module not loaded from the checkout),
  and loads the reference even where the alias was imported first.

* With the builtin spec (no golden set), a recording holds every key the
  spec lists, of its shape and dtype, is the same when recorded again, and
  `disco` matches it natively.
* A case's recipe is found by what its JSON says it is: a set whose cases
  are named for other sizes (`env_catch_jittable_10x5`) is recorded, and
  recorded again from itself, bit for bit.

The reference checkout is `$DISCO_REFERENCE`, by default `../shared/reference`
beside the repository; without it these tests skip (fail under CI).
`$DISCO_PARITY_RECORDED` names a set recorded here from the matching
shipped set (as .ci/run does); `$DISCO_PARITY_SHIPPED` the shipped sets
(default `$DISCO_PARITY_DIR`). The slow test records one itself (minutes).
Where no shipped set exists (a fresh clone) and `$DISCO_PARITY_DIR` is a
recording of the builtin spec, that recording is checked instead.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import types
from typing import Any

import numpy as np
import pytest

from tests.parity import builtin
from tests.parity import golden
from tests.parity import platforms
from tests.parity import variant
from tests.parity.recorder import kinds
from tests.parity.recorder import recipes
from tests.parity.recorder import reference as reference_lib
from tests.parity.recorder import spec as spec_lib

# The two tests that record cases are slow (minutes each, past CI's 20:
# `pytest -m slow tests/parity/test_record.py`); the rest take seconds.
pytestmark = pytest.mark.without_goldens

_REPO = pathlib.Path(__file__).resolve().parents[2]
RECORDED_ENV = 'DISCO_PARITY_RECORDED'
# The shipped set's cases that the recording left out on purpose
# (space-separated; the recorder's --skip), e.g. .ci/run's.
SKIPPED_ENV = 'DISCO_PARITY_RECORDED_SKIPPED'
SHIPPED_ENV = platforms.SHIPPED_ENV


def _unavailable(message: str) -> None:
  if os.environ.get('CI'):
    pytest.fail(message, pytrace=False)
  pytest.skip(message)


def reference_dir() -> pathlib.Path:
  """The reference checkout; skips (fails under CI) without one."""
  value = os.environ.get(reference_lib.REFERENCE_ENV)
  path = pathlib.Path(value) if value else _REPO.parent / 'shared' / 'reference'
  if not (path / reference_lib.PACKAGE / 'agent.py').is_file():
    _unavailable(
        f'No reference checkout at {path} (set ${reference_lib.REFERENCE_ENV}'
        ' to a clone of google-deepmind/disco_rl at 9059a29).'
    )
  return path.resolve()


def _run_recorder(*args: str) -> subprocess.CompletedProcess[str]:
  return subprocess.run(
      [sys.executable, '-m', 'tests.parity.record', *args],
      cwd=_REPO,
      capture_output=True,
      text=True,
      check=False,
  )


def differences(
    got_dir: pathlib.Path, want_dir: pathlib.Path, name: str
) -> list[str]:
  """Where case `name` differs between two sets (empty: bit for bit).

  Keys, dtypes and shapes must be equal, and every value's bits, but for
  NaNs, which may differ in their payload (not in their places).
  """
  with (
      np.load(got_dir / f'{name}.npz') as g,
      np.load(want_dir / f'{name}.npz') as w,
  ):
    got = {k: g[k] for k in g.files}
    want = {k: w[k] for k in w.files}
  problems = []
  if set(got) != set(want):
    only_got = sorted(set(got) - set(want))[:5]
    only_want = sorted(set(want) - set(got))[:5]
    problems.append(f'keys: only recorded {only_got}, only shipped {only_want}')
  for key in sorted(set(got) & set(want)):
    a, b = got[key], want[key]
    if (a.dtype, a.shape) != (b.dtype, b.shape):
      problems.append(f'{key}: {a.dtype}{a.shape} != {b.dtype}{b.shape}')
      continue
    if a.tobytes() == b.tobytes():
      continue
    if a.dtype.kind == 'f' and np.array_equal(a, b, equal_nan=True):
      if np.array_equal(np.signbit(a), np.signbit(b)):
        continue  # NaN payloads only.
    if a.dtype.kind == 'f':
      diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
      bad = int(np.sum(a != b) - np.sum(np.isnan(a) & np.isnan(b)))
      problems.append(
          f'{key}: {bad} of {a.size} values differ, at most'
          f' {np.nanmax(diff):.3g}'
      )
    else:
      problems.append(f'{key}: {int(np.sum(a != b))} of {a.size} differ')
  return problems


def _shipped_root() -> pathlib.Path:
  """Where the shipped sets are: `$DISCO_PARITY_SHIPPED`, else the goldens'."""
  value = os.environ.get(SHIPPED_ENV)
  return pathlib.Path(value).resolve() if value else golden.root_dir()


def _shipped_sets(root: pathlib.Path) -> list[platforms.GoldenSet]:
  return [
      s for s in platforms.golden_sets(root) if not platforms.is_recording(s)
  ]


def _matching_set() -> platforms.GoldenSet:
  """The shipped set recorded on this kind of machine; skips if none."""
  root = _shipped_root()
  machine = platforms.read_machine()
  shipped = _shipped_sets(root)
  for golden_set in shipped:
    if platforms.matches(machine, golden_set.recorded)[0]:
      return golden_set
  pytest.skip(
      f'No shipped golden set in {root} was recorded on this kind of machine'
      f' ({machine.describe()}; sets: {", ".join(s.name for s in shipped)}),'
      ' so none can be reproduced bit for bit here.'
  )


def _check_reproduces(
    out: pathlib.Path,
    shipped: platforms.GoldenSet,
    skipped: tuple[str, ...] = (),
) -> None:
  """`out` is `shipped` leaf for leaf, bit for bit, with its sidecars.

  `skipped`: shipped cases that `out` leaves out on purpose.
  """
  all_names = spec_lib.spec_cases(shipped.directory)
  assert set(skipped) <= set(all_names), f'unknown cases in {skipped}'
  names = [name for name in all_names if name not in skipped]
  assert names and names == spec_lib.spec_cases(out), 'the cases differ'
  report = {}
  for name in names:
    problems = differences(out, shipped.directory, name)
    if problems:
      report[name] = problems
  assert not report, f'Not bit for bit against set {shipped.name!r}:\n' + (
      '\n'.join(f'{k}:\n  ' + '\n  '.join(v[:10]) for k, v in report.items())
  )
  (recorded_set,) = platforms.golden_sets(out)
  assert platforms.matches(platforms.read_machine(), recorded_set.recorded)[0]
  assert json.loads((out / platforms.PLATFORM_FILE).read_text())['spec'] == (
      shipped.name
  )
  for name in names:
    meta = json.loads((out / f'{name}.json').read_text())
    spec = json.loads((shipped.directory / f'{name}.json').read_text())
    assert set(meta['versions']) >= set(spec['versions'])
    del meta['versions'], spec['versions']
    assert meta == spec, name


def test_recorded_set_reproduces_the_matching_shipped_set(tmp_path):
  """The set `$DISCO_PARITY_RECORDED` (recorded here, e.g. by .ci/run).

  Cases named in `$DISCO_PARITY_RECORDED_SKIPPED` were left out of it on
  purpose (.ci/run leaves out the Catch curve where a shipped set matches);
  every other case of the matching shipped set must be in it.

  Without shipped sets, where the goldens are a recording (a user's own),
  cheap cases of it are recorded again and must be the same, bit for bit:
  from the builtin spec where it was made from it, else from its own inputs.
  """
  root = _shipped_root()
  recorded = [
      s for s in platforms.golden_sets(root) if platforms.is_recording(s)
  ]
  if recorded and not _shipped_sets(root):
    _check_recorded_again(root, tmp_path)
    return
  shipped = _matching_set()
  given = os.environ.get(RECORDED_ENV)
  if not given:
    _unavailable(
        f'${RECORDED_ENV} is not set: record a set first (python -m'
        ' tests.parity.record --reference ../shared/reference --out DIR),'
        ' or run `pytest -m slow tests/parity/test_record.py`, which records'
        ' one.'
    )
  skipped = tuple(os.environ.get(SKIPPED_ENV, '').split())
  _check_reproduces(pathlib.Path(given).resolve(), shipped, skipped)


@pytest.mark.slow
def test_recorder_reproduces_the_matching_shipped_set(tmp_path):
  """Records every case (minutes), then as above."""
  shipped = _matching_set()
  reference = reference_dir()
  out = tmp_path / 'recorded'
  result = _run_recorder(
      '--reference', str(reference), '--out', str(out),
      '--spec', str(shipped.directory),
  )  # fmt: skip
  assert result.returncode == 0, result.stdout + result.stderr
  _check_reproduces(out, shipped)


def test_refuses_this_projects_alias(tmp_path):
  """--reference at this repository: its `disco_rl` serves `disco`."""
  result = _run_recorder(
      '--reference', str(_REPO), '--out', str(tmp_path / 'out'),
      '--spec', builtin.NAME, '--cases', 'utils',
  )  # fmt: skip
  assert result.returncode == 2, result.stdout + result.stderr
  assert 'not from the reference' in result.stderr, result.stderr
  assert not (tmp_path / 'out' / 'utils.npz').exists()


@pytest.mark.parametrize('flag', ['--cases', '--skip'])
def test_a_case_not_in_the_spec_is_a_usage_error(tmp_path, flag):
  """Named before the reference is loaded: no checkout needed."""
  result = _run_recorder(
      '--reference', str(tmp_path), '--out', str(tmp_path / 'out'),
      '--spec', builtin.NAME, flag, 'no_such_case',
  )  # fmt: skip
  assert result.returncode == 2, result.stdout + result.stderr
  assert "Cases not in the spec: ['no_such_case']" in result.stderr
  assert not (tmp_path / 'out').exists()


def test_refuses_a_directory_without_the_package(tmp_path):
  result = _run_recorder(
      '--reference', str(tmp_path), '--out', str(tmp_path / 'out'),
      '--spec', builtin.NAME, '--cases', 'utils',
  )  # fmt: skip
  assert result.returncode == 2, result.stdout + result.stderr
  assert f'No {reference_lib.PACKAGE} package' in result.stderr, result.stderr


def _fake_modules(monkeypatch, files: dict[str, pathlib.Path]) -> None:
  for name in [
      n for n in sys.modules if n.split('.')[0] == reference_lib.PACKAGE
  ]:
    monkeypatch.delitem(sys.modules, name)
  for name, path in files.items():
    module = types.ModuleType(name)
    module.__file__ = str(path)
    monkeypatch.setitem(sys.modules, name, module)


def test_provenance_is_each_modules_own_file(tmp_path, monkeypatch):
  package = tmp_path / reference_lib.PACKAGE
  own = {
      reference_lib.PACKAGE: package / '__init__.py',
      f'{reference_lib.PACKAGE}.agent': package / 'agent.py',
      f'{reference_lib.PACKAGE}.value_fns': (
          package / 'value_fns' / '__init__.py'
      ),
      f'{reference_lib.PACKAGE}.value_fns.value_fn': (
          package / 'value_fns' / 'value_fn.py'
      ),
  }
  _fake_modules(monkeypatch, own)
  assert reference_lib.check_provenance(tmp_path) == sorted(own)
  # A module served from elsewhere under the same root (as the alias serves
  # disco_rl.agent with disco/agent.py), or from outside it, is refused.
  for elsewhere in (
      tmp_path / 'disco' / 'agent.py',
      _REPO / 'disco' / 'agent.py',
  ):
    _fake_modules(
        monkeypatch, {**own, f'{reference_lib.PACKAGE}.agent': elsewhere}
    )
    with pytest.raises(
        reference_lib.ProvenanceError, match='not from the reference'
    ):
      reference_lib.check_provenance(tmp_path)


def test_loads_the_reference_where_the_alias_was_imported_first():
  reference = reference_dir()
  code = (
      'import disco_rl.agent, sys, pathlib;'
      'from tests.parity.recorder import reference;'
      f'ref = reference.load_reference(pathlib.Path({str(reference)!r}));'
      'print(ref.agent.__file__);'
      'print(sys.modules["disco_rl.agent"].__file__)'
  )
  result = subprocess.run(
      [sys.executable, '-c', code],
      cwd=_REPO,
      capture_output=True,
      text=True,
      check=False,
  )
  assert result.returncode == 0, result.stderr
  for line in result.stdout.split():
    assert pathlib.Path(line) == reference / reference_lib.PACKAGE / 'agent.py'


# --- The builtin spec ---------------------------------------------------------

# Cheap cases (seconds each): drawn inputs, rng keys, env runs.
_CHEAP = (
    'env_catch_cpu',
    'env_catch_jittable_5x5',
    'env_catch_jittable_8x8',
    'input_transforms',
    'optimizer_adam_sg_clip0p5',
    'optimizer_adam_sg_clip1p0',
    'utils',
)
# Every parity test of those cases (and of no other).
_CHEAP_TESTS = (
    'tests/parity/test_environments.py',
    'tests/parity/test_input_transforms.py',
    'tests/parity/test_optimizers.py',
    'tests/parity/test_utils.py',
)


def _is_builtin(root: pathlib.Path) -> bool:
  """Whether `root` holds a set recorded from the builtin spec."""
  path = root / platforms.PLATFORM_FILE
  if not path.is_file():
    return False
  return json.loads(path.read_text()).get('spec') == builtin.NAME


def _record_cases(
    out: pathlib.Path, cases: tuple[str, ...], spec: str = builtin.NAME
) -> None:
  result = _run_recorder(
      '--reference', str(reference_dir()), '--out', str(out),
      '--spec', spec, '--cases', *cases,
  )  # fmt: skip
  assert result.returncode == 0, result.stdout + result.stderr


def _check_recorded_again(root: pathlib.Path, tmp_path) -> None:
  """Cheap cases of the recording `root`, recorded again, are it."""
  out = tmp_path / 'again'
  _record_cases(out, _CHEAP, builtin.NAME if _is_builtin(root) else str(root))
  report = {n: differences(out, root, n) for n in _CHEAP}
  report = {k: v for k, v in report.items() if v}
  assert not report, f'Not bit for bit against {root}:\n' + '\n'.join(
      f'{k}:\n  ' + '\n  '.join(v[:10]) for k, v in report.items()
  )


def _kind(entry: dict[str, Any], name: str = '') -> kinds.Kind:
  """The kind of a builtin spec entry."""
  return kinds.kind_of(entry['config'], entry['inputs'], name)


def test_builtin_spec_lists_every_case():
  """Each case is of one kind, each kind has a recipe and a builtin case."""
  spec = builtin.load()
  found = {name: _kind(entry, name) for name, entry in spec.items()}
  assert {k.name for k in found.values()} == set(recipes.RECIPES)
  assert set(recipes.RECIPES) == set(kinds.BY_NAME)
  for name, entry in spec.items():
    assert entry['about'] and 'config' in entry, name
    assert entry['outputs'] > 0, name
    assert not any(kinds.is_output(found[name], k) for k in entry['inputs'])


def test_each_golden_case_is_of_its_builtin_entrys_kind():
  """A set's sidecars and keys say the kind its builtin namesake says."""
  spec = builtin.load()
  sets = platforms.golden_sets(_shipped_root())
  assert sets
  for golden_set in sets:
    for name in spec_lib.spec_cases(golden_set.directory):
      got = spec_lib.case_kind(golden_set.directory, name)
      if name in spec:
        assert got == _kind(spec[name]), (golden_set.name, name)


def test_a_case_of_no_kind_is_refused_by_what_it_holds():
  config = {'rows': 5, 'columns': 5, 'batch_size': 2}  # No reset seed.
  with pytest.raises(kinds.UnknownKindError, match='No recorder for case'):
    kinds.kind_of(config, ['inputs/actions'], 'env_catch_jittable_5x5')
  both = {'rows': 5, 'columns': 5, 'reset_seed': 0, 'moving_average': {}}
  with pytest.raises(kinds.UnknownKindError, match='several kinds'):
    kinds.kind_of(both, [], 'mixed')


def test_builtin_check_refuses_a_wrong_input():
  keys = builtin.load()['env_catch_jittable_5x5']['inputs']
  good = {
      k: np.zeros(shape, np.dtype(dtype)) for k, (shape, dtype) in keys.items()
  }
  builtin.check('case', good, keys)
  for bad in (
      {**good, 'inputs/actions': good['inputs/actions'].astype(np.int64)},
      {**good, 'inputs/actions': good['inputs/actions'][:-1]},
      {k: v for k, v in good.items() if k != 'inputs/reset_rng'},
      {**good, 'inputs/extra': np.zeros(())},
  ):
    with pytest.raises(ValueError):
      builtin.check('case', bad, keys)


def test_variant_moves_every_seed_and_the_sizes_it_lists():
  spec = json.loads(builtin.SPEC_FILE.read_text())
  other = variant.variant(spec, 7)
  assert set(other['cases']) == set(spec['cases'])
  for name, entry in other['cases'].items():
    was = spec['cases'][name]
    assert entry['config']['seed'] == was['config'].get('seed', 0) + 7, name
    if name not in variant.SIZES:
      assert entry['inputs'] == was['inputs'], name
      continue
    assert entry['config'] != was['config'], name
    shapes = {k: s for k, (s, _) in entry['inputs'].items()}
    assert not shapes or shapes != {
        k: s for k, (s, _) in was['inputs'].items()
    }, name
  small = other['cases']['agent_disco_small']['config']
  assert other['cases']['agent_disco_small']['inputs'][
      'inputs/rollouts/0/observations'
  ][0] == [
      small['rollout_len_T_plus_1'], small['batch'], small['catch_rows'],
      small['catch_columns'], 1,
  ]  # fmt: skip
  assert other['cases']['eval_curve_catch']['config']['rng'] == 'PRNGKey(7)'


@pytest.mark.slow
@pytest.mark.parametrize(
    'other_sizes', [False, True], ids=['builtin', 'variant']
)
def test_builtin_recording_is_complete_and_disco_matches_it(
    tmp_path, monkeypatch, other_sizes
):
  """Cheap cases: every key the spec lists, then disco's tests, natively.

  Of the builtin spec, and of variant.py's (other seeds and sizes).
  """
  spec_arg = builtin.NAME
  if other_sizes:
    spec_arg = str(tmp_path / 'other.json')
    assert variant.main(['--out', spec_arg]) == 0
    monkeypatch.setenv(builtin.SPEC_ENV, spec_arg)
  out = tmp_path / 'builtin-set'
  _record_cases(out, _CHEAP, spec_arg)
  spec = builtin.load()
  assert sorted(spec_lib.spec_cases(out)) == sorted(_CHEAP)
  for name in _CHEAP:
    with np.load(out / f'{name}.npz') as npz:
      arrays = {k: npz[k] for k in npz.files}
    inputs = {k: v for k, v in arrays.items() if k in spec[name]['inputs']}
    builtin.check(name, inputs, spec[name]['inputs'])
    kind = _kind(spec[name], name)
    outputs = [k for k in arrays if kinds.is_output(kind, k)]
    assert len(outputs) == spec[name]['outputs'], name
    assert len(arrays) == len(inputs) + len(outputs), name
    meta = json.loads((out / f'{name}.json').read_text())
    assert meta['config'] == spec[name]['config'], name
    assert meta['keys'] == {
        k: [list(v.shape), str(v.dtype)] for k, v in arrays.items()
    }
  (recorded,) = platforms.golden_sets(out)
  assert platforms.matches(platforms.read_machine(), recorded.recorded)[0]
  # Our library, fed the drawn inputs, equals the reference bit for bit.
  environ = dict(os.environ, **{golden.PARITY_DIR_ENV: str(out)})
  for name in (
      platforms.PLATFORM_ENV,
      platforms.MODE_ENV,
      platforms.CROSS_DIR_ENV,
      golden.REPORT_ENV,
      golden.MUTATION_ENV,
  ):
    environ.pop(name, None)
  result = subprocess.run(
      [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
       '-n', '0', *_CHEAP_TESTS],
      cwd=_REPO, env=environ, capture_output=True, text=True, check=False,
  )  # fmt: skip
  tail = result.stdout[-3000:] + result.stderr[-2000:]
  assert result.returncode == 0, tail
  summary = result.stdout.strip().rsplit('\n', 1)[-1]
  assert ' passed' in summary and 'skipped' not in summary, tail
  assert ' native ' in result.stdout, tail


# --- Cases named for other sizes ----------------------------------------------

# Builtin cases under names of other sizes and values, as a set of its own
# may name them: {name: (builtin case, config changes)}, on variant.py's
# other seeds and sizes. No shipped name is among them, so the recorder
# must find each one's recipe by what its JSON says it is.
_RENAMED = {
    'env_catch_jittable_10x5': (
        'env_catch_jittable_8x8',
        {
            'rows': 10,
            'columns': 5,
            'single_observation_spec': {'observation': [10, 5, 1]},
        },
    ),
    'optimizer_adam_sg_clip0p3': (
        'optimizer_adam_sg_clip0p5',
        {'clip_max_delta': 0.3},
    ),
    'value_utils_get_value_outs_disco_9x4': (
        'value_utils_get_value_outs_disco',
        {},
    ),
}


def _write_renamed_spec(path: pathlib.Path) -> None:
  """A spec file of `_RENAMED`, in builtin_spec.json's format."""
  other = variant.variant(json.loads(builtin.SPEC_FILE.read_text()), 3)
  cases = {}
  for name, (case, changes) in _RENAMED.items():
    entry = other['cases'][case]
    entry['config'].update(changes)
    cases[name] = entry
  about = 'builtin cases named for other sizes (test_record.py)'
  path.write_text(json.dumps(dict(about=about, cases=cases), indent=1))


def _move_one_output(directory: pathlib.Path, name: str) -> str:
  """Moves the first value of the case's first float output by one ulp."""
  path = directory / f'{name}.npz'
  with np.load(path) as npz:
    arrays = {k: npz[k] for k in npz.files}
  key = min(
      k
      for k, v in arrays.items()
      if k.startswith('expected/') and v.dtype.kind == 'f' and v.size
  )
  value = arrays[key].copy()
  flat_value = value.reshape(-1)
  flat_value[0] = np.nextafter(flat_value[0], np.inf, dtype=value.dtype)
  arrays[key] = value
  np.savez_compressed(path, **arrays)
  return key


def test_records_a_set_whose_cases_are_named_for_other_sizes(tmp_path):
  """Bit for bit: a set of cases named for other sizes, recorded again.

  `_RENAMED`'s cases are recorded from a spec file (their inputs drawn
  here), making a set of this machine's kind. A copy with one output of
  each case moved by one ulp is then recorded again: the recording is the
  set bit for bit, its outputs recomputed (not copied), and differs from
  the copy exactly where that was moved. About 30 s.
  """
  spec_file = tmp_path / 'renamed.json'
  _write_renamed_spec(spec_file)
  names = tuple(_RENAMED)
  # Each is of its namesake's kind, whose recipe the shipped sets check.
  renamed = json.loads(spec_file.read_text())['cases']
  for name, (case, _) in _RENAMED.items():
    assert _kind(renamed[name], name) == _kind(builtin.load()[case]), name
  recorded = tmp_path / 'recorded'
  _record_cases(recorded, names, str(spec_file))
  assert spec_lib.spec_cases(recorded) == sorted(names)
  moved = tmp_path / 'moved'
  shutil.copytree(recorded, moved)
  moved_keys = {name: _move_one_output(moved, name) for name in names}
  again = tmp_path / 'again'
  _record_cases(again, names, str(moved))
  for name in names:
    assert differences(again, recorded, name) == [], name
    problems = differences(again, moved, name)
    assert [p.split(':')[0] for p in problems] == [moved_keys[name]], problems
    meta = json.loads((again / f'{name}.json').read_text())
    want = json.loads((recorded / f'{name}.json').read_text())
    assert meta['case'] == name and meta['config'] == want['config'], name
    del meta['versions'], want['versions']
    assert meta == want, name
