"""The parity suite's teeth: which cases catch each plausible porting bug.

Runs the parity suite once per mode without any bug (the baseline, which
must pass) and once per mode and bug of `mutations.MUTATIONS` (each applied
alone through `$DISCO_PARITY_MUTATION`), and tabulates the failing cases
per golden set. Cross mode compares against every set, this machine's own
included (its kind is taken to be one without a set); native mode against
this machine's own set. Every bug must make at least one case fail against
every set in cross mode, the loose one; the exit status says whether that
holds.

    python -m tests.parity.teeth --out teeth/            # everything (slow)
    python -m tests.parity.teeth --modes cross --mutations polyak_inverted
    python -m tests.parity.teeth --modes cross --mutations   # spread only

Writes to --out, after every run: `teeth.md` (the table in docs/parity.md),
`teeth.csv` (bug, mode, set, failing cases), `margins.csv` and `margins.md`
(per mode, set, bug and case, the worst comparison as a multiple of its
tolerance: the baseline's is the spread measured here, a bug's is how far
it lands outside), `teeth.json` (everything; `--resume` skips the runs it
holds), and the runs' logs and JSON-lines reports. The runs share a JAX
compilation cache in --out unless `$JAX_COMPILATION_CACHE_DIR` is set.
"""

import argparse
from collections.abc import Sequence
import csv
import json
import os
import pathlib
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from tests.parity import golden
from tests.parity import mutations
from tests.parity import platforms

_REPO = pathlib.Path(__file__).resolve().parents[2]
_BASELINE = 'none'
# Cross mode's kind of machine: one that matches no set, so that every set,
# this machine's own included, is compared.
_NO_SET_KIND = 'teeth-no-set'


def _run(
    mode: str,
    mutation: str,
    out: pathlib.Path,
    workers: int,
    tests: Sequence[str],
) -> dict[str, object]:
  """Runs pytest once; returns its failing cases and worst ratios."""
  tag = f'{mode}-{mutation}'
  report = out / 'reports' / f'{tag}.jsonl'
  junit = out / 'junit' / f'{tag}.xml'
  log = out / 'logs' / f'{tag}.txt'
  for path in (report, junit, log):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
  env = dict(os.environ)
  env[platforms.MODE_ENV] = mode
  env.pop(platforms.CROSS_DIR_ENV, None)
  if mode == platforms.CROSS:
    env[platforms.PLATFORM_ENV] = _NO_SET_KIND
  env.setdefault('JAX_COMPILATION_CACHE_DIR', str(out / 'jax-cache'))
  env[golden.REPORT_ENV] = str(report)
  env.pop(golden.MUTATION_ENV, None)
  if mutation != _BASELINE:
    env[golden.MUTATION_ENV] = mutation
  command = [
      sys.executable, '-m', 'pytest', *tests, '-q', '-p', 'no:cacheprovider',
      f'--junitxml={junit}', '-o', 'junit_family=xunit1',
  ]  # fmt: skip
  if workers > 1:
    command += ['-n', str(workers)]
  start = time.perf_counter()
  with open(log, 'w') as f:
    process = subprocess.run(
        command, cwd=_REPO, env=env, stdout=f, stderr=subprocess.STDOUT
    )
  seconds = time.perf_counter() - start
  if process.returncode not in (0, 1):  # 1: some tests failed.
    raise RuntimeError(
        f'pytest exited with {process.returncode} for {tag}; see {log}.'
    )

  # Keyed by set, then case.
  worst: dict[str, dict[str, float]] = {}
  failing: dict[str, set[str]] = {}
  if report.exists():
    for line in report.read_text().splitlines():
      row = json.loads(line)
      ratio = float(row['ratio'])
      cases = worst.setdefault(row.get('set', ''), {})
      cases[row['case']] = max(cases.get(row['case'], 0.0), ratio)
      if ratio > 1.0:
        failing.setdefault(row.get('set', ''), set()).add(row['case'])
  failing_tests = []
  for testcase in ET.parse(junit).getroot().iter('testcase'):
    if testcase.find('failure') is None and testcase.find('error') is None:
      continue
    name = f'{testcase.get("classname")}::{testcase.get("name")}'
    failing_tests.append(name)
    loaded = [
        p.get('value').split('|')
        for p in testcase.iter('property')
        if p.get('name') == golden.CASE_PROPERTY
    ]
    # A test that stopped with an exception before comparing anything fails
    # every case it loaded (e.g. a shape error inside the library).
    if not any(c in failing.get(s, ()) for c, _, s in loaded):
      for case, _, golden_set in loaded:
        failing.setdefault(golden_set, set()).add(case)
        worst.setdefault(golden_set, {})[case] = float('inf')
      if not loaded:
        failing.setdefault('', set()).add(name)
  summary = '; '.join(
      f'{s or "?"}: {", ".join(sorted(c))}' for s, c in sorted(failing.items())
  )
  print(
      f'{tag:45s} {seconds:6.0f} s  failing cases: {summary or "none"}',
      flush=True,
  )
  return dict(
      failing={k: sorted(v) for k, v in failing.items()},
      failing_tests=failing_tests,
      worst=worst,
      seconds=seconds,
  )


def _short(case: str) -> str:
  return f'`{case}`'


def _columns(results, modes) -> list[tuple[str, str]]:
  """(mode, set) pairs, in the order the runs met them."""
  columns = []
  for mode in modes:
    for run in results[mode].values():
      for golden_set in run['worst']:
        if (mode, golden_set) not in columns:
          columns.append((mode, golden_set))
  return columns


