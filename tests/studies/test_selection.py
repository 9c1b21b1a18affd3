"""Tests of `disco.studies.selection`: the step size chosen per rule."""

import math

import pytest

from disco.studies import selection


def test_selection_picks_the_highest_mean_per_rule():
  rows = selection.select_learning_rates({
      'disco': {1e-4: [1.0, 2.0, 3.0], 3e-4: [4.0, 0.0, 5.0], 5e-4: [2, 2, 2]},
      'actor_critic': {1e-4: [0.5, 0.5], 3e-4: [0.1, 0.2]},
  })
  assert selection.chosen_rates(rows) == {'disco': 3e-4, 'actor_critic': 1e-4}
  by_key = {(r['rule'], r['learning_rate']): r for r in rows}
  best = by_key['disco', 3e-4]
  assert best['chosen']
  assert best['mean_final_return'] == pytest.approx(3.0)
  assert best['std'] == pytest.approx(math.sqrt(7.0))
  assert (best['min'], best['max'], best['seeds']) == (0.0, 5.0, 3)
  assert sum(r['chosen'] for r in rows) == 2


def test_selection_ties_nan_and_all_nan():
  nan = math.nan
  rows = selection.select_learning_rates({
      # A tie goes to the rate listed first.
      'disco': {5e-4: [1.0, 1.0], 1e-4: [1.0, 1.0]},
      # NaN seeds are left out; a rate without any finite return loses.
      'actor_critic': {1e-4: [nan, nan], 3e-4: [nan, -2.0]},
  })
  assert selection.chosen_rates(rows) == {'disco': 5e-4, 'actor_critic': 3e-4}
  rows = selection.select_learning_rates({'disco': {3e-4: [nan], 1e-4: [nan]}})
  assert selection.chosen_rates(rows) == {'disco': 3e-4}
  with pytest.raises(ValueError, match='no learning rates'):
    selection.select_learning_rates({'disco': {}})


def test_markdown():
  rows = selection.select_learning_rates(
      {'disco': {1e-4: [1.0], 3e-4: [math.nan]}}
  )
  for row in rows:
    row['env'] = 'gymnax:Breakout-MinAtar'
  assert selection.markdown(rows).splitlines()[2:] == [
      '| Breakout-MinAtar | disco | 0.0001 | 1 ± n/a [1, 1] | yes |',
      '| Breakout-MinAtar | disco | 0.0003 | no episode ended |  |',
  ]
