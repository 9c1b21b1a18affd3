"""The agent's step size chosen per rule, as the paper tunes it.

The paper tunes only the agent's learning rate (over {1e-4, 3e-4, 5e-4})
on one environment. `select_learning_rates` keeps, per rule, the rate with
the highest mean final return over seeds; `markdown` tables the choice.
"""

from collections.abc import Mapping, Sequence
import math
from typing import Any

import numpy as np

from disco import metrics
from disco.studies import tables

COLUMNS = (
    'env',
    'rule',
    'learning_rate',
    'mean_final_return',
    'std',
    'min',
    'max',
    'seeds',
    'chosen',
    'run_wall_seconds',
)
# How `tables.read_csv` reads a selection CSV back.
PARSERS = dict(
    env=str,
    rule=str,
    learning_rate=float,
    mean_final_return=tables.float_or_nan,
    std=tables.float_or_nan,
    min=tables.float_or_nan,
    max=tables.float_or_nan,
    seeds=int,
    chosen=tables.true,
    run_wall_seconds=tables.float_or_zero,
)


def select_learning_rates(
    finals: Mapping[str, Mapping[float, Sequence[float]]],
) -> list[dict[str, Any]]:
  """Per rule, the rate with the highest mean final return over seeds.

  Args:
    finals: rule -> learning rate -> the seeds' final returns (NaN: a seed
      without a finished evaluation episode, left out of its mean). Rates
      in the order they were listed.

  Returns:
    One row per rule and rate (`COLUMNS` less env and wall time): mean,
    std (ddof=1), min and max over seeds, the seeds, and `chosen` (True for
    exactly one rate per rule: the highest mean; ties go to the rate listed
    first; a rate without any finite return loses to any with one, and if
    none has one, the first is chosen).

  Raises:
    ValueError: a rule without rates.
  """
  rows = []
  for rule, by_rate in finals.items():
    if not by_rate:
      raise ValueError(f'no learning rates for rule {rule!r}')
    group = []
    for rate, values in by_rate.items():
      summary = metrics.summarize_seeds(np.asarray(values, np.float64))
      group.append(
          dict(
              rule=rule,
              learning_rate=float(rate),
              mean_final_return=summary.mean,
              std=summary.std,
              min=summary.min,
              max=summary.max,
              seeds=summary.num_seeds,
              chosen=False,
          )
      )

    def _rank(i: int) -> tuple[float, int]:
      mean = group[i]['mean_final_return']
      return (-math.inf if math.isnan(mean) else mean, -i)

    group[max(range(len(group)), key=_rank)]['chosen'] = True
    rows.extend(group)
  return rows


def chosen_rates(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
  """rule -> its chosen learning rate, from `select_learning_rates` rows."""
  return {r['rule']: float(r['learning_rate']) for r in rows if r['chosen']}


def markdown(rows: Sequence[Mapping[str, Any]]) -> str:
  """The selection as a markdown table (rows with `env`)."""
  cells = []
  for r in rows:
    if math.isnan(r['mean_final_return']):
      summary = 'no episode ended'
    else:
      std = 'n/a' if math.isnan(r['std']) else f'{r["std"]:.3g}'
      summary = (
          f'{r["mean_final_return"]:.3g} ± {std} [{r["min"]:.3g},'
          f' {r["max"]:.3g}]'
      )
    cells.append((
        tables.env_label(r['env']),
        r['rule'],
        f'{r["learning_rate"]:g}',
        summary,
        'yes' if r['chosen'] else '',
    ))
  return tables.markdown(
      (
          'environment',
          'rule',
          'learning rate',
          'final return: mean ± std [min, max]',
          'chosen',
      ),
      cells,
  )
