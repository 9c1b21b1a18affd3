"""Tests for `disco.eval`: configs, smoke runs of both loops, every rule.

Runs use tiny agents and a handful of iterations (Disco's meta-network
still takes ~20 s to compile), and each expensive run is one test that
checks many properties. Multi-device runs happen in a subprocess with forced
host devices. The 1000-iteration learning runs are marked `slow`.
"""

import contextlib
import dataclasses
import json
import os
import signal
import sys
import textwrap

import jax
import numpy as np
import pytest

import disco
from disco import checkpoint
from disco import configs
from disco import eval as eval_lib
from disco import learner
from disco import logs
from disco import plotting
from disco import train
from disco.environments import registry
from disco.value_fns import value_utils
from tests import forced_devices

_COMPILE_EVENT = '/jax/core/compile/backend_compile_duration'

# Two environments, learning from iteration 4 on (8 trajectories needed, 2
# added per iteration), three learner steps in six iterations.
TINY = dict(
    num_steps=6,
    learner_batch_size=8,
    replay_ratio=4,
    rollout_len=5,
    buffer_capacity=32,
    agent_dense=(16,),
    agent_lstm_size=8,
    agent_head_mlp_hiddens=(8,),
    value_fn_dense=(8,),
    steps_per_chunk=4,
)
_FIRST_LEARNER_ITERATION = 4  # 1-based.

DISCO_LOGS = {
    'agent_q_mean',
    'aux_kl_loss',
    'aux_policy_entropy',
    'aux_target_entropy',
    'entropy',
    'global_gradient_norm',
    'global_update_norm',
    'logits',
    'normalized_td',
    'pi_hat',
    'pi_hat_entropy',
    'pi_loss',
    'q_loss',
    'q_target',
    'td',
    'total_loss',
    'y',
    'y_entropy',
    'y_hat',
    'z',
    'z_entropy',
    'z_hat',
    # `disco.rule_diagnostics`: the rule's targets and inputs.
    'y_hat_entropy',
    'z_hat_entropy',
    'meta_input/reward',
    'meta_input/q',
    'meta_input/adv',
    'meta_input/qv_adv',
    'meta_input/nonzero_reward',
}


@contextlib.contextmanager
def _compile_log():
  """Records, for every XLA compilation, how many iterations had finished."""
  state = {'iterations': 0, 'compiled_after': []}

  def listener(event, duration, **kwargs):
    del duration, kwargs
    if event == _COMPILE_EVENT:
      state['compiled_after'].append(state['iterations'])

  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    yield state
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)


# `EvalConfig(fast=True)`, the deprecated alias of the trainer, warns at
# every run; `test_fast_disco_smoke` checks the warning.
_DEPRECATED = pytest.mark.filterwarnings(
    'ignore:EvalConfig\\(fast=True\\) is deprecated:DeprecationWarning'
)


def _run_and_watch(config: eval_lib.EvalConfig):
  progress = []
  with _compile_log() as compiles:

    def progress_fn(step, metrics):
      progress.append((step, dict(metrics)))
      compiles['iterations'] = step

    history = eval_lib.run_eval(config, progress_fn=progress_fn)
  return history, progress, compiles['compiled_after']


def _check_curve(history: eval_lib.EvalHistory, config: eval_lib.EvalConfig):
  num = config.num_steps
  assert len(history) == num
  per_iteration = config.rollout_len * config.num_envs
  np.testing.assert_array_equal(
      history.steps, per_iteration * np.arange(1, num + 1)
  )
  ended = history.num_episodes > 0
  np.testing.assert_array_equal(np.isnan(history.avg_returns), ~ended)
  np.testing.assert_allclose(
      history.avg_returns[ended],
      history.total_returns[ended] / history.num_episodes[ended],
  )
  # Catch returns are +1 or -1.
  assert np.all(np.abs(history.avg_returns[ended]) <= 1.0)
  assert np.all(np.diff(history.elapsed) >= 0)
  learned = np.arange(1, num + 1) >= _FIRST_LEARNER_ITERATION
  for name, values in history.logs.items():
    assert values.shape == (num,), name
    np.testing.assert_array_equal(np.isnan(values), ~learned, err_msg=name)
  # Every learner step really ran (a skipped one would log zeros).
  assert np.all(history.logs['global_gradient_norm'][learned] > 0)
  columns = history.columns()
  assert all(len(v) == num for v in columns.values())


