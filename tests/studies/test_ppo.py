"""Tests of rejax's PPO as a baseline (`disco.studies.ppo*`), tiny budgets.

The runs need rejax and are skipped without it; the budget arithmetic and
the error without rejax run everywhere. The runs are one program for two
seeds on DeepSea with a tiny PPO (a few iterations, four evaluation
episodes), compiled at XLA's lowest optimisation level, and a segmented
run on CartPole stopped and resumed.
"""

import importlib.util
import json
import os
import signal

import numpy as np
import pytest

from disco import checkpoint
from disco import interrupts
from disco.studies import pieces
from disco.studies import ppo
from disco.studies import ppo_runs
from disco.studies import ppo_segmented
from disco.studies import records
from disco.studies import runs

_HAS_REJAX = importlib.util.find_spec('rejax') is not None
_NEEDS_REJAX = pytest.mark.skipif(not _HAS_REJAX, reason='needs rejax')
# 4 environments x 8 steps: 32 env steps per PPO iteration.
_TINY = dict(num_envs=4, num_steps=8, num_epochs=1, num_minibatches=1)


def test_plan_whole_iterations():
  # 200k steps, 10 points, 1024 steps an iteration: 19.5 -> 20 per point.
  assert ppo.plan(1024, 200_000, 10) == (20 * 1024, 200 * 1024)
  # At least one iteration per point.
  assert ppo.plan(1024, 100, 4) == (1024, 4 * 1024)
  with pytest.raises(ValueError, match='positive'):
    ppo.plan(1024, 0, 4)


def test_env_ids_and_configs():
  assert ppo.rejax_env_id('gymnax:Breakout-MinAtar') == 'Breakout-MinAtar'
  assert ppo.rejax_env_id('craftax:Craftax-Classic-Symbolic-v1') == (
      'craftax/Craftax-Classic-Symbolic-v1'
  )
  settings, source = ppo.config_for('gymnax:Breakout-MinAtar')
  assert settings == ppo.REJAX_BREAKOUT_MINATAR
  assert 'tuned for this env' in source
  settings['agent_kwargs']['activation'] = 'relu'  # A copy.
  assert ppo.REJAX_BREAKOUT_MINATAR['agent_kwargs'] == {'activation': 'tanh'}
  assert ppo.config_for('DeepSea-bsuite')[0] == {}


def test_eval_points_get_closest_to_the_budget():
  # MinAtar (1,024 env steps an iteration), 72,500: 5 points of 14
  # iterations, 71,680 steps (4 or 6 points reach 73,728).
  assert ppo_runs.eval_points(1024, 72_500) == 5
  # rejax's defaults (4,096): 5 points would take 81,920; 6 take 73,728.
  assert ppo_runs.eval_points(4096, 72_500) == 6
  # Exact budgets keep the preferred count.
  assert ppo_runs.eval_points(100, 5_000) == 5
  # At most one point per iteration.
  assert ppo_runs.eval_points(20, 20) == 1
  assert ppo_runs.eval_points(20, 40) == 2
  with pytest.raises(ValueError):
    ppo_runs.eval_points(0, 100)


def test_settings_name_the_method_and_episodes():
  craftax = ppo_runs.settings('craftax:Craftax-Classic-Symbolic-v1', 10, [0])
  assert craftax == dict(
      env_steps=10, seeds=[0], method='segmented', num_eval_episodes=16,
      overrides={},
  )  # fmt: skip
  minatar = ppo_runs.settings('gymnax:Breakout-MinAtar', 10, (0, 1), _TINY)
  assert minatar['method'] == 'run_ppo' and minatar['seeds'] == [0, 1]
  assert minatar['num_eval_episodes'] == 128 and minatar['overrides'] == _TINY


@pytest.mark.skipif(_HAS_REJAX, reason='rejax is installed here')
def test_without_rejax_the_error_names_the_extra():
  with pytest.raises(ModuleNotFoundError, match=r'disco-jax\[ppo\]'):
    ppo.require_rejax()


@_NEEDS_REJAX
def test_run_ppo_curve():
  seeds = (0, 3)
  num_points = 3
  result = ppo.run_ppo(
      'DeepSea-bsuite',
      num_env_steps=3 * 2 * 32,
      seeds=seeds,
      num_eval_points=num_points,
      num_eval_episodes=4,
      overrides=_TINY,
      compiler_options=ppo.FAST_COMPILE,
  )
  assert result['seeds'] == list(seeds)
  steps = np.asarray(result['env_steps'])
  returns = np.asarray(result['returns'])
  lengths = np.asarray(result['episode_lengths'])
  assert steps.shape == returns.shape == lengths.shape == (2, num_points)
  # Two iterations of 32 env steps between points.
  np.testing.assert_array_equal(steps, [[64, 128, 192]] * 2)
  assert np.all(np.isfinite(returns))
  # DeepSea (size 8) episodes last 8 steps.
  np.testing.assert_array_equal(lengths, 8)
  assert result['config']['total_timesteps'] == 192
  assert result['config']['eval_freq'] == 64
  assert result['config']['num_eval_episodes'] == 4
  assert 0 < result['compile_time_s'] < result['wall_time_s']
  assert 0 < result['train_time_s'] < result['wall_time_s']
  record = ppo_runs._record('DeepSea-bsuite', {}, result)  # pylint: disable=protected-access
  assert [s['final_return'] for s in record['seeds']] == [
      r[-1] for r in result['returns']
  ]
  assert [c['env_steps'] for c in record['curves']] == [64, 128, 192] * 2


