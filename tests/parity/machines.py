"""Kinds of machine: read from this system, or from a set's PLATFORM.json.

A kind is a few identity fields (backend, vendor, ISA level, CPU family and
model, jaxlib; `IDENTITY_FIELDS`) and the CPU flags known present or
absent. `read_machine` reads this machine, `machine_from_record` a set's
record, and `matches` says whether this machine is the kind a set was
recorded on (`platforms.py` picks the sets of a run with it).
"""

from collections.abc import Mapping
import dataclasses
import pathlib
import platform as platform_lib
from typing import Any

import jax
import jaxlib

PLATFORM_FILE = 'PLATFORM.json'

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
