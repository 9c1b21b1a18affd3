"""The long benchmarks' scripts: their runs, configs and names.

The machinery they share (runs in pieces, records, the report) is tested in
tests/studies; these tests load the scripts as users run them and check
what each one asks of it.
"""

import argparse
import importlib.util
import pathlib

import pytest

from disco import train
from disco.studies import records
from disco.studies import runs as runs_lib

_BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / 'benchmarks'


def _load(name):
  spec = importlib.util.spec_from_file_location(
      name, _BENCHMARKS / f'{name}.py'
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


vs_baselines = _load('disco103_vs_baselines')


def test_command_needs_an_environment_or_the_report(capsys, tmp_path):
  with pytest.raises(SystemExit) as e:
    vs_baselines.main(['--out', str(tmp_path)])
  assert e.value.code == 2
  assert 'give --env' in capsys.readouterr().err


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
  assert craftax.eval_max_steps == 10_000  # Craftax-Classic's episodes.
  # Its grid and pixel observations too: the same episodes.
  for env in ('Symbolic-Grid-v1', 'Pixels-v1'):
    grid = vs_baselines.our_config(
        f'craftax:Craftax-Classic-{env}', 'disco', 0, args
    )
    assert grid.eval_max_steps == 10_000, env
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


def test_a_command_lists_its_runs_named_as_the_records_kept():
  args = argparse.Namespace(
      env='gymnax:Breakout-MinAtar', seeds=[0, 1], seeds_together=False,
      algos=('disco', 'ppo'), agent=None, updates=5, env_steps=None,
      disco_lr=1e-3, ac_lr=1e-3,
  )  # fmt: skip
  disco0, disco1, ppo = vs_baselines.runs(args)
  assert (disco0.name, disco1.name) == (
      'Breakout-MinAtar__disco__s0',
      'Breakout-MinAtar__disco__s1',
  )
  assert (disco0.config.seed, disco1.config.seed, disco0.num_seeds) == (0, 1, 1)
  assert ppo == runs_lib.PpoRun(
      'Breakout-MinAtar__ppo',
      'gymnax:Breakout-MinAtar',
      disco0.config.num_steps * disco0.config.env_steps_per_step,
      (0, 1),
  )
  args.seeds_together = True
  together, _ = vs_baselines.runs(args)
  assert together.name == 'Breakout-MinAtar__disco__s0-1'
  assert together.num_seeds == 2
  # The protocol's names, as its records under benchmarks/results/ have them.
  protocol = _load('paper_protocol')
  kept = _BENCHMARKS / 'results' / 'paper_protocol' / 'runs'
  name = protocol.run_name('gymnax:Breakout-MinAtar', 'disco', (1, 2))
  assert (kept / f'{name}.json').is_file()
  assert (kept / f'{runs_lib.run_name(protocol.CRAFTAX, "ppo")}.json').is_file()
  assert (
      protocol.run_name(
          protocol.CRAFTAX, 'disco', (0,), 'conv_frames', 24, 'atari'
      )
      == 'Craftax-Classic-Symbolic-v1__disco__envs24__conv_frames__atari__s0'
  )


# ----------------------------------------------------------------------------
# crafter_worldgen.py: numba's compiled noise draws Crafter's own worlds.


def test_crafter_draws_the_same_worlds_with_and_without_numba():
  pytest.importorskip('crafter')
  pytest.importorskip('numba')
  worldgen = _load('crafter_worldgen')
  got = {mode: worldgen.run_mode(mode, 3, 1) for mode in worldgen.MODES}
  assert got['numba']['jit'] and not got['python']['jit']
  # Two resets, two different worlds, each drawn alike by both modes.
  assert len(set(got['numba']['hashes'])) == 2
  assert got['numba']['hashes'] == got['python']['hashes']


# ----------------------------------------------------------------------------
# craftax_arms.py: one factor per arm.


def test_each_craftax_arm_changes_one_factor_of_the_base():
  arms = _load('craftax_arms')
  args = argparse.Namespace(
      steps_per_chunk=4, checkpoint_every=40, reward_scale=1.0
  )
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


def test_a_craftax_arm_at_a_reward_scale_changes_only_the_scale_and_name():
  arms = _load('craftax_arms')
  args = argparse.Namespace(
      steps_per_chunk=4, checkpoint_every=40, reward_scale=1.0
  )
  scaled = argparse.Namespace(**vars(args) | dict(reward_scale=10.0))
  for arm in ('base', 'rollout_per_update'):
    base = arms.arm_config(arm, 0, 250_000, args).to_dict()
    config = arms.arm_config(arm, 0, 250_000, scaled).to_dict()
    changed = {k for k, v in config.items() if base[k] != v}
    assert changed == {'reward_scale'} and config['reward_scale'] == 10.0
  # Unscaled runs keep their names (their records resume); a scale is part
  # of the arm's label, which the report reads before '__s'.
  assert arms.run_name('base', 250_000, (0,)) == 'base__250k__s0'
  name = arms.run_name('rollout_per_update', 250_000, (1,), 10.0)
  assert name == 'rollout_per_update_x10__250k__s1'
  assert name.rsplit('__s', 1)[0] == 'rollout_per_update_x10__250k'


def test_craftax_arms_seeds_together_are_one_run_reported_per_seed():
  arms = _load('craftax_arms')
  todo = arms.runs.seed_runs(
      arms.ENV,
      ['base', 'width_256'],
      (0, 1, 2),
      name_fn=lambda arm, seeds: arms.run_name(arm, 250_000, seeds),
      config_fn=lambda arm, seed: arms.arm_config(
          arm, seed, 250_000, argparse.Namespace(
              steps_per_chunk=10, checkpoint_every=40, reward_scale=1.0)),
      together=True,
      checkpoints=False,
  )  # fmt: skip
  assert [(r.name, r.num_seeds, r.checkpoints) for r in todo] == [
      ('base__250k__s0-2', 3, False),
      ('width_256__250k__s0-2', 3, False),
  ]
  # A record of two seeds together: one row per seed in the report.
  logs = dict(
      seed=[0, 1, 0, 1],
      step=[0, 0, 4, 4],
      env_steps=[0, 0, 696, 696],
      learner_steps=[0, 0, 100, 100],
      train_return=[None, None, 1.0, 3.0],
      train_episodes=[None, None, 2, 2],
      eval_return=[0.5, 0.7, 2.0, 4.0],
      **{
          f'logs/{name}': [None, None, 2.5, 2.6]
          for name in ('entropy', 'y_entropy', 'z_entropy')
      },
  )
  record = dict(name='base__1k__s0-1', seeds=[0, 1], status='done',
                logs=logs, wall_seconds=10.0)  # fmt: skip
  rows = [arms.seed_row(record, *c) for c in arms.seed_columns(record)]
  assert [(r['arm'], r['seed'], r['eval_return']) for r in rows] == [
      ('base__1k', 0, 2.0),
      ('base__1k', 1, 4.0),
  ]


def test_craftax_arms_summary_takes_every_seed_at_the_arms_common_step():
  arms = _load('craftax_arms')

  def record(seed, status, env_steps, evals, returns):
    n = len(env_steps)
    logs = dict(
        seed=[seed] * n,
        step=[4 * i for i in range(n)],
        env_steps=env_steps,
        learner_steps=[100 * i for i in range(n)],
        train_return=returns,
        train_episodes=[None] + [2] * (n - 1),
        eval_return=evals,
        **{f'logs/{k}': [None] + [2.5] * (n - 1)
           for k in ('entropy', 'y_entropy', 'z_entropy')},
    )  # fmt: skip
    return dict(name=f'width_256__250k__s{seed}', seeds=[seed],
                status=status, logs=logs, wall_seconds=10.0)  # fmt: skip

  found = [
      record(0, 'done', [0, 696, 1392], [0.5, 2.0, 9.0], [None, 1.0, 7.0]),
      record(1, 'partial', [0, 696], [0.7, 4.0], [None, 3.0]),
  ]
  (row,) = arms.summary(found)
  assert (row['arm'], row['seeds'], row['env_steps']) == (
      'width_256__250k',
      2,
      696,
  )
  # Seed 0 at step 696, not at its last evaluation (9.0) and return (7.0).
  assert row['eval_return'].endswith('; 2.00 / 4.00')
  assert row['train_return_last10'].endswith('; 1.00 / 3.00')
  # Each seed's own row in arms.csv keeps its whole run.
  rows = [arms.seed_row(r, *c) for r in found for c in arms.seed_columns(r)]
  assert [r['eval_return'] for r in rows] == [9.0, 4.0]


def test_a_record_is_of_its_values_not_of_how_its_run_was_cut():
  saved = dict(
      config=train.TrainConfig(
          steps_per_chunk=4, unroll_inner_scans=False
      ).to_dict(),
      num_seeds=1,
  )

  def asked(**changes):
    return dict(config=train.TrainConfig(**changes).to_dict(), num_seeds=1)

  # Cut, checkpointed or compiled otherwise: the same run.
  assert records.same_settings(
      saved, asked(steps_per_chunk=10, checkpoint_every=7, keep_checkpoints=1)
  )
  assert records.same_settings(saved, asked(unroll_inner_scans=None))
  # Another budget, value or seed count: another run.
  assert not records.same_settings(saved, asked(num_steps=7))
  assert not records.same_settings(saved, asked(discount=0.9))
  assert not records.same_settings(saved, dict(asked(), num_seeds=2))


def test_crafter_and_craftax_pixels_runs_differ_only_in_the_environment():
  crafter_paths = _load('crafter_paths')
  host, fused = (crafter_paths.config(env, 0) for env in crafter_paths.ENVS)
  assert host.env == 'crafter'
  assert fused.env == 'craftax:Craftax-Classic-Pixels-v1'
  assert host.replace(env=fused.env) == fused
  # The preset but for the CPU reading, which says what it changes.
  preset = train.preset(crafter_paths.PRESET, agent=crafter_paths.AGENT)
  assert (host.frame_stack, host.learner_batch_size) == (1, 8)
  assert (preset.frame_stack, preset.learner_batch_size) == (32, 24)
  assert host.replay_fraction == preset.replay_fraction
  assert host.rollout_len * host.num_envs == preset.env_steps_per_step
  # At least 100,000 steps, every one of which the buffer can hold.
  steps = host.num_steps * host.env_steps_per_step
  assert 100_000 <= steps < 100_000 + host.env_steps_per_step
  assert host.buffer_capacity * host.rollout_len >= steps
  assert host.buffer_capacity <= preset.buffer_capacity
