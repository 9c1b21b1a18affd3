"""The report of a study's runs: per-seed final returns and their IQM.

From the records of a study's trainer runs (`disco.studies.pieces`) and
PPO runs (`disco.studies.ppo_runs`), `write` makes, in the study's
directory:

  results.csv  per environment, algorithm and seed: final return, env
               steps, learner updates (the trainer's), wall seconds per seed
               (a run of seeds trained together: its time over its seeds)
  summary.csv  per environment and algorithm: interquartile mean over seeds
               with a 95% percentile-bootstrap interval, mean, the seeds'
               values
  curves.csv   every evaluation point (and the policy's entropy per chunk)
  curves.png   per environment: evaluation return against env steps, and
               against learner updates with the policy's entropy
               (`disco.studies.plots.seed_curves`)

A stopped run's seeds (a partial record) end before finished ones; the
summary pools each algorithm's seeds at the last evaluation all of them
reached (`at_common_budget`).
"""

from collections.abc import Sequence
import pathlib
from typing import Any

import numpy as np

from disco import metrics
from disco.studies import plots
from disco.studies import records
from disco.studies import tables

ALGOS = ('disco', 'actor_critic', 'ppo')


def _trainer_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
  config = record['settings']['config']
  rows = []
  for seed in record['seeds']:
    col = records.seed_columns(record, seed)
    ev = np.isfinite(col['eval_return'])
    if not ev.any():  # A stopped run before its first evaluation.
      continue
    rows.append(
        dict(
            env=config['env'],
            algo=config['rule'],
            status=record['status'],
            seed=seed,
            learning_rate=config['agent_learning_rate'],
            # At the last evaluation (a stopped run's last row may be later).
            final_return=float(col['eval_return'][ev][-1]),
            env_steps=int(col['env_steps'][ev][-1]),
            learner_updates=int(col['learner_steps'][ev][-1]),
            wall_seconds_per_seed=round(
                record['wall_seconds'] / len(record['seeds']), 1
            ),
            pieces=len(record['pieces']),
            eval_curve=(
                col['env_steps'][ev],
                col['learner_steps'][ev],
                col['eval_return'][ev],
            ),
            entropy_curve=(
                col['learner_steps'],
                col.get('logs/entropy', np.full(ev.shape, np.nan)),
            ),
        )
    )
  return rows


def _ppo_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
  rows = []
  for s in record['seeds']:
    points = [c for c in record['curves'] if c['seed'] == s['seed']]
    rows.append(
        dict(
            env=record['env'],
            algo='ppo',
            status=record['status'],
            seed=s['seed'],
            learning_rate=None,
            final_return=s['final_return'],
            env_steps=s['env_steps'],
            learner_updates=None,
            wall_seconds_per_seed=round(
                record['wall_seconds'] / len(record['seeds']), 1
            ),
            pieces=1,
            eval_curve=(
                np.array([c['env_steps'] for c in points], float),
                None,
                np.array([c['value'] for c in points], float),
            ),
            entropy_curve=None,
        )
    )
  return rows


def iqm_interval(values: np.ndarray) -> dict[str, float]:
  """`iqm`, `ci_low`, `ci_high`: the IQM over seeds [S] and its 95% interval.

  A percentile-bootstrap interval (`disco.metrics.bootstrap_interval`).
  """
  low, high = metrics.bootstrap_interval(values)
  return dict(iqm=metrics.interquartile_mean(values), ci_low=low, ci_high=high)


def seed_values(values: np.ndarray) -> str:
  """The seeds' values, two decimals each, space-separated."""
  return ' '.join(f'{v:.2f}' for v in values)


def per_seed_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """One row per environment, algorithm and seed, with its curves.

  Args:
    runs: records of trainer runs (with `logs`) and PPO runs.

  Returns:
    Rows of results.csv's columns, plus `eval_curve` (env steps, learner
    updates or None, returns) and `entropy_curve` (learner updates,
    entropy; None for PPO).
  """
  rows = []
  for record in runs:
    rows += _trainer_rows(record) if 'logs' in record else _ppo_rows(record)
  return rows