# ----------------------------------------------------------------------------
# Configuration.


def test_config_defaults_are_the_colab_values():
  config = eval_lib.EvalConfig()
  assert config.rule == 'disco' and config.env == 'catch'
  assert (config.num_steps, config.learner_batch_size, config.rollout_len) == (
      1000,
      64,
      29,
  )
  assert (config.replay_ratio, config.num_envs) == (32, 2)
  assert (config.buffer_capacity, config.buffer_seed) == (1024, 17)
  assert config.learning_starts == 64
  assert config.seed == 0 and config.agent_learning_rate == 1e-2
  assert not config.fast
  settings = eval_lib.make_agent_settings(config)
  assert settings.learning_rate == 1e-2
  assert settings.net_settings.name == 'mlp'
  assert settings.net_settings.net_args.to_dict() == dict(
      dense=(512, 512),
      model_arch_name='lstm',
      head_w_init_std=1e-2,
      model_kwargs=dict(head_mlp_hiddens=(128,), lstm_size=128),
  )
  # Everything else is Disco's own settings.
  reference = disco.get_settings_disco()
  assert settings.hyper_params == reference.hyper_params
  assert settings.update_rule == reference.update_rule


@pytest.mark.parametrize(
    'changes, message',
    [
        (dict(rule='dqn'), 'Unknown rule'),
        (dict(env='pong'), 'Unknown environment'),
        (dict(num_steps=0), 'num_steps'),
        (dict(rollout_len=1), 'rollout_len'),
        (
            dict(learner_batch_size=16, replay_ratio=32),
            'at least one environment',
        ),
        (dict(min_buffer_size=2000), 'min_buffer_size'),
        (dict(agent_learning_rate=0.0), 'agent_learning_rate'),
        (dict(agent_dense=()), 'agent_dense'),
        (dict(fast=True, env='catch-cpu'), 'jittable'),
        (
            dict(rule='actor_critic', update_rule_params='x.npz'),
            'update_rule_params',
        ),
        (dict(max_devices=0), 'max_devices'),
    ],
)
def test_config_rejects_bad_settings(changes, message):
  with pytest.raises(ValueError, match=message):
    eval_lib.EvalConfig(**changes)


def test_config_is_frozen_and_normalises_sizes():
  config = eval_lib.EvalConfig(agent_dense=[32, 32])
  assert config.agent_dense == (32, 32)
  with pytest.raises(dataclasses.FrozenInstanceError):
    config.seed = 1  # pytype: disable=not-writable


def test_select_devices_divides_the_environments():
  devices = eval_lib.select_devices(num_envs=2)
  assert 1 <= len(devices) <= 2 and 2 % len(devices) == 0
  assert eval_lib.select_devices(num_envs=2, max_devices=1) == (
      jax.devices()[0],
  )


def test_wrong_update_rule_params_fail_before_compiling():
  config = eval_lib.EvalConfig(**TINY)
  with pytest.raises(ValueError, match='missing'):
    eval_lib.run_eval(config, update_rule_params={'lstm/linear': {}})


# ----------------------------------------------------------------------------
# Environments by name (disco.environments.registry).


def test_registry_builds_catch_environments():
  env = registry.make_environment('catch', batch_size=3)
  assert isinstance(env, disco.CatchJittableEnvironment)
  assert registry.is_jittable(env) and env.batch_size == 3
  assert env.single_observation_spec()['observation'].shape == (8, 8, 1)
  small = registry.make_environment('catch', 2, settings={'rows': 5})
  assert small.single_observation_spec()['observation'].shape == (5, 8, 1)
  cpu = registry.make_environment('catch-cpu', batch_size=2, seed=3)
  assert isinstance(cpu, disco.CatchEnvironment)
  assert not registry.is_jittable(cpu)
  assert cpu.single_observation_spec().shape == (8, 8)


@pytest.mark.parametrize(
    'name, settings, error, message',
    [
        ('pong', None, registry.UnknownEnvironmentError, 'Unknown environ'),
        ('gymnax:', None, registry.UnknownEnvironmentError, 'CartPole'),
        ('catch', {'size': 3}, ValueError, 'Unknown Catch setting'),
        (
            'gymnax:CartPole-v1',
            {'max_step_in_episode': 3},
            ValueError,
            r"'max_step_in_episode'.*EnvParams.*max_steps_in_episode",
        ),
    ],
)
def test_registry_errors(name, settings, error, message):
  with pytest.raises(error, match=message):
    registry.make_environment(name, batch_size=2, settings=settings)


