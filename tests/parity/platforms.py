"""Which golden set a parity run compares against, and how tightly.

XLA emits different CPU code for AVX-512 and for AVX2-only processors, so
the reference gives other low bits on each (MANIFEST.md section 3a). The
goldens therefore come in sets, one per kind of machine they were recorded
on: the main set in `$DISCO_PARITY_DIR` (AVX-512) and `platforms/<kind>/`
beside it (e.g. `platforms/avx2/`). A run has one of two modes:

* `native`: against the set recorded on this kind of machine, at the tight
  tolerances that hold there (bitwise where the reference is reproduced bit
  for bit);
* `cross`: against a set recorded on another kind of machine, at tolerances
  shaped to each quantity and set above the reference's own spread across
  machines. A machine without a set of its own (another CPU family, a GPU)
  always runs in this mode.

Environment variables:
  DISCO_PARITY_MODE: `auto` (default: native when this machine's kind has a
    set, else cross), `native` or `cross` (forces cross-platform mode
    against a set that is not this machine's).
  DISCO_PARITY_PLATFORM: this machine's kind, overriding the detection
    (`avx512`, `avx2`, or any other name, which has no set).
  DISCO_PARITY_BACKEND: `gpu` (or `tpu`) to require that accelerator: JAX's
    default backend must be it, else every parity test is skipped; its
    matmuls then run at `highest` precision (TF32 is far outside any
    tolerance).
"""

import dataclasses
import functools
import os
import pathlib
import platform

import jax

MODE_ENV = 'DISCO_PARITY_MODE'
PLATFORM_ENV = 'DISCO_PARITY_PLATFORM'
BACKEND_ENV = 'DISCO_PARITY_BACKEND'

NATIVE = 'native'
CROSS = 'cross'
_MODES = ('auto', NATIVE, CROSS)

# MANIFEST.md section 3a: the main set (the directory itself) was recorded
# on an Intel Xeon with AVX-512; the others live in platforms/<kind>/.
ROOT_PLATFORM = 'avx512'
PLATFORMS_SUBDIR = 'platforms'


class SelectionError(Exception):
  """The requested mode or set cannot be had here (message says why)."""


@dataclasses.dataclass(frozen=True)
class Selection:
  """The golden set a run uses and the mode it runs in.

  Attributes:
    machine: this machine's kind ('avx512', 'avx2', 'gpu', ...).
    reason: how `machine` was determined, for the report.
    mode: NATIVE or CROSS.
    requested: the mode asked for ('auto', 'native' or 'cross').
    platform: the kind of machine the chosen set was recorded on.
    directory: the chosen set's directory.
    sets: every available set, {kind: directory}.
  """

  machine: str
  reason: str
  mode: str
  requested: str
  platform: str
  directory: pathlib.Path
  sets: dict[str, pathlib.Path]

  def describe(self) -> str:
    """One line for the test report."""
    others = sorted(k for k in self.sets if k != self.platform)
    return (
        f'mode {self.mode} (asked: {self.requested}); this machine:'
        f' {self.machine} ({self.reason}); goldens: set {self.platform!r} at'
        f' {self.directory}; other sets: {", ".join(others) or "none"}'
    )


def _cpu_flags() -> set[str] | None:
  try:
    text = pathlib.Path('/proc/cpuinfo').read_text()
  except OSError:
    return None
  for line in text.splitlines():
    if line.startswith('flags'):
      return set(line.split(':', 1)[1].split())
  return None


def detect_machine() -> tuple[str, str]:
  """This machine's kind, and how it was found.

  The kinds with goldens are those of the CPU JAX computes on: 'avx512'
  (x86 with AVX-512 F) and 'avx2' (x86 with AVX2 but no AVX-512). Anything
  else is named but has no set: an accelerator backend ('gpu', 'tpu'),
  another architecture ('cpu-arm64'), or an x86 CPU without AVX2.

  Returns:
    (kind, reason).
  """
  forced = os.environ.get(PLATFORM_ENV)
  if forced:
    return forced, f'${PLATFORM_ENV}'
  backend = jax.default_backend()
  if backend != 'cpu':
    return backend, f'JAX backend {backend!r}'
  machine = platform.machine().lower()
  if machine not in ('x86_64', 'amd64'):
    return f'cpu-{machine}', f'CPU architecture {machine}'
  flags = _cpu_flags()
  if flags is None:
    return 'cpu-x86', 'no /proc/cpuinfo to read the CPU flags from'
  if 'avx512f' in flags:
    return 'avx512', 'CPU flags include avx512f'
  if 'avx2' in flags:
    return 'avx2', 'CPU flags include avx2, not avx512f'
  return 'cpu-x86', 'CPU flags include neither avx2 nor avx512f'


def golden_sets(root: pathlib.Path) -> dict[str, pathlib.Path]:
  """{kind: directory} of the sets under `root` (the main set is `root`)."""
  sets = {ROOT_PLATFORM: root}
  subdir = root / PLATFORMS_SUBDIR
  if subdir.is_dir():
    for path in sorted(subdir.iterdir()):
      if path.is_dir() and any(path.glob('*.npz')):
        sets[path.name] = path
  return sets


@functools.cache
def select(root: pathlib.Path) -> Selection:
  """The set and mode of this run (see the module docstring).

  Args:
    root: the main golden directory (`$DISCO_PARITY_DIR`).

  Returns:
    The selection.

  Raises:
    SelectionError: an unknown mode; native mode without a set for this
      machine; cross mode without a set for another machine.
  """
  requested = os.environ.get(MODE_ENV, 'auto').strip().lower() or 'auto'
  if requested not in _MODES:
    raise SelectionError(
        f'${MODE_ENV}={requested!r}; expected one of {", ".join(_MODES)}.'
    )
  machine, reason = detect_machine()
  sets = golden_sets(root)
  mode = requested
  if mode == 'auto':
    mode = NATIVE if machine in sets else CROSS
  if mode == NATIVE:
    if machine not in sets:
      raise SelectionError(
          f'${MODE_ENV}=native, but there is no golden set for this machine'
          f' ({machine}: {reason}); sets: {", ".join(sorted(sets))}.'
      )
    chosen = machine
  else:
    others = [k for k in sets if k != machine]
    if not others:
      raise SelectionError(
          'Cross-platform mode needs a golden set recorded on another kind'
          f' of machine than this one ({machine}); found only'
          f' {", ".join(sorted(sets))}.'
      )
    # The main set when it is another machine's, else the first other one.
    chosen = ROOT_PLATFORM if ROOT_PLATFORM in others else others[0]
  return Selection(
      machine=machine,
      reason=reason,
      mode=mode,
      requested=requested,
      platform=chosen,
      directory=sets[chosen],
      sets=sets,
  )
