"""Run records: one JSON file per run of a study, and reading them back.

A run named `name` of a study writing to `out` keeps its record in
`<out>/runs/<name>.json` once it finished (status `done`) and, while it is
stopped part way, in `<out>/runs/<name>.partial.json` (status `partial`).
A record holds the `settings` it ran with; a study that finds a finished
record of the same settings skips the run, and one of other settings is an
error (`RecordError`), never overwritten.

A trainer run's record keeps every log row of every seed under `logs`
(columns of numbers, None where a value was missing); `seed_columns` gives
one seed's columns back as arrays.
"""

from collections.abc import Mapping
import json
import pathlib
from typing import Any

import numpy as np

from disco import files

DONE = 'done'
PARTIAL = 'partial'
RUNS_DIR = 'runs'
# The trainer's execution fields (`disco.train.config.EXECUTION_FIELDS`,
# which a run may change when it resumes) that a record is still of: its
# budget and its rule's parameters. The others (how a run is cut into
# calls, checkpointed and compiled) are left out of its settings.
RECORD_OF = ('num_steps', 'update_rule_params')


class RecordError(Exception):
  """A run's files belong to other settings than the ones asked for."""


def jsonable(value: Any) -> Any:
  """`value` as it reads back from JSON (tuples as lists)."""
  return json.loads(json.dumps(value))


def write_json(path: pathlib.Path, value: Any) -> None:
  """Writes `value` as JSON atomically: a crash leaves the old file."""
  path.parent.mkdir(parents=True, exist_ok=True)
  files.write_json_atomic(path, value)


def record_path(out: pathlib.Path, name: str) -> pathlib.Path:
  """Where run `name` of the study in `out` keeps its finished record."""
  return out / RUNS_DIR / f'{name}.json'


def partial_path(out: pathlib.Path, name: str) -> pathlib.Path:
  """Where run `name` keeps its record while it is stopped part way."""
  return out / RUNS_DIR / f'{name}.partial.json'


def normal_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
  """`settings` as JSON reads them, a trainer `config` with today's fields.

  A `config` entry is read back through `disco.train.TrainConfig`, so a
  record saved before a field existed matches a config with that field at
  its default; the execution fields that only cut, checkpoint and compile
  a run are left out, so a run resumes and a record counts whatever they
  are.
  """
  from disco import train  # pylint: disable=g-import-not-at-top
  from disco.train import config as config_lib  # pylint: disable=g-import-not-at-top

  settings = jsonable(settings)
  if isinstance(settings.get('config'), dict):
    config = train.TrainConfig.from_dict(settings['config']).to_dict()
    how_run = config_lib.EXECUTION_FIELDS.difference(RECORD_OF)
    settings['config'] = jsonable(
        {k: v for k, v in config.items() if k not in how_run}
    )
  return settings


def same_settings(saved: Mapping[str, Any], asked: Mapping[str, Any]) -> bool:
  """Whether a record's `saved` settings are the `asked` ones."""
  return normal_settings(saved) == normal_settings(asked)


def differing(saved: Mapping[str, Any], asked: Mapping[str, Any]) -> list[str]:
  """The names of the top-level settings that differ, sorted."""
  saved, asked = jsonable(saved), jsonable(asked)
  names = set(saved) | set(asked)
  return sorted(k for k in names if saved.get(k) != asked.get(k))


def load_record(
    out: pathlib.Path, name: str, settings: Mapping[str, Any]
) -> dict[str, Any] | None:
  """Run `name`'s finished record if it ran with `settings`, else None.

  A missing or unreadable file (a write cut short) and a record of a run
  that did not finish give None: the run is run again.

  Raises:
    RecordError: the file holds a finished run of other settings.
  """
  path = record_path(out, name)
  if not path.is_file():
    return None
  try:
    record = json.loads(path.read_text())
  except (OSError, ValueError):
    return None
  if record.get('status') != DONE:
    return None
  saved = record.get('settings') or {}
  if not same_settings(saved, settings):
    raise RecordError(
        f'{path} holds a finished run with other settings (differing:'
        f' {", ".join(differing(saved, settings))}); use another --out or'
        ' delete it'
    )
  return record


def load_records(
    out: pathlib.Path, include_partial: bool = False
) -> list[dict[str, Any]]:
  """The records in `<out>/runs/`, in the order of their file names.

  Args:
    out: the study's output directory.
    include_partial: also the records of stopped runs (a finished record of
      the same run wins over its partial one).

  Returns:
    Each run's record once: finished ones, and partial ones if asked.
  """
  wanted = (DONE, PARTIAL) if include_partial else (DONE,)
  found: dict[str, dict[str, Any]] = {}
  runs = out / RUNS_DIR
  for path in sorted(runs.glob('*.json')) if runs.is_dir() else []:
    record = json.loads(path.read_text())
    name = path.name.removesuffix('.json').removesuffix('.partial')
    if record.get('status') in wanted:
      if found.get(name, {}).get('status') != DONE:
        found[name] = record
  return list(found.values())


def json_numbers(values: Any) -> list[float | None]:
  """Numbers as a record keeps them: floats, None where not finite."""
  return [
      float(x) if np.isfinite(x) else None
      for x in np.asarray(values, np.float64).tolist()
  ]


def seed_columns(record: Mapping[str, Any], seed: int) -> dict[str, np.ndarray]:
  """A trainer record's log columns [rows] of one seed (NaN where None)."""
  logs = {
      k: np.array([np.nan if x is None else x for x in v], np.float64)
      for k, v in record['logs'].items()
  }
  rows = logs['seed'] == seed
  return {k: v[rows] for k, v in logs.items()}
