"""Which golden sets a parity run compares against, and how tightly.

XLA emits different CPU code for different processors, so the reference
gives other low bits on each (MANIFEST.md sections 3a and 3b). The goldens
therefore come in sets, one per machine they were recorded on: the set in
`$DISCO_PARITY_DIR` itself and those in `platforms/<name>/` beside it. Each
set's `PLATFORM.json` says what it was recorded on (vendor, ISA level, and
CPU family and model where known), its cases' JSON the jaxlib version. This
machine is read from the system in the same fields, and a set *matches* it
when every field the set recorded is this machine's (`matches`;
`machines.py` reads and matches kinds of machine). A run has one of two
modes:

* `native`: against the set that matches this machine, at the tight
  tolerances that hold there (bit for bit where the reference is
  reproduced bit for bit);
* `cross`: against every set that does not match this machine, each in
  turn, at tolerances shaped to each quantity and set above the widest
  spread measured across sets. A machine that matches no set (another
  vendor or generation, ARM, a GPU) runs in this mode against all of them.

A set without `PLATFORM.json` matches no machine: it is only ever compared
in cross mode.

One run can also compare in both modes: with `$DISCO_PARITY_CROSS_DIR`, the
sets there that do not match this machine (every one, where none does) are
compared in cross mode beside the run's own sets (it may be
`$DISCO_PARITY_DIR` itself: native against the set that matches, cross
against the others). Each test's computation then serves every set.

Environment variables:
  DISCO_PARITY_MODE: `auto` (default: native against the matching set if
    there is one, else cross against all sets), `native` (fails without a
    matching set) or `cross` (against every set that does not match this
    machine; against the sets given, if all of them match it).
  DISCO_PARITY_CROSS_DIR: another root of sets (laid out as
    `$DISCO_PARITY_DIR`), whose sets that do not match this machine are
    compared too, in cross mode, whatever the run's mode.
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
import sys
from typing import Any

from tests.parity import machines

# pylint: disable=g-importing-member,useless-import-alias
from tests.parity.machines import IDENTITY_FIELDS as IDENTITY_FIELDS
from tests.parity.machines import PLATFORM_FILE as PLATFORM_FILE
from tests.parity.machines import Machine as Machine
from tests.parity.machines import machine_from_record as machine_from_record
from tests.parity.machines import matches as matches
from tests.parity.machines import parse_cpuinfo as parse_cpuinfo
from tests.parity.machines import read_machine as read_machine

PARITY_DIR_ENV = 'DISCO_PARITY_DIR'
MODE_ENV = 'DISCO_PARITY_MODE'
CROSS_DIR_ENV = 'DISCO_PARITY_CROSS_DIR'
PLATFORM_ENV = 'DISCO_PARITY_PLATFORM'
BACKEND_ENV = 'DISCO_PARITY_BACKEND'

NATIVE = 'native'
CROSS = 'cross'
_MODES = ('auto', NATIVE, CROSS)

PLATFORMS_SUBDIR = 'platforms'
# The name of the set in `$DISCO_PARITY_DIR` itself when its PLATFORM.json
# names none, and the earlier name of its kind (`DISCO_PARITY_PLATFORM`).
MAIN_SET = 'main'
_ALIASES = {'avx512': MAIN_SET}


class SelectionError(Exception):
  """The requested mode or set cannot be had here (message says why)."""


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
  recorded: machines.Machine | None


def _read_record(directory: pathlib.Path) -> dict[str, Any] | None:
  path = directory / machines.PLATFORM_FILE
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
    if path.name == machines.PLATFORM_FILE:
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
  path = golden_set.directory / machines.PLATFORM_FILE
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
    name = _unique_name(str((record or {}).get('set') or default), sets)
    recorded = (
        machines.machine_from_record(record) if record is not None else None
    )
    sets.append(GoldenSet(name, directory, recorded))
  return tuple(sets)


def detect_machine(
    sets: tuple[GoldenSet, ...] = (),
) -> tuple[machines.Machine, str]:
  """This machine's kind, and where it was read from.

  Args:
    sets: the available sets, whose names `DISCO_PARITY_PLATFORM` may use.

  Returns:
    (machine, reason).
  """
  forced = os.environ.get(PLATFORM_ENV, '').strip()
  if not forced:
    return machines.read_machine(), 'read from this system'
  how = f'${PLATFORM_ENV}={forced}'
  if '=' in forced:
    record = {}
    for part in filter(None, (p.strip() for p in forced.split(','))):
      key, _, value = part.partition('=')
      record[key.strip()] = value.strip()
    unknown = sorted(set(record) - set(machines.IDENTITY_FIELDS))
    if unknown:
      raise SelectionError(
          f'{how}: unknown fields {", ".join(unknown)}; expected some of'
          f' {", ".join(machines.IDENTITY_FIELDS)}.'
      )
    return (
        dataclasses.replace(machines.machine_from_record(record), flags=None),
        how,
    )
  name = _ALIASES.get(forced, forced)
  for golden_set in sets:
    if golden_set.name == name and golden_set.recorded is not None:
      return golden_set.recorded, f'{how}: the machine set {name!r} was on'
  # A kind no set was recorded on.
  return machines.Machine(fields={}, name=forced), how


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
    compared: the sets this run compares against: in `mode`, then those of
      `cross_also`.
    cross_also: the sets of `$DISCO_PARITY_CROSS_DIR` compared in cross mode
      whatever `mode` is (also in `sets` and `compared`).
  """

  machine: machines.Machine
  reason: str
  mode: str
  requested: str
  sets: tuple[GoldenSet, ...]
  matching: Mapping[str, tuple[bool, str]]
  compared: tuple[GoldenSet, ...]
  cross_also: tuple[GoldenSet, ...] = ()

  def by_name(self, name: str) -> GoldenSet:
    (chosen,) = [s for s in self.sets if s.name == name]
    return chosen

  def mode_of(self, golden_set: GoldenSet) -> str:
    """NATIVE or CROSS: how this run compares against `golden_set`."""
    return CROSS if golden_set in self.cross_also else self.mode

  def describe(self) -> list[str]:
    """Lines for the test report."""
    also = self.cross_also
    lines = [
        f'this machine: {self.machine.describe()} ({self.reason})',
        (
            f'mode {self.mode} (asked: {self.requested}) against set(s)'
            f' {", ".join(s.name for s in self.compared if s not in also)}'
        ),
    ]
    if also:
      lines.append(
          f'and mode {CROSS} (${CROSS_DIR_ENV}) against set(s)'
          f' {", ".join(s.name for s in also)}'
      )
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
  matching = {s.name: machines.matches(machine, s.recorded) for s in sets}
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
  cross_also = ()
  cross_dir = os.environ.get(CROSS_DIR_ENV, '').strip()
  if cross_dir:
    found = golden_sets(pathlib.Path(cross_dir).resolve())
    if not found:
      raise SelectionError(
          f'${CROSS_DIR_ENV}={cross_dir}: no golden cases (*.npz) there or'
          ' in its platforms/.'
      )
    # A set already in the run (the same directory) stays one set: compared
    # once, natively if it is this machine's.
    known = {s.directory: s for s in sets}
    extra = _renamed(tuple(s for s in found if s.directory not in known), sets)
    for s in extra:
      matching[s.name] = machines.matches(machine, s.recorded)
    added = iter(extra)
    found = tuple(known.get(s.directory) or next(added) for s in found)
    cross_also = tuple(
        s for s in found if not matching[s.name][0] and s not in compared
    )
    sets += extra
    compared += cross_also
  return Selection(
      machine=machine,
      reason=reason,
      mode=mode,
      requested=requested,
      sets=sets,
      matching=matching,
      compared=compared,
      cross_also=cross_also,
  )


def _unique_name(name: str, taken: tuple[GoldenSet, ...]) -> str:
  """`name`, with `'` appended until no set of `taken` has it."""
  names = {s.name for s in taken}
  while name in names:
    name += "'"
  return name


def _renamed(
    extra: tuple[GoldenSet, ...], taken: tuple[GoldenSet, ...]
) -> tuple[GoldenSet, ...]:
  """`extra`, each set named apart from `taken`'s and from each other's."""
  renamed = ()
  for s in extra:
    name = _unique_name(s.name, taken + renamed)
    renamed += (dataclasses.replace(s, name=name),)
  return renamed


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