@_NEEDS_REJAX
def test_segmented_ppo_resumes_bit_for_bit(tmp_path, monkeypatch):
  # 6 iterations, evaluations after 2, 4 and 6, checkpoints every 3.
  monkeypatch.setattr(ppo_segmented, 'CHECKPOINTS', 2)

  def run(seeds=(0, 1), **kwargs):
    return ppo_segmented.run_ppo_segmented(
        'CartPole-v1', 6 * 32, seeds, 3, 4, _TINY, **kwargs
    )

  def interrupt_after_5(iteration):
    if iteration == 5:
      os.kill(os.getpid(), signal.SIGINT)

  whole = run()
  with pytest.raises(interrupts.Interrupted):
    run(
        checkpoint_dir=tmp_path,
        handle_interrupts=True,
        progress_fn=interrupt_after_5,
    )
  assert checkpoint.list_steps(tmp_path) == [3, 5]
  resumed = run(checkpoint_dir=tmp_path)
  for name in ('env_steps', 'returns', 'episode_lengths'):
    assert resumed[name] == whole[name], name
  assert resumed['env_steps'][0] == [64, 128, 192]
  assert [
      (p['started_at_iteration'], p['ended_at_iteration'], p['status'])
      for p in resumed['pieces']
  ] == [(0, 5, 'interrupted'), (5, 6, 'finished')]
  assert resumed['wall_time_s'] == pytest.approx(
      sum(p['wall_seconds'] for p in resumed['pieces'])
  )
  with pytest.raises(
      checkpoint.CheckpointMismatchError, match='another PPO run'
  ):
    run(seeds=(0, 2), checkpoint_dir=tmp_path)


@_NEEDS_REJAX
def test_a_killed_ppo_piece_keeps_its_time_and_reads_as_killed(
    tmp_path, monkeypatch
):
  """A process killed outright runs no `finally`: its listing stays."""
  monkeypatch.setattr(ppo_segmented, 'CHECKPOINTS', 2)
  monkeypatch.setattr(pieces, 'RUNNING_EVERY_S', 0.0)
  pieces_path = tmp_path / pieces.PIECES_FILE
  listed = {}

  def run(**kwargs):
    return ppo_segmented.run_ppo_segmented(
        'CartPole-v1', 6 * 32, (0,), 3, 4, _TINY, checkpoint_dir=tmp_path,
        **kwargs,
    )  # fmt: skip

  def kill_after_5(iteration):
    if iteration == 5:
      listed['text'] = pieces_path.read_text()  # What a kill leaves.
      os.kill(os.getpid(), signal.SIGINT)

  with pytest.raises(interrupts.Interrupted):
    run(handle_interrupts=True, progress_fn=kill_after_5)
  (running,) = json.loads(listed['text'])['pieces']
  assert running['status'] == pieces.RUNNING
  assert running['ended_at_iteration'] == 5
  assert running['wall_seconds'] >= running['train_seconds'] > 0
  pieces_path.write_text(listed['text'])  # As if its `finally` never ran.
  resumed = run()
  assert [p['status'] for p in resumed['pieces']] == [pieces.KILLED, 'finished']
  assert resumed['pieces'][0]['wall_seconds'] == running['wall_seconds']


@_NEEDS_REJAX
def test_a_ppo_run_of_a_study_is_kept_and_then_skipped(tmp_path, capsys):
  # rejax's defaults on DeepSea: one PPO iteration of 64 x 64 env steps.
  todo = [runs.PpoRun('ppo', 'gymnax:DeepSea-bsuite', 4096, (0,))]
  (record,) = runs.run_all(tmp_path, todo, show_progress=False)
  assert record['name'] == 'ppo' and record['status'] == records.DONE
  assert record['settings'] == ppo_runs.settings(
      'gymnax:DeepSea-bsuite', 4096, [0]
  )
  assert [c['env_steps'] for c in record['curves']] == [4096]
  assert 'ppo: done, ' in capsys.readouterr().out
  (kept,) = records.load_records(tmp_path)
  assert kept['curves'] == record['curves']  # (Its NaNs compare unequal.)
  (again,) = runs.run_all(tmp_path, todo, show_progress=False)
  assert again['wall_seconds'] == record['wall_seconds']
  assert 'ppo: done before' in capsys.readouterr().out
