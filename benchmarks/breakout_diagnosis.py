"""Why does Disco103 trail on Breakout-MinAtar? One setting changed at a time.

Every variant trains Disco103 (or actor-critic) with the trainer's `paper`
preset on Breakout-MinAtar for `--env-steps` (1M: 3,449 iterations, 3,440
learner updates) and differs from the base in the fields it names
(`variants`):

  base         the `small` agent (MLP 256-256, action LSTM 64, heads 64),
               step size 5e-4 (the issue's setting)
  lr<rate>     base at another step size, from the paper's {1e-4, 3e-4,
               5e-4} to the colab's 1e-2
  colab_agent  the colab's agent (MLP 512-512, LSTM 128, heads 128)
  replay<f>    another replay fraction (more environments, the same batch)
  ac_lr<rate>  actor-critic with the base agent, for comparison

Each run is done in pieces (`disco.studies.pieces`): Ctrl-C, SIGTERM or a
kill loses at most 250 iterations; a finished run is skipped. Every chunk's
log row is kept (returns, the policy's entropy, the rule's target entropy),
and `--report` writes `diagnosis.csv` (one row per run and seed: final
returns, entropy at points in time, wall time) and `diagnosis.png`
(evaluation return and policy entropy against updates).

  python benchmarks/breakout_diagnosis.py --out DIR --variants lr1e-2 lr1e-3
  python benchmarks/breakout_diagnosis.py --out DIR --report

`faithful_check.py` compares the trainer with the faithful loop at the
colab's settings. Needs gymnax and matplotlib.
"""

import argparse
import math
import pathlib
import sys
from typing import Any

import numpy as np

from disco.studies import plots
from disco.studies import records
from disco.studies import runs
from disco.studies import tables

ENV = 'gymnax:Breakout-MinAtar'
ENV_STEPS = 1_000_000
SMALL = dict(
    agent_dense=(256, 256), agent_lstm_size=64, agent_head_mlp_hiddens=(64,)
)
COLAB = dict(
    agent_dense=(512, 512), agent_lstm_size=128, agent_head_mlp_hiddens=(128,)
)
BASE = dict(rule='disco', agent_learning_rate=5e-4, **SMALL)
RATES = (1e-4, 3e-4, 5e-4, 1e-3, 3e-3, 1e-2)
EVAL_EVERY = 100
EVAL_ENVS = 16
STEPS_PER_CHUNK = 25
# The warm-up's end: the first evaluation at 4x the initial policy's
# typical return (~0.5).
WARMUP_RETURN = 2.0
ENTROPY_AT = (500, 1000, 2000, 3000)


def rate_name(rate: float) -> str:
  """1e-2 for 0.01, 3e-4 for 0.0003."""
  return f'{rate:.0e}'.replace('e-0', 'e-')


def variants(base_rate: float) -> dict[str, dict[str, Any]]:
  """Variant name -> the fields that differ from the `paper` preset."""
  table = {
      f'lr{rate_name(r)}': BASE | dict(agent_learning_rate=r) for r in RATES
  }
  table['base'] = dict(BASE)
  at = dict(agent_learning_rate=base_rate)
  table['colab_agent'] = BASE | COLAB | at
  # The same batch of 96 with more of it fresh: num_envs = fresh part.
  for fraction, envs in ((0.75, 24), (0.5, 48)):
    table[f'replay{fraction:g}'] = (
        BASE
        | at
        | dict(
            replay_fraction=fraction, num_envs=envs, buffer_capacity=envs * 100
        )
    )
  for r in RATES:
    table[f'ac_lr{rate_name(r)}'] = BASE | dict(
        rule='actor_critic', agent_learning_rate=r
    )
  return table


def config_for(fields: dict[str, Any], env_steps: int, seed: int):
  from disco import train  # pylint: disable=g-import-not-at-top

  config = train.preset(
      'paper',
      env=ENV,
      eval_envs=EVAL_ENVS,
      eval_max_steps=1000,
      steps_per_chunk=STEPS_PER_CHUNK,
      eval_every=EVAL_EVERY,
      checkpoint_every=250,
      seed=seed,
      # Time limits end episodes as terminations, as in the diagnosis's
      # first runs (recorded before `truncation` existed) and the benchmark.
      truncation='terminate',
      **fields,
  )
  return config.replace(num_steps=config.num_steps_for(env_steps))


def _tail_return(col: dict[str, np.ndarray]) -> float:
  """Episode-weighted training return over the last 10% of iterations."""
  tail = col['step'] > col['step'][-1] * 0.9
  episodes = col['train_episodes'][tail]
  total = np.nansum(col['train_return'][tail] * episodes)
  return float(total / episodes.sum()) if episodes.sum() else math.nan