def test_registry_names_the_extra_when_gymnax_is_missing(monkeypatch):
  # A None entry in sys.modules makes the import fail as if not installed;
  # the adapter imports gymnax only when an environment is built.
  monkeypatch.setitem(sys.modules, 'gymnax', None)
  with pytest.raises(ImportError, match=r'pip install "disco-jax\[envs\]"'):
    registry.make_environment('gymnax:CartPole-v1', batch_size=2)


def test_plotting_names_the_extra_when_matplotlib_is_missing(monkeypatch):
  # The hint must work for a wheel as for a clone: no `-e .`.
  monkeypatch.setitem(sys.modules, 'matplotlib', None)
  with pytest.raises(ImportError, match=r'`pip install "disco-jax\[colab\]"`'):
    plotting.require_matplotlib()


@_DEPRECATED
def test_gymnax_environment_through_the_fast_path():
  # gymnax is in the `[test]` extra (and `[envs]`).
  config = eval_lib.EvalConfig(
      rule='actor_critic', env='gymnax:CartPole-v1', fast=True, **TINY
  )
  history = eval_lib.run_eval(config)
  assert len(history) == config.num_steps
  assert np.all(np.isfinite(history.logs['total_loss'][3:]))
  # CartPole pays 1 per step: finished episodes have positive returns.
  ended = history.num_episodes > 0
  assert np.all(history.avg_returns[ended] >= 1)


# Slow (CI time): gymnax through the fast path stays in CI.
@pytest.mark.slow
def test_disco103_on_a_minatar_game_through_the_faithful_loop():
  # The observation (10x10x4) and action (3) sizes come from the specs.
  config = eval_lib.EvalConfig(env='gymnax:Breakout-MinAtar', **TINY)
  history = eval_lib.run_eval(config)
  assert len(history) == config.num_steps
  learned = history.logs['total_loss'][_FIRST_LEARNER_ITERATION - 1 :]
  assert np.all(np.isfinite(learned))
  assert np.all(np.isnan(history.logs['total_loss'][:3]))
  torso = history.params['mlp/~_embedding_pass/torso/~/linear_0']['w']
  assert torso.shape == (10 * 10 * 4, 16)
  policy_head = history.params['mlp/~_head_pass/torso_head/~/linear_0']['w']
  assert policy_head.shape == (16, 3)
  # Breakout pays 0 or 1 per brick; returns are counts of bricks.
  ended = history.num_episodes > 0
  assert np.all(history.total_returns[ended] >= 0)


def _check_scaled_rewards_read(history: eval_lib.EvalHistory, scale: float):
  """The rule read each of Catch's non-zero rewards as sign_log(+-scale)."""
  nonzero = history.logs['meta_input/nonzero_reward']
  read = nonzero > 0
  assert read.any()
  np.testing.assert_allclose(
      history.logs['meta_input/reward'][read] / nonzero[read],
      np.log1p(scale),
      rtol=1e-5,
  )


# ----------------------------------------------------------------------------
# Smoke runs.


def test_faithful_disco_smoke():
  # Rewards times 10 for the learner; returns (`_check_curve`: Catch's are
  # -1 or 1) stay in the game's units.
  config = eval_lib.EvalConfig(reward_scale=10.0, **TINY)
  history, progress, compiled_after = _run_and_watch(config)
  _check_curve(history, config)
  _check_scaled_rewards_read(history, 10.0)
  assert history.rule == 'disco' and history.seed == 0
  assert set(history.logs) == DISCO_LOGS
  # One progress call per iteration with the scalar metrics.
  assert [step for step, _ in progress] == list(range(1, 7))
  assert (
      set(progress[-1][1])
      == {'env_steps', 'avg_return', 'num_episodes'} | DISCO_LOGS
  )
  assert 'total_loss' not in progress[0][1]
  # Each function compiles once: nothing compiles after the first learner
  # step's iteration.
  assert max(compiled_after) < _FIRST_LEARNER_ITERATION, compiled_after
  torso = history.params['mlp/~_embedding_pass/torso/~/linear_0']
  assert torso['w'].shape == (64, 16)
  assert isinstance(torso['w'], np.ndarray)


