"""Which golden sets a parity run compares against, and how tightly.

XLA emits different CPU code for different processors, so the reference
gives other low bits on each (MANIFEST.md sections 3a and 3b). The goldens
therefore come in sets, one per machine they were recorded on: the set in
`$DISCO_PARITY_DIR` itself and those in `platforms/<name>/` beside it. Each
set's `PLATFORM.json` says what it was recorded on (vendor, ISA level, and
CPU family and model where known), its cases' JSON the jaxlib version. This
machine is read from the system in the same fields, and a set *matches* it
when every field the set recorded is this machine's (`matches`). A run has
one of two modes:

* `native`: against the set that matches this machine, at the tight
  tolerances that hold there (bit for bit where the reference is
  reproduced bit for bit);
* `cross`: against every set that does not match this machine, each in
  turn, at tolerances shaped to each quantity and set above the widest
  spread measured across sets. A machine that matches no set (another
  vendor or generation, ARM, a GPU) runs in this mode against all of them.

A set without `PLATFORM.json` matches no machine: it is only ever compared
in cross mode.

Environment variables:
  DISCO_PARITY_MODE: `auto` (default: native against the matching set if
    there is one, else cross against all sets), `native` (fails without a
    matching set) or `cross` (against every set that does not match this
    machine; against the sets given, if all of them match it).
  DISCO_PARITY_PLATFORM: this machine's kind, overriding the detection: a
    set's name (`main`, `avx2`, `avx512-amd`: the machine that set was
    recorded on; `avx512` is the old name of `main`), fields
    (`vendor_id=AuthenticAMD,isa=avx512,cpu_family=25,model=17`), or any
    other name (`arm64`, `unknown`), a kind that matches no set.
  DISCO_PARITY_BACKEND: `gpu` (or `tpu`) to require that accelerator: JAX's
    default backend must be it, else every parity test is skipped; its
    matmuls then run at `highest` precision (TF32 is far outside any
    tolerance).
"""

from collections.abc import Mapping
import dataclasses
import functools
import json
import os
import pathlib
import platform as platform_lib
import sys
from typing import Any

import jax
import jaxlib

PARITY_DIR_ENV = 'DISCO_PARITY_DIR'
MODE_ENV = 'DISCO_PARITY_MODE'
PLATFORM_ENV = 'DISCO_PARITY_PLATFORM'
BACKEND_ENV = 'DISCO_PARITY_BACKEND'

NATIVE = 'native'
CROSS = 'cross'
_MODES = ('auto', NATIVE, CROSS)

PLATFORMS_SUBDIR = 'platforms'
PLATFORM_FILE = 'PLATFORM.json'
# The name of the set in `$DISCO_PARITY_DIR` itself when its PLATFORM.json
# names none, and the earlier name of its kind (`DISCO_PARITY_PLATFORM`).
MAIN_SET = 'main'
_ALIASES = {'avx512': MAIN_SET}

# The fields that identify a kind of machine, in the order they are shown.
# A set that records a field matches only machines with the same value.
IDENTITY_FIELDS = (
    'backend',
    'device_kind',
    'arch',
    'vendor_id',
    'isa',
    'cpu_family',
    'model',
    'jaxlib',
)
# Without these a recorded platform is too vague to match anything.
_REQUIRED = {'cpu': ('vendor_id', 'isa')}
_INT_FIELDS = ('cpu_family', 'model')


class SelectionError(Exception):
  """The requested mode or set cannot be had here (message says why)."""


@dataclasses.dataclass(frozen=True)
class Machine:
  """A kind of machine, as read from the system or a PLATFORM.json.

  Attributes:
    fields: identity fields (`IDENTITY_FIELDS`) that are known.
    flags: CPU feature flags known to be present (None: not known, as for
      a machine named by its fields alone).
    absent: CPU feature flags known to be absent.
    name: a free-text name for reports (a CPU's model name, a kind).
  """

  fields: Mapping[str, Any]
  flags: frozenset[str] | None = None
  absent: frozenset[str] = frozenset()
  name: str = ''

  def describe(self) -> str:
    known = ', '.join(
        f'{k}={self.fields[k]}' for k in IDENTITY_FIELDS if k in self.fields
    )
    if self.name and known:
      return f'{self.name} ({known})'
    return self.name or known or 'unknown'