def at_common_budget(
    group: Sequence[dict[str, Any]],
) -> tuple[int, np.ndarray, int | None]:
  """Each seed's return at the last evaluation every seed reached.

  Seeds that went further give their last evaluation at or before it.

  Args:
    group: `per_seed_rows` rows of one environment and algorithm.

  Returns:
    The budget (env steps), the returns [seeds] there, and the learner
    updates there (None for rejax's PPO).
  """
  budget = min(r['env_steps'] for r in group)
  values, updates = [], []
  for r in group:
    if r['env_steps'] == budget:
      values.append(r['final_return'])
      updates.append(r['learner_updates'])
      continue
    steps, learner, returns = r['eval_curve']
    i = np.flatnonzero(np.asarray(steps) <= budget)[-1]
    values.append(float(returns[i]))
    updates.append(None if learner is None else int(learner[i]))
  return budget, np.array(values), updates[0]


def summary_rows(
    rows: Sequence[dict[str, Any]], algos: Sequence[str] = ALGOS
) -> list[dict[str, Any]]:
  """Per environment and algorithm: IQM over seeds and its 95% interval.

  At the budget every seed reached (`at_common_budget`); environments in
  the order they come, algorithms in `algos`' order.
  """
  out = []
  for env in dict.fromkeys(r['env'] for r in rows):
    for algo in algos:
      group = [r for r in rows if r['env'] == env and r['algo'] == algo]
      if not group:
        continue
      budget, values, updates = at_common_budget(group)
      out.append(
          dict(
              env=env,
              algo=algo,
              seeds=len(group),
              **iqm_interval(values),
              mean=float(np.nanmean(values)),
              per_seed=seed_values(values),
              env_steps=budget,
              learner_updates=updates,
              wall_seconds_per_seed=round(
                  float(np.mean([r['wall_seconds_per_seed'] for r in group])),
                  1,
              ),
          )
      )
  return out


def markdown(summary: Sequence[dict[str, Any]]) -> str:
  """The summary as a markdown table."""
  return tables.markdown(
      (
          'environment',
          'algorithm',
          'env steps / seed',
          'updates',
          'IQM [95% CI]',
          'per seed',
      ),
      (
          (
              tables.env_label(row['env']),
              row['algo'],
              f'{row["env_steps"]:,}',
              row['learner_updates'] or '',
              f'{row["iqm"]:.2f} [{row["ci_low"]:.2f}, {row["ci_high"]:.2f}]',
              row['per_seed'],
          )
          for row in summary
      ),
  )


def curve_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """curves.csv's rows: every evaluation point, and the entropy per chunk."""
  curves = []
  for r in rows:
    name = dict(env=r['env'], algo=r['algo'], seed=r['seed'])
    steps, updates, returns = r['eval_curve']
    for i, (x, y) in enumerate(zip(steps, returns)):
      curves.append(
          name
          | dict(
              kind='eval',
              env_steps=int(x),
              learner_updates='' if updates is None else int(updates[i]),
              value=float(y),
          )
      )
    if r['entropy_curve'] is not None:
      for x, y in zip(*r['entropy_curve']):
        if np.isfinite(y):
          curves.append(
              name
              | dict(
                  kind='entropy',
                  env_steps='',
                  learner_updates=int(x),
                  value=float(y),
              )
          )
  return curves


def write(
    out: pathlib.Path, rows: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
  """Writes results.csv, summary.csv, curves.csv and curves.png in `out`.

  Args:
    out: the study's directory.
    rows: `per_seed_rows` of its records (not empty).

  Returns:
    The summary's rows.
  """
  plain = [
      {k: v for k, v in r.items() if not k.endswith('_curve')} for r in rows
  ]
  tables.write_csv(out / 'results.csv', plain, digits=4)
  summary = summary_rows(rows)
  tables.write_csv(out / 'summary.csv', summary, digits=4)
  tables.write_csv(out / 'curves.csv', curve_rows(rows), digits=4)
  plots.seed_curves(rows, out / 'curves.png')
  return summary
