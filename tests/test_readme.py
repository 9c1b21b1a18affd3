"""The README's Disco103 example runs as written."""

import os
import pathlib
import re
import subprocess
import sys

from tests.parity import builders

_README = pathlib.Path(__file__).resolve().parents[1] / 'README.md'
_MARKER = '<!-- readme-quickstart -->'


def _quickstart_code() -> str:
  text = _README.read_text()
  assert _MARKER in text, f'{_MARKER} is missing from the README'
  after = text.split(_MARKER, 1)[1]
  match = re.match(r'\s*```python\n(.*?)```', after, re.DOTALL)
  assert match, 'no python block follows the quickstart marker'
  return match.group(1)


def test_quickstart_runs_as_written(tmp_path):
  env = dict(os.environ, DISCO_WEIGHTS=builders.weights_path())
  script = tmp_path / 'quickstart.py'
  script.write_text(_quickstart_code())
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
  printed = result.stdout.strip().splitlines()[-1]
  assert "'total_loss'" in printed and "'pi_loss'" in printed, printed
