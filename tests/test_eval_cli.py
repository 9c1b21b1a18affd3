"""Tests for the `disco-eval` command line.

Runs use the default (full-size) configuration for one or two iterations:
learning only starts at iteration 32, so they initialise, act and write
their files without compiling a learner step.
"""

import importlib.metadata
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from disco import eval_cli
from disco import plotting

_REPO = pathlib.Path(__file__).resolve().parents[1]


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
  assert script.value == 'disco.eval_cli:main'


@pytest.mark.parametrize(
    'argv, message',
    [
        (['--steps', '0'], 'must be >= 1'),
        (['--steps', 'ten'], 'not an integer'),
        (['--seed', '-1'], 'must be >= 0'),
        (['--rule', 'dqn'], 'invalid choice'),
        (['--env', 'pong'], 'unknown environment'),
        (['--env', 'gymnax:'], 'unknown environment'),
        (['--rule', 'disco', '--compare', 'actor_critic'], 'not allowed'),
        (['--compare', 'disco', 'disco'], 'twice'),
        (['--fast', '--env', 'catch-cpu'], 'jittable'),
        (['--rule', 'actor_critic', '--weights', 'w.npz'], 'disco rule only'),
        (['--weights', '/no/such/file.npz'], 'no such file'),
    ],
)
def test_bad_arguments_get_a_usage_error(capsys, argv, message):
  status, _, err = _main(capsys, *argv)
  assert status == 2
  assert message in err and 'Traceback' not in err
  assert err.startswith('usage: disco-eval')


def test_out_dir_that_is_a_file_is_rejected(capsys, tmp_path):
  blocker = tmp_path / 'file'
  blocker.write_text('')
  status, _, err = _main(capsys, '--out-dir', str(blocker))
  assert status == 2 and 'not a directory' in err


def test_invalid_weights_file_is_a_one_line_error(capsys, tmp_path):
  garbage = tmp_path / 'garbage.npz'
  garbage.write_bytes(b'not an npz archive')
  status, out, err = _main(
      capsys, '--weights', str(garbage), '--out-dir', str(tmp_path), '--quiet'
  )
  assert status == 1
  assert err.startswith('disco-eval: error:') and 'garbage.npz' in err
  assert 'Traceback' not in err and not out


def test_missing_disco103_is_a_one_line_error(capsys, tmp_path, monkeypatch):
  monkeypatch.setenv('DISCO_WEIGHTS', str(tmp_path / 'absent.npz'))
  status, _, err = _main(capsys, '--out-dir', str(tmp_path), '--quiet')
  assert status == 1
  assert err.startswith('disco-eval: error:') and 'absent.npz' in err
  assert 'Traceback' not in err


def test_compare_writes_one_csv_and_one_plot(capsys, tmp_path):
  out_dir = tmp_path / 'runs'  # Created by the command.
  status, out, err = _main(
      capsys,
      '--compare',
      'disco',
      'actor_critic',
      '--steps',
      '2',
      '--out-dir',
      str(out_dir),
  )
  assert status == 0, err
  csv_path = out_dir / 'disco-actor_critic_catch_seed0.csv'
  png_path = out_dir / 'disco-actor_critic_catch_seed0.png'
  assert f'Wrote the curve to {csv_path}' in out
  assert f'Wrote the plot to {png_path}' in out
  assert png_path.read_bytes().startswith(b'\x89PNG')
  columns = plotting.read_csv(csv_path)
  np.testing.assert_array_equal(
      columns['rule'], ['disco', 'disco', 'actor_critic', 'actor_critic']
  )
  np.testing.assert_array_equal(columns['steps'], [58, 116, 58, 116])
  assert np.all(np.abs(columns['avg_returns']) <= 1)
  # The summary and the tqdm progress bar.
  assert 'disco seed 0:' in out and 'actor_critic seed 0:' in out
  assert '2/2' in err


def test_seeds_and_csv_only(capsys, tmp_path):
  status, out, _ = _main(
      capsys,
      '--rule',
      'actor_critic',
      '--steps',
      '1',
      '--seed',
      '3',
      '--num-seeds',
      '2',
      '--no-plot',
      '--quiet',
      '--name',
      'mine',
      '--out-dir',
      str(tmp_path),
  )
  assert status == 0
  assert out.strip() == f'Wrote the curve to {tmp_path / "mine.csv"}'
  columns = plotting.read_csv(tmp_path / 'mine.csv')
  np.testing.assert_array_equal(columns['seed'], [3, 4])
  assert not list(tmp_path.glob('*.png'))


def test_command_in_a_fresh_process_reports_errors_without_traceback():
  done = subprocess.run(
      [sys.executable, '-m', 'disco.eval_cli', '--steps', '-5'],
      cwd=_REPO,
      env=dict(os.environ),
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
  )
  assert done.returncode == 2
  assert 'must be >= 1' in done.stderr and 'Traceback' not in done.stderr
