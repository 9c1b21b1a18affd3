"""What an evaluation run returns (`EvalHistory`) and how it is filled.

`Recorder` collects the faithful loop's rows, reports them to the caller's
`progress_fn` and `log_fn`, and converts to and from checkpoint arrays so
that a resumed run returns the whole curve; `TrainRows` does the same for
the trainer's per-iteration rows (`EvalConfig(fast=True)`).
"""

from collections.abc import Callable, Mapping, Sequence
import dataclasses
import time
from typing import Any

import haiku as hk
import numpy as np

from disco import acting
from disco import logs as logs_lib
from disco import progress
from disco.eval import config as eval_config

ProgressFn = progress.ProgressFn
# (seed, iteration from 1, that iteration's row) -> None.
LogFn = Callable[[int, int, Mapping[str, float]], None]


@dataclasses.dataclass(frozen=True)
class RolloutRecord:
  """What `EvalConfig.record_rollouts` keeps (N iterations, L learner steps).

  Attributes:
    actions: [N, T, num_envs] actions of every rollout.
    rewards: [N, T, num_envs] rewards.
    discounts: [N, T, num_envs] bool discounts.
    sample_indices: [L, learner_batch_size] buffer positions sampled (0 = oldest).
    learner_step_index: [L] the iteration of each learner step.
  """

  actions: np.ndarray
  rewards: np.ndarray
  discounts: np.ndarray
  sample_indices: np.ndarray
  learner_step_index: np.ndarray


@dataclasses.dataclass(frozen=True)
class EvalHistory:
  """The learning curve of one run; one entry per loop iteration (N).

  Attributes:
    rule: the update rule's name.
    seed: the run's seed.
    steps: [N] environment steps taken so far, at the end of each iteration.
    avg_returns: [N] average return of the episodes that ended during the
      iteration's rollout (NaN if none did).
    total_returns: [N] sum of those returns.
    num_episodes: [N] how many episodes ended.
    logs: {name: [N]} scalar learner logs (means over devices), NaN for the
      iterations before learning starts.
    elapsed: [N] seconds from the start of `run_eval` to the end of each
      iteration (`fast=True`: from the start or resumption of the run to
      the end of the iteration's chunk, the trainer's 'elapsed').
    params: the agent network's final parameters (host arrays).
    rollouts: the recorded rollouts, if requested.
  """

  rule: str
  seed: int
  steps: np.ndarray
  avg_returns: np.ndarray
  total_returns: np.ndarray
  num_episodes: np.ndarray
  logs: Mapping[str, np.ndarray]
  elapsed: np.ndarray
  params: hk.Params | None = None
  rollouts: RolloutRecord | None = None

  def __len__(self) -> int:
    return len(self.steps)

  def columns(self) -> dict[str, np.ndarray]:
    """The per-iteration curve as named columns, named as in `log.csv`."""
    return dict(
        iteration=np.arange(1, len(self) + 1),
        env_steps=self.steps,
        avg_return=self.avg_returns,
        total_return=self.total_returns,
        num_episodes=self.num_episodes,
        elapsed=self.elapsed,
        **{k: self.logs[k] for k in sorted(self.logs)},
    )

  def first_iteration_reaching(self, threshold: float) -> int | None:
    """The first iteration (1-based) with average return >= `threshold`."""
    hits = np.flatnonzero(
        np.nan_to_num(self.avg_returns, nan=-np.inf) >= threshold
    )
    return int(hits[0]) + 1 if hits.size else None


