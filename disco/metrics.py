"""Summary statistics of learning curves.

Per-episode average returns over a curve's final window, smoothing,
Crafter's score, and statistics across seeds (IQM, bootstrap intervals)
that skip and count the seeds without a value.
"""

import dataclasses
import math

import numpy as np

# The share of the last iterations that the final average return covers.
FINAL_FRACTION = 0.1


def final_window(num_iterations: int, fraction: float = FINAL_FRACTION) -> int:
  """How many of the last iterations the final average return covers (>= 1)."""
  return max(1, math.ceil(fraction * num_iterations))


def final_average_return(
    total_returns: np.ndarray,
    num_episodes: np.ndarray,
    fraction: float = FINAL_FRACTION,
) -> tuple[float, float]:
  """Episode-weighted average return over the last `fraction` of a curve.

  Args:
    total_returns: [N] summed returns of the episodes ended per iteration.
    num_episodes: [N] their number.
    fraction: the share of the N iterations covered, rounded up.

  Returns:
    (summed returns / number of the episodes that ended in those iterations,
    that number); the average is NaN if no episode ended there.
  """
  window = final_window(len(total_returns), fraction)
  total = float(np.sum(np.asarray(total_returns, np.float64)[-window:]))
  count = float(np.sum(np.asarray(num_episodes, np.float64)[-window:]))
  return (total / count if count > 0 else math.nan), count


def final_mean(
    env_steps: np.ndarray,
    values: np.ndarray,
    fraction: float = FINAL_FRACTION,
) -> float:
  """Mean of a logged column over the rows of a run's last steps.

  Args:
    env_steps: [N] environment steps at each row's end (increasing).
    values: [N] the column (NaN where a row has none).
    fraction: the share of the run's environment steps covered.

  Returns:
    The mean of the finite values of the rows ending after `1 - fraction`
    of the steps; NaN if there are none.
  """
  env_steps = np.asarray(env_steps, np.float64)
  values = np.asarray(values, np.float64)
  window = (env_steps > (1.0 - fraction) * env_steps[-1]) & ~np.isnan(values)
  return float(np.mean(values[window])) if window.any() else math.nan


def crafter_score(success_rates: np.ndarray) -> float:
  """Crafter's score: the geometric mean of 1 + each success rate, minus 1.

  Hafner (2022), "Benchmarking the spectrum of agent capabilities": each
  achievement's success rate is the percentage of episodes that unlocked it
  at least once.

  Args:
    success_rates: [A] percentages in [0, 100].

  Returns:
    The score, in [0, 100].
  """
  rates = np.asarray(success_rates, np.float64)
  return float(np.exp(np.mean(np.log1p(rates))) - 1.0)


def crafter_score_curve(
    env_steps: np.ndarray,
    episodes: np.ndarray,
    unlocked: np.ndarray,
    rows: int,
) -> tuple[np.ndarray, np.ndarray]:
  """Crafter's score over consecutive groups of `rows` log rows.

  One row's few episodes give a noisy score; a group pools them.

  Args:
    env_steps: [R] environment steps at each row.
    episodes: [R] training episodes ended in each row.
    unlocked: [R, A] of those, how many unlocked each achievement.
    rows: rows per group (a trailing part group is dropped).

  Returns:
    ([G] each group's last environment steps, [G] its score); groups
    without an episode are left out.
  """
  xs, ys = [], []
  for start in range(0, len(env_steps) - rows + 1, rows):
    group = slice(start, start + rows)
    count = np.sum(episodes[group])
    if count:
      xs.append(env_steps[group][-1])
      ys.append(crafter_score(100.0 * np.sum(unlocked[group], axis=0) / count))
  return np.asarray(xs), np.asarray(ys)


def final_training_measures(
    env_steps: np.ndarray,
    train_return: np.ndarray,
    train_episodes: np.ndarray,
    unlocked: np.ndarray | None = None,
    names: tuple[str, ...] = (),
    fraction: float = FINAL_FRACTION,
) -> dict[str, float]:
  """Crafter's measures of the training episodes over a run's last steps.

  The rows (chunks or iterations) that end after `1 - fraction` of the
  run's environment steps: their episodes' average return and, given the
  achievements, their Crafter score and success rates.

  Args:
    env_steps: [N] environment steps at each row's end (increasing).
    train_return: [N] the average return of the row's ended episodes (NaN
      where none ended).
    train_episodes: [N] how many ended.
    unlocked: [N, A] how many of them unlocked each achievement, or None.
    names: the A achievements' names (default: their indices).
    fraction: the share of the run's environment steps covered.

  Returns:
    'train_return', 'train_episodes' and, with `unlocked`, 'crafter_score'
    and 'success/<name>' (percentages) for each achievement; NaN where no
    episode ended.
  """
  env_steps = np.asarray(env_steps, np.float64)
  counts = np.asarray(train_episodes, np.float64)
  if not len(env_steps):
    return dict(train_return=math.nan, train_episodes=0.0)
  window = (env_steps > (1.0 - fraction) * env_steps[-1]) & (counts > 0)
  count = float(np.sum(counts[window]))
  totals = np.asarray(train_return, np.float64)[window] * counts[window]
  out = dict(
      train_return=float(np.sum(totals)) / count if count else math.nan,
      train_episodes=count,
  )
  if unlocked is not None:
    unlocked = np.asarray(unlocked, np.float64)[window]
    rates = (
        100.0 * np.sum(unlocked, axis=0) / count
        if count
        else np.full(unlocked.shape[1:], math.nan)
    )
    out['crafter_score'] = crafter_score(rates) if count else math.nan
    names = names or tuple(str(i) for i in range(len(rates)))
    out.update({f'success/{n}': float(r) for n, r in zip(names, rates)})
  return out


