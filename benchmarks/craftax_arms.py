"""What holds Disco103 near random on Craftax-Classic, one factor at a time.

Disco103 under the `crafter` protocol ends near a random policy on symbolic
Craftax-Classic (2.90 at 1M steps; benchmarks/results/paper_protocol_1m_cpu).
Each arm changes one thing of that run (`crafter` preset, `craftax_frames`
agent, time limits as terminations, 32 evaluation episodes):

* width_256, width_1024: the action model's LSTM and heads 64 -> 256, 1024;
* conv_grid: the convolutional torso (`conv_frames`) on the map as a grid
  ('Craftax-Classic-Symbolic-Grid-v1');
* rollout_per_update: the other reading of the replay ratio
  (`crafter_rollout_per_update`: 232 environment steps per update);
* no_weight_decay: weight decay 0 instead of 0.3;
* base: the run itself again, for Crafter's measures, which the old
  records lack.

Each seed is one run in pieces (`pieces.py`), resumed by running the same
command again. `--report` writes arms.csv (per seed: the last evaluation's
return, the training episodes' return and Crafter score over the last 10%
of steps), summary.csv (IQM [95% bootstrap interval] per arm) and
curves.png (evaluation return, Crafter score, the entropies of the policy
and of the predictions y and z, against environment steps).

  python benchmarks/craftax_arms.py --out benchmarks/results/craftax_arms \\
      --arms rollout_per_update --seeds 0 1 2 --env-steps 250000
  python benchmarks/craftax_arms.py --out benchmarks/results/craftax_arms \\
      --report --include-partial

Needs craftax and matplotlib.
"""

import argparse
import csv
import json
import pathlib
import signal
import sys
from typing import Any

import numpy as np
import pieces  # pylint: disable=g-bad-import-order

from disco import metrics

ENV = 'craftax:Craftax-Classic-Symbolic-v1'
GRID_ENV = 'craftax:Craftax-Classic-Symbolic-Grid-v1'
EVAL_ENVS = 32
EVAL_MAX_STEPS = 10_000
EVALUATIONS = 8
# The runs the arms change one factor of: Disco103, `crafter` protocol,
# `craftax_frames`, seeds 0-2 to 1M steps (before Crafter's measures).
BASE_RUNS = (
    pathlib.Path(__file__).resolve().parent
    / 'results'
    / 'paper_protocol_1m_cpu'
    / 'runs'
)
BASE_LABEL = 'base (1M runs, cut)'
# Rows pooled into one point of the training Crafter score's curve.
SCORE_ROWS = 25
# Each arm: (preset, agent, changes of the base run).
ARMS: dict[str, tuple[str, str, dict[str, Any]]] = {
    'base': ('crafter', 'craftax_frames', {}),
    'width_256': (
        'crafter',
        'craftax_frames',
        dict(agent_lstm_size=256, agent_head_mlp_hiddens=(256,)),
    ),
    'width_1024': (
        'crafter',
        'craftax_frames',
        dict(agent_lstm_size=1024, agent_head_mlp_hiddens=(1024,)),
    ),
    'conv_grid': ('crafter', 'conv_frames', dict(env=GRID_ENV)),
    'rollout_per_update': ('crafter_rollout_per_update', 'craftax_frames', {}),
    'no_weight_decay': (
        'crafter',
        'craftax_frames',
        dict(agent_weight_decay=0.0),
    ),
}
CURVES = (
    ('eval_return', 'evaluation return'),
    ('crafter_score', f'Crafter score (training, {SCORE_ROWS} rows pooled)'),
    ('logs/entropy', 'policy entropy'),
    ('logs/y_entropy', 'y entropy'),
    ('logs/z_entropy', 'z entropy'),
)


