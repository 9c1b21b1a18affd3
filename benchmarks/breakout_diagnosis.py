"""Why Disco103 trails on Breakout-MinAtar: one setting changed at a time.

Every variant trains Disco103 (or actor-critic) with the trainer's `paper`
preset on Breakout-MinAtar for `--env-steps` (1M: 3,449 iterations, 3,440
learner updates) and differs from the base in the fields it names:

  base         the `small` agent (MLP 256-256, action LSTM 64, heads 64),
               step size 5e-4 (the issue's setting)
  lr<rate>     base at another step size, from the paper's {1e-4, 3e-4,
               5e-4} to the colab's 1e-2
  colab_agent  the colab's agent (MLP 512-512, LSTM 128, heads 128)
  replay<f>    another replay fraction (more environments, the same batch)
  ac_lr<rate>  actor-critic with the base agent, for comparison

Each run is resumable (`benchmarks/pieces.py`): Ctrl-C, SIGTERM or a kill
loses at most `--checkpoint-every` iterations; a finished run is skipped.
Every chunk's log row is kept (returns, the policy's entropy, the rule's
target entropy), and `--report` writes `diagnosis.csv` (one row per run
and seed: final returns, entropy at points in time, wall time) and
`diagnosis.png` (evaluation return and policy entropy against updates).

  python benchmarks/breakout_diagnosis.py --out DIR --variants lr1e-2 lr1e-3
  python benchmarks/breakout_diagnosis.py --out DIR --report
  python benchmarks/breakout_diagnosis.py --out DIR --faithful-check 1500

`--faithful-check N` rules the trainer out: the reference colab's faithful
loop (`disco.eval`, its settings: 2 environments, batches of 64 replayed
trajectories, one update per rollout) and the trainer at the same settings
(`colab` preset) train Disco103 with the base agent at `--base-rate` for N
iterations each, and `faithful_check.csv` gives both curves (training
return and policy entropy per 250 updates). They cannot agree bit for bit
(the trainer takes its gradients through the taken actions only and draws
its own random numbers), only in distribution.

Needs gymnax and matplotlib.
"""

import argparse
import csv
import math
import pathlib
import sys
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import pieces  # pylint: disable=g-import-not-at-top,wrong-import-position

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
WARMUP_RETURN = 2.0


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


