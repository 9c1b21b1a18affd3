"""Tests for `disco.metrics`, on numbers worked out by hand."""

import math

import numpy as np

from disco import metrics


def test_final_window_rounds_up_and_covers_at_least_one_iteration():
  assert metrics.final_window(20) == 2
  assert metrics.final_window(11) == 2
  assert metrics.final_window(5) == 1
  assert metrics.final_window(1) == 1
  assert metrics.final_window(10, fraction=0.5) == 5


def test_final_average_return_weights_episodes_over_the_last_tenth():
  # 20 iterations: the last 2 count. 3 episodes summing to 6, then none.
  totals = [100.0] * 18 + [6.0, 0.0]
  counts = [1.0] * 18 + [3.0, 0.0]
  assert metrics.final_average_return(totals, counts) == (2.0, 3.0)
  # 11 iterations: ceil(1.1) = 2 count; (4 + 2) / (1 + 2).
  totals = [50.0] * 9 + [4.0, 2.0]
  counts = [1.0] * 9 + [1.0, 2.0]
  assert metrics.final_average_return(totals, counts) == (2.0, 3.0)
  # A quarter: ceil(2.75) = 3 count; (50 + 4 + 2) / (1 + 1 + 2).
  assert metrics.final_average_return(
      np.asarray(totals), np.asarray(counts), fraction=0.25
  ) == (14.0, 4.0)


def test_final_average_return_without_episodes_is_nan():
  final, episodes = metrics.final_average_return([1.0, 0.0], [1.0, 0.0])
  assert math.isnan(final) and episodes == 0.0


def test_smoothed_returns_use_trailing_episode_weighted_windows():
  totals = np.array([2.0, 0.0, 6.0, 0.0, 0.0])
  counts = np.array([1.0, 0.0, 2.0, 0.0, 0.0])
  smoothed = metrics.smoothed_returns(totals, counts, window=2)
  np.testing.assert_allclose(smoothed[:4], [2.0, 2.0, 3.0, 3.0])
  assert math.isnan(smoothed[4])


def test_summarize_seeds_leaves_out_nan_seeds():
  summary = metrics.summarize_seeds([1.0, math.nan, 3.0, 5.0])
  assert summary == metrics.SeedSummary(
      mean=3.0, std=2.0, min=1.0, max=5.0, num_finite=3, num_seeds=4
  )


def test_summarize_seeds_of_one_or_no_finite_value():
  one = metrics.summarize_seeds(np.array([2.5]))
  assert (one.mean, one.min, one.max, one.num_finite) == (2.5, 2.5, 2.5, 1)
  assert math.isnan(one.std)
  none = metrics.summarize_seeds([math.nan, math.nan])
  assert none.num_finite == 0 and none.num_seeds == 2
  assert all(math.isnan(v) for v in (none.mean, none.std, none.min, none.max))


def test_seed_band_over_finite_seeds():
  curves = np.array([
      [1.0, math.nan, math.nan],
      [3.0, 4.0, math.nan],
  ])
  mean, low, high = metrics.seed_band(curves)
  np.testing.assert_array_equal(mean, [2.0, 4.0, math.nan])
  np.testing.assert_array_equal(low, [1.0, 4.0, math.nan])
  np.testing.assert_array_equal(high, [3.0, 4.0, math.nan])


def test_interquartile_mean_cuts_a_quarter_at_each_end():
  assert metrics.interquartile_mean([1.0, 2.0, 3.0]) == 2.0  # Plain mean.
  values = [100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -100.0]  # Cut 2 each end.
  assert metrics.interquartile_mean(values) == 3.5
  assert metrics.interquartile_mean([np.nan, 2.0, 4.0]) == 3.0
  assert math.isnan(metrics.interquartile_mean([np.nan]))


def test_bootstrap_interval_brackets_the_statistic_and_narrows_with_data():
  rng = np.random.default_rng(1)
  few = rng.normal(5.0, 1.0, size=3)
  many = rng.normal(5.0, 1.0, size=300)
  low3, high3 = metrics.bootstrap_interval(few)
  low, high = metrics.bootstrap_interval(many)
  assert low3 <= metrics.interquartile_mean(few) <= high3
  assert low <= 5.0 <= high
  assert high - low < high3 - low3
  assert metrics.bootstrap_interval([2.0]) == (2.0, 2.0)
  assert metrics.bootstrap_interval(few) == (low3, high3)  # Seeded.
  assert all(math.isnan(x) for x in metrics.bootstrap_interval([np.nan]))


def test_crafter_score_is_the_geometric_mean_of_one_plus_the_rates():
  assert metrics.crafter_score([0.0] * 22) == 0.0
  assert math.isclose(metrics.crafter_score([100.0] * 22), 100.0)
  # exp((log 101 + log 1) / 2) - 1 = sqrt(101) - 1.
  assert math.isclose(metrics.crafter_score([100.0, 0.0]), math.sqrt(101) - 1)
  # Below the arithmetic mean: rare achievements weigh more.
  assert metrics.crafter_score([90.0, 10.0]) < 50.0


def test_crafter_score_curve_pools_rows_into_groups():
  env_steps = np.array([10, 20, 30, 40, 50])
  episodes = np.array([1, 1, 0, 0, 2])
  unlocked = np.array([[1, 0], [1, 1], [0, 0], [0, 0], [2, 0]])
  steps, scores = metrics.crafter_score_curve(env_steps, episodes, unlocked, 2)
  # Groups (10, 20) and (30, 40); 50 is a part group, (30, 40) has no episode.
  np.testing.assert_array_equal(steps, [20])
  assert math.isclose(scores[0], metrics.crafter_score([100.0, 50.0]))


def test_final_training_measures_cover_the_last_tenth_of_the_steps():
  env_steps = np.array([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000])
  returns = np.array([0, 0, 0, 0, 0, 0, 0, 0, 2.0, 5.0])
  episodes = np.array([1, 1, 1, 1, 1, 1, 1, 1, 4, 2])
  unlocked = np.zeros((10, 2))
  unlocked[-1] = [2, 1]  # Both episodes of the last row: 100% and 50%.
  unlocked[-2] = [4, 4]  # Outside the window.
  out = metrics.final_training_measures(
      env_steps, returns, episodes, unlocked, ('wood', 'table')
  )
  assert out['train_return'] == 5.0 and out['train_episodes'] == 2
  assert out['success/wood'] == 100.0 and out['success/table'] == 50.0
  assert math.isclose(
      out['crafter_score'], math.sqrt(101 * 51) - 1, rel_tol=1e-12
  )
  # A fifth: the last two rows, episode-weighted.
  wider = metrics.final_training_measures(
      env_steps, returns, episodes, fraction=0.2
  )
  assert math.isclose(wider['train_return'], (2.0 * 4 + 5.0 * 2) / 6)
  # No episode in the window: NaN.
  none = metrics.final_training_measures(
      env_steps, returns, np.zeros(10), unlocked
  )
  assert math.isnan(none['train_return']) and math.isnan(none['crafter_score'])


def test_final_mean_averages_the_finite_values_of_the_last_tenth():
  steps = np.arange(1, 11) * 100.0  # 100 ... 1,000
  values = np.arange(10.0)
  # Rows ending after 900 steps: only the last.
  assert metrics.final_mean(steps, values) == 9.0
  assert metrics.final_mean(steps, values, fraction=0.3) == 8.0
  values[-1] = np.nan
  assert math.isnan(metrics.final_mean(steps, values))
  assert metrics.final_mean(steps, values, fraction=0.3) == 7.5
