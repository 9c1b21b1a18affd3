"""The suite's `xdist_group` marks take effect under `pytest -n`.

Tests that share compiled programs (the parity tests' runs against several
golden sets, the tiny meta-training and discovery runs) are grouped onto one
worker with `xdist_group` and `--dist loadgroup` (pyproject.toml). When a
pytest and pytest-xdist pair stops honouring the marks, nothing fails: each
test compiles its programs again, and CI takes minutes longer (pytest 9.2.0
with pytest-xdist 3.8.0, pytest-dev/pytest-xdist#1386). This checks the
installed pair.
"""

import os
import re
import subprocess
import sys

import pytest

_TESTS = """
import pytest

pytestmark = pytest.mark.xdist_group('shared')

@pytest.mark.parametrize('i', range(8))
def test_grouped(i):
  del i
"""


def test_a_group_runs_on_one_worker(tmp_path):
  pytest.importorskip('xdist')
  (tmp_path / 'test_grouped.py').write_text(_TESTS)
  (tmp_path / 'pytest.ini').write_text('[pytest]\n')
  done = subprocess.run(
      [
          sys.executable, '-m', 'pytest', '-n', '2', '--dist', 'loadgroup',
          '-v', '-p', 'no:cacheprovider', '-c', str(tmp_path / 'pytest.ini'),
          '--rootdir', str(tmp_path), str(tmp_path),
      ],  # fmt: skip
      cwd=tmp_path,
      # Not this run's own worker settings (PYTEST_XDIST_WORKER, ...).
      env={k: v for k, v in os.environ.items() if not k.startswith('PYTEST')},
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
  )
  assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
  workers = re.findall(r'\[(gw\d+)\].*PASSED.*test_grouped', done.stdout)
  assert len(workers) == 8, done.stdout[-2000:]
  assert len(set(workers)) == 1, (
      f'the 8 tests of one xdist_group ran on workers {sorted(set(workers))}:'
      f' pytest {pytest.__version__} with this pytest-xdist ignores the'
      ' groups (pytest-dev/pytest-xdist#1386); install pytest<9.2'
  )