def report(out: pathlib.Path) -> None:
  """diagnosis.csv and diagnosis.png from the finished runs in `out`."""
  import json  # pylint: disable=g-import-not-at-top

  records = sorted(
      (
          json.loads(p.read_text())
          for p in (out / pieces.RUNS_DIR).glob('*.json')
      ),
      key=lambda r: r['name'],
  )
  rows, curves = [], {}
  for record in records:
    for seed in record['seeds']:
      col = pieces.seed_columns(record, seed)
      ev = np.isfinite(col['eval_return'])
      learner = col['learner_steps']
      entropy = col.get('logs/entropy', np.full_like(learner, np.nan))
      row = dict(
          run=record['name'],
          rule=record['settings']['config']['rule'],
          learning_rate=record['settings']['config']['agent_learning_rate'],
          seed=seed,
          env_steps=int(col['env_steps'][-1]),
          learner_steps=int(learner[-1]),
          final_eval_return=float(col['eval_return'][ev][-1]),
          best_eval_return=float(np.max(col['eval_return'][ev])),
          final_train_return=_tail_return(col),
          wall_seconds=round(record['wall_seconds'], 1),
      )
      for at in (500, 1000, 2000, 3000):
        i = np.searchsorted(learner, at)
        row[f'entropy_at_{at}'] = (
            float(entropy[i]) if i < len(entropy) else math.nan
        )
      row['final_entropy'] = float(entropy[-1])
      # The warm-up's end: the first evaluation at 4x the initial policy's
      # typical return (~0.5).
      above = np.flatnonzero(col['eval_return'][ev] >= WARMUP_RETURN)
      row['first_update_return_2'] = (
          int(learner[ev][above[0]]) if above.size else ''
      )
      rows.append(row)
      curves[(record['name'], seed)] = (
          learner[ev],
          col['eval_return'][ev],
          learner,
          entropy,
      )
  if not rows:
    print(f'no finished runs in {out}')
    return
  with open(out / 'diagnosis.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  for row in rows:
    print(
        f"{row['run']:>14} seed {row['seed']}: eval"
        f" {row['final_eval_return']:6.2f} (best"
        f" {row['best_eval_return']:6.2f}), train"
        f" {row['final_train_return']:6.2f}, entropy"
        f" {row['entropy_at_500']:.3f}/{row['entropy_at_1000']:.3f}/{row['entropy_at_2000']:.3f}/{row['final_entropy']:.3f},"
        f" {row['wall_seconds']:.0f} s"
    )
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, (ax_r, ax_h) = plt.subplots(1, 2, figsize=(12, 4.5))
  # One colour per run (more runs than the default cycle's 10 colours);
  # actor-critic dashed.
  colors = plt.get_cmap('tab20').colors
  for i, ((name, seed), (x_e, y_e, x_h, y_h)) in enumerate(
      sorted(curves.items())
  ):
    style = dict(
        label=f'{name} s{seed}',
        color=colors[i % len(colors)],
        ls='--' if name.startswith('ac_') else '-',
    )
    ax_r.plot(x_e, y_e, **style)
    ax_h.plot(x_h, y_h, **style)
  ax_r.set(xlabel='learner updates', ylabel='evaluation return (16 episodes)')
  ax_h.set(xlabel='learner updates', ylabel='policy entropy (nats)')
  ax_h.axhline(math.log(3), color='grey', lw=0.5, ls=':')
  ax_r.legend(fontsize=7)
  fig.suptitle(f'{ENV}, paper preset batches: what moves Disco103')
  fig.tight_layout()
  fig.savefig(out / 'diagnosis.png', dpi=110)
  print(f'wrote {out / "diagnosis.csv"} and {out / "diagnosis.png"}')


def _tail_return(col: dict[str, np.ndarray]) -> float:
  """Episode-weighted training return over the last 10% of iterations."""
  tail = col['step'] > col['step'][-1] * 0.9
  episodes = col['train_episodes'][tail]
  total = np.nansum(col['train_return'][tail] * episodes)
  return float(total / episodes.sum()) if episodes.sum() else math.nan


def faithful_check(
    out: pathlib.Path, num_steps: int, rate: float, seed: int
) -> None:
  """The faithful loop and the trainer at the colab's settings, side by side."""
  # pylint: disable=g-import-not-at-top
  import time

  from disco import eval as eval_lib
  from disco import train

  # pylint: enable=g-import-not-at-top
  fields = dict(SMALL, env=ENV, agent_learning_rate=rate, seed=seed)
  window = 250
  rows = []
  start = time.perf_counter()
  history = eval_lib.run_eval(
      eval_lib.EvalConfig(num_steps=num_steps, **fields)
  )
  faithful_s = time.perf_counter() - start
  entropy = history.logs['entropy']
  for end in range(window, num_steps + 1, window):
    part = slice(end - window, end)
    episodes = history.num_episodes[part].sum()
    rows.append(
        dict(
            loop='faithful',
            iterations=end,
            env_steps=int(history.steps[end - 1]),
            train_return=float(history.total_returns[part].sum() / episodes),
            episodes=int(episodes),
            entropy=float(np.nanmean(entropy[part])),
        )
    )
  start = time.perf_counter()
  result = train.run_train(
      train.preset('colab', num_steps=num_steps, steps_per_chunk=25, **fields)
  )
  trainer_s = time.perf_counter() - start
  logs = result.logs
  for end in range(window, num_steps + 1, window):
    part = (logs['step'] > end - window) & (logs['step'] <= end)
    episodes = logs['train_episodes'][part].sum()
    total = np.nansum(logs['train_return'][part] * logs['train_episodes'][part])
    rows.append(
        dict(
            loop='trainer',
            iterations=end,
            env_steps=int(logs['env_steps'][part][-1]),
            train_return=float(total / episodes),
            episodes=int(episodes),
            entropy=float(np.nanmean(logs['logs/entropy'][part])),
        )
    )
  out.mkdir(parents=True, exist_ok=True)
  with open(out / 'faithful_check.csv', 'w', newline='') as f:
    f.write(
        f'# {ENV}, seed {seed}, step size {rate:g}; wall: faithful'
        f' {faithful_s:.0f} s, trainer {trainer_s:.0f} s\n'
    )
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  for row in rows:
    print(
        f"{row['loop']:>8} {row['iterations']:5d}: return"
        f" {row['train_return']:.2f} ({row['episodes']} episodes), entropy"
        f" {row['entropy']:.3f}"
    )


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
  parser.add_argument('--faithful-check', type=int, default=0, metavar='N')
  parser.add_argument('--no-progress', action='store_true')
  args = parser.parse_args(argv)
  table = variants(args.base_rate)
  unknown = [v for v in args.variants if v not in table]
  if unknown:
    parser.error(f'unknown variants {unknown}; choose from {sorted(table)}')
  for name in args.variants:
    config = config_for(table[name], args.env_steps, args.first_seed)
    run_name = name if args.first_seed == 0 else f'{name}__s{args.first_seed}'
    record = pieces.run(
        args.out,
        run_name,
        config,
        num_seeds=args.seeds,
        show_progress=not args.no_progress,
    )
    print(f'{run_name}: done in {record["wall_seconds"]:.0f} s', flush=True)
  if args.faithful_check:
    faithful_check(
        args.out, args.faithful_check, args.base_rate, args.first_seed
    )
  if args.report:
    report(args.out)
  return 0


if __name__ == '__main__':
  sys.exit(main())
