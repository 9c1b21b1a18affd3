"""Subprocess helpers for tests on forced CPU devices and several processes."""

import os
import pathlib
import socket

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


def free_address() -> str:
  """'127.0.0.1:<port>' of a free port, for `jax.distributed.initialize`."""
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return f'127.0.0.1:{s.getsockname()[1]}'
