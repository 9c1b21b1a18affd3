"""Does Craftax-Classic stand in for the original Crafter?

The same agent, preset and budget on the paper's Crafter (`crafter`, its
own package, stepped on the host) and on Craftax-Classic's pixels
(`craftax:Craftax-Classic-Pixels-v1`, fused in the compiled program):
Disco103, `crafter_rollout_per_update` with the `conv` agent, under the
reading a 2-core CPU with 24 GiB affords (`CPU_READING`: one frame, not 32,
and learner batches of 8, not 24; the protocol's own settings ran out of
memory at its first update). The buffer holds the run's 100,000 steps, all
it can ever store of them. Each run goes in pieces (`disco.studies.runs`);
`--report` writes results.csv (per run: training return and Crafter score
over the last 10% of steps, the rule's diagnostics), curves.csv
and curves.png.

  python benchmarks/crafter_paths.py --out benchmarks/results/crafter_paths \\
      --envs crafter craftax:Craftax-Classic-Pixels-v1
  python benchmarks/crafter_paths.py --out benchmarks/results/crafter_paths \\
      --report --include-partial

Needs crafter, craftax and matplotlib.
"""

import argparse
import sys
from typing import Any

import numpy as np

from disco import metrics
from disco import train
from disco.studies import plots
from disco.studies import records
from disco.studies import runs as runs_lib
from disco.studies import scale_report
from disco.studies import tables

ENVS = ('crafter', 'craftax:Craftax-Classic-Pixels-v1')
PRESET = 'crafter_rollout_per_update'
AGENT = 'conv'
# What differs from the preset, and why: a CPU's memory and time.
CPU_READING = dict(frame_stack=1, learner_batch_size=8, learning_starts=8)
ENV_STEPS = 100_000
# Crafter's score pools the episodes of this many log rows.
SCORE_ROWS = 10


def config(env: str, seed: int) -> Any:
  """The run's config: the preset, the CPU reading, 100,000 steps."""
  base = train.preset(PRESET, agent=AGENT, env=env, **CPU_READING)
  iterations = -(-ENV_STEPS // base.env_steps_per_step)
  trajectories = iterations * base.num_envs
  return base.replace(
      seed=seed,
      num_steps=iterations,
      buffer_capacity=min(base.buffer_capacity, trajectories),
      eval_every=0,
      steps_per_chunk=4,
      checkpoint_every=40,
  )


def runs(args: argparse.Namespace) -> list[runs_lib.TrainRun]:
  return [
      runs_lib.TrainRun(f'{_label(env)}__disco__s{seed}', config(env, seed))
      for env in args.envs
      for seed in args.seeds
  ]


def _label(env: str) -> str:
  return env.split(':')[-1]


def seed_row(
    record: dict[str, Any], seed: int
) -> tuple[dict[str, Any], dict[str, np.ndarray], list[str]]:
  """One seed's measures over its last 10% of steps, its logs, achievements."""
  logs = records.seed_columns(record, seed)
  steps = logs['env_steps']
  trained = logs['step'] > 0
  names = sorted(k for k in logs if k.startswith('unlocked/'))
  final = metrics.final_training_measures(
      logs['env_steps'][trained],
      logs['train_return'][trained],
      logs['train_episodes'][trained],
      np.stack([logs[k][trained] for k in names], 1),
      tuple(k.split('/', 1)[1] for k in names),
  )
  row = dict(
      env=record['settings']['config']['env'],
      seed=seed,
      status=record['status'],
      env_steps=int(logs['env_steps'][-1]),
      learner_steps=int(logs['learner_steps'][-1]),
      train_return_last10=round(final['train_return'], 3),
      episodes_last10=int(final['train_episodes']),
      crafter_score_last10=round(final['crafter_score'], 3),
      wall_seconds=round(record['wall_seconds']),
  )
  row |= scale_report.final_diagnostics(steps, logs)  # The rule's.
  return row, logs, names


def report(args: argparse.Namespace) -> None:
  found = records.load_records(args.out, args.include_partial)
  if not found:
    print(f'no runs in {args.out}')
    return
  rows, curves = [], []
  fig, axes = plots.figure(1, 3, (15.0, 4.0))
  axes = axes[0]
  for record in found:
    for seed in record['seeds']:
      row, logs, names = seed_row(record, int(seed))
      rows.append(row)
      trained = (logs['step'] > 0) & (logs['train_episodes'] > 0)
      x, score = metrics.crafter_score_curve(
          logs['env_steps'][trained],
          logs['train_episodes'][trained],
          np.stack([logs[k][trained] for k in names], 1),
          SCORE_ROWS,
      )
      label = f'{_label(row["env"])} s{seed}'
      axes[0].plot(
          logs['env_steps'][trained], logs['train_return'][trained], label=label
      )
      axes[1].plot(x, score, label=label)
      axes[2].plot(logs['env_steps'], logs['logs/entropy'], label=label)
      curves += [
          dict(env=row['env'], seed=seed, env_steps=int(s), train_return=r)
          for s, r in zip(
              logs['env_steps'][trained], logs['train_return'][trained]
          )
      ]
  for ax, title in zip(
      axes,
      (
          'training return',
          f'Crafter score ({SCORE_ROWS} rows pooled)',
          'policy entropy (ln 17 = 2.83)',
      ),
  ):
    ax.set_title(title)
    ax.set_xlabel('environment steps')
  axes[0].legend()
  plots.save(fig, args.out / 'curves.png')
  tables.write_csv(args.out / 'results.csv', rows)
  tables.write_csv(args.out / 'curves.csv', curves)
  print(tables.markdown(list(rows[0]), [list(r.values()) for r in rows]))


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  runs_lib.add_flags(parser, seeds=(0,))
  parser.add_argument(
      '--envs', nargs='+', choices=ENVS, help='the environments to run'
  )
  args = parser.parse_args(argv)
  if args.envs is None and not args.report:
    parser.error(f'give --envs (of {", ".join(ENVS)}) or --report')
  return runs_lib.run_then_report(
      parser.prog,
      args,
      None if args.envs is None else runs(args),
      (lambda: report(args)) if args.report else None,
  )


if __name__ == '__main__':
  sys.exit(main())
