"""The tables of runs summed up per seed: results.csv, curves.csv, markdown.

For records in the form of `disco.studies.finals.train` (the trainer) and
`disco.studies.ppo_runs.run` (rejax's PPO), with `env`, `algo` and
`learning_rate` added:

  results.csv  one row per environment, algorithm and seed: learning rate,
               final return and its episodes, training return, env steps,
               learner steps (the trainer's), the run's wall time, whether
               the row is selected on (`disco.studies.selection`), and the
               status ('done' or 'not run: ...').
  curves.csv   per environment, algorithm, seed and point: kind ('eval':
               evaluation episodes; 'train': training episodes of a chunk
               of iterations, the trainer's only), env steps, mean return
               and episodes.

`markdown` tables results.csv's rows: final return mean ± std [min, max]
over seeds, one line per environment and algorithm.
"""

from collections.abc import Mapping, Sequence
import math
from typing import Any

from disco.studies import records
from disco.studies import tables

RESULT_COLUMNS = (
    'env',
    'algo',
    'seed',
    'learning_rate',
    'final_return',
    'final_eval_episodes',
    'final_train_return',
    'final_train_episodes',
    'env_steps',
    'learner_steps',
    'run_wall_seconds',
    'selected_on',
    'status',
)
# How `tables.read_csv` reads a results.csv back.
RESULT_PARSERS = dict(
    env=str,
    algo=str,
    seed=int,
    learning_rate=tables.float_or_nan,
    final_return=tables.float_or_nan,
    final_eval_episodes=tables.int_or_zero,
    final_train_return=tables.float_or_nan,
    final_train_episodes=tables.int_or_zero,
    env_steps=tables.int_or_none,
    learner_steps=tables.int_or_none,
    run_wall_seconds=tables.float_or_zero,
    selected_on=tables.true,
    status=str,
)
CURVE_COLUMNS = (
    'env',
    'algo',
    'seed',
    'point',
    'kind',
    'env_steps',
    'return',
    'episodes',
)


def result_rows(
    record: Mapping[str, Any], selected_on: bool = False
) -> list[dict[str, Any]]:
  """One results.csv row per seed of a finished run's record."""
  rows = []
  for seed in record['seeds']:
    rows.append(
        dict(
            env=record['env'],
            algo=record['algo'],
            seed=seed['seed'],
            learning_rate=record['learning_rate'],
            final_return=seed['final_return'],
            final_eval_episodes=seed['final_eval_episodes'],
            final_train_return=seed['final_train_return'],
            final_train_episodes=seed['final_train_episodes'],
            env_steps=seed['env_steps'],
            learner_steps=seed['learner_steps'],
            run_wall_seconds=round(float(record['wall_seconds']), 1),
            selected_on=selected_on,
            status=record['status'],
        )
    )
  return rows


def not_run_rows(
    env: str,
    algo: str,
    learning_rate: float | None,
    seeds: Sequence[int],
    reason: str,
) -> list[dict[str, Any]]:
  """results.csv rows of a run that could not be run, and why."""
  return [
      dict(
          env=env,
          algo=algo,
          seed=seed,
          learning_rate=learning_rate,
          final_return=math.nan,
          final_eval_episodes=0,
          final_train_return=math.nan,
          final_train_episodes=0,
          env_steps=None,
          learner_steps=None,
          run_wall_seconds=0.0,
          selected_on=False,
          status=f'not run: {reason}',
      )
      for seed in seeds
  ]


def curve_rows(record: Mapping[str, Any]) -> list[dict[str, Any]]:
  """curves.csv rows of a run's record."""
  return [
      dict(
          env=record['env'],
          algo=record['algo'],
          seed=c['seed'],
          point=c['point'],
          kind=c['kind'],
          env_steps=c['env_steps'],
          episodes=c['episodes'],
          **{'return': c['value']},
      )
      for c in record['curves']
  ]


def markdown(
    rows: Sequence[Mapping[str, Any]],
    selection: Sequence[Mapping[str, Any]] = (),
    notes: Sequence[str] = (),
) -> str:
  """The results as a markdown table, one line per environment and algorithm.

  Args:
    rows: results.csv rows.
    selection: `disco.studies.selection` rows (for the wall time of the
      selection runs that are not in the table).
    notes: lines under the table (what its numbers are).

  Returns:
    The table, a note on the rows selected on (marked †) if any, `notes`,
    and the total wall time of the runs.
  """
  groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
  for row in rows:
    groups.setdefault((row['env'], row['algo']), []).append(row)
  lines = []
  table_seconds = 0.0
  any_selected = False
  for (env, algo), group in groups.items():
    first = group[0]
    selected = bool(first['selected_on'])
    any_selected |= selected
    env_cell = tables.env_label(env) + (' †' if selected else '')
    rate = first['learning_rate']
    rate_cell = '-' if rate is None or math.isnan(rate) else f'{rate:g}'
    if first['status'] != records.DONE:
      status = first['status']
      lines.append(
          (env_cell, algo, rate_cell, status, '-', len(group), '-', '-')
      )
      continue
    final = tables.seeds_cell([r['final_return'] for r in group])
    train = '-'
    if algo != 'ppo':
      train = tables.seeds_cell([r['final_train_return'] for r in group])
    steps = sorted({r['env_steps'] for r in group if r['env_steps']})
    wall = float(first['run_wall_seconds'])
    table_seconds += wall
    lines.append((
        env_cell,
        algo,
        rate_cell,
        final,
        train,
        len(group),
        ', '.join(f'{s:,}' for s in steps),
        f'{wall / 60:.1f} min',
    ))
  text = [
      tables.markdown(
          (
              'environment',
              'algorithm',
              'learning rate',
              'final return: mean ± std [min, max]',
              'training return, last 10%',
              'seeds',
              'env steps per seed',
              'wall time (all seeds)',
          ),
          lines,
      ),
      '',
  ]
  if any_selected:
    text.append(
        '† The learning-rate selection environment: its disco and'
        ' actor_critic rows are the best of the rates tried, chosen on these'
        ' very runs (selected on); the other rows are not.'
    )
  text += notes
  other = sum(
      float(r['run_wall_seconds']) for r in selection if not r['chosen']
  )
  total = table_seconds + other
  runs = f'Runs: {total / 60:.1f} min wall in total'
  if other:
    runs += (
        f' ({table_seconds / 60:.1f} min in the table, {other / 60:.1f} min'
        ' for the selection runs at the rates not chosen)'
    )
  text.append(runs + '.')
  return '\n'.join(text)


def timing_line(label: str, record: Mapping[str, Any]) -> str:
  """A line on a finished run's wall time, how it was spent, and its finals.

  The trainer's runs: startup (environment, compiling and the first
  evaluation: the wall time less the iterations at the steady rate) and
  seconds per iteration; PPO's: compiling.
  """
  line = f'{label}: {record["wall_seconds"]:.0f} s'
  if 'compile_seconds' in record:
    line += f' (compiling {record["compile_seconds"]:.0f} s)'
  else:
    line += (
        f' (startup ~{record["startup_seconds"]:.0f} s,'
        f' {record["seconds_per_iteration"]:.2f} s per iteration,'
        f' {record["iterations"]} iterations)'
    )
  finals = tables.seeds_cell([s['final_return'] for s in record['seeds']])
  return f'{line}; final return {finals}'
