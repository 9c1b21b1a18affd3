"""A trainer run summed up per seed: final returns, curves and its speed.

`train` runs `disco.train.run_train` and returns a record that keeps, per
seed, the final return (the mean return of the last evaluation's
episodes), the training return over the last 10% of iterations
(episode-weighted), and the evaluation and training curves; and, for the
run, its wall time split into startup and seconds per iteration. It is the
form `disco.studies.ppo_runs` gives a PPO run, so the two are tabled alike
(`disco.studies.tables`).
"""

from collections.abc import Mapping, Sequence
import math
import time
from typing import Any

import numpy as np

from disco import metrics
from disco import progress
from disco.studies import pieces
from disco.studies import records


class Clock:
  """A progress function that notes when each chunk ended, then passes on."""

  def __init__(self, inner: progress.ProgressFn | None = None):
    self._inner = inner
    self.start = time.perf_counter()
    self.points: list[tuple[int, float]] = []

  def __call__(self, step: int, row: Mapping[str, float]) -> None:
    self.points.append((step, time.perf_counter() - self.start))
    if self._inner is not None:
      self._inner(step, row)


def iteration_timing(
    points: Sequence[tuple[int, float]],
    first_learning_step: int,
    num_steps: int,
    wall_seconds: float,
) -> tuple[float, float]:
  """(seconds per iteration, startup seconds) of a trainer run.

  Args:
    points: (iterations done, seconds since the start) after each chunk.
    first_learning_step: the last iteration that only acted; the rate is
      measured after the first chunk past it (which compiles the learner).
    num_steps: the run's iterations.
    wall_seconds: the run's wall time.

  Returns:
    The steady rate (evaluations included) and the rest of the wall time;
    NaN where too few chunks ran.
  """
  after = [(s, t) for s, t in points if s > first_learning_step]
  if len(after) < 2 or after[-1][0] == after[0][0]:
    return math.nan, math.nan
  rate = (after[-1][1] - after[0][1]) / (after[-1][0] - after[0][0])
  return rate, wall_seconds - rate * num_steps


def seed_summary(
    logs: Mapping[str, np.ndarray], seed: int, num_steps: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  """One seed's finals and curve points from a run's log columns.

  Args:
    logs: `disco.train.TrainResult.logs` (columns [rows], all seeds).
    seed: the seed.
    num_steps: the run's iterations (the last 10% give the training return).

  Returns:
    The seed's finals (final_return, final_eval_episodes,
    final_train_return, final_train_episodes, env_steps, learner_steps)
    and its curve points (kind 'eval' or 'train': every log row with
    episodes of that kind).
  """
  rows = logs['seed'] == seed
  col = {k: v[rows] for k, v in logs.items()}
  tail = col['step'] > num_steps - metrics.final_window(num_steps)
  train_episodes = float(np.sum(col['train_episodes'][tail]))
  train_total = float(
      np.nansum(col['train_return'][tail] * col['train_episodes'][tail])
  )
  finals = dict(
      seed=int(seed),
      final_return=float(col['eval_return'][-1]),
      final_eval_episodes=int(col['eval_episodes'][-1]),
      final_train_return=(
          train_total / train_episodes if train_episodes else math.nan
      ),
      final_train_episodes=int(train_episodes),
      env_steps=int(col['env_steps'][-1]),
      learner_steps=int(col['learner_steps'][-1]),
  )
  curves = []
  for kind in ('eval', 'train'):
    episodes = col[f'{kind}_episodes']
    for point, i in enumerate(np.flatnonzero(episodes > 0)):
      curves.append(
          dict(
              seed=int(seed),
              point=point,
              kind=kind,
              env_steps=int(col['env_steps'][i]),
              value=float(col[f'{kind}_return'][i]),
              episodes=int(episodes[i]),
          )
      )
  return finals, curves


def train(
    config: Any,
    *,
    num_seeds: int,
    first_learning_step: int,
    update_rule_params: Any = None,
    label: str = 'train',
    show_progress: bool = True,
) -> dict[str, Any]:
  """Trains `num_seeds` seeds of `config` together; returns their record.

  Args:
    config: a `disco.train.TrainConfig`.
    num_seeds: seeds `config.seed`... trained together.
    first_learning_step: the last iteration that only acts (for the timing).
    update_rule_params: the rule's parameters (None: the config's).
    label: the progress bar's title.
    show_progress: a progress bar.

  Returns:
    status ('done'), settings (the config and the seeds, as
    `disco.studies.pieces` keeps them), wall_seconds, startup_seconds,
    seconds_per_iteration, iterations, `seeds` (`seed_summary`'s finals per
    seed) and `curves` (all seeds' points).
  """
  from disco import train as train_lib  # pylint: disable=g-import-not-at-top

  start = time.perf_counter()
  with pieces.progress_bar(config, label, show_progress) as bar:
    clock = Clock(bar)
    result = train_lib.run_train(
        config,
        num_seeds=num_seeds,
        update_rule_params=update_rule_params,
        progress_fn=clock,
    )
  wall = time.perf_counter() - start
  rate, startup = iteration_timing(
      clock.points, first_learning_step, config.num_steps, wall
  )
  seeds, curves = [], []
  for seed in result.seeds:
    finals, points = seed_summary(result.logs, seed, config.num_steps)
    seeds.append(finals)
    curves += points
  return dict(
      status=records.DONE,
      settings=dict(config=config.to_dict(), num_seeds=num_seeds),
      wall_seconds=wall,
      startup_seconds=startup,
      seconds_per_iteration=rate,
      iterations=config.num_steps,
      seeds=seeds,
      curves=curves,
  )