def seed_row(record: dict[str, Any], seed: int) -> dict[str, Any]:
  """diagnosis.csv's row of one seed of a run."""
  col = records.seed_columns(record, seed)
  ev = np.isfinite(col['eval_return'])
  learner = col['learner_steps']
  entropy = col.get('logs/entropy', np.full_like(learner, np.nan))
  config = record['settings']['config']
  row = dict(
      run=record['name'],
      rule=config['rule'],
      learning_rate=config['agent_learning_rate'],
      seed=seed,
      env_steps=int(col['env_steps'][-1]),
      learner_steps=int(learner[-1]),
      final_eval_return=float(col['eval_return'][ev][-1]),
      best_eval_return=float(np.max(col['eval_return'][ev])),
      final_train_return=_tail_return(col),
      wall_seconds=round(record['wall_seconds'], 1),
  )
  for at in ENTROPY_AT:
    i = np.searchsorted(learner, at)
    row[f'entropy_at_{at}'] = (
        float(entropy[i]) if i < len(entropy) else math.nan
    )
  row['final_entropy'] = float(entropy[-1])
  above = np.flatnonzero(col['eval_return'][ev] >= WARMUP_RETURN)
  row['first_update_return_2'] = (
      int(learner[ev][above[0]]) if above.size else ''
  )
  return row


def plot(runs_: list[dict[str, Any]], path: pathlib.Path) -> None:
  """Evaluation return and policy entropy against updates, every run."""
  fig, axes = plots.figure(1, 2, (12, 4.5))
  ax_r, ax_h = axes[0]
  # One colour per run and seed (more than the default cycle's 10 colours);
  # actor-critic dashed.
  colors = plots.colors('tab20')
  curves = sorted(
      ((r['name'], seed), records.seed_columns(r, seed))
      for r in runs_
      for seed in r['seeds']
  )
  for i, ((name, seed), col) in enumerate(curves):
    ev = np.isfinite(col['eval_return'])
    learner = col['learner_steps']
    entropy = col.get('logs/entropy', np.full_like(learner, np.nan))
    style = dict(
        label=f'{name} s{seed}',
        color=colors[i % len(colors)],
        ls='--' if name.startswith('ac_') else '-',
    )
    ax_r.plot(learner[ev], col['eval_return'][ev], **style)
    ax_h.plot(learner, entropy, **style)
  ax_r.set(xlabel='learner updates', ylabel='evaluation return (16 episodes)')
  ax_h.set(xlabel='learner updates', ylabel='policy entropy (nats)')
  ax_h.axhline(math.log(3), color='grey', lw=0.5, ls=':')
  ax_r.legend(fontsize=7)
  fig.suptitle(f'{ENV}, paper preset batches: what moves Disco103')
  fig.tight_layout()
  plots.save(fig, path)


def report(out: pathlib.Path) -> None:
  """diagnosis.csv and diagnosis.png from the finished runs in `out`."""
  found = records.load_records(out, include_partial=True)
  found = sorted(found, key=lambda r: r['name'])
  rows = [seed_row(r, seed) for r in found for seed in r['seeds']]
  if not rows:
    print(f'no finished runs in {out}')
    return
  tables.write_csv(out / 'diagnosis.csv', rows)
  for row in rows:
    entropies = '/'.join(
        f'{row[k]:.3f}'
        for k in ('entropy_at_500', 'entropy_at_1000', 'entropy_at_2000')
    )
    print(
        f"{row['run']:>14} seed {row['seed']}: eval"
        f" {row['final_eval_return']:6.2f} (best"
        f" {row['best_eval_return']:6.2f}), train"
        f" {row['final_train_return']:6.2f}, entropy"
        f" {entropies}/{row['final_entropy']:.3f}, {row['wall_seconds']:.0f} s"
    )
  plot(found, out / 'diagnosis.png')
  print(f'wrote {out / "diagnosis.csv"} and {out / "diagnosis.png"}')


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--out', type=pathlib.Path, required=True)
  parser.add_argument('--variants', nargs='*', default=())
  parser.add_argument('--seeds', type=int, default=1)
  parser.add_argument('--first-seed', type=int, default=0)
  parser.add_argument('--env-steps', type=int, default=ENV_STEPS)
  parser.add_argument(
      '--base-rate',
      type=float,
      default=5e-4,
      help='step size of the agent and replay variants',
  )
  parser.add_argument('--report', action='store_true')
  parser.add_argument('--no-progress', action='store_true')
  args = parser.parse_args(argv)
  table = variants(args.base_rate)
  unknown = [v for v in args.variants if v not in table]
  if unknown:
    parser.error(f'unknown variants {unknown}; choose from {sorted(table)}')
  seed = args.first_seed
  todo = [
      runs.TrainRun(
          name if seed == 0 else f'{name}__s{seed}',
          config_for(table[name], args.env_steps, seed),
          num_seeds=args.seeds,
      )
      for name in args.variants
  ]
  steps = [
      lambda: runs.run_all(args.out, todo, show_progress=not args.no_progress)
  ]
  if args.report:
    steps.append(lambda: report(args.out))
  return runs.command(parser.prog, args.out, steps)


if __name__ == '__main__':
  sys.exit(main())