def smoothed_returns(
    total_returns: np.ndarray, num_episodes: np.ndarray, window: int
) -> np.ndarray:
  """Episode-weighted average return over trailing windows of iterations.

  Args:
    total_returns: [N] summed returns of the episodes ended per iteration.
    num_episodes: [N] their number.
    window: iterations per window (fewer at the start of the curve).

  Returns:
    [N] returns / episodes over iterations (i - window, i]; NaN where no
    episode ended in the window.
  """
  totals = np.concatenate([[0.0], np.cumsum(total_returns, dtype=np.float64)])
  counts = np.concatenate([[0.0], np.cumsum(num_episodes, dtype=np.float64)])
  ends = np.arange(1, len(total_returns) + 1)
  starts = np.maximum(ends - window, 0)
  total = totals[ends] - totals[starts]
  count = counts[ends] - counts[starts]
  with np.errstate(invalid='ignore', divide='ignore'):
    return np.where(count > 0, total / count, np.nan)


@dataclasses.dataclass(frozen=True)
class SeedSummary:
  """Mean and spread of one number over seeds, NaN seeds left out.

  Attributes:
    mean: mean over the finite values (NaN if none).
    std: their sample standard deviation, ddof=1 (NaN if fewer than two).
    min: the smallest finite value (NaN if none).
    max: the largest finite value (NaN if none).
    num_finite: how many seeds had a finite value.
    num_seeds: how many seeds there were.
  """

  mean: float
  std: float
  min: float
  max: float
  num_finite: int
  num_seeds: int


def summarize_seeds(values: np.ndarray) -> SeedSummary:
  """Mean, standard deviation, min and max of per-seed values [S]."""
  values = np.asarray(values, np.float64).reshape(-1)
  finite = values[np.isfinite(values)]
  if not finite.size:
    return SeedSummary(math.nan, math.nan, math.nan, math.nan, 0, values.size)
  return SeedSummary(
      mean=float(np.mean(finite)),
      std=float(np.std(finite, ddof=1)) if finite.size > 1 else math.nan,
      min=float(np.min(finite)),
      max=float(np.max(finite)),
      num_finite=int(finite.size),
      num_seeds=int(values.size),
  )


def seed_band(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Per-iteration mean, min and max over seeds of curves [S, N].

  NaN entries (e.g. windows without episodes) are left out; an iteration
  where every seed is NaN gives NaN.

  Returns:
    ([N] mean, [N] min, [N] max).
  """
  curves = np.asarray(curves, np.float64)
  finite = np.isfinite(curves)
  any_finite = finite.any(axis=0)
  with np.errstate(invalid='ignore', divide='ignore'):
    mean = np.where(finite, curves, 0.0).sum(0) / finite.sum(0)
  low = np.min(np.where(finite, curves, np.inf), axis=0)
  high = np.max(np.where(finite, curves, -np.inf), axis=0)
  return (
      np.where(any_finite, mean, np.nan),
      np.where(any_finite, low, np.nan),
      np.where(any_finite, high, np.nan),
  )


def interquartile_mean(values: np.ndarray) -> float:
  """The mean of the middle 50% of `values` (rliable's IQM).

  As `scipy.stats.trim_mean(values, 0.25)`: int(0.25 n) values are cut at
  each end, so for fewer than four values it is the plain mean. NaN values
  are left out; NaN if none is left.
  """
  finite = np.sort(np.asarray(values, np.float64).ravel())
  finite = finite[np.isfinite(finite)]
  if not finite.size:
    return math.nan
  cut = int(0.25 * finite.size)
  return float(np.mean(finite[cut : finite.size - cut]))


def bootstrap_interval(
    values: np.ndarray,
    statistic=interquartile_mean,
    *,
    confidence: float = 0.95,
    num_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
  """A percentile-bootstrap interval of `statistic` over `values`' seeds.

  Resamples the finite values with replacement `num_resamples` times
  (numpy's generator, `seed`) and returns the (1 - confidence) / 2 and
  (1 + confidence) / 2 quantiles of the statistic. With one value the
  interval is that value; NaN without any.
  """
  finite = np.asarray(values, np.float64).ravel()
  finite = finite[np.isfinite(finite)]
  if not finite.size:
    return math.nan, math.nan
  rng = np.random.default_rng(seed)
  picks = rng.integers(0, finite.size, size=(num_resamples, finite.size))
  stats = np.array([statistic(finite[p]) for p in picks])
  alpha = (1.0 - confidence) / 2.0
  low, high = np.quantile(stats, [alpha, 1.0 - alpha])
  return float(low), float(high)
