"""Summarises parity reports ($DISCO_PARITY_REPORT, JSON lines) as a CSV.

One row per case, set and mode (with the reason where a case took cross
tolerances in a native run): how many comparisons, how many had no error
at all (ratio 0: equal bit for bit, or a bound's statistic of 0), how many
were out of tolerance (ratio > 1; NaN counts as infinite), and the worst
(largest ratio of error to tolerance) with the leaf it was measured on and
its largest absolute error, where the comparison gives one.
Rows that a mutation (a planted bug) produced are left out.

  python -m tests.parity.report native.jsonl cross.jsonl --out summary.csv
"""

import argparse
from collections.abc import Iterable, Sequence
import contextlib
import csv
import json
import math
import pathlib
import sys

COLUMNS = (
    'case',
    'set',
    'mode',
    'comparisons',
    'bit_for_bit',
    'out_of_tolerance',
    'worst_ratio',
    'worst_check',
    'worst_leaf',
    'worst_measure',
    'worst_max_abs',
)


def summarise(rows: Iterable[dict[str, object]]) -> list[dict[str, object]]:
  """The summary rows (COLUMNS) of report rows, sorted by case, set, mode."""
  table: dict[tuple[str, str, str], dict[str, object]] = {}
  for row in rows:
    if row.get('mutation'):
      continue
    mode = str(row['mode'])
    if row.get('why_cross'):
      mode += f' ({row["why_cross"]})'
    key = (str(row['case']), str(row.get('set', '')), mode)
    ratio = float(row['ratio'])
    if math.isnan(ratio):  # A NaN fails its test: count it as the worst.
      ratio = math.inf
    entry = table.setdefault(
        key,
        dict(
            zip(COLUMNS[:3], key),
            comparisons=0,
            bit_for_bit=0,
            out_of_tolerance=0,
            worst_ratio=-1.0,
        ),
    )
    entry['comparisons'] += 1
    entry['bit_for_bit'] += ratio == 0.0
    entry['out_of_tolerance'] += ratio > 1.0
    if ratio > entry['worst_ratio']:
      entry.update(
          worst_ratio=ratio,
          worst_check=row.get('check', ''),
          worst_leaf=row.get('leaf', ''),
          worst_measure=row.get('measure', ''),
          worst_max_abs=row.get('max_abs', ''),
      )
  return [table[k] for k in sorted(table)]


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
      prog='python -m tests.parity.report',
      description=__doc__.split('\n', 1)[0],
  )
  parser.add_argument('reports', nargs='+', type=pathlib.Path)
  parser.add_argument('--out', type=pathlib.Path, help='default: stdout')
  args = parser.parse_args(argv)
  rows = []
  for path in args.reports:
    if not path.is_file():
      parser.error(f'No report {path}.')
    for number, line in enumerate(path.read_text().splitlines(), 1):
      if not line.strip():
        continue
      try:
        rows.append(json.loads(line))
      except json.JSONDecodeError:  # E.g. a worker killed while writing.
        print(f'{path}:{number}: not JSON, left out', file=sys.stderr)
  summary = summarise(rows)
  out = open(args.out, 'w') if args.out else contextlib.nullcontext(sys.stdout)
  with out as f:
    writer = csv.DictWriter(f, COLUMNS, lineterminator='\n')
    writer.writeheader()
    for entry in summary:
      writer.writerow(
          {**entry, 'worst_ratio': f'{float(entry["worst_ratio"]):.3g}'}
      )
  return 0


if __name__ == '__main__':
  raise SystemExit(main())
