"""`disco-train`: its flags, errors, outputs and resume, on tiny runs."""

import csv
import json

import pytest

from disco import cli
from disco import train
from disco.train import cli as train_cli
from tests import tiny_args

_ARGS = [
    *tiny_args.TRAIN,
    '--rule=actor_critic',
    '--env=catch',
    '--no-progress',
]


def _main(capsys, *argv):
  try:
    status = train_cli.main(list(argv))
  except SystemExit as e:  # argparse exits on usage errors.
    status = e.code
  out, err = capsys.readouterr()
  return status, out, err


def _rows(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


def test_every_config_field_is_a_flag(capsys):
  with pytest.raises(SystemExit):
    train_cli.main(['--help'])
  help_text = capsys.readouterr().out
  for name in train.TrainConfig.field_names():
    if name not in cli.HIDDEN_FIELDS:
      assert cli.flag(name) + ' ' in help_text, name
  assert '--preset {colab,paper}' in help_text


@pytest.mark.parametrize(
    'argv, message',
    [
        (['--num-seeds=0'], '--num-seeds must be >= 1'),
        (['--preset=atari'], 'invalid choice'),
        (['--rule=dqn'], 'Unknown rule'),
        (['--env=catch-cpu'], 'jittable'),
        (['--replay-fraction=1.5'], 'replay_fraction'),
    ],
)
def test_bad_flags_are_usage_errors(argv, message, capsys, tmp_path):
  status, _, err = _main(capsys, *argv, f'--out-dir={tmp_path}')
  assert status == 2, err
  assert message in err and 'Traceback' not in err


def test_a_run_writes_its_outputs_and_resumes(capsys, tmp_path):
  out = tmp_path / 'run'
  status, stdout, err = _main(
      capsys, *_ARGS, '--num-steps=3', '--num-seeds=2', f'--out-dir={out}'
  )
  assert status == 0, err
  names = {p.name for p in out.iterdir()}
  assert {
      'config.json',
      'log.csv',
      'checkpoints',
      'agent_params_seed0.npz',
      'agent_params_seed1.npz',
  } <= names
  saved = json.loads((out / 'config.json').read_text())
  assert saved['command'] == 'disco-train' and saved['num_seeds'] == 2
  assert saved['config']['rule'] == 'actor_critic'
  rows = _rows(out / 'log.csv')
  # A row per seed and chunk (one iteration each) and the step-0 evaluation.
  assert sorted({r['seed'] for r in rows}) == ['0', '1']
  assert max(int(r['step']) for r in rows) == 3
  assert 'seed 1: final evaluation return' in stdout

  status, _, err = _main(
      capsys, f'--out-dir={out}', '--preset=paper', '--resume'
  )
  assert status == 2 and '--preset starts a new run' in err
  status, _, err = _main(
      capsys, f'--out-dir={out}', '--resume', '--num-steps=5', '--no-progress'
  )
  assert status == 0, err
  resumed = _rows(out / 'log.csv')
  assert resumed[: len(rows)] == rows
  assert max(int(r['step']) for r in resumed) == 5
