"""The one log codec: per-step rows as columns, checkpoint arrays and CSV.

`columns` turns a run's rows (one dict per step) into arrays, `to_arrays` /
`from_arrays` keep them in a checkpoint and `CsvLog` streams them to
`log.csv`, atomically and resumably. Details: `docs/design.md`.
"""

from collections.abc import Callable, Iterable, Mapping
import csv
import io
import math
import pathlib
from typing import Any

import numpy as np

from disco import checkpoint
from disco import files

Row = Mapping[str, Any]
# Checkpoint keys: one array per column under `logs/`, their order as JSON.
LOGS = 'logs/'
COLUMN_ORDER = 'log_columns'


def _format(value: Any) -> str:
  if isinstance(value, (float, np.floating)):
    return '' if math.isnan(value) else repr(float(value))
  if isinstance(value, np.integer):
    return str(int(value))
  return str(value)


def _parse(text: str) -> Any:
  """A CSV field back as int, float (NaN for empty) or string."""
  if text == '':
    return math.nan
  for kind in (int, float):
    try:
      return kind(text)
    except ValueError:
      pass
  return text


def read_csv(path: files.PathLike) -> list[dict[str, Any]]:
  """The rows of a CSV file, numbers parsed (empty fields are NaN)."""
  with pathlib.Path(path).open(newline='') as f:
    return [{k: _parse(v) for k, v in row.items()} for row in csv.DictReader(f)]


def columns(rows: Iterable[Row]) -> dict[str, np.ndarray]:
  """Rows as columns (a missing field is NaN; strings stay strings)."""
  rows = list(rows)
  names = _names(rows)
  out = {}
  for name in names:
    values = [row.get(name, math.nan) for row in rows]
    if any(isinstance(v, str) for v in values):
      out[name] = np.asarray([str(v) for v in values])
    else:
      out[name] = np.asarray(values, np.float64)
  return out


def to_arrays(rows: Iterable[Row], prefix: str = '') -> dict[str, np.ndarray]:
  """Numeric rows as checkpoint arrays: `<prefix>logs/<column>` [num_rows]."""
  named = columns(rows)
  arrays = {f'{prefix}{LOGS}{k}': v for k, v in named.items()}
  arrays[prefix + COLUMN_ORDER] = checkpoint.json_array(list(named))
  return arrays


def is_log_array(name: str, prefix: str = '') -> bool:
  """Whether checkpoint array `name` is one of `to_arrays(..., prefix)`'s."""
  return name.startswith(prefix + LOGS) or name == prefix + COLUMN_ORDER


def from_arrays(
    arrays: Mapping[str, np.ndarray], prefix: str = ''
) -> list[dict[str, float]]:
  """Inverse of `to_arrays` (every row has every column, NaN kept).

  Checkpoints written before the column order was kept give their columns
  sorted by name.

  Raises:
    ValueError: columns of different lengths.
  """
  head = prefix + LOGS
  if prefix + COLUMN_ORDER in arrays:
    names = checkpoint.from_json_array(arrays[prefix + COLUMN_ORDER])
  else:
    names = sorted(k[len(head) :] for k in arrays if k.startswith(head))
  named = {k: np.asarray(arrays[head + k]) for k in names}
  lengths = {len(v) for v in named.values()}
  if len(lengths) > 1:
    raise ValueError(f'Log columns of different lengths: {sorted(lengths)}.')
  num = lengths.pop() if lengths else 0
  return [{k: float(v[i]) for k, v in named.items()} for i in range(num)]


def read_columns(path: files.PathLike) -> dict[str, np.ndarray]:
  """A CSV file's columns (see `columns`)."""
  return columns(read_csv(path))


def _names(rows: Iterable[Row]) -> list[str]:
  names = []
  for row in rows:
    names.extend(k for k in row if k not in names)
  return names


def write_csv(rows: Iterable[Row], path: files.PathLike) -> pathlib.Path:
  """Writes `rows` to `path` atomically; returns the path."""
  rows = list(rows)
  names = _names(rows)
  lines = [names] + [[_format(row.get(k, '')) for k in names] for row in rows]
  text = io.StringIO()
  csv.writer(text).writerows(lines)
  path = pathlib.Path(path)
  files.write_text_atomic(path, text.getvalue())
  return path


class CsvLog:
  """A `log.csv` that grows by one flushed row per step."""

  def __init__(self, path: files.PathLike):
    self.path = pathlib.Path(path)
    self._rows: list[dict[str, Any]] = []
    self._names: list[str] = []

  def keep(self, predicate: Callable[[Row], bool]) -> None:
    """Loads an existing file and keeps only the rows `predicate` accepts.

    A resumed run calls it with "row is not after my checkpoint"; without a
    file, the log starts empty.
    """
    if self.path.exists():
      self._rows = [row for row in read_csv(self.path) if predicate(row)]
    else:
      self._rows = []
    self._names = _names(self._rows)
    write_csv(self._rows, self.path)

  def append(self, row: Row) -> None:
    """Adds one row and flushes it to disk."""
    row = dict(row)
    self._rows.append(row)
    new = [k for k in row if k not in self._names]
    if new or not self.path.exists():
      self._names.extend(new)
      write_csv(self._rows, self.path)
      return
    with self.path.open('a', newline='') as f:
      csv.writer(f).writerow([_format(row.get(k, '')) for k in self._names])

  @property
  def rows(self) -> list[dict[str, Any]]:
    return list(self._rows)
