"""What numba does for the original Crafter: faster resets, the same worlds.

Crafter draws a new 64x64 world at every reset from opensimplex noise, which
numba compiles when it is installed (the `crafter` extra installs it) and
which runs as pure Python otherwise. Each round runs one process per mode,
in turn: `numba` (compiled noise) and `python` (`NUMBA_DISABLE_JIT=1`). A
process makes one environment as `crafter` does (`seed=--seed`), resets it
once untimed (numba's compilation, or loading its cache), then times
`--resets` resets and hashes each reset's world (its materials) and first
frame. Writes results.csv (per round and mode: the first reset, the median
reset) and prints the medians over rounds and their ratio; exits non-zero
if a mode draws a different world.

  python benchmarks/crafter_worldgen.py --out benchmarks/results/crafter_worldgen

Needs the `crafter` extra.
"""

import argparse
import hashlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from typing import Any

from disco.studies import tables

MODES = ('numba', 'python')


def child(seed: int, resets: int) -> dict[str, Any]:
  """Times `resets` resets after an untimed one; hashes every world."""
  # pylint: disable=g-import-not-at-top
  import crafter
  import numba
  # pylint: enable=g-import-not-at-top

  env = crafter.Env(seed=seed)
  start = time.perf_counter()
  frames = [env.reset()]
  first = time.perf_counter() - start
  times = []
  worlds = [env._world._mat_map.tobytes()]  # pylint: disable=protected-access
  for _ in range(resets):
    start = time.perf_counter()
    frames.append(env.reset())
    times.append(time.perf_counter() - start)
    worlds.append(env._world._mat_map.tobytes())  # pylint: disable=protected-access
  hashes = [
      hashlib.sha256(world + frame.tobytes()).hexdigest()
      for world, frame in zip(worlds, frames)
  ]
  return dict(
      jit=not numba.config.DISABLE_JIT,
      first_reset_s=first,
      reset_s=times,
      hashes=hashes,
  )


def run_mode(mode: str, seed: int, resets: int) -> dict[str, Any]:
  """`child` in a fresh process, numba's compilation on or off."""
  env = dict(os.environ)
  env.pop('NUMBA_DISABLE_JIT', None)
  if mode == 'python':
    env['NUMBA_DISABLE_JIT'] = '1'
  out = subprocess.run(
      [sys.executable, __file__, '--child', str(seed), str(resets)],
      env=env,
      check=True,
      capture_output=True,
      text=True,
  )
  return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--out', type=pathlib.Path)
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--resets', type=int, default=5)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--child', nargs=2, type=int, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    print(json.dumps(child(*args.child)))
    return 0
  if args.out is None:
    parser.error('--out is required')
  rows, hashes = [], {}
  for round_ in range(args.rounds):
    for mode in MODES:
      got = run_mode(mode, args.seed, args.resets)
      assert got['jit'] == (mode == 'numba'), got['jit']
      hashes.setdefault(mode, got['hashes'])
      if got['hashes'] != hashes[mode]:
        print(f'{mode}: round {round_} drew other worlds than round 0')
        return 1
      rows.append(
          dict(
              round=round_,
              mode=mode,
              first_reset_s=round(got['first_reset_s'], 4),
              median_reset_s=round(statistics.median(got['reset_s']), 4),
          )
      )
      print(rows[-1], flush=True)
  same = hashes['numba'] == hashes['python']
  args.out.mkdir(parents=True, exist_ok=True)
  tables.write_csv(args.out / 'results.csv', rows)
  median = {
      mode: statistics.median(
          r['median_reset_s'] for r in rows if r['mode'] == mode
      )
      for mode in MODES
  }
  print(
      f'median reset: numba {median["numba"]:.3f} s, python'
      f' {median["python"]:.3f} s, ratio'
      f' {median["python"] / median["numba"]:.1f}x ({args.rounds} rounds of'
      f' {args.resets} resets, seed {args.seed}); the {args.resets + 1} worlds'
      f' {"are" if same else "are NOT"} the same'
  )
  return 0 if same else 1


if __name__ == '__main__':
  sys.exit(main())
