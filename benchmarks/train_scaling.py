"""How does the trainer's throughput grow with the number of environments?

For each `--num-envs` N, trains Disco103 with the `paper` preset
(`preset('paper', env=..., num_envs=N, buffer_capacity=<the least multiple
of N that is at least 1000>, eval_every=0)`) in a fresh Python process, so
that start-up is cold and peak memory is the setting's own, and prints one
table row per N:

  learner_steps_per_s  steady-state learner steps per second
  env_steps_per_s      steady-state environment steps per second
  startup_s            process start to the end of the first learning chunk,
                       less the steady-state time of its iterations (imports,
                       weights, init, the act-only warm-up iterations and
                       both programs' compilation included)
  peak_device_gib      the device's peak memory in use (where
                       `memory_stats()` reports it; blank on CPU)
  peak_rss_gib         the process's peak resident memory

The paper preset takes 10 fresh trajectories per learner batch, so N must be
a multiple of 10 and every iteration makes N / 10 learner steps of 290 fresh
environment steps each: the learner's share of the work per environment step
is the same for every N, and only acting is batched wider.

`--steps` counts learning iterations; the act-only iterations before the
buffer holds one learner batch run first. Steady state is every chunk after
the first learning one (which compiles), timed with `progress_fn`, so
`--steps` should be at least twice `--steps-per-chunk`.

  python benchmarks/train_scaling.py                       # Breakout-MinAtar
  python benchmarks/train_scaling.py --env catch --num-envs 10 40 --steps 20
  python benchmarks/train_scaling.py --out /tmp/train_scaling.csv

The default environment needs gymnax (`pip install -e '.[envs]'`); `--env
catch` needs nothing more.
"""

import argparse
import csv
import importlib.util
import json
import math
import resource
import subprocess
import sys
import time

_CHILD_FLAG = '--child'
_MIN_BUFFER = 1000
_COLUMNS = (
    'num_envs',
    'buffer_capacity',
    'learner_steps_per_s',
    'env_steps_per_s',
    'startup_s',
    'peak_device_gib',
    'peak_rss_gib',
    'timed_iterations',
)


def _buffer_capacity(num_envs: int) -> int:
  return num_envs * math.ceil(_MIN_BUFFER / num_envs)


def _child(env: str, num_envs: int, steps: int, steps_per_chunk: int) -> None:
  """Trains one setting and prints its raw figures as one JSON line."""
  # pylint: disable=g-import-not-at-top
  import jax

  from disco import train

  config = train.preset(
      'paper',
      env=env,
      num_envs=num_envs,
      buffer_capacity=_buffer_capacity(num_envs),
      eval_every=0,
      steps_per_chunk=steps_per_chunk,
  )
  config = config.replace(num_steps=config.warmup_steps + steps)
  # (end time, iterations done, learner steps done, env steps done).
  chunks = []

  def progress(step, row):
    chunks.append((time.time(), step, row['learner_steps'], row['env_steps']))

  train.run_train(config, progress_fn=progress)
  device = jax.devices()[0]
  stats = device.memory_stats() or {}
  peak = stats.get('peak_bytes_in_use')
  print(
      json.dumps(
          dict(
              chunks=chunks,
              device=f'{device.platform}:{device.device_kind}',
              peak_device_bytes=peak,
              peak_rss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
          )
      )
  )


def _measure(
    env: str, num_envs: int, steps: int, steps_per_chunk: int
) -> dict[str, float | str]:
  """Runs `_child` in a fresh process and turns its timings into rates."""
  command = [
      sys.executable,
      __file__,
      _CHILD_FLAG,
      env,
      str(num_envs),
      str(steps),
      str(steps_per_chunk),
  ]
  start = time.time()
  done = subprocess.run(command, capture_output=True, text=True, check=False)
  if done.returncode:
    raise RuntimeError(f'num_envs={num_envs} failed:\n{done.stderr[-3000:]}')
  raw = json.loads(done.stdout.strip().splitlines()[-1])
  chunks = raw['chunks']
  first = next((i for i, c in enumerate(chunks) if c[2] > 0), len(chunks))
  if first >= len(chunks) - 1:
    raise RuntimeError(
        f'num_envs={num_envs}: under two learning chunks; raise --steps.'
    )
  (t0, step0, learner0, env0), (t1, step1, learner1, env1) = (
      chunks[first],
      chunks[-1],
  )
  seconds = t1 - t0
  # The first learning chunk's iterations, at the steady-state rate.
  first_seconds = (step0 - (chunks[first - 1][1] if first else 0)) * (
      seconds / (step1 - step0)
  )
  peak = raw['peak_device_bytes']
  return {
      'num_envs': num_envs,
      'buffer_capacity': _buffer_capacity(num_envs),
      'learner_steps_per_s': (learner1 - learner0) / seconds,
      'env_steps_per_s': (env1 - env0) / seconds,
      'startup_s': t0 - start - first_seconds,
      'peak_device_gib': '' if peak is None else peak / 2**30,
      'peak_rss_gib': raw['peak_rss_kib'] / 2**20,
      'timed_iterations': step1 - step0,
      'device': raw['device'],
  }


def _format(value: float | str) -> str:
  if isinstance(value, float):
    return f'{value:.2f}' if value < 100 else f'{value:.0f}'
  return str(value)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--env', default='gymnax:Breakout-MinAtar')
  parser.add_argument(
      '--num-envs', type=int, nargs='+', default=[10, 40, 160, 640, 2560]
  )
  parser.add_argument(
      '--steps', type=int, default=40, help='learning iterations per setting'
  )
  parser.add_argument('--steps-per-chunk', type=int, default=10)
  parser.add_argument('--out', default=None, help='CSV file of the table')
  args = parser.parse_args()
  if args.env.startswith('gymnax:') and not importlib.util.find_spec('gymnax'):
    parser.error(
        f"{args.env} needs gymnax (pip install -e '.[envs]'); or --env catch."
    )

  rows, failed = [], 0
  print(f'env {args.env}, {args.steps} learning iterations per setting')
  print('  '.join(_COLUMNS), flush=True)
  for num_envs in args.num_envs:
    try:
      row = _measure(args.env, num_envs, args.steps, args.steps_per_chunk)
    except RuntimeError as error:
      print(error, file=sys.stderr, flush=True)
      failed += 1
      continue
    rows.append(row)
    print(
        '  '.join(f'{_format(row[k]):>{len(k)}}' for k in _COLUMNS),
        flush=True,
    )
  if rows:
    print(f'device {rows[0]["device"]}')
  if args.out:
    with open(args.out, 'w', newline='') as f:
      writer = csv.DictWriter(f, fieldnames=(*_COLUMNS, 'env', 'device'))
      writer.writeheader()
      for row in rows:
        writer.writerow(row | {'env': args.env})
  if failed:
    sys.exit(f'{failed} of {len(args.num_envs)} settings failed.')


if __name__ == '__main__':
  if len(sys.argv) > 1 and sys.argv[1] == _CHILD_FLAG:
    _env, _num_envs, _steps, _per_chunk = sys.argv[2:]
    _child(_env, int(_num_envs), int(_steps), int(_per_chunk))
  else:
    main()