def test_fast_disco_smoke():
  # Chunks of 2: iterations 1-2 and 3 run the acting-only program, 4-5 and
  # 6 the learning one.
  # At reward scale 10, as `test_faithful_disco_smoke`.
  config = eval_lib.EvalConfig(
      fast=True, reward_scale=10.0, **(TINY | dict(steps_per_chunk=2))
  )
  with pytest.warns(DeprecationWarning, match=r"run_train.*preset\('colab'\)"):
    history, progress, compiled_after = _run_and_watch(config)
  assert isinstance(history, eval_lib.EvalHistory)
  _check_curve(history, config)
  _check_scaled_rewards_read(history, 10.0)
  assert set(history.logs) == DISCO_LOGS
  assert [step for step, _ in progress] == list(range(1, 7))
  # Each program compiles once, the learning one in the background by its
  # first chunk: a shorter chunk reuses it.
  assert max(compiled_after) <= _FIRST_LEARNER_ITERATION - 1, compiled_after

  # The trainer's run with the equivalent config, one row per iteration.
  train_config = eval_lib.to_train_config(config)
  result = train.run_train(train_config)
  assert train_config.log_every_iteration
  np.testing.assert_array_equal(result.logs['step'], np.arange(1, 7))
  np.testing.assert_array_equal(result.logs['env_steps'], history.steps)
  np.testing.assert_array_equal(
      result.logs['train_episodes'], history.num_episodes
  )
  np.testing.assert_array_equal(
      result.logs['train_return'], history.avg_returns
  )
  for name, values in history.logs.items():
    np.testing.assert_array_equal(result.logs[f'logs/{name}'], values, name)
  jax.tree.map(np.testing.assert_array_equal, result.params[0], history.params)


def test_actor_critic_smoke_and_stored_behaviour_outputs():
  config = eval_lib.EvalConfig(rule='actor_critic', **TINY)
  history = eval_lib.run_eval(config)
  _check_curve(history, config)
  assert {'total_loss', 'global_gradient_norm'} <= set(history.logs)
  assert 'q_loss' not in history.logs
  # Storing every behaviour output, as the reference does, changes nothing:
  # the rules read only the logits.
  full = eval_lib.run_eval(
      dataclasses.replace(config, store_behaviour_outs=True)
  )
  np.testing.assert_array_equal(full.avg_returns, history.avg_returns)
  for name, values in history.logs.items():
    np.testing.assert_array_equal(full.logs[name], values, err_msg=name)


def test_policy_gradient_trains_a_value_function_alongside():
  config = eval_lib.EvalConfig(rule='policy_gradient', **TINY)
  history = eval_lib.run_eval(config)
  _check_curve(history, config)
  assert {'value_fn/value_loss', 'entropy', 'pg_advs'} <= set(history.logs)
  assert np.all(np.isfinite(history.logs['value_fn/value_loss'][3:]))


def test_cpu_catch_runs_through_the_cpu_unroll():
  config = eval_lib.EvalConfig(rule='actor_critic', env='catch-cpu', **TINY)
  history = eval_lib.run_eval(config)
  _check_curve(history, config)


# Slow (CI time): vmapped seeds stay in CI through tests/test_cli.py.
@pytest.mark.slow
@_DEPRECATED
def test_run_eval_seeds_vmaps_the_fast_path():
  config = eval_lib.EvalConfig(
      rule='actor_critic', fast=True, **(TINY | dict(num_steps=5))
  )
  histories = eval_lib.run_eval_seeds(config, [0, 1, 2])
  assert [h.seed for h in histories] == [0, 1, 2]
  for history in histories:
    _check_curve(history, config)
  # Different seeds act differently.
  assert not np.array_equal(
      histories[0].logs['total_loss'], histories[1].logs['total_loss']
  )
  # vmap does not change a seed's run.
  (single,) = eval_lib.run_eval_seeds(config, [1])
  np.testing.assert_allclose(
      single.logs['total_loss'], histories[1].logs['total_loss'], rtol=1e-4
  )
  np.testing.assert_array_equal(single.avg_returns, histories[1].avg_returns)


