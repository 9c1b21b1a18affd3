"""CSV files and markdown tables of a study, and the cells in them.

`write_csv` and `read_csv` keep one row per dict; `markdown` lays out a
table; `seeds_cell` and `iqm_cell` write a number over seeds the two ways
the studies report it: mean ± std [min, max], and the interquartile mean
with its 95% bootstrap interval (`disco.metrics`).
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
import csv
import math
import pathlib
from typing import Any

import numpy as np

from disco import metrics


def env_label(env: str) -> str:
  """An environment's name without its family ('gymnax:Breakout-MinAtar')."""
  return env.split(':', 1)[-1]


def _cell(value: Any, digits: int | None, blank_nan: bool) -> Any:
  if isinstance(value, float):
    if blank_nan and math.isnan(value):
      return ''
    if digits is not None:
      return round(value, digits)
  return value


def write_csv(
    path: pathlib.Path,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    *,
    digits: int | None = None,
    blank_nan: bool = False,
    comment: str | None = None,
) -> pathlib.Path:
  """Writes `rows` as CSV, one line each; returns `path`.

  Args:
    path: the file, written afresh.
    rows: the rows; a value missing from a row is an empty field, as None.
    columns: the columns, in order (default: the first row's keys); keys
      of a row that are not among them are left out.
    digits: floats rounded to this many decimals (default: exact).
    blank_nan: NaN as an empty field (default: 'nan').
    comment: a first line `# <comment>`, before the header.
  """
  columns = list(columns if columns is not None else rows[0])
  with open(path, 'w', newline='') as f:
    if comment is not None:
      f.write(f'# {comment}\n')
    writer = csv.DictWriter(f, fieldnames=columns, extrasaction='ignore')
    writer.writeheader()
    for row in rows:
      writer.writerow({k: _cell(v, digits, blank_nan) for k, v in row.items()})
  return path


def read_csv(
    path: pathlib.Path, parsers: Mapping[str, Callable[[str], Any]]
) -> list[dict[str, Any]]:
  """A CSV file's rows, each field read by its column's parser.

  Raises:
    ValueError: the file lacks some of `parsers`' columns (e.g. one written
      by an older version), or a field does not parse.
  """
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  missing = set(parsers) - set(rows[0] if rows else parsers)
  if missing:
    raise ValueError(f'{path} lacks the columns {sorted(missing)}')
  return [{k: parse(r[k]) for k, parse in parsers.items()} for r in rows]


def float_or_nan(text: str) -> float:
  """A CSV field as a float, NaN if empty."""
  return float(text) if text else math.nan


def float_or_zero(text: str) -> float:
  """A CSV field as a float, 0 if empty."""
  return float(text or 0.0)


def int_or_none(text: str) -> int | None:
  """A CSV field as an int, None if empty."""
  return int(text) if text else None


def int_or_zero(text: str) -> int:
  """A CSV field as an int, 0 if empty."""
  return int(text or 0)


def true(text: str) -> bool:
  """A CSV field written from a bool."""
  return text == 'True'


def markdown(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
  """A markdown table: `header`'s cells, a rule, then one line per row."""
  lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
  for cells in rows:
    lines.append('| ' + ' | '.join(str(c) for c in cells) + ' |')
  return '\n'.join(lines)


def seeds_cell(values: Sequence[float]) -> str:
  """'mean ± std [min, max]' over the finite values (std with ddof=1)."""
  s = metrics.summarize_seeds(np.asarray(values, np.float64))
  if not s.num_finite:
    return 'no episode ended'
  std = f'{s.std:.3g}' if s.num_finite > 1 else 'n/a'
  text = f'{s.mean:.3g} ± {std} [{s.min:.3g}, {s.max:.3g}]'
  if s.num_finite < s.num_seeds:
    text += f' ({s.num_seeds - s.num_finite} seed(s) without episodes)'
  return text


def iqm_cell(values: Sequence[float]) -> str:
  """'IQM [95% interval]; v0 / v1 / ...' over seeds, NaN values left out.

  Empty if no value is finite.
  """
  values = np.asarray(values, np.float64)
  finite = values[~np.isnan(values)]
  if not finite.size:
    return ''
  low, high = metrics.bootstrap_interval(finite)
  return (
      f'{metrics.interquartile_mean(finite):.2f} [{low:.2f}, {high:.2f}];'
      f' {" / ".join(f"{v:.2f}" for v in values)}'
  )


def ratios(
    rows: Sequence[dict[str, Any]],
    column: str,
    *,
    value: str,
    fields: Sequence[str],
    field: str,
    other: Callable[[Mapping[str, Any]], Any],
    defaults: Mapping[str, Any] | None = None,
) -> None:
  """Sets each row's `column` to its `value` over a like row's.

  The like row has the row's `fields` but `field`, which is `other(row)`
  there (a row is like itself where `other(row)` is its own); a field
  missing from a row, None or empty, reads as `defaults` says.

  Args:
    rows: the rows, changed in place.
    column: the ratio's column ('' where there is no like row, or where
      `other(row)` is None).
    value: the column whose values are divided.
    fields: what a like row shares, `field` among them.
    field: the one field in which the like row may differ.
    other: a row -> `field`'s value in its like row.
    defaults: per field, the value that a missing one reads as.
  """
  defaults = defaults or {}

  def read(row: Mapping[str, Any], name: str) -> Any:
    got = row.get(name)
    return defaults.get(name, got) if got in (None, '') else got

  def key(row: Mapping[str, Any], changed: Any) -> tuple[Any, ...]:
    return tuple(changed if f == field else read(row, f) for f in fields)

  for row in rows:
    wanted = other(row)
    like = None
    if wanted is not None:
      target = key(row, wanted)
      like = next((r for r in rows if key(r, read(r, field)) == target), None)
    row[column] = row[value] / like[value] if like else ''
