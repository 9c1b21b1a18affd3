"""What both command lines share: flags, outputs, errors, Ctrl-C and resume.

Both commands run in-process (`main(argv)`) on tiny configs.
"""

import csv
import json
import os
import pathlib
import signal

import numpy as np
import pytest

from disco import cli
from disco import eval as eval_lib
from disco import meta_train
from disco import progress
from disco.discovery import cli as discovery_cli
from disco.eval import cli as eval_cli
from disco.meta_train import cli as meta_train_cli
from disco.train import cli as train_cli
from tests import tiny_args

_REPO = pathlib.Path(__file__).resolve().parents[1]

_EVAL_ARGS = [*tiny_args.EVAL, '--rule=actor_critic', '--steps-per-chunk=2']
_META_TRAIN_ARGS = list(tiny_args.META_TRAIN)
# Flags of the shared vocabulary, spelled the same in both commands.
_SHARED = [
    '--num-steps=2',
    '--seed=4',
    '--checkpoint-every=1',
    '--keep-checkpoints=1',
    '--env=catch',
    '--env-settings=rows=5,columns=5',
    '--agent-learning-rate=0.0005',
    '--value-fn-learning-rate=0.001',
    '--no-progress',
]


def _main(module, capsys, *argv):
  """Runs a command in-process; returns (exit status, stdout, stderr)."""
  try:
    status = module.main(list(argv))
  except SystemExit as e:  # argparse exits on usage errors.
    status = e.code
  out, err = capsys.readouterr()
  return status, out, err