class Recorder:
  """Collects the per-iteration scalars (and optional rollouts) of a run.

  Attributes:
    steps, totals, counts, elapsed: one entry per iteration recorded.
    logs: per iteration, the learner's scalar logs, or None before learning.
    actions, rewards, discounts: per iteration [T, num_envs] arrays (only
      with `record_rollouts`).
    sample_indices, learner_steps: per learner step, the buffer positions
      sampled and the iteration (from 0) (only with `record_rollouts`).
  """

  def __init__(
      self,
      config: eval_config.EvalConfig,
      seed: int,
      start_time: float,
      *,
      progress_fn: ProgressFn | None = None,
      progress_offset: int = 0,
      log_fn: LogFn | None = None,
  ):
    self._config = config
    self._seed = seed
    self._start = start_time
    self._elapsed_offset = 0.0
    self._progress_fn = progress_fn
    self._progress_offset = progress_offset
    self._log_fn = log_fn
    self.steps: list[int] = []
    self.totals: list[float] = []
    self.counts: list[float] = []
    self.elapsed: list[float] = []
    self.logs: list[dict[str, float] | None] = []
    self.actions, self.rewards, self.discounts = [], [], []
    self.sample_indices, self.learner_steps = [], []

  def __len__(self) -> int:
    return len(self.steps)

  def add(
      self,
      env_steps: int,
      total: float,
      count: float,
      logs: Mapping[str, float] | None,
      now: float | None = None,
  ) -> None:
    """Records one iteration and reports it to `log_fn` and `progress_fn`."""
    now = time.perf_counter() if now is None else now
    elapsed = now - self._start + self._elapsed_offset
    self.steps.append(env_steps)
    self.totals.append(total)
    self.counts.append(count)
    self.logs.append(None if logs is None else dict(logs))
    self.elapsed.append(elapsed)
    avg_return = float(acting.average_return(total, count))
    if self._log_fn is not None:
      row = dict(
          env_steps=float(env_steps),
          avg_return=avg_return,
          total_return=float(total),
          num_episodes=float(count),
          elapsed=elapsed,
      )
      self._log_fn(self._seed, len(self), row | dict(logs or {}))
    if self._progress_fn is not None:
      metrics = dict(
          env_steps=float(env_steps),
          avg_return=avg_return,
          num_episodes=float(count),
      )
      self._progress_fn(
          self._progress_offset + len(self), metrics | dict(logs or {})
      )

  def history(self, params: hk.Params | None) -> EvalHistory:
    """The `EvalHistory` of the iterations recorded, ending at `params`."""
    columns = dict(sorted(logs_lib.columns(r or {} for r in self.logs).items()))
    totals = np.asarray(self.totals, np.float64)
    counts = np.asarray(self.counts, np.float64)
    rollouts = None
    if self._config.record_rollouts:
      rollouts = RolloutRecord(**self._rollout_arrays())
    return EvalHistory(
        rule=self._config.rule,
        seed=self._seed,
        steps=np.asarray(self.steps, np.int64),
        avg_returns=acting.average_return(totals, counts),
        total_returns=totals,
        num_episodes=counts,
        logs=columns,
        elapsed=np.asarray(self.elapsed, np.float64),
        params=params,
        rollouts=rollouts,
    )

  def _rollout_arrays(self) -> dict[str, np.ndarray]:
    shape = (0, self._config.rollout_len, self._config.num_envs)
    batch = self._config.learner_batch_size

    def _stack(items: list[np.ndarray], dtype: type) -> np.ndarray:
      return np.asarray(items) if items else np.zeros(shape, dtype)

    return dict(
        actions=_stack(self.actions, np.int32),
        rewards=_stack(self.rewards, np.float32),
        discounts=_stack(self.discounts, np.bool_),
        sample_indices=np.asarray(self.sample_indices, np.int64).reshape(
            -1, batch
        ),
        learner_step_index=np.asarray(self.learner_steps, np.int64),
    )

  # --- Checkpoints. ---

  def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
    """The recorded curve as flat checkpoint arrays under `prefix`."""
    history = self.history(params=None)
    arrays = dict(
        steps=history.steps,
        total_returns=history.total_returns,
        num_episodes=history.num_episodes,
        elapsed=history.elapsed,
        learned=np.asarray([logs is not None for logs in self.logs], bool),
    )
    arrays.update(logs_lib.to_arrays(logs or {} for logs in self.logs))
    if self._config.record_rollouts:
      arrays.update(
          {f'rollouts/{k}': v for k, v in self._rollout_arrays().items()}
      )
    return {f'{prefix}/{k}': v for k, v in arrays.items()}

  def restore(self, arrays: Mapping[str, np.ndarray], prefix: str) -> None:
    """Takes the curve of `to_arrays(prefix)` as the iterations so far.

    Later iterations' `elapsed` continues from the last restored one.

    Raises:
      KeyError: if an array is missing.
    """
    head = prefix + '/'
    learned = arrays[head + 'learned']
    rows = logs_lib.from_arrays(arrays, head) or [{}] * len(learned)
    self.steps = [int(x) for x in arrays[head + 'steps']]
    self.totals = [float(x) for x in arrays[head + 'total_returns']]
    self.counts = [float(x) for x in arrays[head + 'num_episodes']]
    self.elapsed = [float(x) for x in arrays[head + 'elapsed']]
    self.logs = [row if done else None for row, done in zip(rows, learned)]
    self._elapsed_offset = self.elapsed[-1] if self.elapsed else 0.0
    if self._config.record_rollouts:
      self.actions = list(arrays[head + 'rollouts/actions'])
      self.rewards = list(arrays[head + 'rollouts/rewards'])
      self.discounts = list(arrays[head + 'rollouts/discounts'])
      self.sample_indices = list(arrays[head + 'rollouts/sample_indices'])
      self.learner_steps = [
          int(x) for x in arrays[head + 'rollouts/learner_step_index']
      ]


