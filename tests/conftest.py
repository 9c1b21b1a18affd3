"""Session hooks of the parity suite (tests/parity), kept at the tests' root.

pytest reads `pytest_report_header` only from the conftest files it loads
at start-up, and under pytest-xdist the controller (which prints the report)
never collects tests/parity, so these hooks live here:

* the report's header says which golden sets and mode the parity tests use
  and why (tests/parity/platforms.py), and its summary lists each case with
  its mode and set;
* `$DISCO_PARITY_MUTATION` applies a deliberate bug for the whole session
  (tests/parity/mutations.py), to check that the suite catches it;
* under `-n`, the heaviest files start first (`_HEAVY_FIRST`);
* on an accelerator, matmuls run at 'highest' precision, and
  `$DISCO_PARITY_BACKEND` skips the parity tests where that backend is not
  JAX's default.
"""

import collections
import json
import os
import pathlib

import jax
import pytest

from tests.parity import golden
from tests.parity import mutations
from tests.parity import platforms

_TESTS_DIR = pathlib.Path(__file__).parent
_PARITY_DIR = _TESTS_DIR / 'parity'
# Under `-n`, pytest-xdist hands out whole files (`--dist loadfile` in
# pyproject.toml), so that a file's tests, which mostly share their compiled
# programs, compile each once. These files take 40 to 150 s of a worker on
# CI's machine (2-core AMD EPYC Zen 4, `--durations`, 2026-11-27); they go
# first, heaviest first, so that the two workers end together. Before them
# goes test_meta_train.py, whose tiny meta-training run the command-line,
# runtime and notebook tests run too: they then load its compiled programs
# from CI's JAX compilation cache instead of compiling them beside it.
_HEAVY_FIRST = (
    'test_meta_train.py',
    'parity/test_meta_gradient.py',
    'test_eval.py',
    'test_train.py',
    'test_disco_rl_compat.py',
    'parity/test_agent.py',
    'test_discovery.py',
    'parity/test_eval_curve.py',
    'test_train_protocols.py',
    'test_train_host.py',
    'test_cli.py',
    'test_agents_and_precision.py',
)


def _is_parity(item: pytest.Item) -> bool:
  return _PARITY_DIR in pathlib.Path(str(item.path)).parents


def pytest_configure(config: pytest.Config) -> None:
  name = os.environ.get(golden.MUTATION_ENV)
  if name:
    patch = pytest.MonkeyPatch()
    mutations.apply(name, patch)
    config.add_cleanup(patch.undo)
  if jax.default_backend() != 'cpu':
    # TF32 or bfloat16 passes are far outside any parity tolerance.
    jax.config.update('jax_default_matmul_precision', 'highest')


def pytest_report_header(config: pytest.Config) -> list[str]:
  del config
  lines = []
  name = os.environ.get(golden.MUTATION_ENV)
  if name:
    lines.append(
        f'disco parity: MUTATION {name}:'
        f' {mutations.MUTATIONS[name].description}'
    )
  root = os.environ.get(golden.PARITY_DIR_ENV)
  if not root or not pathlib.Path(root).is_dir():
    return lines + [f'disco parity: ${golden.PARITY_DIR_ENV} not set']
  try:
    chosen = platforms.select(pathlib.Path(root).resolve())
  except platforms.SelectionError as e:
    return lines + [f'disco parity: {e}']
  described = chosen.describe()
  for golden_set in chosen.compared:
    origin = _recorded_by(golden_set.directory)
    if origin:
      described.append(f'  set {golden_set.name!r} {origin}')
  return lines + ['disco parity: ' + line for line in described]


def _recorded_by(directory: pathlib.Path) -> str:
  """How a set made by tests/parity/record.py was recorded ('' if shipped)."""
  try:
    record = json.loads((directory / platforms.PLATFORM_FILE).read_text())
  except (OSError, ValueError):
    return ''
  if not isinstance(record, dict) or not record.get('recorder'):
    return ''
  return (
      f'was recorded by {record["recorder"]} from the reference on'
      f' {record.get("model_name") or "an unnamed machine"}, with the inputs'
      f' and configs of set {record.get("spec")!r}'
  )


_FILE_RANK = {name: rank for rank, name in enumerate(_HEAVY_FIRST)}


def _file_rank(item: pytest.Item) -> int:
  name = pathlib.Path(str(item.path)).relative_to(_TESTS_DIR).as_posix()
  return _FILE_RANK.get(name, len(_FILE_RANK))


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
  del config
  items.sort(key=_file_rank)  # Stable: each file keeps its order.
  wanted = os.environ.get(platforms.BACKEND_ENV)
  if not wanted or jax.default_backend() == wanted:
    return
  skip = pytest.mark.skip(
      reason=(
          f'${platforms.BACKEND_ENV}={wanted}, but JAX runs on'
          f' {jax.default_backend()!r} here (no {wanted} available).'
      )
  )
  for item in items:
    if _is_parity(item):
      item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
  report = yield
  if call.when in ('setup', 'call') and _is_parity(item):
    for name, mode, platform in golden.loaded:
      entry = (golden.CASE_PROPERTY, f'{name}|{mode}|{platform}')
      if entry not in item.user_properties:
        item.user_properties.append(entry)
    golden.loaded.clear()
    report.user_properties = list(item.user_properties)
  return report


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
  """One line per golden case: its mode, its set and its tests' outcomes."""
  del exitstatus, config
  outcomes = collections.defaultdict(collections.Counter)
  for reports in terminalreporter.stats.values():
    for report in reports:
      # A test's outcome is its call's, or its setup's if that did not pass.
      when = getattr(report, 'when', None)
      if when != 'call' and not (when == 'setup' and not report.passed):
        continue
      for key, value in getattr(report, 'user_properties', ()):
        if key == golden.CASE_PROPERTY:
          outcomes[value][report.outcome] += 1
  if not outcomes:
    return
  terminalreporter.section('disco parity: cases and modes')
  for value in sorted(outcomes):
    name, mode, platform = value.split('|')
    counts = ', '.join(f'{n} {k}' for k, n in sorted(outcomes[value].items()))
    terminalreporter.line(f'{name:40s} {mode:32s} set {platform:11s} {counts}')
