"""Pins the four commands' `--help` text and their errors for bad input.

The golden files in `tests/cli_golden/` were recorded from the commands;
`DISCO_RECORD_CLI_GOLDEN=1` records them again (after an intended change).

Each case runs as `python -m <module> argv` would: a process of its own,
in a directory of its own, with its own exit status, stdout and stderr. The
processes are forked from one that has imported the command's module, one
such process per command (`_DRIVER`), which saves the 35 cases about two
seconds of imports each.
"""

import functools
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

_HELP = ['--help']
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

# Runs `python -m <module> argv` for each argv of argv[2] (JSON) in a
# process forked from this one, in a fresh directory under argv[3], and
# prints [[status, stdout, stderr], ...] as JSON.
_DRIVER = r"""
import importlib, json, os, runpy, sys, traceback

module, argvs, root = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
importlib.import_module(module)
results = []
for i, argv in enumerate(argvs):
  cwd = os.path.join(root, str(i))
  os.makedirs(os.path.join(cwd, 'old'))
  with open(os.path.join(cwd, 'old', 'config.json'), 'w') as f:
    f.write('{"config": {}}')
  out, err = os.path.join(root, f'{i}.out'), os.path.join(root, f'{i}.err')
  pid = os.fork()
  if pid == 0:  # As `python -m module argv` from cwd.
    os.chdir(cwd)
    for fd, path in ((1, out), (2, err)):
      os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    sys.argv = [module] + argv
    try:
      runpy.run_module(module, run_name='__main__', alter_sys=True)
      status = 0
    except SystemExit as e:
      if e.code is None or isinstance(e.code, int):
        status = e.code or 0
      else:
        print(e.code, file=sys.stderr)
        status = 1
    except BaseException:
      traceback.print_exc()
      status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
  _, wait_status = os.waitpid(pid, 0)
  with open(out) as f, open(err) as g:
    results.append([os.waitstatus_to_exitcode(wait_status), f.read(), g.read()])
print(json.dumps(results))
"""


@functools.cache
def _runs(prog: str, tmp: pathlib.Path) -> dict[str, tuple[int, str, str]]:
  """Every case of `prog`, keyed by `_key`: (exit status, stdout, stderr)."""
  argvs = [_HELP] + [argv for p, argv in _BAD if p == prog]
  env = dict(
      os.environ,
      PYTHONPATH=str(_REPO),
      COLUMNS='100',
      JAX_PLATFORMS='cpu',
      PYTHONWARNINGS='ignore',
  )
  root = tmp / prog
  root.mkdir()
  done = subprocess.run(
      [sys.executable, '-c', _DRIVER, _COMMANDS[prog], json.dumps(argvs),
       str(root)],  # fmt: skip
      env=env,
      capture_output=True,
      text=True,
      timeout=600,
      check=False,
  )
  assert done.returncode == 0, done.stderr[-4000:]
  results = json.loads(done.stdout.strip().splitlines()[-1])
  return {_key(prog, a): tuple(r) for a, r in zip(argvs, results)}


def _run(prog, argv, tmp_path_factory):
  tmp = tmp_path_factory.getbasetemp() / 'cli_pinned'
  tmp.mkdir(exist_ok=True)
  return _runs(prog, tmp)[_key(prog, argv)]


def _key(prog, argv):
  return ' '.join([prog, *argv])


@pytest.mark.parametrize('prog', sorted(_COMMANDS))
def test_help_text_is_unchanged(prog, tmp_path_factory):
  status, out, err = _run(prog, _HELP, tmp_path_factory)
  assert (status, err) == (0, '')
  golden = _GOLDEN / f'{prog}.help.txt'
  if _RECORD:
    golden.write_text(out)
  assert out == golden.read_text()


@pytest.mark.parametrize('prog, argv', _BAD, ids=[_key(*c) for c in _BAD])
def test_bad_input_exit_status_and_message_are_unchanged(
    prog, argv, tmp_path_factory
):
  status, out, err = _run(prog, argv, tmp_path_factory)
  name = re.sub(r'[^A-Za-z0-9]+', '_', _key(prog, argv)).strip('_')
  golden = _GOLDEN / 'errors' / f'{name}.json'
  got = dict(status=status, stdout=out, stderr=err)
  if _RECORD:
    golden.parent.mkdir(exist_ok=True)
    golden.write_text(json.dumps(got, indent=1) + '\n')
  assert got == json.loads(golden.read_text())
  assert status in (1, 2) and 'Traceback' not in err
