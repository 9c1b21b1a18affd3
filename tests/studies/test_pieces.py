"""Tests of `disco.studies.pieces` and `disco.studies.runs`: runs in pieces.

A tiny actor-critic run on Catch is stopped (by a shorter run, SIGTERM or
SIGINT), resumed to what a straight run gives, and skipped once done.
"""

import argparse
import functools
import json
import os
import signal

import numpy as np
import pytest

from disco import checkpoint
from disco import train
from disco.studies import pieces
from disco.studies import records
from disco.studies import runs
from tests.studies import tiny


def test_a_stopped_run_resumes_to_the_straight_result_and_is_then_skipped(
    tmp_path,
):
  straight = pieces.run(
      tmp_path / 'a', 'run', tiny.tiny_config(), num_seeds=1,
      show_progress=False,
  )  # fmt: skip
  # A run stopped after 3 iterations leaves its checkpoints behind.
  out = tmp_path / 'b'
  train.run_train(
      tiny.tiny_config(num_steps=3),
      checkpoint_dir=out / pieces.CHECKPOINTS_DIR / 'run',
  )
  resumed = pieces.run(
      out, 'run', tiny.tiny_config(), num_seeds=1, show_progress=False
  )
  for name in ('step', 'env_steps', 'train_return', 'eval_return'):
    np.testing.assert_array_equal(
        np.array(resumed['logs'][name], float),
        np.array(straight['logs'][name], float),
        err_msg=name,
    )
  assert [p['status'] for p in resumed['pieces']] == ['finished']
  assert resumed['pieces'][0]['started_at_step'] == 3
  assert resumed['pieces'][0]['ended_at_step'] == 6
  path = records.record_path(out, 'run')
  before = path.read_text()
  again = pieces.run(
      out, 'run', tiny.tiny_config(), num_seeds=1, show_progress=False
  )
  assert again == json.loads(before) and path.read_text() == before
  with pytest.raises(records.RecordError, match='other settings'):
    pieces.run(out, 'run', tiny.tiny_config(num_steps=7), num_seeds=1)


def test_a_stopped_run_is_reported_up_to_its_checkpoint_when_asked(tmp_path):
  name = 'catch__actor_critic__s0'
  ckpt_dir = tmp_path / pieces.CHECKPOINTS_DIR / name
  train.run_train(tiny.tiny_config(num_steps=4), checkpoint_dir=ckpt_dir)
  settings = dict(config=tiny.tiny_config().to_dict(), num_seeds=1)
  pieces.write_partial(tmp_path, name, settings, [], ckpt_dir)
  record = json.loads(records.partial_path(tmp_path, name).read_text())
  assert record['status'] == records.PARTIAL and record['seeds'] == [0]
  assert record['logs']['step'] == [0.0, 1.0, 2.0, 3.0, 4.0]
  assert records.load_records(tmp_path) == []
  (partial,) = records.load_records(tmp_path, include_partial=True)
  assert partial['name'] == name


def test_a_run_without_checkpoints_keeps_its_rows_when_stopped(
    tmp_path, monkeypatch
):
  """One device call's run: no checkpoint written, its rows kept on SIGINT."""

  class _StopAfter3(pieces.progress.ProgressBar):

    def __call__(self, step, row):
      if step >= 3:
        os.kill(os.getpid(), signal.SIGINT)

  monkeypatch.setattr(pieces.progress, 'ProgressBar', _StopAfter3)
  name = 'catch__actor_critic__s0'
  with pytest.raises(KeyboardInterrupt):
    pieces.run(
        tmp_path, name, tiny.tiny_config(), num_seeds=1, show_progress=False,
        checkpoints=False,
    )  # fmt: skip
  monkeypatch.undo()
  ckpt_dir = tmp_path / pieces.CHECKPOINTS_DIR / name
  assert [p.name for p in ckpt_dir.iterdir()] == [pieces.PIECES_FILE]
  assert not records.record_path(tmp_path, name).exists()
  record = json.loads(records.partial_path(tmp_path, name).read_text())
  assert record['status'] == records.PARTIAL and record['seeds'] == [0]
  # The signal comes after iteration 3's row; the run stops there.
  assert record['logs']['step'] == [0.0, 1.0, 2.0, 3.0]
  straight = pieces.run(
      tmp_path / 'straight', name, tiny.tiny_config(), num_seeds=1,
      show_progress=False,
  )  # fmt: skip
  np.testing.assert_array_equal(
      record['logs']['train_return'], straight['logs']['train_return'][:4]
  )
  (partial,) = records.load_records(tmp_path, include_partial=True)
  assert partial['name'] == name


def test_a_killed_piece_keeps_its_time_and_reads_as_killed(
    tmp_path, monkeypatch
):
  """A process killed outright (out of memory) runs no `finally`."""
  name = 'run'
  pieces_path = tmp_path / pieces.CHECKPOINTS_DIR / name / pieces.PIECES_FILE
  listed = {}

  class _KillAfter3(pieces.progress.ProgressBar):

    def __call__(self, step, row):
      if step == 3:
        listed['text'] = pieces_path.read_text()  # What a kill leaves.
        os.kill(os.getpid(), signal.SIGINT)

  monkeypatch.setattr(pieces, 'RUNNING_EVERY_S', 0.0)
  monkeypatch.setattr(pieces.progress, 'ProgressBar', _KillAfter3)
  with pytest.raises(KeyboardInterrupt):
    pieces.run(tmp_path, name, tiny.tiny_config(), num_seeds=1)
  monkeypatch.undo()
  (running,) = json.loads(listed['text'])['pieces']
  assert running['status'] == pieces.RUNNING
  assert running['ended_at_step'] == 2 and running['wall_seconds'] > 0
  pieces_path.write_text(listed['text'])  # As if its `finally` never ran.
  done = pieces.run(tmp_path, name, tiny.tiny_config(), num_seeds=1)
  assert [p['status'] for p in done['pieces']] == [pieces.KILLED, 'finished']
  assert done['pieces'][0]['wall_seconds'] == running['wall_seconds']


