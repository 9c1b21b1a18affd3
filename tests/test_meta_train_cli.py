"""Tests for `disco-meta-train` (`disco.meta_train.cli`).

The command runs in-process (`main(argv)`) with a tiny config, so that it
shares the compiled meta-update with the other tests of the worker.
"""

import csv
import importlib.metadata
import json
import pathlib

import chex
import jax
import numpy as np

from disco import checkpoint
from disco import meta_train
from disco import weights
from disco.meta_train import cli as meta_train_cli
from tests import tiny_args

# tests/test_meta_train.py's tiny run, whose file runs first under `-n`
# (tests/conftest.py): CI's JAX compilation cache holds its meta-step.
_TINY_ARGS = [*tiny_args.META_TRAIN, '--checkpoint-every=1']
_TINY = meta_train.MetaTrainConfig(
    num_steps=2,
    num_inner_steps=1,
    rollout_len=4,
    envs_per_device=4,
    agent_dense=(16,),
    agent_head_mlp_hiddens=(8,),
    agent_lstm_size=8,
    value_fn_dense=(16,),
    checkpoint_every=1,
)


def _rows(path: pathlib.Path) -> list[dict[str, str]]:
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


def test_console_script_is_declared():
  (entry,) = [
      e
      for e in importlib.metadata.entry_points(group='console_scripts')
      if e.name == 'disco-meta-train'
  ]
  assert entry.value == 'disco.meta_train.cli:main'
  assert entry.load() is meta_train_cli.main


def test_run_writes_everything_and_resumes(tmp_path, capsys):
  out = tmp_path / 'run'
  status = meta_train_cli.main(
      _TINY_ARGS + ['--num-steps=2', f'--out-dir={out}']
  )
  captured = capsys.readouterr()
  assert status == 0, captured.err
  assert 'meta-step' in captured.err  # The tqdm bar.
  for name in (
      'config.json',
      'log.csv',
      'update_rule_params.npz',
      'rewards.png',
      'meta_loss.png',
      'meta_grad_norm.png',
  ):
    assert (out / name).is_file(), name
    assert str(out / name) in captured.out, name
  assert str(checkpoint.step_path(out / 'checkpoints', 2)) in captured.out
  assert 'share of positive rewards' in captured.out
  saved = json.loads((out / 'config.json').read_text())
  assert saved == dict(command='disco-meta-train', config=_TINY.to_dict())
  rows = _rows(out / 'log.csv')
  assert [r['step'] for r in rows] == ['1', '2']
  assert {'meta_loss', 'pos_rewards', 'neg_rewards', 'meta_grad_norm'} <= set(
      rows[0]
  )
  for png in ('rewards.png', 'meta_loss.png', 'meta_grad_norm.png'):
    assert (out / png).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'

  # Same run, same rule as the library's.
  direct = meta_train.run_meta_train(_TINY)
  saved = weights.load_update_rule_params(out / 'update_rule_params.npz')
  chex.assert_trees_all_equal(saved, direct.update_rule_params)
  np.testing.assert_array_equal(
      [float(r['meta_loss']) for r in rows], direct.logs['meta_loss']
  )

  # Without --resume the directory is not reused.
  assert meta_train_cli.main(_TINY_ARGS + [f'--out-dir={out}']) == 2
  assert '--resume' in capsys.readouterr().err

  # A resume with another config is refused and changes nothing.
  config_before = (out / 'config.json').read_text()
  assert (
      meta_train_cli.main([f'--out-dir={out}', '--resume', '--agent-dense=32'])
      == 1
  )
  assert 'agent_dense' in capsys.readouterr().err
  assert (out / 'config.json').read_text() == config_before

  # --resume reads config.json; --num_steps extends the run.
  status = meta_train_cli.main(
      [f'--out-dir={out}', '--resume', '--num-steps=3', '--no-progress']
  )
  assert status == 0, capsys.readouterr().err
  rows = _rows(out / 'log.csv')
  assert [r['step'] for r in rows] == ['1', '2', '3']
  longer = meta_train.run_meta_train(_TINY.replace(num_steps=3))
  chex.assert_trees_all_equal(
      weights.load_update_rule_params(out / 'update_rule_params.npz'),
      longer.update_rule_params,
  )
  np.testing.assert_array_equal(
      [float(r['meta_loss']) for r in rows], longer.logs['meta_loss']
  )


def test_init_from_a_file_and_bad_inputs(tmp_path, capsys):
  rule = tmp_path / 'rule.npz'
  weights.save_update_rule_params(meta_train.random_init_params(_TINY), rule)
  out = tmp_path / 'from_file'
  status = meta_train_cli.main(
      _TINY_ARGS
      + [
          '--num-steps=1',
          f'--update-rule-params={rule}',
          f'--out-dir={out}',
          '--no-progress',
      ]
  )
  assert status == 0, capsys.readouterr().err
  # Starting from the random init's file is the random-init run.
  direct = meta_train.run_meta_train(_TINY.replace(num_steps=1))
  chex.assert_trees_all_equal(
      weights.load_update_rule_params(out / 'update_rule_params.npz'),
      direct.update_rule_params,
  )

  status = meta_train_cli.main([
      f'--update-rule-params={tmp_path / "nope.npz"}',
      f'--out-dir={tmp_path / "nope"}',
      '--no-progress',
  ])
  assert status == 1
  assert 'nope.npz' in capsys.readouterr().err


def test_resume_trims_the_log_at_this_process_checkpoint(
    tmp_path, capsys, monkeypatch
):
  # Process 1 of 2 keeps its checkpoints in checkpoints/process_1. The loop
  # is a stand-in: the command's bookkeeping is what is tested.
  monkeypatch.setattr(jax, 'process_count', lambda: 2)
  monkeypatch.setattr(jax, 'process_index', lambda: 1)
  params = {'module': {'w': np.zeros((2,), np.float32)}}

  def _run(
      config, *, progress_fn, checkpoint_dir, resume, handle_interrupts, logger
  ):
    del handle_interrupts, logger
    if not resume:
      for step in (1, 2, 3):
        progress_fn(step, {'meta_loss': float(step)})
      checkpoint.save(
          checkpoint_dir / 'process_1',
          2,
          update_rule_params=params,
          arrays={},
          metadata={},
      )
    return meta_train.MetaTrainResult(
        update_rule_params=params,
        logs={},
        num_steps=config.num_steps,
        checkpoint_path=None,
    )

  monkeypatch.setattr(meta_train, 'run_meta_train', _run)
  out = tmp_path / 'run'
  argv = [f'--out-dir={out}', '--no-progress', '--no-plot']
  assert meta_train_cli.main(_TINY_ARGS + argv) == 0, capsys.readouterr().err
  assert [r['step'] for r in _rows(out / 'log.csv')] == ['1', '2', '3']
  assert meta_train_cli.main(argv + ['--resume']) == 0, capsys.readouterr().err
  assert [r['step'] for r in _rows(out / 'log.csv')] == ['1', '2']
