"""How fast is the acting half of a trainer iteration, timed alone?

`learner_cost.py` times whole iterations (a rollout and its learner
updates). This times the same preset's iterations with learning switched
off (`learning_starts` at the buffer's size: every iteration only acts and
fills the buffer), so that the two together say where an iteration's time
goes. Per number of environments and of seeds trained together, it trains
`--chunks` chunks of `--chunk` acting iterations and times every chunk after
the first (which compiles).

  iterations_per_s  acting iterations per second (all seeds together)
  ms_per_step       milliseconds per sequential environment step: one step
                    of all environments of all seeds, with the agent's step
  env_steps_per_s   environment steps per second, all seeds

`--inner-scans rolled unrolled` times each setting with the scans inside an
environment step as loops and unrolled (`TrainConfig.unroll_inner_scans`).

  python benchmarks/rollout_cost.py --preset crafter \\
      --env craftax:Craftax-Classic-Symbolic-v1 --agent craftax_frames \\
      --num-envs 6 24 --num-seeds 1 3 --out rollout_cost.csv
"""

import argparse
import csv
import pathlib
import platform
import sys
import time
from typing import Any

COLUMNS = (
    'preset',
    'env',
    'agent',
    'frame_stack',
    'num_envs',
    'num_seeds',
    'inner_scans',
    'iterations_per_s',
    'ms_per_step',
    'env_steps_per_s',
    'timed_iterations',
    'first_chunk_s',
)


def measure(
    preset: str,
    env: str,
    agent: str,
    num_envs: int,
    num_seeds: int,
    chunk: int,
    chunks: int,
    inner_scans: str = 'rolled',
) -> dict[str, float]:
  """Times acting-only iterations of `preset` with `num_envs` environments."""
  from disco import replay  # pylint: disable=g-import-not-at-top
  from disco import train  # pylint: disable=g-import-not-at-top

  num_steps = chunk * chunks
  made = replay.capacity_of_run(num_steps, num_envs)
  config = train.preset(
      preset,
      env=env,
      agent=agent,
      num_envs=num_envs,
      num_steps=num_steps,
      steps_per_chunk=chunk,
      eval_every=0,
      checkpoint_every=0,
      buffer_capacity=made,
      learning_starts=made,
      unroll_inner_scans=inner_scans == 'unrolled',
  )
  ends = []
  start = time.perf_counter()
  train.run_train(
      config,
      num_seeds=num_seeds,
      progress_fn=lambda step, row: ends.append(time.perf_counter()),
  )
  timed = (len(ends) - 1) * chunk
  rate = timed / (ends[-1] - ends[0])
  return dict(
      preset=preset,
      env=env,
      agent=agent,
      frame_stack=config.frame_stack,
      num_envs=num_envs,
      num_seeds=num_seeds,
      inner_scans=inner_scans,
      iterations_per_s=rate,
      ms_per_step=1000.0 / (rate * config.rollout_len),
      env_steps_per_s=rate * config.env_steps_per_step * num_seeds,
      timed_iterations=timed,
      first_chunk_s=ends[0] - start,
  )


def _append(path: pathlib.Path, header: str, row: dict[str, Any]) -> None:
  """Adds `row` to the CSV at `path`, headed by `header` if it is new."""
  new = not path.exists()
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, 'a', newline='') as f:
    if new:
      f.write(header + '\n')
    writer = csv.DictWriter(f, COLUMNS)
    if new:
      writer.writeheader()
    writer.writerow(
        {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
    )


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--preset', default='crafter')
  parser.add_argument('--env', default='craftax:Craftax-Classic-Symbolic-v1')
  parser.add_argument('--agent', default='craftax_frames')
  parser.add_argument('--num-envs', nargs='+', type=int, default=(6,))
  parser.add_argument('--num-seeds', nargs='+', type=int, default=(1,))
  parser.add_argument(
      '--inner-scans',
      nargs='+',
      choices=('rolled', 'unrolled'),
      default=('rolled',),
      help='the scans inside an environment step left as loops, or unrolled',
  )
  parser.add_argument('--chunk', type=int, default=10)
  parser.add_argument('--chunks', type=int, default=4)
  parser.add_argument('--out', type=pathlib.Path, default=None)
  args = parser.parse_args(argv)
  if args.chunks < 2:
    parser.error('--chunks must be at least 2 (the first one compiles)')
  import jax  # pylint: disable=g-import-not-at-top

  header = (
      f'# {platform.processor() or platform.machine()},'
      f' {jax.devices()[0].device_kind} ({jax.default_backend()}),'
      f' JAX {jax.__version__}; {time.strftime("%Y-%m-%d")}'
  )
  print(header, flush=True)
  if args.out is not None:
    args.out.unlink(missing_ok=True)  # Written afresh, as before.
  for num_envs in args.num_envs:
    for num_seeds in args.num_seeds:
      for inner_scans in args.inner_scans:
        row = measure(
            args.preset,
            args.env,
            args.agent,
            num_envs,
            num_seeds,
            args.chunk,
            args.chunks,
            inner_scans,
        )
        print(
            ', '.join(
                f'{k}={v:.4g}' if isinstance(v, float) else f'{k}={v}'
                for k, v in row.items()
            ),
            flush=True,
        )
        if args.out is not None:
          # Row by row: a measurement stopped by a deadline keeps the rest.
          _append(args.out, header, row)
  return 0


if __name__ == '__main__':
  sys.exit(main())
