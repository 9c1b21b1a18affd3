"""Tests of `benchmarks/unseen_envs.py`.

The command line runs as a subprocess, as users run it (its usage errors
in-process, through `main`, which exits as argparse does); the machinery it
runs on (learning-rate selection, PPO's evaluation points, skipping finished
runs) is tested in tests/studies. The failure paths and the tables printed
from handwritten CSV files take seconds; a tiny end-to-end run (two
iterations of a tiny agent, disco and actor_critic, PPO only where rejax is
installed) is marked slow.
"""

import csv
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

_REPO = pathlib.Path(__file__).resolve().parents[1]
_SCRIPT = _REPO / 'benchmarks' / 'unseen_envs.py'
_SPEC = importlib.util.spec_from_file_location('unseen_envs', _SCRIPT)
unseen_envs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(unseen_envs)

_HAS_REJAX = importlib.util.find_spec('rejax') is not None


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


def _write_csv(path, rows):
  with path.open('w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)


# The command line: errors.


def test_readme_table_without_results_is_an_error(tmp_path):
  result = _run('--out', str(tmp_path), '--readme-table')
  assert result.returncode == 1
  assert 'run the benchmark first' in result.stderr


@pytest.mark.parametrize(
    'flags, message',
    [
        (('--seeds', '0'), 'argument --seeds: must be > 0'),
        (('--learning-rates', 'fast'), "not a valid float: 'fast'"),
        (('--algos', 'dqn'), "invalid choice: 'dqn'"),
        (('--envs', 'catch', 'catch'), '--envs lists a value twice'),
        (('--envs', 'catch-cpu'), "non-jittable environment 'catch-cpu'"),
        (('--algos', 'ppo', '--envs', 'catch'), 'ppo runs gymnax and craftax'),
        (('--config', 'num_envs'), 'expected NAME=VALUE'),
    ],
)
def test_bad_flags_are_usage_errors(tmp_path, flags, message, capsys):
  # In-process (argparse exits the same way); the subprocess path is
  # covered by the other command-line tests.
  with pytest.raises(SystemExit) as exit_info:
    unseen_envs.main(['--out', str(tmp_path / 'out'), *flags])
  assert exit_info.value.code == 2
  assert message in capsys.readouterr().err
  assert not (tmp_path / 'out').exists()


def test_setup_errors_fail_before_training(tmp_path):
  out = tmp_path / 'out'
  rules = ('--algos', 'disco', 'actor_critic', '--envs', 'catch')
  result = _run('--out', str(out), *rules, '--config', 'no_such_field=1')
  assert result.returncode == 1
  assert "unknown TrainConfig field(s) ['no_such_field']" in result.stderr
  result = _run('--out', str(out), *rules, '--envs', 'gymnax:NoSuchEnv-v0')
  assert result.returncode == 1
  assert 'NoSuchEnv' in result.stderr
  result = _run(
      *('--out', str(out), *rules),
      env={'DISCO_WEIGHTS': str(tmp_path / 'missing.npz')},
  )
  assert result.returncode == 1
  assert 'missing.npz' in result.stderr
  assert not out.exists()


@pytest.mark.skipif(_HAS_REJAX, reason='rejax is installed here')
def test_ppo_without_rejax_names_the_package(tmp_path):
  result = _run(
      *('--out', str(tmp_path / 'out'), '--envs', 'gymnax:DeepSea-bsuite'),
      *('--algos', 'ppo'),
  )
  assert result.returncode == 1
  assert "needs the package 'rejax'" in result.stderr
  assert 'pip install "disco-jax[ppo]"' in result.stderr
  assert '--algos disco actor_critic' in result.stderr
  assert not (tmp_path / 'out').exists()


# The command line: tables from existing CSV files.


def _result(env, algo, seed, final, **fields):
  row = dict(
      env=env,
      algo=algo,
      seed=seed,
      learning_rate='' if algo == 'ppo' else '0.0003',
      final_return=final,
      final_eval_episodes=128 if algo == 'ppo' else 16,
      final_train_return='' if algo == 'ppo' else '0.5',
      final_train_episodes=0 if algo == 'ppo' else 10,
      env_steps=72500,
      learner_steps='' if algo == 'ppo' else 241,
      run_wall_seconds=120.0,
      selected_on=False,
      status='done',
  )
  row.update(fields)
  return row


def test_readme_table_from_results_and_selection_csv(tmp_path):
  breakout, craftax = 'gymnax:Breakout-MinAtar', 'craftax:Craftax-Classic-v1'
  rows = [
      _result(breakout, 'disco', 0, '1.0', selected_on=True),
      _result(breakout, 'disco', 1, '', selected_on=True),
      _result(breakout, 'disco', 2, '3.0', selected_on=True),
      _result(breakout, 'ppo', 0, '5.5', env_steps=71680, run_wall_seconds=60),
      _result(craftax, 'ppo', 0, '', status='not run: too slow', env_steps=''),
  ]
  _write_csv(tmp_path / 'results.csv', rows)
  selection = [
      dict(
          env=breakout,
          rule='disco',
          learning_rate=lr,
          mean_final_return=mean,
          std='1.4142135623730951',
          min='1.0',
          max='3.0',
          seeds=3,
          chosen=chosen,
          run_wall_seconds=wall,
      )
      for lr, mean, chosen, wall in (
          (0.0001, '0.5', False, 180.0),
          (0.0003, '2.0', True, 120.0),
      )
  ]
  _write_csv(tmp_path / 'selection.csv', selection)
  result = _run('--out', str(tmp_path), '--readme-table')
  assert result.returncode == 0, result.stderr
  lines = result.stdout.strip().splitlines()
  assert lines[:4] == [
      (
          '| environment | rule | learning rate | final return: mean ± std'
          ' [min, max] | chosen |'
      ),
      '|---|---|---|---|---|',
      '| Breakout-MinAtar | disco | 0.0001 | 0.5 ± 1.41 [1, 3] |  |',
      '| Breakout-MinAtar | disco | 0.0003 | 2 ± 1.41 [1, 3] | yes |',
  ]
  table = lines[5:]
  assert table[0].startswith('| environment | algorithm | learning rate |')
  assert table[2:5] == [
      (
          '| Breakout-MinAtar † | disco | 0.0003 | 2 ± 1.41 [1, 3] (1 seed(s)'
          ' without episodes) | 0.5 ± 0 [0.5, 0.5] | 3 | 72,500 | 2.0 min |'
      ),
      (
          '| Breakout-MinAtar | ppo | - | 5.5 ± n/a [5.5, 5.5] | - | 1 |'
          ' 71,680 | 1.0 min |'
      ),
      '| Craftax-Classic-v1 | ppo | - | not run: too slow | - | 1 | - | - |',
  ]
  assert table[6].startswith('† The learning-rate selection environment')
  assert table[-1] == (
      'Runs: 6.0 min wall in total (3.0 min in the table, 3.0 min for the'
      ' selection runs at the rates not chosen).'
  )


def test_readme_table_rejects_an_old_results_csv(tmp_path):
  _write_csv(tmp_path / 'results.csv', [dict(env='catch', rule='disco')])
  result = _run('--out', str(tmp_path), '--readme-table')
  assert result.returncode == 1
  assert 'lacks the columns' in result.stderr


# A tiny end-to-end run.

# Two environments acting 5 steps: 10 env steps an iteration; batches of
# 2 fresh and 2 replayed trajectories, learning from the first iteration.
_TINY = (
    *('num_envs=2', 'rollout_len=5', 'learner_batch_size=4'),
    *('replay_fraction=0.5', 'buffer_capacity=8', 'learning_starts=2'),
    *('agent_dense=[16]', 'agent_lstm_size=8', 'agent_head_mlp_hiddens=[8]'),
    *('eval_envs=2', 'eval_max_steps=20'),
)
_TINY_PPO = ('num_envs=4', 'num_steps=5', 'num_epochs=1', 'num_minibatches=1')


@pytest.mark.slow
def test_tiny_benchmark_end_to_end(tmp_path):
  out = tmp_path / 'out'
  envs = ('gymnax:Breakout-MinAtar', 'gymnax:DeepSea-bsuite')
  algos = ('disco', 'actor_critic') + (('ppo',) if _HAS_REJAX else ())
  args = (
      *('--out', str(out), '--envs', *envs, '--algos', *algos),
      *('--seeds', '2', '--learning-rates', '1e-3', '3e-3'),
      *('--env-steps', '20', '--config', *_TINY),
      *('--ppo-config', *_TINY_PPO, '--quiet'),
  )
  result = _run(*args)
  assert result.returncode == 0, result.stderr
  printed = result.stdout

  results = _read_csv(out / 'results.csv')
  keys = [(r['env'], r['algo'], int(r['seed'])) for r in results]
  assert keys == [(e, a, s) for e in envs for a in algos for s in (0, 1)]
  selection = _read_csv(out / 'selection.csv')
  assert [(r['rule'], float(r['learning_rate'])) for r in selection] == [
      (rule, lr) for rule in ('disco', 'actor_critic') for lr in (1e-3, 3e-3)
  ]
  chosen = {
      r['rule']: float(r['learning_rate'])
      for r in selection
      if r['chosen'] == 'True'
  }
  assert set(chosen) == {'disco', 'actor_critic'}
  for row in results:
    assert row['status'] == 'done'
    assert float(row['run_wall_seconds']) > 0
    assert row['selected_on'] == str(
        row['env'] == envs[0] and row['algo'] != 'ppo'
    )
    if row['algo'] == 'ppo':
      assert row['learning_rate'] == row['learner_steps'] == ''
      assert int(row['env_steps']) == 20
      continue
    assert float(row['learning_rate']) == chosen[row['algo']]
    # Two iterations of 10 env steps, each with one learner step.
    assert (int(row['env_steps']), int(row['learner_steps'])) == (20, 2)
    assert int(row['final_eval_episodes']) > 0
    assert math.isfinite(float(row['final_return']))

  curves = _read_csv(out / 'curves.csv')
  for env in envs:
    for algo in ('disco', 'actor_critic'):
      evals = [
          int(c['env_steps'])
          for c in curves
          if (c['env'], c['algo'], c['seed'], c['kind'])
          == (env, algo, '0', 'eval')
      ]
      assert evals == [0, 10, 20]  # Iteration 0, then every iteration.
  png = out / 'curves.png'
  assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'

  # One file per run: 2 rules x 2 rates on Breakout, the chosen ones on
  # DeepSea, PPO on both.
  runs = sorted(p.name for p in (out / 'runs').iterdir())
  assert len(runs) == 4 + 2 + (2 if _HAS_REJAX else 0)
  record = json.loads((out / 'runs' / runs[0]).read_text())
  assert record['status'] == 'done'

  # The selection table (after the selection and again at the end) and the
  # results table: a header and one line per row each.
  table = [line for line in printed.splitlines() if line.startswith('| ')]
  assert len(table) == 2 * (1 + 4) + 1 + len(envs) * len(algos)
  reprinted = _run('--out', str(out), '--readme-table')
  assert reprinted.returncode == 0, reprinted.stderr
  assert reprinted.stdout.strip() in printed
  for name in ('results.csv', 'selection.csv', 'curves.csv', 'curves.png'):
    assert f'Wrote {out / name}' in printed

  # A rerun skips every run; a run whose file is gone runs again.
  rate = f'{chosen["disco"]:g}'
  (out / 'runs' / f'DeepSea-bsuite__disco__lr{rate}.json').unlink()
  rerun = _run(*args)
  assert rerun.returncode == 0, rerun.stderr
  assert rerun.stdout.count('done before') == len(runs) - 1
  assert f'DeepSea-bsuite disco lr={rate}: done before' not in rerun.stdout
  assert f'DeepSea-bsuite disco lr={rate}: ' in rerun.stdout
  # Other settings in the same directory stop before any training.
  changed = _run(*args[:-1], '--seeds', '3')
  assert changed.returncode == 1
  assert 'holds a finished run with other settings' in changed.stderr