def test_a_command_stopped_by_sigterm_says_so_and_the_same_one_resumes(
    capsys, tmp_path, monkeypatch
):
  """A session's end (SIGTERM): a checkpoint, a message, no traceback."""
  todo = [runs.TrainRun('run', tiny.tiny_config())]

  def run_all():
    runs.run_all(tmp_path, todo, show_progress=False)

  class _TermAfter3(pieces.progress.ProgressBar):

    def __call__(self, step, row):
      if step == 3:
        os.kill(os.getpid(), signal.SIGTERM)

  monkeypatch.setattr(pieces.progress, 'ProgressBar', _TermAfter3)
  code = runs.command('bench', tmp_path, [run_all])
  monkeypatch.undo()
  assert code == 128 + signal.SIGTERM
  err = capsys.readouterr().err
  assert 'bench: stopped by SIGTERM' in err
  assert 'the same command goes on' in err
  partial = json.loads(records.partial_path(tmp_path, 'run').read_text())
  assert partial['pieces'][0]['status'] == 'interrupted'
  stopped_at = partial['pieces'][0]['ended_at_step']
  assert 3 <= stopped_at < 6
  reported = []
  args = argparse.Namespace(
      out=tmp_path, no_progress=True, keep_checkpoints=None
  )
  report = functools.partial(reported.append, 'report')
  assert runs.run_then_report('bench', args, todo, report) == 0
  assert reported == ['report']
  assert 'run: done' in capsys.readouterr().out
  done = json.loads(records.record_path(tmp_path, 'run').read_text())
  assert [p['started_at_step'] for p in done['pieces']] == [0, stopped_at]
  assert done['logs']['step'][-1] == 6.0
  # The done record replaces the partial one: one file per run.
  assert not records.partial_path(tmp_path, 'run').exists()
  # A record of other settings: an error message, exit status 1.
  other = [runs.TrainRun('run', tiny.tiny_config(num_steps=7))]
  code = runs.command(
      'bench', tmp_path, [lambda: runs.run_all(tmp_path, other)]
  )
  assert code == 1
  assert 'bench: error:' in capsys.readouterr().err


def test_records_saved_before_truncation_existed_match_the_same_run():
  saved = tiny.tiny_config().to_dict()
  del saved['truncation']
  now = dict(
      config=tiny.tiny_config().replace(truncation='terminate').to_dict()
  )
  assert records.same_settings(dict(config=saved), now)
  assert not records.same_settings(
      dict(config=tiny.tiny_config().to_dict()), now
  )


def test_run_names_and_flag_types():
  env = 'gymnax:Breakout-MinAtar'
  assert runs.run_name(env, 'disco') == 'Breakout-MinAtar__disco'
  assert runs.run_name(env, 'disco', 1) == 'Breakout-MinAtar__disco__s1'
  assert (
      runs.run_name(env, 'disco', (0, 1, 2), ['colab'])
      == 'Breakout-MinAtar__disco__colab__s0-2'
  )
  assert runs.eval_max_steps('gymnax:Freeway-MinAtar') == 2500
  assert runs.eval_max_steps('catch') == 1000
  assert runs.name_value('agent_dense=[64]') == ('agent_dense', [64])
  assert runs.name_value('env=catch') == ('env', 'catch')
  with pytest.raises(argparse.ArgumentTypeError, match='NAME=VALUE'):
    runs.name_value('num_envs')
  assert runs.positive(float)('3e-4') == 3e-4
  with pytest.raises(argparse.ArgumentTypeError, match='must be > 0'):
    runs.positive(int)('0')


def test_keep_checkpoints_sets_what_a_run_leaves_and_may_change_on_resume(
    tmp_path,
):
  ckpt_dir = tmp_path / pieces.CHECKPOINTS_DIR / 'run'
  train.run_train(tiny.tiny_config(num_steps=3), checkpoint_dir=ckpt_dir)
  assert checkpoint.list_steps(ckpt_dir) == [2, 3]  # The config's 2.
  todo = [runs.TrainRun('run', tiny.tiny_config())]
  (record,) = runs.run_all(
      tmp_path, todo, show_progress=False, keep_checkpoints=1
  )
  assert checkpoint.list_steps(ckpt_dir) == [6]
  assert record['pieces'][0]['started_at_step'] == 3
  # Not one of the record's settings: the run is done whatever it keeps.
  assert runs.run_all(tmp_path, todo, show_progress=False) == [record]
  parser = argparse.ArgumentParser()
  runs.add_flags(parser, seeds=(0,))
  assert parser.parse_args(['--out', 'o']).keep_checkpoints is None
  flags = ['--out', 'o', '--keep-checkpoints', '1']
  assert parser.parse_args(flags).keep_checkpoints == 1
  with pytest.raises(SystemExit):
    parser.parse_args(['--out', 'o', '--keep-checkpoints', '0'])
