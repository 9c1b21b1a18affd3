"""The README's Disco103 example runs as written."""

import os
import subprocess
import sys

import pytest

from tests import readme_quickstart
from tests.parity import builders


def test_quickstart_runs_as_written(tmp_path):
  env = dict(os.environ, DISCO_WEIGHTS=builders.weights_path())
  script = tmp_path / 'quickstart.py'
  script.write_text(readme_quickstart.code())
  result = subprocess.run(
      [sys.executable, '-W', 'error::DeprecationWarning', str(script)],
      cwd=tmp_path,
      env=env,
      capture_output=True,
      text=True,
      timeout=600,
      check=False,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  readme_quickstart.check(result.stdout)


def test_quickstart_code_is_the_block_after_the_marker(tmp_path):
  readme = tmp_path / 'README.md'
  readme.write_text(
      '# x\n\n```python\nprint(0)\n```\n\n'
      f'{readme_quickstart.MARKER}\n```python\nprint(1)\n```\n'
  )
  assert readme_quickstart.code(readme) == 'print(1)\n'
  readme.write_text('no marker\n')
  with pytest.raises(ValueError, match='missing'):
    readme_quickstart.code(readme)


def test_quickstart_check_wants_the_learner_logs():
  readme_quickstart.check("compiling\n{'pi_loss': 0.1, 'total_loss': 1.0}\n")
  for stdout in ('', "{'pi_loss': 0.1}\n", "{'total_loss': 1.0}\nbye\n"):
    with pytest.raises(ValueError, match='did not print'):
      readme_quickstart.check(stdout)
