"""Tests for `benchmarks/unseen_envs.py` (Disco103 against actor-critic).

One tiny end-to-end run (two environments, both rules, two seeds, five
iterations, a small network) checks the files it writes; the metric helpers
are checked on numbers worked out by hand.
"""

import csv
import importlib.util
import math
import pathlib

import numpy as np
import pytest

from disco import eval as eval_lib

_SCRIPT = (
    pathlib.Path(__file__).resolve().parents[1]
    / 'benchmarks'
    / 'unseen_envs.py'
)


def _load_script():
  spec = importlib.util.spec_from_file_location('unseen_envs', _SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


unseen_envs = _load_script()

_ENVS = ('gymnax:Breakout-MinAtar', 'gymnax:DeepSea-bsuite')
_RULES = ('disco', 'actor_critic')
_STEPS = 5
_ROLLOUT_LEN = 5
# Batch 4 // replay ratio 1: learning starts at the first iteration, so no
# acting-only program is compiled (that keeps the test fast).
_NUM_ENVS = 4
_TINY_NETWORK = dict(
    dense=(16,),
    lstm_size=8,
    head_mlp_hiddens=(8,),
    buffer_capacity=32,
    steps_per_chunk=4,
)


def _history(total_returns, num_episodes):
  num = len(total_returns)
  total_returns = np.asarray(total_returns, np.float64)
  num_episodes = np.asarray(num_episodes, np.float64)
  with np.errstate(invalid='ignore', divide='ignore'):
    avg = total_returns / num_episodes
  return eval_lib.EvalHistory(
      rule='disco',
      seed=0,
      steps=np.arange(1, num + 1) * 10,
      avg_returns=avg,
      total_returns=total_returns,
      num_episodes=num_episodes,
      logs={},
      elapsed=np.zeros((num,)),
  )


def test_final_average_return_weights_episodes_over_the_last_tenth():
  # 20 iterations: the last 2 count. 3 episodes summing to 6, then none.
  totals = [100.0] * 18 + [6.0, 0.0]
  counts = [1.0] * 18 + [3.0, 0.0]
  final, episodes = unseen_envs.final_average_return(_history(totals, counts))
  assert final == 2.0 and episodes == 3.0
  # 11 iterations: ceil(1.1) = 2 count; (4 + 2) / (1 + 2).
  history = _history([50.0] * 9 + [4.0, 2.0], [1.0] * 9 + [1.0, 2.0])
  assert unseen_envs.final_average_return(history) == (2.0, 3.0)


def test_final_average_return_without_episodes_is_nan():
  final, episodes = unseen_envs.final_average_return(
      _history([1.0, 0.0], [1.0, 0.0])
  )
  assert math.isnan(final) and episodes == 0.0


def test_smoothed_returns_use_trailing_episode_weighted_windows():
  totals = np.array([2.0, 0.0, 6.0, 0.0, 0.0])
  counts = np.array([1.0, 0.0, 2.0, 0.0, 0.0])
  smoothed = unseen_envs.smoothed_returns(totals, counts, window=2)
  np.testing.assert_allclose(smoothed[:4], [2.0, 2.0, 3.0, 3.0])
  assert math.isnan(smoothed[4])


def _read_csv(path):
  with path.open(newline='') as f:
    return list(csv.DictReader(f))


def test_tiny_benchmark_writes_results_curves_and_plot(tmp_path, capsys):
  out = tmp_path / 'out'
  status = unseen_envs.main(
      [
          '--envs',
          *_ENVS,
          '--rules',
          *_RULES,
          '--seeds',
          '2',
          '--steps',
          str(_STEPS),
          '--batch-size',
          '4',
          '--replay-ratio',
          '1',
          '--rollout-len',
          str(_ROLLOUT_LEN),
          '--smoothing',
          '2',
          '--out',
          str(out),
          '--quiet',
      ],
      config_overrides=_TINY_NETWORK,
  )
  printed = capsys.readouterr().out
  assert status == 0

  results = _read_csv(out / 'results.csv')
  pairs = [(r['env'], r['rule'], int(r['seed'])) for r in results]
  assert pairs == [(e, r, s) for e in _ENVS for r in _RULES for s in (0, 1)]
  curves = _read_csv(out / 'curves.csv')
  assert len(curves) == len(_ENVS) * len(_RULES) * 2 * _STEPS
  steps_per_iteration = _ROLLOUT_LEN * _NUM_ENVS
  for row in results:
    assert int(row['env_steps']) == _STEPS * steps_per_iteration
    assert int(row['iterations']) == _STEPS
    assert float(row['run_wall_seconds']) > 0
    assert (
        float(row['learning_rate'])
        == unseen_envs.DEFAULT_LEARNING_RATES[row['rule']]
    )
    # The final return is the last iteration's (ceil(0.5) = 1), as in the
    # curves file.
    (last,) = [
        c
        for c in curves
        if (c['env'], c['rule'], c['seed'], c['iteration'])
        == (row['env'], row['rule'], row['seed'], str(_STEPS))
    ]
    assert int(row['final_episodes']) == int(last['num_episodes'])
    if int(row['final_episodes']):
      final = float(row['final_avg_return'])
      assert math.isfinite(final)
      assert final == pytest.approx(
          float(last['total_return']) / int(last['num_episodes'])
      )
    else:
      assert row['final_avg_return'] == ''
    if row['env'] == 'gymnax:DeepSea-bsuite':
      # 8-step episodes: each environment ends one at step 24 (iteration
      # 5); returns lie between the move costs and the treasure.
      assert int(row['final_episodes']) == _NUM_ENVS
      assert -0.01 <= float(row['final_avg_return']) <= 1.0

  for row in curves:
    assert int(row['env_steps']) == int(row['iteration']) * (
        steps_per_iteration
    )
    assert math.isfinite(float(row['total_return']))
    if int(row['num_episodes']):
      assert math.isfinite(float(row['avg_return']))
    else:
      assert row['avg_return'] == ''

  png = out / 'curves.png'
  assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
  assert png.stat().st_size > 10_000

  # The printed table has one line per environment and rule, and the
  # --readme-table mode prints the same table again from results.csv.
  table = [line for line in printed.splitlines() if line.startswith('| ')]
  assert len(table) == 1 + len(_ENVS) * len(_RULES)
  assert table[1].startswith('| Breakout-MinAtar | disco | ')
  assert unseen_envs.main(['--out', str(out), '--readme-table']) == 0
  reprinted = capsys.readouterr().out.strip()
  assert reprinted.startswith('| environment |') and reprinted in printed
  for name in ('results.csv', 'curves.csv', 'curves.png'):
    assert f'Wrote {out / name}' in printed


def test_readme_table_without_results_is_an_error(tmp_path, capsys):
  status = unseen_envs.main(['--out', str(tmp_path), '--readme-table'])
  assert status == 1
  assert 'run the benchmark first' in capsys.readouterr().err


def test_unknown_environment_fails_before_training(tmp_path, capsys):
  status = unseen_envs.main(
      ['--envs', 'gymnax:NoSuchEnv-v0', '--out', str(tmp_path), '--quiet']
  )
  assert status == 1
  assert 'NoSuchEnv' in capsys.readouterr().err


def test_missing_weights_fail_before_training(tmp_path, capsys, monkeypatch):
  monkeypatch.setenv('DISCO_WEIGHTS', str(tmp_path / 'missing.npz'))
  status = unseen_envs.main(
      ['--rules', 'actor_critic', 'disco', '--out', str(tmp_path), '--quiet']
  )
  assert status == 1
  assert 'missing.npz' in capsys.readouterr().err
  assert not (tmp_path / 'results.csv').exists()


def test_learning_rates_by_rule():
  rules = ('disco', 'actor_critic', 'policy_gradient')
  by_rule = unseen_envs.learning_rates_by_rule
  assert by_rule([], rules) == {
      'disco': 1e-2,
      'actor_critic': 1e-3,
      'policy_gradient': 1e-2,
  }
  assert by_rule([(None, 5e-4)], rules) == dict.fromkeys(rules, 5e-4)
  assert by_rule([('disco', 3e-4), (None, 5e-4)], rules) == {
      'disco': 3e-4,
      'actor_critic': 5e-4,
      'policy_gradient': 5e-4,
  }
