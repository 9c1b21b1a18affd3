"""A set written: each case's arrays and sidecar, and `PLATFORM.json`.

The sidecar of a case is the spec set's (or, for the builtin spec, its
config and keys) with the `versions` that ran here; `PLATFORM.json` says
which machine recorded the set, with which recorder and from which spec,
as `platforms.py` reads the shipped sets.
"""

from collections.abc import Mapping
from importlib import metadata
import json
import pathlib
import platform as platform_lib
import subprocess
import time
from typing import Any

import jax
import numpy as np

from tests.parity import builtin
from tests.parity import platforms
from tests.parity.recorder import recipes
from tests.parity.recorder import reference
from tests.parity.recorder import spec as spec_lib


class UnknownCaseError(ValueError):
  """A case named (to record or to skip) that the spec does not have."""


def _commit(root: pathlib.Path) -> str | None:
  """The checkout's git commit, if it is a git checkout."""
  try:
    result = subprocess.run(
        ['git', '-C', str(root), 'rev-parse', 'HEAD'],
        capture_output=True,
        text=True,
        check=False,
    )
  except OSError:
    return None
  return result.stdout.strip() if result.returncode == 0 else None


def versions(root: pathlib.Path, spec: Mapping[str, str]) -> dict[str, str]:
  """The versions that ran, in the sidecars' `versions` fields.

  Args:
    root: the reference checkout; its git commit, if it is a git checkout,
      else the spec's (a checkout of files says none).
    spec: the spec case's `versions`.
  """
  out = {}
  for package in _VERSIONED:
    try:
      out[package] = metadata.version(package)
    except metadata.PackageNotFoundError:
      out[package] = 'unknown'
  out['python'] = platform_lib.python_version()
  commit = _commit(root)
  out['disco_rl_commit'] = commit or spec.get('disco_rl_commit', 'unknown')
  out['disco_rl_source'] = (
      'git checkout' if commit else 'files (commit as the spec says)'
  )
  out['platform'] = jax.default_backend()
  return out


_VERSIONED = (
    'jax',
    'jaxlib',
    'dm-haiku',
    'chex',
    'rlax',
    'distrax',
    'optax',
    'numpy',
)
# CPU flags that tell kinds of machine apart, listed in PLATFORM.json when
# present (`cpu_flags_known`) or, for the first three, absent.
_FLAGS = (
    'fma',
    'avx2',
    'avx512f',
    'avx512dq',
    'avx512bw',
    'avx512vl',
    'avx512_bf16',
    'avx512_vnni',
    'asimd',
    'sve',
)
_FLAGS_ABSENT = ('fma', 'avx2', 'avx512f')
RECORDER = platforms.RECORDER


def platform_record(
    name: str, spec: platforms.GoldenSet | None
) -> dict[str, Any]:
  """This machine's PLATFORM.json, as `platforms.py` reads the shipped ones.

  Args:
    name: the set's name.
    spec: the set whose cases (inputs, configs) were recorded; None: the
      builtin spec (inputs drawn here).

  Returns:
    The record: identity fields, model name, CPU flags, and which recorder
    and spec made it.
  """
  machine = platforms.read_machine()
  record: dict[str, Any] = {'set': name}
  for key in platforms.IDENTITY_FIELDS:
    if key in machine.fields:
      record[key] = machine.fields[key]
  record['model_name'] = machine.name
  if machine.flags is not None:
    record['cpu_flags_known'] = [f for f in _FLAGS if f in machine.flags]
    record['cpu_flags_absent'] = [
        f for f in _FLAGS_ABSENT if f not in machine.flags
    ]
  record['recorder'] = RECORDER
  record['spec'] = spec.name if spec else builtin.label()
  source = (
      f'the inputs and configs of set {spec.name!r}'
      if spec
      else f'inputs drawn from the spec {builtin.spec_file().name}'
  )
  record['note'] = (
      f'recorded {time.strftime("%Y-%m-%d")} by {RECORDER} from the'
      f' reference, with {source}'
  )
  return record


def _key_list(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
  return {k: [list(v.shape), str(v.dtype)] for k, v in arrays.items()}


def _sidecar(
    ref, spec: platforms.GoldenSet | None, name: str, arrays
) -> dict[str, Any]:
  """The case's JSON: the spec set's, or the builtin spec's config."""
  if spec is not None:
    meta = json.loads((spec.directory / f'{name}.json').read_text())
  else:
    entry = builtin.load()[name]
    meta = dict(case=name, summary=entry['about'], config=entry['config'])
    meta['spec'] = builtin.label()
    meta['keys'] = _key_list(arrays)
  meta['versions'] = versions(ref.root, meta.get('versions', {}))
  return meta


def record(
    reference_dir: pathlib.Path,
    out_dir: pathlib.Path,
    spec: platforms.GoldenSet | None,
    cases: list[str] | None = None,
    set_name: str | None = None,
    skip: tuple[str, ...] = (),
) -> list[str]:
  """Records the cases of `spec` into `out_dir`.

  Args:
    reference_dir: the reference checkout.
    out_dir: where the set goes (not the spec set itself).
    spec: the set whose cases to record; None: the builtin spec.
    cases: the cases to record (default: all of the spec).
    set_name: PLATFORM.json's set name (default: `out_dir`'s name).
    skip: cases of the spec not to record.

  Returns:
    The names of the cases recorded.

  Raises:
    UnknownCaseError: a case to record or skip that is not in the spec
      (before anything runs).
    kinds.UnknownKindError: a case whose JSON says no kind of case (before
      anything runs).
  """
  out_dir = out_dir.resolve()
  if spec is not None and out_dir == spec.directory.resolve():
    raise ValueError(f'--out is the spec set {spec.directory} itself.')
  spec_dir = spec.directory if spec is not None else None
  spec_cases = spec_lib.spec_cases(spec_dir)
  unknown = sorted((set(cases or ()) | set(skip)) - set(spec_cases))
  if unknown:
    raise UnknownCaseError(f'Cases not in the spec: {unknown}')
  names = [name for name in cases or spec_cases if name not in skip]
  for name in names:
    spec_lib.case_kind(spec_dir, name)
  ref = reference.load_reference(reference_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  for name in names:
    start = time.time()
    arrays = recipes.record_case(ref, spec_dir, name)
    reference.check_provenance(ref.root)
    np.savez_compressed(out_dir / f'{name}.npz', **arrays)
    meta = _sidecar(ref, spec, name, arrays)
    (out_dir / f'{name}.json').write_text(json.dumps(meta, indent=1) + '\n')
    print(
        f'{name}: {len(arrays)} keys, {time.time() - start:.0f} s', flush=True
    )
  machine = platform_record(set_name or out_dir.name, spec)
  (out_dir / platforms.PLATFORM_FILE).write_text(
      json.dumps(machine, indent=1) + '\n'
  )
  return names
