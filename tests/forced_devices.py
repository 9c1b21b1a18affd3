"""Subprocess helpers for tests on forced CPU devices and several processes."""

import json
import os
import pathlib
import socket
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def env(num_devices: int) -> dict[str, str]:
  """This process's environment, asking JAX for `num_devices` CPU devices.

  `XLA_FLAGS` must be set before JAX starts, so the tests that use it run
  their work in a subprocess.
  """
  result = dict(os.environ)
  result['XLA_FLAGS'] = (
      result.get('XLA_FLAGS', '')
      + f' --xla_force_host_platform_device_count={num_devices}'
  ).strip()
  result['JAX_PLATFORMS'] = 'cpu'
  result['PYTHONPATH'] = os.pathsep.join(
      [str(REPO)] + result.get('PYTHONPATH', '').split(os.pathsep)
  ).rstrip(os.pathsep)
  return result


def run_python(
    script: str, env: dict[str, str] | None = None, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
  """Runs Python source `script` in a fresh interpreter at the repository root.

  `env` defaults to this process's environment on CPU with the repository
  importable; output is captured as text and a failure is the caller's to
  assert.
  """
  if env is None:
    env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS='cpu')
  return subprocess.run(
      [sys.executable, '-c', script],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=timeout,
      check=False,
  )


def free_address() -> str:
  """'127.0.0.1:<port>' of a free port, for `jax.distributed.initialize`."""
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return f'127.0.0.1:{s.getsockname()[1]}'


def check_two_processes_match_two_devices(
    worker: str, tmp_path: pathlib.Path
) -> None:
  """Runs `worker` as one process on two devices and as two joined processes.

  `worker` is Python source taking `out_dir process_id [address]` (process
  id -1: no `jax.distributed`), which checkpoints steps 2 and 3 under
  `out_dir` and prints a JSON report as its last line. The two processes
  (one CPU device each, Gloo collectives) must each print the one-process
  report exactly, and each keep its own checkpoints under `process_<i>/`.
  """
  address = free_address()
  commands = {
      'local': ([str(tmp_path / 'local'), '-1'], 2),
      'process_0': ([str(tmp_path / 'hosts'), '0', address], 1),
      'process_1': ([str(tmp_path / 'hosts'), '1', address], 1),
  }
  # Output goes to files, not pipes: a process blocked on a full pipe while
  # we wait on another would stall its peer at `jax.distributed`'s barriers.
  procs = {}
  for name, (args, num_devices) in commands.items():
    with (
        (tmp_path / f'{name}.out').open('w') as out,
        (tmp_path / f'{name}.err').open('w') as err,
    ):
      procs[name] = subprocess.Popen(
          [sys.executable, '-c', worker, *args],
          env=env(num_devices),
          cwd=REPO,
          stdout=out,
          stderr=err,
      )
  reports = []
  for name, proc in procs.items():
    proc.wait(timeout=1800)
    err = (tmp_path / f'{name}.err').read_text()
    assert proc.returncode == 0, f'{name}: {err[-4000:]}'
    out = (tmp_path / f'{name}.out').read_text()
    reports.append(json.loads(out.strip().splitlines()[-1]))
  local, *processes = reports
  for report in processes:
    assert report == local
  for i in range(2):
    steps = sorted(
        p.name for p in (tmp_path / 'hosts' / f'process_{i}').iterdir()
    )
    assert steps == ['step_00000002', 'step_00000003']
