"""Tests of `benchmarks/ppo_rejax.py`: rejax's PPO at a tiny budget.

Skipped where rejax is not installed. The run is one program for two seeds
on DeepSea with a tiny PPO (a few iterations, four evaluation episodes),
compiled at XLA's lowest optimisation level to keep the test fast.
"""

import importlib.util
import pathlib

import numpy as np
import pytest

rejax = pytest.importorskip('rejax')

_PATH = pathlib.Path(__file__).resolve().parents[1] / 'benchmarks'
_SPEC = importlib.util.spec_from_file_location(
    'ppo_rejax', _PATH / 'ppo_rejax.py'
)
ppo_rejax = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ppo_rejax)

# 4 environments x 8 steps: 32 env steps per PPO iteration.
_TINY = dict(num_envs=4, num_steps=8, num_epochs=1, num_minibatches=1)


def test_plan_whole_iterations():
  # 200k steps, 10 points, 1024 steps an iteration: 19.5 -> 20 per point.
  assert ppo_rejax.plan(1024, 200_000, 10) == (20 * 1024, 200 * 1024)
  # At least one iteration per point.
  assert ppo_rejax.plan(1024, 100, 4) == (1024, 4 * 1024)
  with pytest.raises(ValueError, match='positive'):
    ppo_rejax.plan(1024, 0, 4)


def test_env_ids_and_configs():
  assert ppo_rejax.rejax_env_id('gymnax:Breakout-MinAtar') == 'Breakout-MinAtar'
  assert ppo_rejax.rejax_env_id('craftax:Craftax-Classic-Symbolic-v1') == (
      'craftax/Craftax-Classic-Symbolic-v1'
  )
  settings, source = ppo_rejax.config_for('gymnax:Breakout-MinAtar')
  assert settings == ppo_rejax.REJAX_BREAKOUT_MINATAR
  assert 'tuned for this env' in source
  settings['agent_kwargs']['activation'] = 'relu'  # A copy.
  assert ppo_rejax.REJAX_BREAKOUT_MINATAR['agent_kwargs'] == {
      'activation': 'tanh'
  }
  assert ppo_rejax.config_for('DeepSea-bsuite')[0] == {}


def test_run_ppo_curve():
  seeds = (0, 3)
  num_points = 3
  result = ppo_rejax.run_ppo(
      'DeepSea-bsuite',
      num_env_steps=3 * 2 * 32,
      seeds=seeds,
      num_eval_points=num_points,
      num_eval_episodes=4,
      overrides=_TINY,
      compiler_options=ppo_rejax.FAST_COMPILE,
  )
  assert result['seeds'] == list(seeds)
  steps = np.asarray(result['env_steps'])
  returns = np.asarray(result['returns'])
  lengths = np.asarray(result['episode_lengths'])
  assert steps.shape == returns.shape == lengths.shape == (2, num_points)
  # Two iterations of 32 env steps between points.
  np.testing.assert_array_equal(steps, [[64, 128, 192]] * 2)
  assert np.all(np.diff(steps, axis=1) > 0)
  assert np.all(np.isfinite(returns))
  # DeepSea (size 8) episodes last 8 steps.
  np.testing.assert_array_equal(lengths, 8)
  assert result['config']['total_timesteps'] == 192
  assert result['config']['eval_freq'] == 64
  assert result['config']['num_eval_episodes'] == 4
  assert 0 < result['compile_time_s'] < result['wall_time_s']
  assert 0 < result['train_time_s'] < result['wall_time_s']
