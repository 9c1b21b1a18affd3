"""Pins the four commands' `--help` text and their errors for bad input.

The golden files in `tests/cli_golden/` were recorded from the commands;
`DISCO_RECORD_CLI_GOLDEN=1` records them again (after an intended change).
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

_REPO = pathlib.Path(__file__).resolve().parents[1]
_GOLDEN = _REPO / 'tests' / 'cli_golden'
_RECORD = os.environ.get('DISCO_RECORD_CLI_GOLDEN') == '1'

_COMMANDS = {
    'disco-eval': 'disco.eval.cli',
    'disco-train': 'disco.train.cli',
    'disco-meta-train': 'disco.meta_train.cli',
    'disco-discover': 'disco.discovery.cli',
}

# (command, argv): bad inputs, run in a directory holding `old/config.json`.
_BAD = [
    ('disco-eval', ['--bogus']),
    ('disco-eval', ['--num-steps=ten']),
    ('disco-eval', ['--num-steps=0']),
    ('disco-eval', ['--fast=maybe']),
    ('disco-eval', ['--resume']),
    ('disco-eval', ['--out-dir=none', '--resume']),
    ('disco-eval', ['--rule=disco', '--compare', 'actor_critic']),
    ('disco-eval', ['--compare', 'dqn']),
    ('disco-eval', ['--num-seeds=0']),
    ('disco-eval', ['--env=pong']),
    ('disco-eval', ['--fast', '--env=catch-cpu']),
    ('disco-train', ['--bogus']),
    ('disco-train', ['--num-seeds=0']),
    ('disco-train', ['--preset=bogus']),
    ('disco-train', ['--num-steps=0']),
    ('disco-train', ['--out-dir=none', '--resume']),
    ('disco-train', ['--out-dir=old', '--resume', '--preset=paper']),
    ('disco-train', ['--out-dir=old', '--resume', '--agent=minatar']),
    ('disco-meta-train', ['--bogus']),
    ('disco-meta-train', ['--num-agents=0']),
    ('disco-meta-train', ['--agent-dense=a,b']),
    ('disco-meta-train', ['--vmap-agents=maybe']),
    ('disco-meta-train', ['--out-dir=none', '--resume']),
    ('disco-meta-train', ['--env=catch-cpu']),
    ('disco-meta-train', ['--env-settings=height']),
    ('disco-discover', ['--bogus']),
    ('disco-discover', ['--population=bad*x']),
    ('disco-discover', ['--num-steps=0']),
    ('disco-discover', ['--preset=bogus']),
    ('disco-discover', ['--out-dir=none', '--resume']),
    ('disco-discover', ['--out-dir=old', '--resume', '--preset=paper']),
]


def _run(prog, argv, cwd):
  """Runs `python -m <module> argv`; returns (exit status, stdout, stderr)."""
  env = dict(
      os.environ,
      PYTHONPATH=str(_REPO),
      COLUMNS='100',
      JAX_PLATFORMS='cpu',
      PYTHONWARNINGS='ignore',
  )
  done = subprocess.run(
      [sys.executable, '-m', _COMMANDS[prog], *argv],
      cwd=cwd,
      env=env,
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
  )
  return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize('prog', sorted(_COMMANDS))
def test_help_text_is_unchanged(prog, tmp_path):
  status, out, err = _run(prog, ['--help'], tmp_path)
  assert (status, err) == (0, '')
  golden = _GOLDEN / f'{prog}.help.txt'
  if _RECORD:
    golden.write_text(out)
  assert out == golden.read_text()


def _key(prog, argv):
  return ' '.join([prog, *argv])


@pytest.mark.parametrize('prog, argv', _BAD, ids=[_key(*c) for c in _BAD])
def test_bad_input_exit_status_and_message_are_unchanged(prog, argv, tmp_path):
  (tmp_path / 'old').mkdir()
  (tmp_path / 'old' / 'config.json').write_text('{"config": {}}')
  status, out, err = _run(prog, argv, tmp_path)
  name = re.sub(r'[^A-Za-z0-9]+', '_', _key(prog, argv)).strip('_')
  golden = _GOLDEN / 'errors' / f'{name}.json'
  got = dict(status=status, stdout=out, stderr=err)
  if _RECORD:
    golden.parent.mkdir(exist_ok=True)
    golden.write_text(json.dumps(got, indent=1) + '\n')
  assert got == json.loads(golden.read_text())
  assert status in (1, 2) and 'Traceback' not in err