def _rows(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


# What both commands write in --out-dir (the final parameters and the plots
# have command-specific names).
_OUTPUTS = {'config.json', 'log.csv', 'checkpoints', '*.npz', '*.png'}


def _files(directory: pathlib.Path) -> set[str]:
  return {
      p.name if p.suffix not in ('.png', '.npz') else '*' + p.suffix
      for p in directory.iterdir()
  }


def _check_shared_run(module, out_dir: pathlib.Path, num_rows: int) -> None:
  """A run with the `_SHARED` flags wrote the same files, with those flags."""
  assert _files(out_dir) == _OUTPUTS
  saved = json.loads((out_dir / 'config.json').read_text())
  assert saved['command'] == module.PROG
  config = saved['config']
  assert (config['seed'], config['checkpoint_every']) == (4, 1)
  assert config['env_settings'] == [['columns', 5], ['rows', 5]]
  assert config['agent_learning_rate'] == 0.0005
  assert config['value_fn_learning_rate'] == 0.001
  assert len(_rows(out_dir / 'log.csv')) == num_rows


@pytest.mark.parametrize('module', [eval_cli, meta_train_cli])
def test_flags_come_from_the_config_fields(module, capsys):
  config_cls = (
      eval_lib.EvalConfig if module is eval_cli else meta_train.MetaTrainConfig
  )
  with pytest.raises(SystemExit):
    module.main(['--help'])
  help_text = capsys.readouterr().out
  for name in config_cls.field_names():
    if name not in cli.HIDDEN_FIELDS:
      assert cli.flag(name) + ' ' in help_text, name
  for common in cli.COMMON_FLAGS:
    assert common in help_text
  # The deprecated spellings are not shown.
  for old in config_cls.RENAMED:
    assert cli.flag(old) + ' ' not in help_text


@pytest.mark.parametrize(
    'module, argv, message',
    [
        (eval_cli, ['--num-steps=0'], 'num_steps must be >= 1'),
        (eval_cli, ['--num-steps=ten'], 'not an integer'),
        (eval_cli, ['--rule=dqn'], 'Unknown rule'),
        (eval_cli, ['--env=pong'], 'Unknown environment'),
        (eval_cli, ['--env-settings=height=3'], 'Unknown Catch setting'),
        (
            eval_cli,
            ['--env=gymnax:CartPole-v1', '--env-settings=max_steps=3'],
            "Unknown setting(s) 'max_steps' for 'CartPole-v1'",
        ),
        (eval_cli, ['--rule=disco', '--compare', 'actor_critic'], 'not both'),
        (eval_cli, ['--compare', 'disco', 'disco'], 'twice'),
        (eval_cli, ['--fast', '--env=catch-cpu'], 'jittable'),
        (
            eval_cli,
            ['--rule=actor_critic', '--update-rule-params=w.npz'],
            'update_rule_params',
        ),
        (meta_train_cli, ['--num-agents=0'], 'num_agents'),
        (meta_train_cli, ['--agent-dense=a,b'], 'comma-separated ints'),
        (meta_train_cli, ['--vmap-agents=maybe'], 'true or false'),
        (meta_train_cli, ['--env=catch-cpu'], 'jittable'),
    ],
)
def test_bad_flags_are_usage_errors(module, argv, message, capsys, tmp_path):
  status, _, err = _main(module, capsys, *argv, f'--out-dir={tmp_path}')
  assert status == 2, err
  assert message in err and 'Traceback' not in err
  assert err.startswith(f'usage: {module.PROG}')


@pytest.mark.parametrize('module', [eval_cli, meta_train_cli])
def test_resume_needs_an_earlier_run(module, capsys, tmp_path):
  status, _, err = _main(
      module, capsys, f'--out-dir={tmp_path / "none"}', '--resume'
  )
  assert status == 2 and 'config.json does not exist' in err


def test_resume_of_another_commands_run_names_it(capsys, tmp_path):
  # A disco-eval run directory, resumed by disco-meta-train.
  cli.RunDir(tmp_path).write_config(eval_cli.PROG, eval_lib.EvalConfig())
  status, _, err = _main(
      meta_train_cli, capsys, f'--out-dir={tmp_path}', '--resume'
  )
  assert status == 2 and 'Unknown' not in err, err
  assert f'holds a disco-eval run, not a {meta_train_cli.PROG} one' in err
  assert f'disco-eval --out-dir {tmp_path} --resume' in err


@pytest.mark.parametrize(
    'module, flag', [(eval_cli, '--update-rule-params'), (meta_train_cli, '')]
)
def test_named_errors_are_one_line_and_debug_shows_the_traceback(
    module, flag, capsys, tmp_path
):
  garbage = tmp_path / 'garbage.npz'
  garbage.write_bytes(b'not an npz archive')
  argv = [
      f'--update-rule-params={garbage}',
      f'--out-dir={tmp_path / "out"}',
      '--no-progress',
      '--no-plot',
  ]
  del flag
  status, _, err = _main(module, capsys, *argv)
  assert status == 1
  assert err.startswith(f'{module.PROG}: error:') and 'garbage.npz' in err
  assert 'Traceback' not in err
  status, _, err = _main(
      module, capsys, *argv[:1], f'--out-dir={tmp_path / "out2"}', '--debug'
  )
  assert status == 1 and 'Traceback' in err


def test_deprecated_spellings_still_work_with_a_warning(capsys, tmp_path):
  with pytest.warns(DeprecationWarning):
    parser = eval_cli.build_parser()
    args = parser.parse_args([
        '--steps=3',
        '--batch_size=16',
        '--learning-rate=0.5',
        '--quiet',
        f'--out={tmp_path}',
    ])
  assert cli.overrides(args, eval_lib.EvalConfig) == dict(
      num_steps=3, learner_batch_size=16, agent_learning_rate=0.5
  )
  assert not args.progress and args.out_dir == tmp_path
  with pytest.warns(DeprecationWarning):
    args = meta_train_cli.build_parser().parse_args(
        ['--init=disco103', '--batch_size_per_device=8', '--no_progress']
    )
  assert cli.overrides(args, meta_train.MetaTrainConfig) == dict(
      update_rule_params='disco103', envs_per_device=8
  )
  del capsys


def _interrupt_at(monkeypatch, step: int) -> None:
  """Presses Ctrl-C (SIGINT to this process) when the bar reaches `step`."""
  original = progress.ProgressBar.__call__

  def _call(self, current, metrics):
    original(self, current, metrics)
    if current == step:
      os.kill(os.getpid(), signal.SIGINT)

  monkeypatch.setattr(progress.ProgressBar, '__call__', _call)


def _curve(out_dir: pathlib.Path) -> list[dict[str, str]]:
  rows = _rows(out_dir / 'log.csv')
  for row in rows:
    del row['elapsed']  # Wall time: the one column that differs.
  return rows


@pytest.mark.parametrize('loop', ['faithful', 'fast'])
def test_eval_interrupted_and_resumed_equals_uninterrupted(
    loop, capsys, tmp_path, monkeypatch
):
  argv = _EVAL_ARGS + _SHARED + ['--num-steps=8']
  if loop == 'fast':
    argv += ['--fast', '--num-seeds=2']
  straight = tmp_path / 'straight'
  status, out, err = _main(eval_cli, capsys, *argv, f'--out-dir={straight}')
  assert status == 0, err
  assert 'wrote' in out
  _check_shared_run(eval_cli, straight, 16 if loop == 'fast' else 8)

  stopped = tmp_path / 'stopped'
  with monkeypatch.context() as patch:
    _interrupt_at(patch, 5)
    status, _, err = _main(eval_cli, capsys, *argv, f'--out-dir={stopped}')
  assert status == 130, err
  assert f'disco-eval --out-dir {stopped} --resume' in err
  partial = _curve(stopped)
  assert 0 < len(partial) < len(_curve(straight))
  assert (stopped / 'returns.png').is_file()  # The partial curve.
  status, _, err = _main(eval_cli, capsys, f'--out-dir={stopped}', '--resume')
  assert status == 0, err
  assert _curve(stopped) == _curve(straight)
  with np.load(straight / 'agent_params.npz') as a:
    with np.load(stopped / 'agent_params.npz') as b:
      assert sorted(a) == sorted(b)
      for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


# tests/test_meta_train.py's tiny run, whose file runs first under `-n`
# (tests/conftest.py): CI's JAX compilation cache holds its meta-step.
def test_meta_train_interrupted_and_resumed_equals_uninterrupted(
    capsys, tmp_path, monkeypatch
):
  argv = _META_TRAIN_ARGS + _SHARED + ['--num-steps=3']
  straight = tmp_path / 'straight'
  status, out, err = _main(
      meta_train_cli, capsys, *argv, f'--out-dir={straight}'
  )
  assert status == 0, err
  assert 'wrote' in out
  _check_shared_run(meta_train_cli, straight, 3)
  stopped = tmp_path / 'stopped'
  with monkeypatch.context() as patch:
    _interrupt_at(patch, 1)
    status, _, err = _main(
        meta_train_cli, capsys, *argv, f'--out-dir={stopped}'
    )
  assert status == 130, err
  assert f'disco-meta-train --out-dir {stopped} --resume' in err
  assert len(_rows(stopped / 'log.csv')) == 1
  assert (stopped / 'meta_loss.png').is_file()  # The partial curve.
  status, _, err = _main(
      meta_train_cli, capsys, f'--out-dir={stopped}', '--resume'
  )
  assert status == 0, err
  assert _rows(stopped / 'log.csv') == _rows(straight / 'log.csv')
  with np.load(straight / 'update_rule_params.npz') as a:
    with np.load(stopped / 'update_rule_params.npz') as b:
      for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_docs_flag_tables_are_the_generated_ones():
  page = (_REPO / 'docs' / 'cli.md').read_text()
  for module in (eval_cli, meta_train_cli, train_cli, discovery_cli):
    table = cli.flags_table(module.build_parser())
    assert table in page, f'docs/cli.md lacks {module.PROG}:\n{table}'
