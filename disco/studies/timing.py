"""Timings in fresh processes, and the machine they ran on.

A timing must not inherit another setting's compiled programs or caches,
so a study times each setting in a process of its own: `child_result` runs
the study's script with one setting as JSON and reads back the JSON the
script prints last. `worktree` gives the source tree of another git
revision, whose library the process can import instead, for a
before-and-after ratio; `machine` says in a few words what ran it.
"""

from collections.abc import Mapping
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
from typing import Any


def child_result(
    script: str,
    flag: str,
    spec: Mapping[str, Any],
    library: str | None = None,
) -> Any:
  """Runs `script flag <spec as JSON>` in a fresh Python process.

  Args:
    script: the study's script.
    flag: the flag under which it times one setting (e.g. '--child').
    spec: the setting.
    library: a source tree whose `disco` the process imports instead of
      this one's (e.g. a `worktree` of an older commit).

  Returns:
    The JSON of its last output line, or None (its error printed) if it
    failed.
  """
  env = None
  if library is not None:
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [library] + [p for p in [env.get('PYTHONPATH')] if p]
    )
  done = subprocess.run(
      [sys.executable, script, flag, json.dumps(spec)],
      capture_output=True,
      text=True,
      check=False,
      env=env,
  )
  if done.returncode:
    print(done.stderr[-2000:], file=sys.stderr)
    return None
  return json.loads(done.stdout.strip().splitlines()[-1])


def worktree(repo: pathlib.Path, rev: str) -> str:
  """A detached git worktree of `rev` of `repo` (made once, in the temp dir).

  Returns:
    Its path, named for the commit.
  """
  sha = subprocess.run(
      ['git', '-C', str(repo), 'rev-parse', '--verify', f'{rev}^{{commit}}'],
      capture_output=True,
      text=True,
      check=True,
  ).stdout.strip()
  path = pathlib.Path(tempfile.gettempdir()) / f'disco-{sha[:12]}'
  if not (path / 'disco').is_dir():
    subprocess.run(
        ['git', '-C', str(repo), 'worktree', 'add', '--detach', str(path), sha],
        check=True,
        capture_output=True,
    )
  return str(path)


def machine() -> str:
  """This machine in a few words: CPU model, cores, devices, JAX version."""
  import jax  # pylint: disable=g-import-not-at-top

  info = {}
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        key, _, value = line.partition(':')
        info.setdefault(key.strip(), value.strip())
  except OSError:
    pass
  model = info.get('model name') or platform.processor() or platform.machine()
  if 'cpu family' in info:
    flags = info.get('flags', '').split()
    isa = 'AVX-512' if 'avx512f' in flags else 'no AVX-512'
    model += f" (family {info['cpu family']}, model {info.get('model')}, {isa})"
  device = jax.devices()[0]
  kind = f' ({device.device_kind})' if device.platform != 'cpu' else ''
  return (
      f'{model} ({os.cpu_count()} cores), {jax.device_count()}'
      f' {device.platform} device(s){kind}, JAX {jax.__version__}'
  )