def _write(results, modes, names, out: pathlib.Path) -> None:
  """The tables of everything run so far (see the module docstring)."""
  columns = _columns(results, modes)
  with open(out / 'teeth.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(
        ['bug', 'mode', 'set', 'num_failing_cases', 'failing_cases']
    )
    for name in names:
      for mode, golden_set in columns:
        if name in results[mode]:
          failing = results[mode][name]['failing'].get(golden_set, [])
          writer.writerow(
              [name, mode, golden_set, len(failing), ' '.join(failing)]
          )
  with open(out / 'margins.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['mode', 'set', 'bug', 'case', 'worst_ratio'])
    for mode, golden_set in columns:
      for name in names:
        if name not in results[mode]:
          continue
        worst = results[mode][name]['worst'].get(golden_set, {})
        for case, ratio in sorted(worst.items()):
          writer.writerow([mode, golden_set, name, case, f'{ratio:.4g}'])
  lines = [
      '| bug | '
      + ' | '.join(f'failing cases, {m} mode, set `{g}`' for m, g in columns)
      + ' |',
      '|---|' + '---|' * len(columns),
  ]
  for name in names:
    description = (
        'none (baseline)'
        if name == _BASELINE
        else f'`{name}`: {mutations.MUTATIONS[name].description}'
    )
    cells = []
    for mode, golden_set in columns:
      if name not in results[mode]:
        cells.append('(not run)')
        continue
      failing = results[mode][name]['failing'].get(golden_set, [])
      cells.append(
          f'{len(failing)}: ' + ', '.join(_short(c) for c in failing)
          if failing
          else '0'
      )
    lines.append(f'| {description} | ' + ' | '.join(cells) + ' |')
  (out / 'teeth.md').write_text('\n'.join(lines) + '\n')
  (out / 'teeth.json').write_text(json.dumps(results, indent=1))
  (out / 'margins.md').write_text(_margins_table(results, columns, names))


def _margins_table(results, columns, names) -> str:
  """Per mode, set and case: the spread and the closest bug, in tolerances."""
  lines = []
  for mode, golden_set in columns:
    if _BASELINE not in results[mode]:
      continue
    baseline = results[mode][_BASELINE]['worst'].get(golden_set, {})
    lines += [
        (
            f'{mode} mode against set `{golden_set}`: worst comparison of each'
            ' case as a multiple of its tolerance (above 1 fails)'
        ),
        '',
        '| case | no bug | bugs caught | closest catch |',
        '|---|---|---|---|',
    ]
    for case in sorted(baseline):
      caught = sorted(
          (results[mode][n]['worst'].get(golden_set, {}).get(case, 0.0), n)
          for n in names
          if n != _BASELINE
          and n in results[mode]
          and case in results[mode][n]['failing'].get(golden_set, ())
      )
      closest = f'{caught[0][0]:.3g} (`{caught[0][1]}`)' if caught else '-'
      lines.append(
          f'| `{case}` | {baseline[case]:.3g} | {len(caught)} | {closest} |'
      )
    lines.append('')
  return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n')[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument(
      '--modes',
      nargs='+',
      default=[platforms.NATIVE, platforms.CROSS],
      choices=[platforms.NATIVE, platforms.CROSS],
  )
  parser.add_argument(
      '--mutations',
      nargs='*',
      default=list(mutations.MUTATIONS),
      choices=list(mutations.MUTATIONS),
      metavar='BUG',
      help=(
          'bugs to apply (default: all:'
          f' {", ".join(mutations.MUTATIONS)}; none: the baseline alone)'
      ),
  )
  parser.add_argument('--out', type=pathlib.Path, default=pathlib.Path('teeth'))
  parser.add_argument('--workers', type=int, default=2)
  parser.add_argument(
      '--resume',
      action='store_true',
      help="skip the runs that --out's teeth.json already holds",
  )
  parser.add_argument(
      '--tests', nargs='+', default=['tests/parity'], help='pytest targets'
  )
  args = parser.parse_args(argv)
  if not os.environ.get(golden.PARITY_DIR_ENV):
    parser.error('$DISCO_PARITY_DIR must point at the parity goldens.')
  args.out.mkdir(parents=True, exist_ok=True)
  names = [_BASELINE] + list(args.mutations)
  results = {mode: {} for mode in args.modes}
  saved = args.out / 'teeth.json'
  if args.resume and saved.exists():
    for mode, runs in json.loads(saved.read_text()).items():
      if mode in results:
        results[mode].update(runs)
  for mode in args.modes:
    for name in names:
      if name in results[mode]:
        print(f'{mode}-{name}: done earlier (--resume)', flush=True)
        continue
      results[mode][name] = _run(mode, name, args.out, args.workers, args.tests)
      _write(results, args.modes, names, args.out)
  _write(results, args.modes, names, args.out)
  print((args.out / 'teeth.md').read_text())

  ok = True
  for mode in args.modes:
    if any(results[mode][_BASELINE]['failing'].values()):
      print(f'The baseline fails in {mode} mode.')
      ok = False
  if platforms.CROSS in args.modes:
    sets = list(results[platforms.CROSS][_BASELINE]['worst'])
    for name in args.mutations:
      failing = results[platforms.CROSS][name]['failing']
      for golden_set in sets:
        if not failing.get(golden_set):
          print(f'{name} is caught by no case against set {golden_set}.')
          ok = False
  return 0 if ok else 1


if __name__ == '__main__':
  sys.exit(main())