def arm_config(arm: str, seed: int, env_steps: int, args: argparse.Namespace):
  """The config of one seed of `arm` at `env_steps` environment steps."""
  from disco import train  # pylint: disable=g-import-not-at-top

  preset, agent, changes = ARMS[arm]
  changes = dict(env=ENV) | changes
  probe = train.preset(preset, agent=agent, **changes)
  num_steps = probe.num_steps_for(env_steps)
  return train.preset(
      preset,
      agent=agent,
      rule='disco',
      seed=seed,
      num_steps=num_steps,
      eval_envs=EVAL_ENVS,
      eval_max_steps=EVAL_MAX_STEPS,
      eval_every=max(1, num_steps // EVALUATIONS),
      steps_per_chunk=args.steps_per_chunk,
      checkpoint_every=args.checkpoint_every,
      truncation='terminate',
      **changes,
  )


def run_name(arm: str, env_steps: int, seed: int) -> str:
  """'<arm>__<budget>__s<seed>': the report's arm label is what precedes s."""
  budget = f'{env_steps // 1000}k' if env_steps % 1000 == 0 else env_steps
  return f'{arm}__{budget}__s{seed}'


def run_arms(args: argparse.Namespace) -> None:
  for arm in args.arms:
    for seed in args.seeds:
      config = arm_config(arm, seed, args.env_steps, args)
      record = pieces.run(
          args.out,
          run_name(arm, args.env_steps, seed),
          config,
          num_seeds=1,
          show_progress=not args.no_progress,
      )
      print(
          f'{record["name"]}: done, {record["wall_seconds"]:.0f} s in'
          f' {len(record["pieces"])} piece(s)',
          flush=True,
      )


def load_records(out: pathlib.Path, include_partial: bool) -> list[dict]:
  runs = out / pieces.RUNS_DIR
  records = {}
  for path in sorted(runs.glob('*.json')) if runs.is_dir() else []:
    record = json.loads(path.read_text())
    if record['status'] == pieces.DONE or include_partial:
      if record['name'] not in records or record['status'] == pieces.DONE:
        records[record['name']] = record
  return list(records.values())


def base_records(env_steps: int) -> list[dict[str, Any]]:
  """The base runs' records up to `env_steps`, named as arms' runs."""
  out = []
  for path in sorted(BASE_RUNS.glob('*__disco__s*.json')):
    record = json.loads(path.read_text())
    if record['status'] != pieces.DONE:
      continue
    keep = [
        i
        for i, x in enumerate(record['logs']['env_steps'])
        if x is not None and x <= env_steps
    ]
    logs = {k: [v[i] for i in keep] for k, v in record['logs'].items()}
    seed = record['seeds'][0]
    out.append(
        record
        | dict(
            name=f'{BASE_LABEL}__s{seed}',
            logs=logs,
            wall_seconds=float('nan'),
        )
    )
  return out


def seed_columns(record: dict[str, Any]) -> tuple[str, int, dict]:
  """(arm label, seed, the seed's log columns) of a record."""
  arm, seed = record['name'].rsplit('__s', 1)
  return arm, int(seed), pieces.seed_columns(record, int(seed))


def pooled_score(logs: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
  """(env steps, Crafter score) over consecutive groups of rows."""
  names = [k for k in logs if k.startswith('unlocked/')]
  if not names:
    return np.array([]), np.array([])
  rows = logs['step'] > 0
  steps, episodes = logs['env_steps'][rows], logs['train_episodes'][rows]
  unlocked = np.stack([logs[k][rows] for k in names], axis=1)
  xs, ys = [], []
  for start in range(0, len(steps) - SCORE_ROWS + 1, SCORE_ROWS):
    group = slice(start, start + SCORE_ROWS)
    count = np.sum(episodes[group])
    if count:
      rates = 100.0 * np.sum(unlocked[group], axis=0) / count
      xs.append(steps[group][-1])
      ys.append(metrics.crafter_score(rates))
  return np.array(xs), np.array(ys)


def seed_row(record: dict[str, Any]) -> dict[str, Any]:
  """One seed's results: last evaluation, Crafter's measures, cost."""
  arm, seed, logs = seed_columns(record)
  trained = logs['step'] > 0
  names = [k for k in logs if k.startswith('unlocked/')]
  final = metrics.final_training_measures(
      logs['env_steps'][trained],
      logs['train_return'][trained],
      logs['train_episodes'][trained],
      np.stack([logs[k][trained] for k in names], 1) if names else None,
      tuple(k.split('/', 1)[1] for k in names),
  )
  evals = ~np.isnan(logs['eval_return'])
  return dict(
      arm=arm,
      seed=int(seed),
      status=record['status'],
      env_steps=int(logs['env_steps'][-1]),
      learner_steps=int(logs['learner_steps'][-1]),
      eval_return=float(logs['eval_return'][evals][-1]),
      entropy_last10=_last_tenth(logs, 'logs/entropy'),
      y_entropy_last10=_last_tenth(logs, 'logs/y_entropy'),
      z_entropy_last10=_last_tenth(logs, 'logs/z_entropy'),
      train_return_last10=final['train_return'],
      crafter_score_last10=final.get('crafter_score', float('nan')),
      # The base runs' wall time covers their 1M steps: left out.
      wall_seconds=(
          round(record['wall_seconds'])
          if np.isfinite(record['wall_seconds'])
          else ''
      ),
  )


def _last_tenth(logs: dict[str, np.ndarray], column: str) -> float:
  """`column`'s mean over the rows of the last 10% of environment steps."""
  steps, values = logs['env_steps'], logs[column]
  window = (steps > 0.9 * steps[-1]) & ~np.isnan(values)
  return float(np.mean(values[window])) if window.any() else float('nan')


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
  out = []
  for arm in dict.fromkeys(r['arm'] for r in rows):
    mine = [r for r in rows if r['arm'] == arm]
    entry = dict(
        arm=arm, seeds=len(mine), env_steps=min(r['env_steps'] for r in mine)
    )
    for key in (
        'eval_return',
        'train_return_last10',
        'crafter_score_last10',
        'entropy_last10',
        'y_entropy_last10',
        'z_entropy_last10',
    ):
      values = np.array([r[key] for r in mine], np.float64)
      if np.isnan(values).all():
        entry[key] = ''
        continue
      low, high = metrics.bootstrap_interval(values[~np.isnan(values)])
      entry[key] = (
          f'{metrics.interquartile_mean(values[~np.isnan(values)]):.2f}'
          f' [{low:.2f}, {high:.2f}];'
          f' {" / ".join(f"{v:.2f}" for v in values)}'
      )
    out.append(entry)
  return out


def write_csv(path: pathlib.Path, rows: list[dict[str, Any]]) -> None:
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)


def plot(records: list[dict[str, Any]], path: pathlib.Path) -> None:
  """Each seed's curves, one colour per arm, one line style per seed."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, axes = plt.subplots(1, len(CURVES), figsize=(4 * len(CURVES), 3.6))
  arms = list(dict.fromkeys(seed_columns(r)[0] for r in records))
  labelled = set()
  for record in records:
    arm, seed, logs = seed_columns(record)
    style = dict(
        color=f'C{arms.index(arm)}',
        linestyle=('-', '--', ':', '-.')[seed % 4],
        linewidth=1,
        label=None if arm in labelled else arm,
    )
    labelled.add(arm)
    for ax, (column, title) in zip(axes, CURVES):
      if column == 'crafter_score':
        x, y = pooled_score(logs)
      elif column in logs:
        keep = ~np.isnan(logs[column])
        x, y = logs['env_steps'][keep], logs[column][keep]
      else:
        continue
      ax.plot(x, y, **(style if ax is axes[0] else style | dict(label=None)))
      ax.set_title(title)
      ax.set_xlabel('environment steps')
  fig.legend(loc='lower center', ncol=len(arms), fontsize=8)
  fig.tight_layout(rect=(0, 0.08, 1, 1))
  fig.savefig(path, dpi=110)
  plt.close(fig)


def report(out: pathlib.Path, include_partial: bool) -> None:
  records = load_records(out, include_partial)
  if not records:
    print(f'no runs in {out}')
    return
  budget = max(max(x for x in r['logs']['env_steps'] if x) for r in records)
  records = base_records(budget) + records
  rows = [seed_row(r) for r in records]
  write_csv(out / 'arms.csv', rows)
  write_csv(out / 'summary.csv', summary(rows))
  plot(records, out / 'curves.png')
  for row in summary(rows):
    print(row)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--out', type=pathlib.Path, required=True)
  parser.add_argument('--arms', nargs='*', choices=sorted(ARMS), default=[])
  parser.add_argument('--seeds', nargs='*', type=int, default=[0, 1, 2])
  parser.add_argument('--env-steps', type=int, default=250_000)
  parser.add_argument('--steps-per-chunk', type=int, default=4)
  parser.add_argument('--checkpoint-every', type=int, default=40)
  parser.add_argument('--no-progress', action='store_true')
  parser.add_argument('--report', action='store_true')
  parser.add_argument('--include-partial', action='store_true')
  args = parser.parse_args(argv)
  try:
    run_arms(args)
  except KeyboardInterrupt as e:
    signum = getattr(e, 'signum', signal.SIGINT)
    print(
        f'stopped by {signal.Signals(signum).name}; the same command goes on'
        f' from the checkpoints in {args.out}',
        file=sys.stderr,
    )
    return 128 + signum
  if args.report:
    report(args.out, args.include_partial)
  return 0


if __name__ == '__main__':
  sys.exit(main())