class TrainRows:
  """The trainer's per-iteration rows as the evaluation loops report them.

  Pass `log` and `progress` to `Trainer.run` (with `log_every_iteration`);
  `histories` turns its `TrainResult` into one `EvalHistory` per seed.
  """

  def __init__(
      self,
      config: eval_config.EvalConfig,
      *,
      progress_fn: ProgressFn | None = None,
      log_fn: LogFn | None = None,
  ):
    self._config = config
    self._progress_fn = progress_fn
    self._log_fn = log_fn

  def log(self, seed: int, row: Mapping[str, float]) -> None:
    """A trainer's `log_fn`: reports `row` as `log_fn(seed, iteration, ...)`."""
    if self._log_fn is not None:
      self._log_fn(seed, int(row['step']), _eval_row(row))

  def progress(self, step: int, row: Mapping[str, float]) -> None:
    """A trainer's `progress_fn`: reports the eval loops' metrics."""
    if self._progress_fn is not None:
      metrics = _eval_row(row)
      del metrics['total_return'], metrics['elapsed']
      self._progress_fn(step, metrics)

  def histories(
      self, logs: Mapping[str, np.ndarray], seeds: Sequence[int], params: Any
  ) -> list[EvalHistory]:
    """One `EvalHistory` per seed from `TrainResult.logs` and `.params`."""
    out = []
    for seed, seed_params in zip(seeds, params, strict=True):
      rows = (logs['seed'] == seed) & (logs['step'] > 0)
      counts = logs['train_episodes'][rows]
      averages = logs['train_return'][rows]
      out.append(
          EvalHistory(
              rule=self._config.rule,
              seed=int(seed),
              steps=logs['env_steps'][rows].astype(np.int64),
              avg_returns=averages,
              total_returns=_totals(averages, counts),
              num_episodes=counts,
              logs={
                  k[len(logs_lib.LOGS) :]: v[rows]
                  for k, v in logs.items()
                  if k.startswith(logs_lib.LOGS)
              },
              elapsed=logs['elapsed'][rows],
              params=seed_params,
          )
      )
    return out


def _totals(averages: Any, counts: Any) -> Any:
  """Sums of returns from their means and counts (0 where none ended)."""
  return np.where(np.asarray(counts) > 0, np.nan_to_num(averages) * counts, 0.0)


def _eval_row(row: Mapping[str, float]) -> dict[str, float]:
  """A trainer's log row as the evaluation loops' `log_fn` row."""
  count = float(row['train_episodes'])
  average = float(row['train_return'])
  return dict(
      env_steps=float(row['env_steps']),
      avg_return=average,
      total_return=float(_totals(average, count)),
      num_episodes=count,
      elapsed=float(row['elapsed']),
  ) | {
      k[len(logs_lib.LOGS) :]: v
      for k, v in row.items()
      if k.startswith(logs_lib.LOGS)
  }
