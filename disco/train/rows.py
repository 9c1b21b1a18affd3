"""The trainer's log rows: one per seed and chunk (or iteration), as columns.

`make_row` turns a chunk's (or an iteration's) outputs into a seed's row;
`disco.logs` gathers rows into the columns of `TrainResult.logs` and keeps
them in a checkpoint.
"""

from collections.abc import Mapping
from typing import Any

import jax

from disco import logs as logs_lib
from disco import metrics
from disco.train.config import TrainConfig

# Columns of the training episodes that unlocked each achievement.
UNLOCKED = 'unlocked/'


def make_row(
    config: TrainConfig,
    warmup: int,
    seed: int,
    s: int,
    step: int,
    outputs: Mapping[str, Any],
    eval_outputs: Mapping[str, Any] | None,
    achievement_names: tuple[str, ...] = (),
) -> dict[str, float]:
  """Seed `s`'s log row of the iterations ending at iteration `step`.

  Args:
    config: the run's settings.
    warmup: the iterations that only act (`Trainer.num_warmup_steps`).
    seed: the seed, for the row's 'seed'.
    s: its index in the outputs' leaves.
    step: iterations done.
    outputs: [S] sums over the iterations of 'total_return',
      'num_episodes' and (once learning) 'logs', and 'num_iterations'
      (how many); empty for a row of an evaluation alone.
    eval_outputs: [S] 'total_return' and 'num_episodes' of the evaluation
      at `step`, or None.
    achievement_names: the achievements the environment counts, whose
      [S, A] counts are the outputs' 'unlocked'.

  Returns:
    The row (see `TrainResult.logs`).
  """
  nan = float('nan')
  # Counts are ints, so that the CSV shows them as such.
  row = dict(
      seed=seed,
      step=step,
      env_steps=step * config.env_steps_per_step,
      learner_steps=max(0, step - warmup) * config.learner_steps_per_step,
      train_return=nan,
      train_episodes=0,
      eval_return=nan,
      eval_episodes=0,
  )
  if 'total_return' in outputs:
    count = int(outputs['num_episodes'][s])
    row['train_episodes'] = count
    row['train_return'] = (
        float(outputs['total_return'][s]) / count if count else nan
    )
  if 'unlocked' in outputs:
    counts = [int(c) for c in outputs['unlocked'][s]]
    for name, c in zip(achievement_names, counts):
      row[UNLOCKED + name] = c
    episodes = row['train_episodes']
    row['crafter_score'] = (
        metrics.crafter_score([100.0 * c / episodes for c in counts])
        if episodes
        else nan
    )
  if eval_outputs is not None:
    count = int(eval_outputs['num_episodes'][s])
    row['eval_episodes'] = count
    row['eval_return'] = (
        float(eval_outputs['total_return'][s]) / count if count else nan
    )
  for name, value in outputs.get('logs', {}).items():
    row[logs_lib.LOGS + name] = float(value[s]) / outputs['num_iterations']
  return row


def iteration_outputs(outputs: Mapping[str, Any], i: int) -> dict[str, Any]:
  """Iteration `i`'s outputs, from a chunk's kept per iteration [S, rows]."""
  one = jax.tree.map(lambda x: x[:, i], dict(outputs))
  return one | dict(num_iterations=1)
