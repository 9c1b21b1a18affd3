"""The long benchmarks' machinery: runs in pieces, and the report.

`benchmarks/pieces.py` trains a tiny actor-critic run on Catch, resumes it
from a checkpoint as a stopped run would, and skips it once done;
`benchmarks/disco103_vs_baselines.py` reports from handwritten records.
"""

import argparse
import csv
import importlib.util
import json
import os
import pathlib
import signal
import sys

import numpy as np
import pytest

from disco import train

_BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / 'benchmarks'


def _load(name):
  if str(_BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(_BENCHMARKS))
  spec = importlib.util.spec_from_file_location(
      name, _BENCHMARKS / f'{name}.py'
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


pieces = _load('pieces')
vs_baselines = _load('disco103_vs_baselines')


def _tiny(num_steps=6):
  return train.preset(
      'colab',
      rule='actor_critic',
      env='catch',
      num_envs=2,
      rollout_len=5,
      learner_batch_size=4,
      replay_fraction=0.5,
      buffer_capacity=8,
      learning_starts=4,
      agent_dense=(16,),
      agent_lstm_size=8,
      agent_head_mlp_hiddens=(8,),
      num_steps=num_steps,
      steps_per_chunk=1,
      checkpoint_every=1,
      eval_every=3,
      eval_envs=2,
      eval_max_steps=20,
  )


def test_a_stopped_run_resumes_to_the_straight_result_and_is_then_skipped(
    tmp_path,
):
  straight = pieces.run(
      tmp_path / 'a', 'run', _tiny(), num_seeds=1, show_progress=False
  )
  # A run stopped after 3 iterations leaves its checkpoints behind.
  out = tmp_path / 'b'
  train.run_train(
      _tiny(num_steps=3), checkpoint_dir=out / pieces.CHECKPOINTS_DIR / 'run'
  )
  resumed = pieces.run(out, 'run', _tiny(), num_seeds=1, show_progress=False)
  for name in ('step', 'env_steps', 'train_return', 'eval_return'):
    np.testing.assert_array_equal(
        np.array(resumed['logs'][name], float),
        np.array(straight['logs'][name], float),
        err_msg=name,
    )
  assert [p['status'] for p in resumed['pieces']] == ['finished']
  assert resumed['pieces'][0]['started_at_step'] == 3
  assert resumed['pieces'][0]['ended_at_step'] == 6
  path = pieces.record_path(out, 'run')
  before = path.read_text()
  again = pieces.run(out, 'run', _tiny(), num_seeds=1, show_progress=False)
  assert again == json.loads(before) and path.read_text() == before
  with pytest.raises(pieces.PiecesError, match='other settings'):
    pieces.run(out, 'run', _tiny(num_steps=7), num_seeds=1)


def _ours(env, rule, seed, finals):
  steps = list(range(0, 25 * len(finals), 25))
  return dict(
      name=f'{env}__{rule}__s{seed}',
      status='done',
      settings=dict(
          config=dict(env=env, rule=rule, agent_learning_rate=3e-3),
          num_seeds=1,
      ),
      wall_seconds=10.0,
      pieces=[{}],
      seeds=[seed],
      logs={
          'seed': [seed] * len(finals),
          'step': steps,
          'env_steps': [290 * s for s in steps],
          'learner_steps': steps,
          'eval_return': finals,
          'logs/entropy': [1.0] * len(finals),
      },
  )


def test_report_gives_iqm_intervals_per_seed_values_and_plots(tmp_path):
  env = 'gymnax:Breakout-MinAtar'
  runs = tmp_path / pieces.RUNS_DIR
  for seed, final in enumerate((1.0, 2.0, 6.0)):
    pieces.write_json(
        runs / f'd{seed}.json', _ours(env, 'disco', seed, [0.0, None, final])
    )
  ppo = dict(
      status='done',
      env=env,
      wall_seconds=30.0,
      seeds=[
          dict(seed=s, final_return=float(s + 3), env_steps=1000)
          for s in (0, 1)
      ],
      curves=[
          dict(seed=s, env_steps=x, value=float(s + x / 1000.0))
          for s in (0, 1)
          for x in (0, 500, 1000)
      ],
  )
  pieces.write_json(runs / 'ppo.json', ppo)
  vs_baselines.report(tmp_path)
  with open(tmp_path / 'summary.csv', newline='') as f:
    summary = {row['algo']: row for row in csv.DictReader(f)}
  assert float(summary['disco']['iqm']) == pytest.approx(3.0)
  assert summary['disco']['per_seed'] == '1.00 2.00 6.00'
  low, high = float(summary['disco']['ci_low']), float(
      summary['disco']['ci_high']
  )
  assert 1.0 <= low <= 3.0 <= high <= 6.0
  assert float(summary['ppo']['iqm']) == pytest.approx(3.5)
  assert float(summary['ppo']['wall_seconds_per_seed']) == 15.0
  for name in ('results.csv', 'curves.csv', 'curves.png'):
    assert (tmp_path / name).is_file(), name


def test_summary_pools_seeds_at_the_budget_every_seed_reached(tmp_path):
  """A stopped seed beside finished ones: the IQM is at its last evaluation."""
  env = 'craftax:Craftax-Classic-Symbolic-v1'
  runs = tmp_path / pieces.RUNS_DIR
  for seed, finals in enumerate(([0.0, 1.0, 5.0], [0.0, 3.0, 6.0])):
    pieces.write_json(runs / f'd{seed}.json', _ours(env, 'disco', seed, finals))
  stopped = dict(_ours(env, 'disco', 2, [0.0, 4.0]), status=pieces.PARTIAL)
  pieces.write_json(runs / 'd2.partial.json', stopped)
  rows = vs_baselines.per_seed_rows(
      vs_baselines.load_records(tmp_path, include_partial=True)
  )
  assert [r['env_steps'] for r in rows] == [290 * 50, 290 * 50, 290 * 25]
  (summary,) = vs_baselines.summary_rows(rows)
  assert summary['env_steps'] == 290 * 25
  assert summary['learner_updates'] == 25
  assert summary['per_seed'] == '1.00 3.00 4.00'
  (done,) = vs_baselines.summary_rows(rows[:2])
  assert done['env_steps'] == 290 * 50 and done['per_seed'] == '5.00 6.00'


def test_plot_tells_seeds_of_one_algorithm_apart(tmp_path):
  """Seeds share their algorithm's colour and differ in line style."""
  env = 'craftax:Craftax-Classic-Symbolic-v1'
  for seed in (0, 1):
    pieces.write_json(
        tmp_path / pieces.RUNS_DIR / f'd{seed}.json',
        _ours(env, 'disco', seed, [0.0, 1.0 + seed]),
    )
  pieces.write_json(
      tmp_path / pieces.RUNS_DIR / 'a0.json',
      _ours(env, 'actor_critic', 0, [0.0, 0.5]),
  )
  rows = vs_baselines.per_seed_rows(vs_baselines.load_records(tmp_path))
  fig = vs_baselines.plot(rows, tmp_path / 'curves.png')
  lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
  assert sorted(lines) == ['actor_critic s0', 'disco s0', 'disco s1']
  disco0, disco1 = lines['disco s0'], lines['disco s1']
  assert disco0.get_color() == disco1.get_color()
  assert disco0.get_linestyle() != disco1.get_linestyle()
  assert lines['actor_critic s0'].get_color() != disco0.get_color()


def test_plot_leaves_no_figure_open(tmp_path):
  """A process reporting many times must not pile up open figures."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  env = 'craftax:Craftax-Classic-Symbolic-v1'
  pieces.write_json(
      tmp_path / pieces.RUNS_DIR / 'd0.json',
      _ours(env, 'disco', 0, [0.0, 1.0]),
  )
  rows = vs_baselines.per_seed_rows(vs_baselines.load_records(tmp_path))
  before = set(plt.get_fignums())
  for _ in range(3):
    vs_baselines.plot(rows, tmp_path / 'curves.png')
  assert set(plt.get_fignums()) == before
  assert (tmp_path / 'curves.png').stat().st_size > 0


def test_command_needs_an_environment_or_the_report(capsys, tmp_path):
  with pytest.raises(SystemExit) as e:
    vs_baselines.main(['--out', str(tmp_path)])
  assert e.value.code == 2
  assert 'give --env' in capsys.readouterr().err


def test_a_command_stopped_by_sigterm_says_so_and_the_same_one_resumes(
    capsys, tmp_path, monkeypatch
):
  """A session's end (SIGTERM): a checkpoint, a message, no traceback."""
  parser = argparse.ArgumentParser(prog='bench')
  parser.add_argument('--out', type=pathlib.Path)
  parser.add_argument('--env')
  parser.add_argument('--report', action='store_true')
  parser.add_argument('--include-partial', action='store_true')
  argv = ['--out', str(tmp_path), '--env', 'catch']

  def run_env(args):
    pieces.run(args.out, 'run', _tiny(), num_seeds=1, show_progress=False)

  class _TermAfter3(pieces.progress.ProgressBar):

    def __call__(self, step, row):
      if step == 3:
        os.kill(os.getpid(), signal.SIGTERM)

  monkeypatch.setattr(pieces.progress, 'ProgressBar', _TermAfter3)
  code = vs_baselines.run_command(parser, argv, run_env, None)
  monkeypatch.undo()
  assert code == 128 + signal.SIGTERM
  err = capsys.readouterr().err
  assert 'stopped by SIGTERM' in err and 'the same command goes on' in err
  partial = json.loads(pieces.partial_path(tmp_path, 'run').read_text())
  assert partial['pieces'][0]['status'] == 'interrupted'
  stopped_at = partial['pieces'][0]['ended_at_step']
  assert 3 <= stopped_at < 6
  assert vs_baselines.run_command(parser, argv, run_env, None) == 0
  done = json.loads(pieces.record_path(tmp_path, 'run').read_text())
  assert [p['started_at_step'] for p in done['pieces']] == [0, stopped_at]
  assert done['logs']['step'][-1] == 6.0
  # The done record replaces the partial one: one file per run.
  assert not pieces.partial_path(tmp_path, 'run').exists()


def test_budgets_count_updates_on_minatar_and_env_steps_on_craftax():
  args = vs_baselines.main.__globals__['argparse'].Namespace(
      updates=5000, env_steps=None, disco_lr=1e-3, ac_lr=1e-3, agent=None
  )
  minatar = vs_baselines.our_config('gymnax:Freeway-MinAtar', 'disco', 1, args)
  warmup = -(-minatar.learning_starts // minatar.num_envs) - 1
  assert minatar.num_steps - warmup == 5000
  assert minatar.agent_dense == (256, 256) and minatar.seed == 1
  assert minatar.truncation == 'terminate'  # As every recorded run.
  assert minatar.eval_max_steps == 2500  # Freeway's episodes: 2,500 steps.
  craftax = vs_baselines.our_config(
      vs_baselines.CRAFTAX, 'actor_critic', 0, args
  )
  assert craftax.num_steps * craftax.env_steps_per_step >= 1_000_000
  assert craftax.agent_dense == (512, 512) and craftax.agent_lstm_size == 64
  # An accelerator's budget: env steps on MinAtar too, the colab's agent.
  args.env_steps, args.agent = 10_000_000, 'colab'
  big = vs_baselines.our_config('gymnax:Breakout-MinAtar', 'disco', 0, args)
  assert big.num_steps == big.num_steps_for(10_000_000)
  assert big.agent_dense == (512, 512) and big.agent_lstm_size == 128


def test_run_names_say_the_agent_and_seeds_trained_together():
  env = 'gymnax:Breakout-MinAtar'
  assert vs_baselines.run_name(env, 'disco', 1) == 'Breakout-MinAtar__disco__s1'
  assert (
      vs_baselines.run_name(env, 'disco', (0, 1, 2), 'colab')
      == 'Breakout-MinAtar__disco__colab__s0-2'
  )
  assert vs_baselines.run_name(env, 'ppo', agent='minatar') == (
      'Breakout-MinAtar__ppo'
  )


def test_a_stopped_run_is_reported_up_to_its_checkpoint_when_asked(tmp_path):
  name = 'catch__actor_critic__s0'
  ckpt_dir = tmp_path / pieces.CHECKPOINTS_DIR / name
  train.run_train(_tiny(num_steps=4), checkpoint_dir=ckpt_dir)
  settings = dict(config=_tiny().to_dict(), num_seeds=1)
  pieces.write_partial(tmp_path, name, settings, [], ckpt_dir)
  record = json.loads(pieces.partial_path(tmp_path, name).read_text())
  assert record['status'] == pieces.PARTIAL and record['seeds'] == [0]
  assert record['logs']['step'] == [0.0, 1.0, 2.0, 3.0, 4.0]
  assert vs_baselines.load_records(tmp_path) == []
  (partial,) = vs_baselines.load_records(tmp_path, include_partial=True)
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
        tmp_path,
        name,
        _tiny(),
        num_seeds=1,
        show_progress=False,
        checkpoints=False,
    )
  monkeypatch.undo()
  ckpt_dir = tmp_path / pieces.CHECKPOINTS_DIR / name
  assert [p.name for p in ckpt_dir.iterdir()] == [pieces.PIECES_FILE]
  assert not pieces.record_path(tmp_path, name).exists()
  record = json.loads(pieces.partial_path(tmp_path, name).read_text())
  assert record['status'] == pieces.PARTIAL and record['seeds'] == [0]
  # The signal comes after iteration 3's row; the run stops there.
  assert record['logs']['step'] == [0.0, 1.0, 2.0, 3.0]
  straight = pieces.run(
      tmp_path / 'straight', name, _tiny(), num_seeds=1, show_progress=False
  )
  np.testing.assert_array_equal(
      record['logs']['train_return'], straight['logs']['train_return'][:4]
  )
  (partial,) = vs_baselines.load_records(tmp_path, include_partial=True)
  assert partial['name'] == name


def test_diagnosis_variants_change_one_thing_from_the_base():
  diagnosis = _load('breakout_diagnosis')
  table = diagnosis.variants(base_rate=3e-3)
  base = table['base']
  assert base['rule'] == 'disco' and base['agent_learning_rate'] == 5e-4
  assert {'lr1e-4', 'lr3e-4', 'lr5e-4', 'lr1e-3', 'lr3e-3', 'lr1e-2'} <= set(
      table
  )
  assert table['lr1e-2'] == base | dict(agent_learning_rate=1e-2)
  assert table['colab_agent']['agent_dense'] == (512, 512)
  assert table['colab_agent']['agent_learning_rate'] == 3e-3
  replay = diagnosis.config_for(table['replay0.5'], 10_000, seed=0)
  assert replay.fresh_per_batch == 48 and replay.num_envs == 48
  assert table['ac_lr3e-3']['rule'] == 'actor_critic'
  config = diagnosis.config_for(base, 1_000_000, seed=2)
  assert config.num_steps == 3449 and config.seed == 2
  # As its first runs were recorded (before `truncation` existed).
  assert config.truncation == 'terminate'


def test_learner_cost_ratios_compare_like_with_like():
  cost = _load('learner_cost')
  rows = [
      dict(env='e', agent='a', num_seeds=1, rule=r, compute_dtype=d, per_seed=v)
      for r, d, v in (
          ('disco', 'float32', 2.0),
          ('disco', 'bfloat16', 1.0),
          ('actor_critic', 'float32', 8.0),
      )
  ]
  rows.append(rows[0] | dict(inner_scans='unrolled', per_seed=3.0))
  cost._ratios(rows)  # pylint: disable=protected-access
  assert [r['vs_f32'] for r in rows] == [1.0, 0.5, 1.0, 1.0]
  assert [r['vs_ac'] for r in rows] == [0.25, '', 1.0, '']
  assert [r['vs_rolled'] for r in rows] == [1.0, 1.0, 1.0, 1.5]


def test_records_saved_before_truncation_existed_match_the_benchmark():
  saved = _tiny().to_dict()
  del saved['truncation']
  now = dict(config=_tiny().replace(truncation='terminate').to_dict())
  assert pieces.normal_settings(dict(config=saved)) == pieces.normal_settings(
      now
  )
  assert pieces.normal_settings(dict(config=_tiny().to_dict())) != (
      pieces.normal_settings(now)
  )


def test_the_protocol_benchmark_runs_the_preset_beside_old_runs_and_paper():
  protocol = _load('paper_protocol')
  args = argparse.Namespace(
      frame_stack=None,
      num_envs=None,
      unroll_inner_scans=False,
      env_steps=None,
      agent=None,
      evaluations=8,
      checkpoint_every=40,
      steps_per_chunk=4,
  )
  config = protocol.our_config(protocol.CRAFTAX, 'disco', 0, args)
  assert (config.learner_batch_size, config.replay_fraction) == (24, 0.99)
  assert config.spread_fresh and config.frame_stack == 32
  assert config.agent_frame_embedding == 64
  # 100,000 steps: 575 rollouts of 6 x 29; the buffer holds them all.
  assert (config.num_steps, config.env_steps_per_step) == (575, 174)
  assert config.buffer_capacity == 576 * 6
  assert config.truncation == 'terminate'
  assert not config.unroll_inner_scans
  unrolled = protocol.our_config(
      protocol.CRAFTAX, 'disco', 0, argparse.Namespace(**vars(args) | dict(
          unroll_inner_scans=True))
  )  # fmt: skip
  assert unrolled == config.replace(unroll_inner_scans=True)
  # With 24 environments: a quarter of the rollouts, four times the updates
  # per rollout, a run name of its own.
  more = protocol.our_config(
      protocol.CRAFTAX, 'disco', 0, argparse.Namespace(**vars(args) | dict(
          num_envs=24))
  )  # fmt: skip
  assert (more.num_steps, more.learner_steps_per_step) == (144, 100)
  assert more.buffer_capacity == 145 * 24
  assert protocol.run_name(protocol.CRAFTAX, 'disco', (0,), None, 24) == (
      'Craftax-Classic-Symbolic-v1__disco__envs24__s0'
  )
  summary = [
      dict(
          env=protocol.CRAFTAX, algo='disco', env_steps=100_050, seeds=1,
          iqm=2.0, ci_low=2.0, ci_high=2.0, per_seed='2.00',
      )
  ]  # fmt: skip
  rows = protocol.comparison(summary)
  settings = [r['settings'] for r in rows]
  assert settings[0] == 'crafter protocol'
  paper = {
      r['algo']: r['iqm'] for r in rows if r['settings'].startswith('paper')
  }
  assert paper['Disco103'] == 6.59 and paper['PPO'] == 4.20
  # The old runs at their evaluations around 100,050 steps.
  old = {
      (r['algo'], r['env_steps'])
      for r in rows
      if r['settings'].startswith('old')
  }
  assert {('disco', 75_110), ('disco', 147_610)} <= old


# ----------------------------------------------------------------------------
# craftax_arms.py: one factor per arm.


def test_each_craftax_arm_changes_one_factor_of_the_base():
  arms = _load('craftax_arms')
  args = argparse.Namespace(steps_per_chunk=4, checkpoint_every=40)
  base = arms.arm_config('base', 0, 250_000, args).to_dict()
  factors = {
      'width_256': {'agent_lstm_size', 'agent_head_mlp_hiddens'},
      'width_1024': {'agent_lstm_size', 'agent_head_mlp_hiddens'},
      'conv_grid': {'env', 'agent_network', 'agent_conv_channels'},
      'rollout_per_update': {'spread_fresh', 'replay_per_slot', 'num_envs',
                             'buffer_capacity', 'num_steps', 'eval_every'},  # fmt: skip
      'no_weight_decay': {'agent_weight_decay'},
  }
  assert set(factors) | {'base'} == set(arms.ARMS)
  for arm, fields in factors.items():
    config = arms.arm_config(arm, 0, 250_000, args)
    changed = {k for k, v in config.to_dict().items() if base[k] != v}
    assert changed == fields, arm
    # Every arm runs at least the budget, within one iteration of it.
    steps = config.num_steps * config.env_steps_per_step
    assert 250_000 <= steps < 250_000 + config.env_steps_per_step
  assert base['rule'] == 'disco' and base['truncation'] == 'terminate'
  assert base['agent_frame_embedding'] == 64 and base['frame_stack'] == 32
