"""Tests for the `disco-eval` command line (see also tests/test_cli.py)."""

import importlib.metadata
import os
import pathlib
import subprocess
import sys

import numpy as np

from disco import logs
from disco.eval import cli as eval_cli
from tests import tiny_args

_REPO = pathlib.Path(__file__).resolve().parents[1]
_TINY = tiny_args.EVAL


def _main(capsys, *argv):
  """Runs `disco-eval argv`; returns (exit status, stdout, stderr)."""
  try:
    status = eval_cli.main(list(argv))
  except SystemExit as e:  # argparse exits on usage errors.
    status = e.code
  out, err = capsys.readouterr()
  return status, out, err


def test_console_script_is_declared():
  (script,) = [
      e
      for e in importlib.metadata.entry_points(group='console_scripts')
      if e.name == 'disco-eval'
  ]
  assert script.value == 'disco.eval.cli:main'
  assert script.load() is eval_cli.main


def test_compare_writes_one_log_one_plot_and_the_params(capsys, tmp_path):
  out_dir = tmp_path / 'runs'  # Created by the command.
  status, out, err = _main(
      capsys,
      *_TINY,
      '--compare',
      'actor_critic',
      'policy_gradient',
      '--num-steps=5',
      f'--out-dir={out_dir}',
  )
  assert status == 0, err
  for name in ('log.csv', 'returns.png', 'agent_params.npz', 'config.json'):
    assert str(out_dir / name) in out
  assert (out_dir / 'returns.png').read_bytes().startswith(b'\x89PNG')
  columns = logs.read_columns(out_dir / 'log.csv')
  np.testing.assert_array_equal(
      columns['rule'], ['actor_critic'] * 5 + ['policy_gradient'] * 5
  )
  np.testing.assert_array_equal(columns['iteration'], [1, 2, 3, 4, 5] * 2)
  np.testing.assert_array_equal(columns['env_steps'], [10, 20, 30, 40, 50] * 2)
  assert np.all(np.abs(np.nan_to_num(columns['avg_return'])) <= 1)
  # Learner logs from the first learner step (iteration 4) on.
  assert np.isnan(columns['total_loss'][:3]).all()
  assert np.isfinite(columns['total_loss'][3:5]).all()
  with np.load(out_dir / 'agent_params.npz') as params:
    assert {k.split('/')[0] for k in params} == {
        'actor_critic',
        'policy_gradient',
    }
  # The summary and the tqdm progress bar.
  assert 'actor_critic seed 0:' in out and 'policy_gradient seed 0:' in out
  assert '5/5' in err


def test_seeds_without_plots(capsys, tmp_path):
  status, out, _ = _main(
      capsys,
      *_TINY,
      '--rule=actor_critic',
      '--num-steps=1',
      '--seed=3',
      '--num-seeds=2',
      '--no-plot',
      '--no-progress',
      f'--out-dir={tmp_path}',
  )
  assert status == 0
  columns = logs.read_columns(tmp_path / 'log.csv')
  np.testing.assert_array_equal(columns['seed'], [3, 4])
  assert not list(tmp_path.glob('*.png'))
  assert 'seed 3:' not in out  # --no-progress: no summary either.


def test_command_in_a_fresh_process_reports_errors_without_traceback():
  done = subprocess.run(
      [sys.executable, '-m', 'disco.eval.cli', '--num-steps', '-5'],
      cwd=_REPO,
      env=dict(os.environ),
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
  )
  assert done.returncode == 2
  assert 'num_steps must be >= 1' in done.stderr
  assert 'Traceback' not in done.stderr