@_DEPRECATED
def test_fast_path_learns_catch_with_vmapped_seeds():
  # Actor-critic with a small agent: its learner step is cheap, so 800
  # iterations of two seeds take a few seconds after compilation. (Disco103
  # needs ~600 full-size learner steps; see the slow tests.)
  config = eval_lib.EvalConfig(
      rule='actor_critic',
      fast=True,
      num_steps=800,
      learner_batch_size=16,
      replay_ratio=2,
      rollout_len=16,
      buffer_capacity=256,
      agent_dense=(64,),
      agent_lstm_size=32,
      agent_head_mlp_hiddens=(32,),
      steps_per_chunk=400,
  )
  for history in eval_lib.run_eval_seeds(config, [0, 1]):
    start = np.nanmean(history.avg_returns[:50])
    end = np.nanmean(history.avg_returns[-100:])
    # A random policy scores about -0.75 on 8x8 Catch. Measured: 0.68 and
    # 0.54 over the last 100 iterations.
    assert start < -0.5 and end > 0.4, (history.seed, start, end)


def test_value_function_rollout_alignment():
  """The value function sees the reward of each transition of the rule."""
  rewards = np.array([[0.0], [0.0], [1.0], [0.0]], np.float32)  # [T, B]
  discounts = np.array([[True], [True], [False], [True]])
  rollout = disco.types.ActorRollout(
      observations=np.zeros((4, 1, 2), np.float32),
      actions=np.zeros((4, 1), np.int32),
      rewards=rewards,
      discounts=discounts,
      agent_outs={'logits': np.zeros((4, 1, 3), np.float32)},
      states={},
      logits=np.zeros((4, 1, 3), np.float32),
  )
  shifted = learner.value_fn_rollout(rollout)
  values = np.zeros((4, 1, 1), np.float32)
  outs, _, _ = value_utils.get_value_outs(
      value_net_out=values,
      q_net_out=None,
      target_value_net_out=None,
      target_q_net_out=None,
      rollout=shifted,
      pi_logits=rollout.logits,
      discount=1.0,
      lambda_=1.0,
  )
  # Transition 1 -> 2 ends its episode with reward 1; with zero values its
  # advantage is 1 and the advantage of transition 0 -> 1 (undiscounted,
  # lambda 1) is 1 as well; the transition 2 -> 3 starts a new episode.
  np.testing.assert_allclose(np.asarray(outs.adv)[:, 0], [1.0, 1.0, 0.0])


# ----------------------------------------------------------------------------
# Checkpoints and resuming.


def _assert_same_runs(got, want):
  """Equal histories bit for bit (all but `elapsed`) and final params."""
  assert len(got) == len(want)
  for a, b in zip(got, want, strict=True):
    assert (a.rule, a.seed) == (b.rule, b.seed)
    a_columns, b_columns = a.columns(), b.columns()
    assert set(a_columns) == set(b_columns)
    for name, values in a_columns.items():
      if name != 'elapsed':
        np.testing.assert_array_equal(values, b_columns[name], err_msg=name)
    jax.tree.map(np.testing.assert_array_equal, a.params, b.params)


def _interrupt_at(iteration: int):
  """A `progress_fn` that sends this process a SIGINT after `iteration`."""

  def progress_fn(step, metrics):
    del metrics
    if step == iteration:
      signal.raise_signal(signal.SIGINT)

  return progress_fn


