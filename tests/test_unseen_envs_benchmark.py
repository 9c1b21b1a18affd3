"""Tests of `benchmarks/unseen_envs.py` through its command line.

The script is run as a subprocess, as users run it; its metrics are
`disco.metrics` (tests/test_metrics.py). The failure paths and the table
printed from an existing `results.csv` are cheap; a tiny end-to-end run
(two environments, both rules, two seeds, five iterations) is marked slow.
"""

import csv
import math
import os
import pathlib
import subprocess
import sys

import pytest

_REPO = pathlib.Path(__file__).resolve().parents[1]
_SCRIPT = _REPO / 'benchmarks' / 'unseen_envs.py'

_ENVS = ('gymnax:Breakout-MinAtar', 'gymnax:DeepSea-bsuite')
_RULES = ('disco', 'actor_critic')
_STEPS = 5
_ROLLOUT_LEN = 5
# Batch 4 // replay ratio 1: learning starts at the first iteration, so no
# acting-only program is compiled (that keeps the test fast).
_NUM_ENVS = 4


def _run(*args: str, env: dict[str, str] | None = None):
  """Runs the script with `args`; returns the completed process."""
  return subprocess.run(
      [sys.executable, str(_SCRIPT), *args],
      cwd=_REPO,
      env=dict(os.environ, **(env or {})),
      capture_output=True,
      text=True,
      check=False,
  )


def _read_csv(path):
  with path.open(newline='') as f:
    return list(csv.DictReader(f))


def test_readme_table_without_results_is_an_error(tmp_path):
  result = _run('--out', str(tmp_path), '--readme-table')
  assert result.returncode == 1
  assert 'run the benchmark first' in result.stderr


def test_readme_table_summarises_seeds_from_results_csv(tmp_path):
  settings = dict(
      env='gymnax:DeepSea-bsuite',
      env_steps=4640,
      iterations=5,
      run_wall_seconds=120.0,
      batch_size=64,
      replay_ratio=2,
  )
  disco = dict(settings, rule='disco', learning_rate=0.01, final_episodes=4)
  rows = [
      dict(disco, seed=0, final_avg_return='1.0'),
      dict(disco, seed=1, final_avg_return='', final_episodes=0),
      dict(disco, seed=2, final_avg_return='3.0'),
      dict(
          settings,
          rule='actor_critic',
          learning_rate=0.001,
          seed=0,
          final_avg_return='0.5',
          final_episodes=2,
      ),
  ]
  with (tmp_path / 'results.csv').open('w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=sorted(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  result = _run('--out', str(tmp_path), '--readme-table')
  assert result.returncode == 0, result.stderr
  lines = result.stdout.strip().splitlines()
  assert lines[0].startswith('| environment | rule | learning rate |')
  assert lines[2:4] == [
      (
          '| DeepSea-bsuite | disco | 0.01 | 2 ± 1.41 [1, 3] (1 seed(s) without'
          ' episodes) | 3 | 4,640 | 2.0 min |'
      ),
      (
          '| DeepSea-bsuite | actor_critic | 0.001 | 0.5 ± n/a [0.5, 0.5] | 1 |'
          ' 4,640 | 2.0 min |'
      ),
  ]
  assert lines[-1] == (
      'Final average return: episode-weighted over the last 10% of 5'
      ' iterations; std over seeds (ddof=1). Batch 64, replay ratio 2. Runs:'
      ' 4.0 min wall in total.'
  )


def test_unknown_environment_fails_before_training(tmp_path):
  result = _run(
      '--envs', 'gymnax:NoSuchEnv-v0', '--out', str(tmp_path), '--quiet'
  )
  assert result.returncode == 1
  assert 'NoSuchEnv' in result.stderr
  assert not (tmp_path / 'results.csv').exists()


def test_missing_weights_fail_before_training(tmp_path):
  result = _run(
      *('--rules', 'actor_critic', 'disco', '--out', str(tmp_path), '--quiet'),
      env={'DISCO_WEIGHTS': str(tmp_path / 'missing.npz')},
  )
  assert result.returncode == 1
  assert 'missing.npz' in result.stderr
  assert not (tmp_path / 'results.csv').exists()


@pytest.mark.slow
def test_tiny_benchmark_writes_results_curves_and_plot(tmp_path):
  out = tmp_path / 'out'
  result = _run(
      *('--envs', *_ENVS, '--rules', *_RULES, '--seeds', '2'),
      *('--steps', str(_STEPS), '--batch-size', '4', '--replay-ratio', '1'),
      *('--rollout-len', str(_ROLLOUT_LEN), '--smoothing', '2'),
      *('--learning-rate', '5e-4', 'disco=3e-4'),
      *('--out', str(out), '--quiet'),
  )
  assert result.returncode == 0, result.stderr
  printed = result.stdout

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
    # A bare LR for every rule, overridden per rule.
    expected_rate = {'disco': 3e-4, 'actor_critic': 5e-4}[row['rule']]
    assert float(row['learning_rate']) == expected_rate
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
  reprinted = _run('--out', str(out), '--readme-table')
  assert reprinted.returncode == 0, reprinted.stderr
  assert reprinted.stdout.strip().startswith('| environment |')
  assert reprinted.stdout.strip() in printed
  for name in ('results.csv', 'curves.csv', 'curves.png'):
    assert f'Wrote {out / name}' in printed