@dataclasses.dataclass(frozen=True)
class GoldenSet:
  """One recording of the cases, and what it was recorded on.

  Attributes:
    name: PLATFORM.json's `set`, else the directory's name.
    directory: where its `<case>.npz`/`.json` files are.
    recorded: the machine it was recorded on; None without PLATFORM.json.
  """

  name: str
  directory: pathlib.Path
  recorded: Machine | None


def _isa(flags: frozenset[str]) -> str:
  if 'avx512f' in flags:
    return 'avx512'
  if 'avx2' in flags:
    return 'avx2'
  return 'x86'


def parse_cpuinfo(text: str) -> dict[str, str]:
  """The first processor's `key: value` lines of /proc/cpuinfo text."""
  info = {}
  for line in text.splitlines():
    if not line.strip():
      if info:
        break
      continue
    key, sep, value = line.partition(':')
    if sep:
      info.setdefault(key.strip(), value.strip())
  return info


def _cpuinfo() -> dict[str, str]:
  try:
    return parse_cpuinfo(pathlib.Path('/proc/cpuinfo').read_text())
  except OSError:
    return {}


def read_machine() -> Machine:
  """This machine, from JAX's backend and version and /proc/cpuinfo."""
  backend = jax.default_backend()
  if backend != 'cpu':
    kind = jax.devices()[0].device_kind
    fields = dict(backend=backend, device_kind=kind, jaxlib=jaxlib.__version__)
    return Machine(fields=fields, name=kind)
  arch = platform_lib.machine().lower()
  arch = {'amd64': 'x86_64', 'aarch64': 'arm64'}.get(arch, arch)
  fields: dict[str, Any] = dict(
      backend='cpu', arch=arch, jaxlib=jaxlib.__version__
  )
  info = _cpuinfo()
  text = info.get('flags', info.get('Features'))
  flags = frozenset(text.split()) if text is not None else None
  if 'vendor_id' in info:
    fields['vendor_id'] = info['vendor_id']
  if arch == 'x86_64' and flags:
    fields['isa'] = _isa(flags)
  for field, key in (('cpu_family', 'cpu family'), ('model', 'model')):
    if info.get(key, '').isdigit():
      fields[field] = int(info[key])
  return Machine(fields=fields, flags=flags, name=info.get('model name', ''))


def machine_from_record(record: Mapping[str, Any]) -> Machine:
  """The machine a PLATFORM.json (or `DISCO_PARITY_PLATFORM` fields) names."""
  fields = {k: record[k] for k in IDENTITY_FIELDS if k in record}
  fields.setdefault('backend', 'cpu')
  if fields.get('isa') in ('avx2', 'avx512', 'x86'):
    fields.setdefault('arch', 'x86_64')
  for k in _INT_FIELDS:
    if k in fields:
      fields[k] = int(fields[k])
  flags = frozenset(record.get('cpu_flags_known', ()))
  if 'isa' in fields and fields['isa'] != 'x86':
    flags |= {'avx512': {'avx512f', 'avx2'}, 'avx2': {'avx2'}}.get(
        fields['isa'], set()
    )
  return Machine(
      fields=fields,
      flags=flags,
      absent=frozenset(record.get('cpu_flags_absent', ())),
      name=str(record.get('model_name', '')),
  )


def matches(machine: Machine, recorded: Machine | None) -> tuple[bool, str]:
  """Whether `machine` is the kind a set was recorded on, and why (not).

  Every identity field the set recorded must be the machine's; flags it
  lists as known must be present and flags it lists as absent must be
  absent. A set without a record, or with too little of one (a CPU set
  without vendor and ISA), matches nothing.
  """
  if recorded is None:
    return False, f'no {PLATFORM_FILE}: a set of unknown origin'
  if not machine.fields:
    return False, f'{machine.name or "this"} is a kind without a set'
  backend = recorded.fields['backend']
  missing = [k for k in _REQUIRED.get(backend, ()) if k not in recorded.fields]
  if missing:
    return False, f'its {PLATFORM_FILE} records no {", ".join(missing)}'
  for key in IDENTITY_FIELDS:
    if key not in recorded.fields:
      continue
    want, have = recorded.fields[key], machine.fields.get(key)
    if have != want:
      here = 'unknown' if have is None else have
      return False, f'{key} {here} here, {want} there'
  if machine.flags is not None:
    lacking = sorted(recorded.flags - machine.flags)
    if lacking:
      return False, f'CPU flags {", ".join(lacking)} missing here'
    extra = sorted(recorded.absent & machine.flags)
    if extra:
      return False, f'CPU flags {", ".join(extra)} here, absent there'
  same = [k for k in IDENTITY_FIELDS if k in recorded.fields]
  unrecorded = [k for k in _INT_FIELDS if k not in recorded.fields]
  reason = 'same ' + ', '.join(same)
  if backend == 'cpu' and unrecorded:
    reason += f' ({"/".join(unrecorded)} not recorded)'
  return True, reason


