"""What holds Disco103 near random on Craftax-Classic, one factor at a time.

Disco103 under the `crafter` protocol ends near a random policy on symbolic
Craftax-Classic (2.90 at 1M steps; benchmarks/results/paper_protocol_1m_cpu).
Each arm (`ARMS`) changes one thing of that run (`crafter` preset,
`craftax_frames` agent, time limits as terminations, 32 evaluation
episodes): the action model's width (width_256, width_1024), the
convolutional torso on the map as a grid (conv_grid), the other reading of
the replay ratio (rollout_per_update), weight decay 0 (no_weight_decay);
base is the run again, with Crafter's measures.

Each seed is one run in pieces (`disco.studies.runs`), resumed by running
the same command again; `--seeds-together` trains them as one `vmap`ped
run (a GPU's: benchmarks/gpu_arms.sh). `--report` writes arms.csv (per
seed: the last evaluation's return; over the last 10% of steps the
training return, Crafter score and entropies), summary.csv (IQM [95%
bootstrap interval] per arm, every seed at the arm's common step) and
curves.png.

  python benchmarks/craftax_arms.py --out benchmarks/results/craftax_arms \\
      --arms rollout_per_update --seeds 0 1 2 --env-steps 250000
  python benchmarks/craftax_arms.py --out benchmarks/results/craftax_arms \\
      --report --include-partial

Needs craftax and matplotlib.
"""

import argparse
import functools
import json
import pathlib
import sys
from typing import Any

import numpy as np

from disco import metrics
from disco.studies import plots
from disco.studies import records
from disco.studies import runs
from disco.studies import scale_report
from disco.studies import tables

ENV = 'craftax:Craftax-Classic-Symbolic-v1'
GRID_ENV = 'craftax:Craftax-Classic-Symbolic-Grid-v1'
EVAL_ENVS = 32
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
# summary.csv's columns after the arm's: arms.csv's measures.
MEASURES = (
    'eval_return',
    'train_return_last10',
    'crafter_score_last10',
    'entropy_last10',
    'y_entropy_last10',
    'z_entropy_last10',
)


