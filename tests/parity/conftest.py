"""Runs every golden test once per golden set this run compares against.

`platforms.select` decides the sets (native mode: this machine's; cross
mode: every other one); each test that loads goldens gets a `golden_set`
parameter with one value per set, which `golden.Case` loads from (under
`-n`, a file's tests run in one worker, so a test's runs against several
sets share its compiled programs and the eval curve's one run). Tests
marked `without_goldens` (the harness's own) run once. The session-wide
hooks (report header and summary, mutations) live in tests/conftest.py.
"""

import os
import pathlib

import pytest

from tests.parity import golden
from tests.parity import platforms

_UNSELECTED = 'no-golden-set'


def _set_names() -> list[str]:
  """The names of the sets compared, or a placeholder that fails or skips."""
  root = os.environ.get(golden.PARITY_DIR_ENV)
  if not root or not pathlib.Path(root).is_dir():
    return [_UNSELECTED]
  try:
    chosen = platforms.select(pathlib.Path(root).resolve())
  except platforms.SelectionError:
    return [_UNSELECTED]  # The fixture reports why.
  return [s.name for s in chosen.compared]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
  if metafunc.definition.get_closest_marker('without_goldens'):
    return
  if 'golden_set' in metafunc.fixturenames:
    names = _set_names()
    metafunc.parametrize('golden_set', names, ids=names, indirect=True)


@pytest.fixture(autouse=True)
def golden_set(request: pytest.FixtureRequest):
  """The set this test run compares against (None: the harness's tests)."""
  name = getattr(request, 'param', None)
  if name is None:
    yield None
    return
  # Without a selection (`_UNSELECTED`) this fails (CI) or skips, saying why.
  golden_set = golden.selection().by_name(name)
  golden.use_set(golden_set)
  try:
    yield golden_set
  finally:
    golden.use_set(None)