def _read_record(directory: pathlib.Path) -> dict[str, Any] | None:
  path = directory / PLATFORM_FILE
  if not path.is_file():
    return None
  try:
    record = json.loads(path.read_text())
  except (OSError, json.JSONDecodeError) as e:
    raise SelectionError(f'{path} is not readable JSON: {e}') from e
  if not isinstance(record, dict):
    raise SelectionError(f'{path} holds {type(record).__name__}, not a map.')
  return record


def _recorded_jaxlib(directory: pathlib.Path) -> str | None:
  """The jaxlib version a case's JSON sidecar says it was recorded with."""
  for path in sorted(directory.glob('*.json')):
    if path.name == PLATFORM_FILE:
      continue
    try:
      versions = json.loads(path.read_text()).get('versions', {})
    except (OSError, json.JSONDecodeError, AttributeError):
      continue
    if isinstance(versions, dict) and versions.get('jaxlib'):
      return str(versions['jaxlib'])
  return None


# PLATFORM.json's `recorder` in a set made by tests/parity/record.py.
RECORDER = 'tests.parity.record'
# Where .ci/run keeps the shipped sets while the suite runs against its own.
SHIPPED_ENV = 'DISCO_PARITY_SHIPPED'


def is_recording(golden_set: GoldenSet) -> bool:
  """Whether a set was made by the recorder here (not a shipped one)."""
  path = golden_set.directory / PLATFORM_FILE
  if not path.is_file():
    return False
  return json.loads(path.read_text()).get('recorder') == RECORDER


def golden_sets(root: pathlib.Path) -> tuple[GoldenSet, ...]:
  """The sets in `root` (if it holds cases) and in `root/platforms/*/`.

  A set's record is its PLATFORM.json, with the jaxlib version of its
  cases' JSON sidecars where PLATFORM.json names none: XLA's code, and so
  the low bits, can change with the compiler as with the CPU.
  """
  directories = [root] if any(root.glob('*.npz')) else []
  subdir = root / PLATFORMS_SUBDIR
  if subdir.is_dir():
    directories += [
        p
        for p in sorted(subdir.iterdir())
        if p.is_dir() and any(p.glob('*.npz'))
    ]
  sets = []
  for directory in directories:
    record = _read_record(directory)
    if record is not None and 'jaxlib' not in record:
      jaxlib_version = _recorded_jaxlib(directory)
      if jaxlib_version:
        record = dict(record, jaxlib=jaxlib_version)
    default = MAIN_SET if directory == root else directory.name
    name = str((record or {}).get('set') or default)
    taken = {s.name for s in sets}
    while name in taken:
      name += "'"
    recorded = machine_from_record(record) if record is not None else None
    sets.append(GoldenSet(name, directory, recorded))
  return tuple(sets)


def detect_machine(sets: tuple[GoldenSet, ...] = ()) -> tuple[Machine, str]:
  """This machine's kind, and where it was read from.

  Args:
    sets: the available sets, whose names `DISCO_PARITY_PLATFORM` may use.

  Returns:
    (machine, reason).
  """
  forced = os.environ.get(PLATFORM_ENV, '').strip()
  if not forced:
    return read_machine(), 'read from this system'
  how = f'${PLATFORM_ENV}={forced}'
  if '=' in forced:
    record = {}
    for part in filter(None, (p.strip() for p in forced.split(','))):
      key, _, value = part.partition('=')
      record[key.strip()] = value.strip()
    unknown = sorted(set(record) - set(IDENTITY_FIELDS))
    if unknown:
      raise SelectionError(
          f'{how}: unknown fields {", ".join(unknown)}; expected some of'
          f' {", ".join(IDENTITY_FIELDS)}.'
      )
    return dataclasses.replace(machine_from_record(record), flags=None), how
  name = _ALIASES.get(forced, forced)
  for golden_set in sets:
    if golden_set.name == name and golden_set.recorded is not None:
      return golden_set.recorded, f'{how}: the machine set {name!r} was on'
  # A kind no set was recorded on.
  return Machine(fields={}, name=forced), how


