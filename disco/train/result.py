"""What a training run returns: `TrainResult`."""

import dataclasses

import haiku as hk
import numpy as np

from disco import metrics
from disco.train import rows as rows_lib
from disco.train.config import TrainConfig


@dataclasses.dataclass(frozen=True)
class TrainResult:
  """What `run_train` returns.

  Attributes:
    config: the run's settings.
    seeds: the seeds, in the order of `params` and of the logs' 'seed'.
    logs: one row per seed and chunk (with `config.log_every_iteration`,
      per seed and iteration; and per evaluation at step 0), as columns:
      'seed', 'step' (iterations done), 'env_steps', 'learner_steps',
      'train_return' (mean return of the training episodes that ended in
      the chunk; NaN if none), 'train_episodes', 'eval_return' (mean return
      of the evaluation episodes run at the chunk's end; NaN when none
      ran), 'eval_episodes', 'elapsed' (seconds since the run started or
      resumed) and the learner's logs averaged over the chunk
      ('logs/<name>', NaN before learning starts).
    params: the agents' final network parameters, one tree per seed.
    num_devices: the devices the run used.
  """

  config: TrainConfig
  seeds: tuple[int, ...]
  logs: dict[str, np.ndarray]
  params: list[hk.Params]
  num_devices: int

  def final_training(
      self, seed: int, fraction: float = metrics.FINAL_FRACTION
  ) -> dict[str, float]:
    """Crafter's measures of `seed`'s training episodes in the last steps.

    The average return of the training episodes that ended in the rows
    after `1 - fraction` of the run's environment steps, and where the
    environment counts achievements (Craftax-Classic) their Crafter score
    and success rates (`metrics.final_training_measures`).
    """
    # Every row but the evaluation before the first iteration.
    rows = (self.logs['seed'] == seed) & (self.logs['step'] > 0)
    names = tuple(
        k[len(rows_lib.UNLOCKED) :]
        for k in self.logs
        if k.startswith(rows_lib.UNLOCKED)
    )
    unlocked = None
    if names:
      unlocked = np.stack(
          [self.logs[rows_lib.UNLOCKED + n][rows] for n in names], axis=1
      )
    return metrics.final_training_measures(
        self.logs['env_steps'][rows],
        self.logs['train_return'][rows],
        self.logs['train_episodes'][rows],
        unlocked,
        names,
        fraction,
    )

  def curve(self, seed: int, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(env_steps, values) of `column` for `seed`, without NaN rows."""
    rows = self.logs['seed'] == seed
    x, y = self.logs['env_steps'][rows], self.logs[column][rows]
    keep = ~np.isnan(y)
    return x[keep], y[keep]