# Slow (CI time): the fast path's exact resume after Ctrl-C stays in CI
# through tests/test_cli.py (a `disco-eval --fast` run with two vmapped seeds,
# stopped by Ctrl-C and resumed).
@pytest.mark.slow
@_DEPRECATED
@pytest.mark.parametrize('seeds', [(0,)])
def test_fast_path_resumes_exactly(tmp_path, seeds):
  # Chunks of 2: acting 1-2 and 3 (a checkpoint at 3), then learning.
  config = eval_lib.EvalConfig(
      rule='actor_critic',
      fast=True,
      checkpoint_every=3,
      **(TINY | dict(steps_per_chunk=2)),
  )
  longer = config.replace(num_steps=12)
  straight = eval_lib.run_eval_seeds(longer, seeds)

  # Stopped by Ctrl-C in iteration 4: the chunk (4-5) finishes first.
  with pytest.raises(KeyboardInterrupt):
    eval_lib.run_eval_seeds(
        config,
        seeds,
        checkpoint_dir=tmp_path,
        progress_fn=_interrupt_at(4),
        handle_interrupts=True,
    )
  assert checkpoint.list_steps(tmp_path) == [3, 5]
  for seed in seeds:
    assert eval_lib.seed_checkpoint_dir(tmp_path, config, seed) == tmp_path
  # Completed to 6, then resumed to 12 in other chunks than the straight
  # run's (checkpoints at the chunk ends after 9 and 12).
  part = eval_lib.run_eval_seeds(
      config, seeds, checkpoint_dir=tmp_path, resume=True
  )
  rows = []
  resumed = eval_lib.run_eval_seeds(
      longer,
      seeds,
      checkpoint_dir=tmp_path,
      resume=True,
      log_fn=lambda seed, iteration, row: rows.append((seed, iteration, row)),
  )
  assert checkpoint.list_steps(tmp_path) == [10, 12]
  _assert_same_runs(resumed, straight)
  for history, whole in zip(part, straight, strict=True):
    np.testing.assert_array_equal(history.avg_returns, whole.avg_returns[:6])
  # Only the new iterations are reported, for every seed.
  assert sorted((s, i) for s, i, _ in rows) == sorted(
      (s, i) for s in seeds for i in range(7, 13)
  )
  assert set(rows[0][2]) >= {
      'env_steps',
      'avg_return',
      'total_return',
      'num_episodes',
      'elapsed',
      'total_loss',
  }
  # A complete run returns at once.
  again = eval_lib.run_eval_seeds(
      longer, seeds, checkpoint_dir=tmp_path, resume=True
  )
  _assert_same_runs(again, straight)


def test_faithful_loop_resumes_exactly(tmp_path):
  config = eval_lib.EvalConfig(checkpoint_every=4, keep_checkpoints=1, **TINY)
  longer = config.replace(num_steps=12)
  straight = eval_lib.run_eval(longer)

  # Ctrl-C in iteration 2: the iteration finishes, checkpoints, stops.
  with pytest.raises(KeyboardInterrupt):
    eval_lib.run_eval(
        config,
        checkpoint_dir=tmp_path,
        progress_fn=_interrupt_at(2),
        handle_interrupts=True,
    )
  assert checkpoint.list_steps(tmp_path) == [2]
  # The replay buffer's numpy generator is part of the checkpoint.
  ckpt = checkpoint.load(tmp_path)
  assert 'buffer_rng_state' in ckpt.arrays
  assert ckpt.metadata['kind'] == 'disco-eval'
  steps = []
  resumed = eval_lib.run_eval(
      longer,
      checkpoint_dir=tmp_path,
      resume=True,
      progress_fn=lambda step, metrics: steps.append(step),
  )
  assert steps == list(range(3, 13))
  # keep_checkpoints=1: only the last.
  assert checkpoint.list_steps(tmp_path) == [12]
  _assert_same_runs([resumed], [straight])
  assert resumed.elapsed[-1] >= resumed.elapsed[1]


# Slow (CI time): one seed's exact resume stays in CI, here and in
# tests/test_cli.py.
@pytest.mark.slow
def test_faithful_seeds_resume_in_their_own_directories(tmp_path):
  config = eval_lib.EvalConfig(
      rule='actor_critic', **(TINY | dict(num_steps=5))
  )
  straight = eval_lib.run_eval_seeds(config, [3, 4])
  # Stopped during the second seed's third iteration (8 = 5 + 3).
  with pytest.raises(KeyboardInterrupt):
    eval_lib.run_eval_seeds(
        config,
        [3, 4],
        checkpoint_dir=tmp_path,
        progress_fn=_interrupt_at(8),
        handle_interrupts=True,
    )
  first, second = (
      eval_lib.seed_checkpoint_dir(tmp_path, config, s) for s in (3, 4)
  )
  assert first == tmp_path / 'seed_3'
  assert checkpoint.list_steps(first) == [5]
  assert checkpoint.list_steps(second) == [3]
  logged = []
  resumed = eval_lib.run_eval_seeds(
      config,
      [3, 4],
      checkpoint_dir=tmp_path,
      resume=True,
      log_fn=lambda seed, iteration, row: logged.append((seed, iteration)),
  )
  assert logged == [(4, 4), (4, 5)]
  _assert_same_runs(resumed, straight)