@dataclasses.dataclass(frozen=True)
class Selection:
  """The golden sets a run compares against and the mode it runs in.

  Attributes:
    machine: this machine.
    reason: how `machine` was determined, for the report.
    mode: NATIVE or CROSS.
    requested: the mode asked for ('auto', 'native' or 'cross').
    sets: every available set.
    matching: {set name: why it does or does not match this machine}.
    compared: the sets this run compares against, in that mode.
  """

  machine: Machine
  reason: str
  mode: str
  requested: str
  sets: tuple[GoldenSet, ...]
  matching: Mapping[str, tuple[bool, str]]
  compared: tuple[GoldenSet, ...]

  def by_name(self, name: str) -> GoldenSet:
    (chosen,) = [s for s in self.sets if s.name == name]
    return chosen

  def describe(self) -> list[str]:
    """Lines for the test report."""
    lines = [
        f'this machine: {self.machine.describe()} ({self.reason})',
        (
            f'mode {self.mode} (asked: {self.requested}) against set(s)'
            f' {", ".join(s.name for s in self.compared)}'
        ),
    ]
    for s in self.sets:
      match, why = self.matching[s.name]
      verdict = 'matches' if match else 'does not match'
      lines.append(f'  set {s.name!r} at {s.directory}: {verdict} ({why})')
    return lines


@functools.cache
def select(root: pathlib.Path) -> Selection:
  """The sets and mode of this run (see the module docstring).

  Args:
    root: `$DISCO_PARITY_DIR`: one set's directory, or the main set with
      others under `platforms/`.

  Returns:
    The selection.

  Raises:
    SelectionError: an unknown mode or platform field; no set under
      `root`; native mode without a set that matches this machine.
  """
  requested = os.environ.get(MODE_ENV, 'auto').strip().lower() or 'auto'
  if requested not in _MODES:
    raise SelectionError(
        f'${MODE_ENV}={requested!r}; expected one of {", ".join(_MODES)}.'
    )
  sets = golden_sets(root)
  if not sets:
    raise SelectionError(
        f'No golden cases (*.npz) in {root} or its platforms/.'
    )
  machine, reason = detect_machine(sets)
  matching = {s.name: matches(machine, s.recorded) for s in sets}
  native = tuple(s for s in sets if matching[s.name][0])
  others = tuple(s for s in sets if not matching[s.name][0])
  mode = requested
  if mode == 'auto':
    mode = NATIVE if native else CROSS
  if mode == NATIVE:
    if not native:
      raise SelectionError(
          f'${MODE_ENV}=native, but no golden set matches this machine'
          f' ({machine.describe()}; {reason}): '
          + '; '.join(f'{k}: {v[1]}' for k, v in matching.items())
      )
    compared = native
  else:
    # Every other set; the given ones if all of them are this machine's.
    compared = others or sets
  return Selection(
      machine=machine,
      reason=reason,
      mode=mode,
      requested=requested,
      sets=sets,
      matching=matching,
      compared=compared,
  )


def main() -> int:
  """Prints this run's selection; `--mode` prints only its mode."""
  root = os.environ.get(PARITY_DIR_ENV)
  if not root:
    print(f'${PARITY_DIR_ENV} is not set.', file=sys.stderr)
    return 2
  try:
    chosen = select(pathlib.Path(root).resolve())
  except SelectionError as e:
    print(e, file=sys.stderr)
    return 1
  print(
      chosen.mode
      if sys.argv[1:] == ['--mode']
      else '\n'.join(chosen.describe())
  )
  return 0


if __name__ == '__main__':
  raise SystemExit(main())
