r"""How do a discovery meta-step's memory and time grow with the window K?

For each K (agent updates the meta-gradient flows through), builds the
discovery step of the `local` preset's sizes (batches of 32 trajectories of
16 steps, validation on 32 environments, the small agent) for a population
(`--population`, default two members on 5x5 Catch, so that each program
compiles in about a minute) and reports XLA's peak memory of the compiled
program (arguments, outputs and temporaries, from `memory_analysis`), the
compile time and the median wall and CPU time (all threads) of a
meta-step after one warm-up step; CPU time is hardly affected by other
processes competing for the cores. Each K runs in a fresh subprocess.
`remat` (each agent update rematerialised in the backward pass) is on
unless `--no-remat`; K = 20 is also measured without it, to show what it
saves.

  python benchmarks/discovery_window.py                      # K = 2, 5, 10, 20
  python benchmarks/discovery_window.py --windows 2,5 --steps 3
  python benchmarks/discovery_window.py --csv benchmarks/results/discovery_window.csv
"""

import argparse
import csv
import json
import pathlib
import statistics
import subprocess
import sys
import time


def _worker(window: int, remat: bool, steps: int, population: str) -> None:
  import jax  # pylint: disable=g-import-not-at-top

  # pylint: disable=g-import-not-at-top
  from disco.discovery import config as discovery_config
  from disco.discovery import loop as discovery_runtime
  # pylint: enable=g-import-not-at-top

  config = discovery_config.DiscoveryConfig(
      population=discovery_config.parse_population(population),
      num_inner_steps=window,
      remat=remat,
  )
  trainer = discovery_runtime.discoverer_for(config)
  state = trainer.initial_state(trainer.random_params())
  key = trainer.layout.put(jax.device_get(state.rng), replicate=True)
  started = time.perf_counter()
  compiled = trainer._step.lower(  # pylint: disable=protected-access
      state.update_rule_params, state.members, key
  ).compile()
  compile_s = time.perf_counter() - started
  memory = compiled.memory_analysis()
  peak = (
      memory.argument_size_in_bytes
      + memory.output_size_in_bytes
      + memory.temp_size_in_bytes
      - memory.alias_size_in_bytes
  )
  state, _ = trainer.step(state)  # Warm-up.
  times, cpu_times = [], []
  for _ in range(steps):
    started, cpu_started = time.perf_counter(), time.process_time()
    state, logs = trainer.step(state)
    times.append(time.perf_counter() - started)
    cpu_times.append(time.process_time() - cpu_started)
  print(json.dumps(dict(
      window=window,
      remat=remat,
      members=config.num_members,
      peak_mib=peak / 2**20,
      temp_mib=memory.temp_size_in_bytes / 2**20,
      compile_s=compile_s,
      step_s=statistics.median(times),
      step_cpu_s=statistics.median(cpu_times),
      meta_loss=logs['meta_loss'],
  )))  # fmt: skip


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--windows', default='2,5,10,20')
  parser.add_argument('--steps', type=int, default=3)
  parser.add_argument('--no-remat', action='store_true')
  parser.add_argument('--population', default='catch/rows=5/columns=5*2')
  parser.add_argument('--csv', type=pathlib.Path, default=None)
  parser.add_argument('--worker', nargs=4, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    window, remat, steps, population = args.worker
    _worker(int(window), remat == 'True', int(steps), population)
    return
  windows = [int(k) for k in args.windows.split(',')]
  runs = [(k, not args.no_remat) for k in windows]
  if not args.no_remat and 20 in windows:
    runs.append((20, False))
  rows = []
  print('| K | remat | peak memory (MiB) | of which temporaries | compile (s)'
        ' | meta-step (s) | meta-step (CPU-s) |')  # fmt: skip
  print('| --- | --- | --- | --- | --- | --- | --- |')
  for window, remat in runs:
    done = subprocess.run(
        [sys.executable, __file__, '--worker', str(window), str(remat),
         str(args.steps), args.population],
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode:  # E.g. killed by the kernel when memory ran out.
      print(
          f'| {window} | {"on" if remat else "off"} | failed (exit status'
          f' {done.returncode}) | | | | |',
          flush=True,
      )
      continue
    row = json.loads(done.stdout.strip().splitlines()[-1])
    rows.append(row)
    print(
        f'| {window} | {"on" if remat else "off"} | {row["peak_mib"]:.0f} |'
        f' {row["temp_mib"]:.0f} | {row["compile_s"]:.0f} |'
        f' {row["step_s"]:.2f} | {row["step_cpu_s"]:.2f} |',
        flush=True,
    )
  if args.csv and rows:
    with args.csv.open('w', newline='') as f:
      writer = csv.DictWriter(f, fieldnames=list(rows[0]))
      writer.writeheader()
      writer.writerows(rows)


if __name__ == '__main__':
  main()