@_DEPRECATED
def test_bad_resumes_are_refused(tmp_path):
  config = eval_lib.EvalConfig(
      rule='actor_critic', **(TINY | dict(num_steps=2))
  )
  eval_lib.run_eval(config, checkpoint_dir=tmp_path)
  with pytest.raises(checkpoint.CheckpointExistsError, match='resume=True'):
    eval_lib.run_eval(config, checkpoint_dir=tmp_path)
  with pytest.raises(ValueError, match='needs a checkpoint_dir'):
    eval_lib.run_eval(config, resume=True)
  mismatch = checkpoint.CheckpointMismatchError
  for changes, message in [
      (dict(agent_learning_rate=0.5), 'agent_learning_rate'),
      (dict(seed=1), 'seeds'),
      (dict(store_behaviour_outs=True), 'store_behaviour_outs'),
      (dict(rule='policy_gradient'), 'rule'),
      (dict(fast=True), 'fast'),
  ]:
    with pytest.raises(mismatch, match=message):
      eval_lib.run_eval(
          config.replace(**changes), checkpoint_dir=tmp_path, resume=True
      )
  with pytest.raises(mismatch, match='past num_steps'):
    eval_lib.run_eval(
        config.replace(num_steps=1), checkpoint_dir=tmp_path, resume=True
    )
  # Other update-rule parameters (placeholders of the right structure).
  params = learner.default_update_rule_params(
      config, learner.build(config, None).agent.update_rule
  )
  other = jax.tree.map(lambda x: x + 1, params)
  with pytest.raises(mismatch, match='update-rule parameters'):
    eval_lib.run_eval(
        config,
        update_rule_params=other,
        checkpoint_dir=tmp_path,
        resume=True,
    )
  # Execution fields may change: a resume to more steps, in chunks.
  history = eval_lib.run_eval(
      config.replace(num_steps=3, checkpoint_every=7, keep_checkpoints=5),
      checkpoint_dir=tmp_path,
      resume=True,
  )
  assert len(history) == 3
  # A directory without checkpoints starts afresh.
  fresh = eval_lib.run_eval(
      config, checkpoint_dir=tmp_path / 'new', resume=True
  )
  assert len(fresh) == 2
  with pytest.raises(configs.ConfigError, match='jittable'):
    eval_lib.run_eval(
        config.replace(env='catch-cpu'), checkpoint_dir=tmp_path / 'cpu'
    )


def test_no_signal_handler_without_handle_interrupts(tmp_path):
  signals = (signal.SIGINT, signal.SIGTERM)
  before = [signal.getsignal(s) for s in signals]
  during = []

  def progress_fn(step, metrics):
    del step, metrics
    during.append([signal.getsignal(s) for s in signals])

  config = eval_lib.EvalConfig(
      rule='actor_critic', **(TINY | dict(num_steps=2))
  )
  # (With a logger too: its rows are the run's iterations.)
  eval_lib.run_eval(
      config, progress_fn=progress_fn, logger='csv', log_dir=tmp_path
  )
  assert during == [before, before]
  assert [signal.getsignal(s) for s in signals] == before
  rows = logs.read_csv(tmp_path / 'log.csv')
  assert [(r['series'], r['step']) for r in rows] == [
      ('actor_critic/seed_0', 1),
      ('actor_critic/seed_0', 2),
  ]
  assert {'env_steps', 'avg_return', 'num_episodes'} <= set(rows[0])
  # With handle_interrupts handlers are installed only while it runs.
  eval_lib.run_eval(config, progress_fn=progress_fn, handle_interrupts=True)
  assert all(d is not b for d, b in zip(during[-1], before))
  assert [signal.getsignal(s) for s in signals] == before


def test_fast_alias_is_the_colab_preset_with_the_configs_settings():
  config = eval_lib.EvalConfig(
      rule='policy_gradient',
      fast=True,
      **(TINY | dict(learner_batch_size=12, buffer_capacity=31)),
  )
  assert config.num_envs == 3
  got = eval_lib.to_train_config(config)
  devices = len(eval_lib.select_devices(config.num_envs))
  # Per-device sizes of the faithful loop's layout as totals; the buffer
  # holds whole rollouts (31 rounded down to 30 on one device).
  assert got == train.preset(
      'colab',
      rule='policy_gradient',
      num_steps=6,
      num_envs=3,
      rollout_len=5,
      learner_batch_size=12 * devices,
      buffer_capacity=31 // (3 // devices) * 3,
      learning_starts=12 * devices,
      agent_dense=(16,),
      agent_lstm_size=8,
      agent_head_mlp_hiddens=(8,),
      value_fn_dense=(8,),
      steps_per_chunk=4,
      eval_envs=3,
      max_devices=devices,
      taken_action_gradients=False,
      forward_once=False,
      share_meta_inputs=False,
      share_state_gates=False,
      truncation='terminate',
      log_every_iteration=True,
  )
  # Its learner step is the faithful loop's, bit for bit: see
  # tests/test_train.py::test_reference_rounding_is_the_faithful_loops_learner_step.


