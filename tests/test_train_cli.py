"""`disco-train`: its flags, errors, outputs and resume, on tiny runs."""

import argparse
import csv
import json
import sys
import types

import pytest

from disco import cli
from disco import configs
from disco import train
from disco.train import cli as train_cli
from disco.train import program
from tests import tensorboard_events
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
  assert (
      '--preset {atari,atari_rollout_per_update,colab,crafter,'
      'crafter_rollout_per_update,paper}'
  ) in help_text


@pytest.mark.parametrize(
    'argv, message',
    [
        (['--num-seeds=0'], '--num-seeds must be >= 1'),
        (['--preset=nonsense'], 'invalid choice'),
        (['--rule=dqn'], 'Unknown rule'),
        (['--env=pong'], 'Unknown environment'),
        (['--replay-fraction=1.5'], 'replay_fraction'),
        (['--unroll-inner-scans=maybe'], 'unroll-inner-scans'),
        (
            ['--probe-reward-scale', '--reward-scale=2'],
            '--probe-reward-scale chooses --reward-scale itself',
        ),
        (['--probe-reward-scale=0'], 'needs a TARGET > 0'),
    ],
)
def test_bad_flags_are_usage_errors(argv, message, capsys, tmp_path):
  status, _, err = _main(capsys, *argv, f'--out-dir={tmp_path}')
  assert status == 2, err
  assert message in err and 'Traceback' not in err


@pytest.mark.parametrize(
    'argv, value',
    [
        ([], None),
        (['--unroll-inner-scans'], True),
        (['--unroll-inner-scans', 'false'], False),
        (['--unroll-inner-scans=none'], None),
    ],
)
def test_unroll_inner_scans_is_a_flag_with_an_automatic_default(argv, value):
  args = train_cli.build_parser().parse_args(argv)
  assert args.unroll_inner_scans is value


def test_unrolling_is_automatic_off_cpus_and_a_bad_value_is_named():
  cpu, gpu = (types.SimpleNamespace(platform=p) for p in ('cpu', 'gpu'))
  assert not program.unroll_on(None, [cpu])
  assert program.unroll_on(None, [gpu])
  assert program.unroll_on(True, [cpu]) and not program.unroll_on(False, [gpu])
  assert train.TrainConfig().unroll_inner_scans is None
  with pytest.raises(configs.ConfigError, match='unroll_inner_scans must be'):
    train.TrainConfig(unroll_inner_scans=1)


# The tests that run `_ARGS` with two seeds (tests/test_preemption.py's as
# well) share its compiled programs: in one pytest worker, and through CI's
# JAX compilation cache across workers.
def test_a_run_writes_its_outputs_and_resumes(capsys, tmp_path):
  out = tmp_path / 'run'
  status, stdout, err = _main(
      capsys,
      *_ARGS,
      '--num-steps=3',
      '--num-seeds=2',
      f'--out-dir={out}',
      '--probe-reward-scale=6',
  )
  assert status == 0, err
  # The probe chose the scale (Catch's random returns: about 0.85) and
  # config.json keeps it, with what the probe measured.
  assert '--probe-reward-scale: reward scale 7' in stdout
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
  probe = saved['chosen']['reward_probe']
  assert saved['config']['reward_scale'] == probe['reward_scale'] == 7.0
  assert probe['target'] == 6.0 and 0.8 < probe['random_return'] < 0.9
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
  assert json.loads((out / 'config.json').read_text())['chosen'] == (
      saved['chosen']
  )
  resumed = _rows(out / 'log.csv')
  assert resumed[: len(rows)] == rows
  assert max(int(r['step']) for r in resumed) == 5


def test_logger_tensorboard_writes_event_files_that_tensorboard_reads(
    capsys, tmp_path
):
  pytest.importorskip('tensorboardX')
  out = tmp_path / 'run'
  argv = [*_ARGS, '--num-seeds=2', f'--out-dir={out}']
  status, _, err = _main(
      capsys, *argv, '--num-steps=3', '--logger', 'csv', 'tensorboard'
  )
  assert status == 0, err
  assert json.loads((out / 'config.json').read_text())['logger'] == [
      'csv',
      'tensorboard',
  ]
  # --resume keeps the run's loggers; steps 1-3 are not logged again.
  status, _, err = _main(
      capsys, f'--out-dir={out}', '--resume', '--num-steps=5'
  )
  assert status == 0, err
  rows = _rows(out / 'log.csv')
  for seed in (0, 1):
    scalars = tensorboard_events.tensorboard_scalars(
        out / 'tensorboard' / f'seed_{seed}'
    )
    assert {
        'env_steps',
        'train_return',
        'eval_return',
        'logs/total_loss',
    } <= set(scalars)
    assert 'seed' not in scalars and 'step' not in scalars
    of_seed = [r for r in rows if r['seed'] == str(seed)]
    # The step-0 evaluation, then one point per iteration, once each.
    assert scalars['eval_return'] == [
        (int(r['step']), pytest.approx(float(r['eval_return'])))
        for r in of_seed
    ]
    assert [step for step, _ in scalars['eval_return']] == list(range(6))
    # NaN (no learning yet) is left out, not logged.
    assert [step for step, _ in scalars['logs/total_loss']] == [
        int(r['step']) for r in of_seed if r['logs/total_loss']
    ]


def test_logger_without_its_extra_is_a_named_error(
    capsys, tmp_path, monkeypatch
):
  monkeypatch.setitem(sys.modules, 'tensorboardX', None)  # Not installed.
  status, _, err = _main(
      capsys, *_ARGS, f'--out-dir={tmp_path}', '--logger', 'tensorboard'
  )
  assert status == 1
  assert err.strip() == (
      'disco-train: error: The tensorboard logger needs the tensorboardX'
      ' package: pip install "disco-jax[tensorboard]"'
  )
  assert not (tmp_path / 'log.csv').exists()  # Nothing ran.


@pytest.mark.parametrize(
    'flags, buffer',
    [
        (dict(num_envs=24), 13_800),  # 400,000 steps in rollouts of 24 x 29.
        (dict(num_envs=24, buffer_capacity=48), 48),  # Its own: kept.
        (dict(), 13_794),  # The preset's.
    ],
)
def test_the_crafter_buffer_follows_num_envs_as_in_preset(flags, buffer):
  args = argparse.Namespace(resume=False, preset='crafter', agent=None)
  for name in train.TrainConfig.field_names():
    setattr(args, name, flags.get(name))
  base = train_cli._base_config(args, {})
  values = base | cli.overrides(args, train.TrainConfig)
  assert values['buffer_capacity'] == buffer
  assert train.preset('crafter', **flags).buffer_capacity == buffer