def arm_config(arm: str, seed: int, env_steps: int, args: argparse.Namespace):
  """The config of one seed of `arm` at `env_steps` environment steps."""
  from disco import train  # pylint: disable=g-import-not-at-top

  preset, agent, changes = ARMS[arm]
  changes = dict(env=ENV, reward_scale=args.reward_scale) | changes
  probe = train.preset(preset, agent=agent, **changes)
  num_steps = probe.num_steps_for(env_steps)
  return train.preset(
      preset,
      agent=agent,
      rule='disco',
      seed=seed,
      num_steps=num_steps,
      eval_envs=EVAL_ENVS,
      eval_max_steps=runs.eval_max_steps(changes['env']),
      eval_every=max(1, num_steps // EVALUATIONS),
      steps_per_chunk=args.steps_per_chunk,
      checkpoint_every=args.checkpoint_every,
      truncation='terminate',
      **changes,
  )


def run_name(
    arm: str, steps: int, seeds: tuple[int, ...], scale: float = 1.0
) -> str:
  """'<arm>[_x<scale>]__<budget>__s<seed>[-<last>]': the label before '__s'."""
  budget = f'{steps // 1000}k' if steps % 1000 == 0 else steps
  together = f'-{seeds[-1]}' if len(seeds) > 1 else ''
  tag = '' if scale == 1.0 else f'_x{scale:g}'
  return f'{arm}{tag}__{budget}__s{seeds[0]}{together}'


def base_records(env_steps: int) -> list[dict[str, Any]]:
  """The base runs' records up to `env_steps`, named as arms' runs."""
  out = []
  for path in sorted(BASE_RUNS.glob('*__disco__s*.json')):
    record = json.loads(path.read_text())
    if record['status'] != records.DONE:
      continue
    steps = record['logs']['env_steps']
    keep = [i for i, x in enumerate(steps) if x is not None and x <= env_steps]
    logs = {k: [v[i] for i in keep] for k, v in record['logs'].items()}
    name = f'{BASE_LABEL}__s{record["seeds"][0]}'
    out.append(record | dict(name=name, logs=logs, wall_seconds=float('nan')))
  return out


def seed_columns(record: dict[str, Any]) -> list[tuple[str, int, dict]]:
  """[(arm label, seed, the seed's log columns)] of a record's seeds."""
  arm = record['name'].rsplit('__s', 1)[0]
  return [
      (arm, int(seed), records.seed_columns(record, int(seed)))
      for seed in record['seeds']
  ]


def pooled_score(logs: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
  """(env steps, Crafter score) over consecutive groups of rows."""
  names = [k for k in logs if k.startswith('unlocked/')]
  if not names:
    return np.array([]), np.array([])
  rows = logs['step'] > 0
  unlocked = np.stack([logs[k][rows] for k in names], axis=1)
  return metrics.crafter_score_curve(
      logs['env_steps'][rows],
      logs['train_episodes'][rows],
      unlocked,
      SCORE_ROWS,
  )


def seed_row(
    record: dict[str, Any], arm: str, seed: int, logs: dict[str, np.ndarray]
) -> dict[str, Any]:
  """One seed's results: last evaluation, Crafter's measures, cost."""
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
  wall = record['wall_seconds']
  # The entropies and the rule's inputs come from final_diagnostics.
  return dict(
      arm=arm,
      seed=int(seed),
      status=record['status'],
      env_steps=int(logs['env_steps'][-1]),
      learner_steps=int(logs['learner_steps'][-1]),
      eval_return=float(logs['eval_return'][evals][-1]),
      train_return_last10=final['train_return'],
      crafter_score_last10=final.get('crafter_score', float('nan')),
      # The base runs' wall time covers their 1M steps: left out.
      wall_seconds=round(wall) if np.isfinite(wall) else '',
  ) | scale_report.final_diagnostics(logs['env_steps'], logs)


def summary(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Per arm: each measure's IQM [95% interval] and the seeds' values.

  Every seed at the arm's common step (the fewest steps its seeds reached).
  """
  seeds = [(r, *columns) for r in found for columns in seed_columns(r)]
  out = []
  for arm in dict.fromkeys(arm for _, arm, _, _ in seeds):
    mine = [(r, s, logs) for r, a, s, logs in seeds if a == arm]
    steps = min(int(logs['env_steps'][-1]) for _, _, logs in mine)
    rows = []
    for r, s, logs in mine:
      keep = logs['env_steps'] <= steps
      rows.append(seed_row(r, arm, s, {k: v[keep] for k, v in logs.items()}))
    entry = dict(arm=arm, seeds=len(rows), env_steps=steps)
    for key in MEASURES:
      entry[key] = tables.iqm_cell([row[key] for row in rows])
    out.append(entry)
  return out


def plot(found: list[dict[str, Any]], path: pathlib.Path) -> None:
  """Each seed's curves, one colour per arm, one line style per seed."""
  fig, axes = plots.figure(1, len(CURVES), (4 * len(CURVES), 3.6))
  axes = axes[0]
  seeds = [columns for r in found for columns in seed_columns(r)]
  arms = list(dict.fromkeys(arm for arm, _, _ in seeds))
  labelled = set()
  for arm, seed, logs in seeds:
    style = dict(
        color=f'C{arms.index(arm)}',
        linestyle=plots.SEED_LINESTYLES[seed % len(plots.SEED_LINESTYLES)],
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
  plots.save(fig, path)


def report(out: pathlib.Path, include_partial: bool) -> None:
  found = records.load_records(out, include_partial)
  if not found:
    print(f'no runs in {out}')
    return
  budget = max(max(x for x in r['logs']['env_steps'] if x) for r in found)
  found = base_records(budget) + found
  rows = [seed_row(r, *columns) for r in found for columns in seed_columns(r)]
  tables.write_csv(out / 'arms.csv', rows)
  arms = summary(found)
  tables.write_csv(out / 'summary.csv', arms)
  plot(found, out / 'curves.png')
  for row in arms:
    print(row)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  runs.add_flags(parser, seeds=(0, 1, 2), one_call=True)
  parser.add_argument('--arms', nargs='*', choices=sorted(ARMS), default=[])
  parser.add_argument('--env-steps', type=int, default=250_000)
  parser.add_argument('--steps-per-chunk', type=int, default=4)
  parser.add_argument('--checkpoint-every', type=int, default=40)
  parser.add_argument('--reward-scale', type=float, default=1.0)
  args = parser.parse_args(argv)
  steps, scale = args.env_steps, args.reward_scale
  todo = runs.seed_runs(
      ENV,
      args.arms,
      args.seeds,
      name_fn=lambda arm, seeds: run_name(arm, steps, seeds, scale),
      config_fn=lambda arm, seed: arm_config(arm, seed, args.env_steps, args),
      together=args.seeds_together,
      checkpoints=not args.no_checkpoints,
  )
  write = functools.partial(report, args.out, args.include_partial)
  return runs.run_then_report(
      parser.prog, args, todo, write if args.report else None
  )


if __name__ == '__main__':
  sys.exit(main())