# ----------------------------------------------------------------------------
# Several devices.


_MULTI_DEVICE_SCRIPT = textwrap.dedent("""
    import json
    import jax
    import numpy as np
    from disco import eval as eval_lib

    assert jax.device_count() == 2, jax.devices()
    tiny = json.loads(TINY_JSON)
    out = {}
    for fast in (False, True):
      config = eval_lib.EvalConfig(rule='actor_critic', fast=fast, **tiny)
      assert len(eval_lib.select_devices(config.num_envs)) == 2
      history = eval_lib.run_eval(config)
      out[str(fast)] = dict(
          steps=history.steps.tolist(),
          num_episodes=history.num_episodes.tolist(),
          loss=np.nan_to_num(history.logs['total_loss'], nan=-1).tolist(),
      )
    print('RESULT' + json.dumps(out))
""")


# Its own process compiles both loops for 2 devices (about 30 s of CI's 20
# minutes): `pytest -m slow`. In CI, test_train.py trains on 2 forced devices
# through the same device layout.
@pytest.mark.slow
def test_runs_on_two_forced_host_devices():
  tiny = {k: list(v) if isinstance(v, tuple) else v for k, v in TINY.items()}
  # With 2 devices each buffer entry holds one trajectory per device, so 8
  # entries (learning) take 8 iterations, as in the reference's layout.
  tiny['num_steps'] = 9
  script = _MULTI_DEVICE_SCRIPT.replace('TINY_JSON', repr(json.dumps(tiny)))
  done = forced_devices.run_python(
      script, env=forced_devices.env(2), timeout=600
  )
  assert done.returncode == 0, done.stderr[-3000:]
  (line,) = [s for s in done.stdout.splitlines() if s.startswith('RESULT')]
  results = json.loads(line[len('RESULT') :])
  for fast, result in results.items():
    assert result['steps'] == [10 * i for i in range(1, 10)], fast
    loss = np.asarray(result['loss'])
    assert np.all(loss[:7] == -1) and np.all(loss[7:] != -1), (fast, loss)


# ----------------------------------------------------------------------------
# Learning (slow: about 5 minutes each on 2 CPU cores; `pytest -m slow`).

_LEARNING_SCRIPT = textwrap.dedent("""
    import json
    import resource
    import numpy as np
    from disco import eval as eval_lib

    history = eval_lib.run_eval(eval_lib.EvalConfig(fast=FAST))
    print('RESULT' + json.dumps(dict(
        first=history.first_iteration_reaching(1.0),
        last_100=float(np.nanmean(history.avg_returns[-100:])),
        peak_rss_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    )))
""")


def _learn_catch(fast: bool) -> dict[str, float]:
  """A default 1000-iteration run in a fresh process (for its peak RSS)."""
  done = forced_devices.run_python(
      _LEARNING_SCRIPT.replace('FAST', str(fast)),
      env=dict(os.environ),
      timeout=3600,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  (line,) = [s for s in done.stdout.splitlines() if s.startswith('RESULT')]
  return json.loads(line[len('RESULT') :])


@pytest.mark.slow
def test_disco103_learns_catch_with_the_faithful_loop():
  result = _learn_catch(fast=False)
  # Measured: 1.0 first at iteration 609, held from about 640 (the
  # reference: from about 650 with seed 0).
  assert result['first'] is not None and result['first'] <= 700, result
  assert result['last_100'] >= 0.95, result
  assert result['peak_rss_gib'] < 3.0, result


@pytest.mark.slow
def test_disco103_learns_catch_with_the_fast_path():
  result = _learn_catch(fast=True)
  assert result['first'] is not None and result['first'] <= 800, result
  assert result['last_100'] >= 0.95, result
  assert result['peak_rss_gib'] < 3.0, result
