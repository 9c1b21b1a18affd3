"""Tests for `disco.meta_train`: config, keys, the loop, checkpoints, resume.

Runs use a tiny config (small networks, 4 environments, rollouts of 4
steps); runs with the same computation share one compiled meta-update.
`test_discovers_catch` is the `slow` learning test.
"""

import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from disco import agent as agent_lib
from disco import checkpoint
from disco import devices
from disco import logs
from disco import meta_train
from disco import progress
from disco import weights
from disco.meta_train import loop as meta_train_runtime
from disco.meta_train import maths as meta_train_maths
from disco.meta_train import meta_gradient

# The command-line tests' tiny run (tests/tiny_args.py): runs of one setting
# share one compiled meta-step (this file's tests in one pytest worker under
# `-n`; the other files' through CI's JAX compilation cache).
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
_LOG_KEYS = {
    'adv',
    'entropy',
    'meta_grad_norm',
    'meta_loss',
    'meta_up_norm',
    'neg_rewards',
    'normalized_adv',
    'pg_loss',
    'pos_reward_fraction',
    'pos_rewards',
    'reg_loss',
    'rewards',
    'val_importance_weight',
    'value',
}


def test_defaults_are_the_reference_notebook_s():
  config = meta_train.MetaTrainConfig()
  assert (
      config.num_steps,
      config.num_agents,
      config.rollout_len,
      config.num_inner_steps,
      config.envs_per_device,
      config.seed,
      config.random_init_seed,
      config.meta_learning_rate,
      config.env,
      config.env_settings,
  ) == (800, 2, 16, 2, 32, 4, 1, 5e-4, 'catch', (('columns', 5), ('rows', 5)))
  assert (config.vmap_agents, config.unroll_inner_steps, config.remat) == (
      True,
      True,
      False,
  )
  assert (
      config.policy_entropy_cost,
      config.prediction_entropy_cost,
      config.target_mean_cost,
      config.target_kl_cost,
  ) == (1e-2, 1e-3, 1e-3, 1e-2)

  expected = agent_lib.get_settings_disco()
  expected.net_settings.net_args = dict(
      dense=(512, 512),
      model_arch_name='lstm',
      head_w_init_std=1e-2,
      model_kwargs=dict(head_mlp_hiddens=(256,), lstm_size=256),
  )
  expected.learning_rate = 5e-4
  assert config.agent_settings().to_dict() == expected.to_dict()

  value_fn = config.value_fn_config()
  assert value_fn.net == 'mlp'
  assert value_fn.net_args == dict(
      dense=(256, 256), head_w_init_std=1e-2, action_spec=()
  )
  assert (
      value_fn.learning_rate,
      value_fn.max_abs_update,
      value_fn.discount_factor,
      value_fn.td_lambda,
      value_fn.outer_value_cost,
      value_fn.ema_decay,
      value_fn.ema_eps,
  ) == (1e-3, 1.0, 0.99, 0.96, 1.0, 0.99, 1e-6)

  env = config.make_env()
  assert env.batch_size == 32
  assert env.single_observation_spec()['observation'].shape == (5, 5, 1)


@pytest.mark.parametrize(
    'changes, match',
    [
        (dict(num_agents=0), 'num_agents'),
        (dict(rollout_len=1.5), 'rollout_len'),
        (dict(agent_dense=(0, 3)), 'agent_dense'),
        (dict(meta_learning_rate=0.0), 'meta_learning_rate'),
        (dict(target_kl_cost=-1.0), 'target_kl_cost'),
        (dict(value_fn_td_lambda=1.5), 'value_fn_td_lambda'),
        (dict(vmap_agents='yes'), 'vmap_agents'),
        (dict(checkpoint_every=-1), 'checkpoint_every'),
    ],
)
def test_config_validation(changes, match):
  with pytest.raises(ValueError, match=match):
    meta_train.MetaTrainConfig(**changes)


def test_config_dict_round_trip():
  config = _TINY.replace(agent_dense=[8, 8])
  assert config.agent_dense == (8, 8)
  assert meta_train.MetaTrainConfig.from_dict(config.to_dict()) == config
  with pytest.raises(ValueError, match='Unknown'):
    meta_train.MetaTrainConfig.from_dict({'num_step': 3})


def _final_arrays(path):
  ckpt = checkpoint.load(path)
  return ckpt.update_rule_params, ckpt.arrays


def _is_meta_update(fun_name: str) -> bool:
  """Whether a compilation is of the meta-update, the run's only `pmap`.

  JAX 0.10 runs `pmap` as `jit` of a `shard_map` of a function `_fun`, and
  names the compilation after that; older versions named it after the
  function.
  """
  return fun_name == 'jit(_fun)' or 'meta_update' in fun_name


# Slow (CI time: a meta-step compiled for this test alone, about a minute);
# the trainer's equivalent (tests/test_train.py) stays in CI.
@pytest.mark.slow
def test_a_fresh_run_compiles_the_meta_update_exactly_once(monkeypatch):
  # A fresh trainer (no compiled meta-update from earlier tests), built for
  # a small program and kept out of the shared cache.
  config = _TINY.replace(
      num_steps=3, num_inner_steps=1, rollout_len=3, envs_per_device=2
  )
  trainer = meta_train_runtime._MetaTrainer(config)  # pylint: disable=protected-access
  monkeypatch.setattr(meta_train_runtime, '_trainer_for', lambda _: trainer)
  compiles = []

  def _listener(name: str, duration: float, **kwargs: Any) -> None:
    del duration
    if name == '/jax/core/compile/backend_compile_duration':
      compiles.append((kwargs.get('fun_name', ''), threading.current_thread()))

  after_step = []
  jax.monitoring.register_event_duration_secs_listener(_listener)
  try:
    meta_train.run_meta_train(
        config,
        progress_fn=lambda step, logs: after_step.append(len(compiles)),
    )
  finally:
    jax.monitoring.unregister_event_duration_listener(_listener)
  # The background compilation is the only one: the first meta-step uses
  # it (same shapes, dtypes, weak types and shardings) rather than
  # compiling again, and so does every later step.
  updates = [thread for name, thread in compiles if _is_meta_update(name)]
  assert len(updates) == 1, compiles
  assert updates[0] is not threading.main_thread()
  # Nothing at all compiles after the first meta-step.
  assert after_step[0] == after_step[-1], after_step


def _key(key: jax.Array) -> tuple[int, ...]:
  return tuple(np.asarray(key).ravel().tolist())


def test_meta_update_key_schedule(monkeypatch):
  """Which key each agent's acting, validation and meta-gradient get.

  The reference's schedule: `act_rng, update_rng = split(rng)`; agent i
  acts with `a_i = split(act_rng, A)[i]` (train rollout j with
  `split(a_i, N)[j]`, step t of a rollout with `split(key, T)[t]`) and
  reuses `a_i` itself for the validation rollout; its meta-gradient gets
  `u_i = split(update_rng, A)[i]`. The meta-gradient itself is stubbed (it
  records its key and returns zeros), so that nothing heavy compiles; how
  it splits `u_i` is pinned by the meta-gradient parity goldens.
  """
  config = _TINY.replace(num_inner_steps=2, rollout_len=2, envs_per_device=2)
  num_agents, num_steps, length = 2, config.num_inner_steps, config.rollout_len
  assert (config.num_agents, num_steps) == (num_agents, 2)
  agent = meta_train.MetaTrainAgent.from_config(config, axis_name=None)
  calls = []  # (what, key), recorded from inside the compiled program.

  def _spy(what: str, key: jax.Array) -> None:
    jax.debug.callback(lambda k: calls.append((what, _key(k))), key)

  unroll_actor = meta_train.MetaTrainAgent.unroll_actor

  def _unroll_actor(self, state, rng, rollout_len):
    _spy('valid' if rollout_len == 2 * length else 'train', rng)
    return unroll_actor(self, state, rng, rollout_len)

  def _calculate_meta_gradient(params, state, train_rollouts, valid, rng, **_):
    del train_rollouts, valid
    _spy('meta_gradient', rng)
    zeros = jax.tree.map(jnp.zeros_like, params)
    train_logs = {'loss': jnp.zeros((num_steps,))}
    return zeros, (state, train_logs, {'meta_loss': jnp.zeros(())})

  actor_step = agent.agent.actor_step

  def _actor_step(params, rng, timestep, actor_state):
    _spy('actor_step', rng)
    return actor_step(params, rng, timestep, actor_state)

  monkeypatch.setattr(meta_train.MetaTrainAgent, 'unroll_actor', _unroll_actor)
  monkeypatch.setattr(
      meta_gradient, 'calculate_meta_gradient', _calculate_meta_gradient
  )
  monkeypatch.setattr(agent.agent, 'actor_step', _actor_step)

  meta_opt = optax.adam(config.meta_learning_rate)
  # The stubbed meta-gradient reads only the rule's shapes: zeros of them,
  # without compiling the rule's random initialisation.
  params = jax.tree.map(
      lambda s: jnp.zeros(s.shape, s.dtype),
      jax.eval_shape(agent.update_rule.init_params, jax.random.PRNGKey(0))[0],
  )
  states = jax.jit(jax.vmap(agent.init_state))(
      jax.random.split(jax.random.PRNGKey(1), 2)
  )
  rng = jax.random.PRNGKey(7)
  update = functools.partial(
      meta_train.meta_update, agent=agent, meta_opt=meta_opt, config=config
  )
  jax.block_until_ready(
      jax.jit(update)(params, meta_opt.init(params), states, rng)
  )
  jax.effects_barrier()

  split = jax.random.split
  act_rng, update_rng = split(rng)
  expected = []
  for a_i, u_i in zip(
      split(act_rng, num_agents), split(update_rng, num_agents)
  ):
    for key in split(a_i, num_steps):
      expected.append(('train', _key(key)))
      expected += [('actor_step', _key(k)) for k in split(key, length)]
    expected.append(('valid', _key(a_i)))  # The acting key, reused.
    expected += [('actor_step', _key(k)) for k in split(a_i, 2 * length)]
    expected.append(('meta_gradient', _key(u_i)))
  assert sorted(calls) == sorted(expected)


def test_run_meta_train_smoke(tmp_path):
  seen = []
  handlers = []

  def _progress(step, logs):
    seen.append((step, dict(logs)))
    handlers.append(signal.getsignal(signal.SIGINT))

  before = signal.getsignal(signal.SIGINT)
  result = meta_train.run_meta_train(
      _TINY,
      progress_fn=_progress,
      checkpoint_dir=tmp_path,
      logger='csv',
      log_dir=tmp_path / 'logs',
  )
  assert [step for step, _ in seen] == [1, 2]
  # Without handle_interrupts the library leaves Ctrl-C alone.
  assert handlers == [before] * 2
  # The logger's rows are the steps' logs.
  rows = logs.read_csv(tmp_path / 'logs' / 'log.csv')
  assert [r['step'] for r in rows] == [1, 2]
  for row, (_, step_logs) in zip(rows, seen, strict=True):
    assert row['meta_loss'] == pytest.approx(step_logs['meta_loss'])
  assert result.num_steps == 2
  assert _LOG_KEYS <= set(result.logs)
  assert any(k.startswith('agent/') for k in result.logs)
  for key, values in result.logs.items():
    assert values.shape == (2,), key
    if key != 'pos_reward_fraction':
      assert np.all(np.isfinite(values)), key
  np.testing.assert_array_equal(
      result.logs['meta_loss'], [logs['meta_loss'] for _, logs in seen]
  )
  # Counts of +1 / -1 rewards in N * T * B = 1 * 4 * 4 steps per agent. An
  # episode of 5x5 Catch lasts 4 steps, so the first rollout may end none:
  # then the share of catches is NaN, as documented.
  total = result.logs['pos_rewards'] + result.logs['neg_rewards']
  assert np.all(total <= 16) and total[-1] > 0, total
  ended = total > 0
  fraction = result.logs['pos_reward_fraction']
  np.testing.assert_allclose(
      fraction[ended], result.logs['pos_rewards'][ended] / total[ended]
  )
  assert np.all(np.isnan(fraction[~ended]))
  # The rule moved by two Adam steps: at most ~lr each (the bias-corrected
  # m / sqrt(v) of two steps is at most 1.0013 in magnitude).
  start = jax.device_get(meta_train.random_init_params(_TINY))
  deltas = jax.tree.map(
      lambda a, b: np.max(np.abs(a - b)), result.update_rule_params, start
  )
  assert 0 < max(jax.tree.leaves(deltas)) <= 2 * 5e-4 * 1.0014 + 1e-6
  # Checkpoints: every step, the newest two kept, loadable as a rule.
  assert checkpoint.list_steps(tmp_path) == [1, 2]
  assert result.checkpoint_path == checkpoint.step_path(tmp_path, 2)
  params = weights.load_update_rule_params(
      result.checkpoint_path / checkpoint.PARAMS_FILENAME
  )
  chex.assert_trees_all_equal(params, result.update_rule_params)


def test_state_keeps_its_types_and_placement():
  trainer = meta_train_runtime._trainer_for(_TINY)  # pylint: disable=protected-access
  state = trainer.initial_state(trainer.random_params())
  expected = trainer.abstract_inputs()
  new_state, _ = trainer.step(state)
  for tree in (state, new_state):
    got = (tree.update_rule_params, tree.meta_opt_state, tree.agents_states)
    for have, want in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
      assert have.aval.strip_weak_type() == have.aval  # No weak types.
      assert (have.shape, have.dtype) == (want.shape, want.dtype)
      assert have.sharding == want.sharding
  assert jax.tree.structure(new_state.agents_states) == jax.tree.structure(
      state.agents_states
  )


def test_resume_is_exact(tmp_path):
  straight = meta_train.run_meta_train(
      _TINY.replace(num_steps=4), checkpoint_dir=tmp_path / 'straight'
  )
  first = meta_train.run_meta_train(
      _TINY.replace(num_steps=2), checkpoint_dir=tmp_path / 'resumed'
  )
  assert first.num_steps == 2
  resumed = meta_train.run_meta_train(
      _TINY.replace(num_steps=4),
      checkpoint_dir=tmp_path / 'resumed',
      resume=True,
  )
  assert resumed.num_steps == 4
  chex.assert_trees_all_equal(
      resumed.update_rule_params, straight.update_rule_params
  )
  chex.assert_trees_all_equal(resumed.logs, straight.logs)
  # Everything else in the final checkpoints is identical too.
  chex.assert_trees_all_equal(
      _final_arrays(tmp_path / 'resumed'), _final_arrays(tmp_path / 'straight')
  )


def test_ctrl_c_checkpoints_then_resumes_exactly(tmp_path):
  config = _TINY.replace(num_steps=3, checkpoint_every=0)

  def _interrupt(step, logs):
    del logs
    if step == 1:
      os.kill(os.getpid(), signal.SIGINT)

  # The handler the loop found (SIG_IGN where the shell started pytest in
  # the background) is the one it must leave.
  before = signal.getsignal(signal.SIGINT)
  with pytest.raises(KeyboardInterrupt):
    meta_train.run_meta_train(
        config,
        progress_fn=_interrupt,
        checkpoint_dir=tmp_path / 'a',
        handle_interrupts=True,
    )
  assert signal.getsignal(signal.SIGINT) is before
  assert checkpoint.list_steps(tmp_path / 'a') == [1]
  resumed = meta_train.run_meta_train(
      config, checkpoint_dir=tmp_path / 'a', resume=True
  )
  straight = meta_train.run_meta_train(config, checkpoint_dir=tmp_path / 'b')
  chex.assert_trees_all_equal(
      resumed.update_rule_params, straight.update_rule_params
  )
  chex.assert_trees_all_equal(resumed.logs, straight.logs)
  assert checkpoint.list_steps(tmp_path / 'a') == [1, 3]


def test_checkpoint_dir_in_use_needs_resume(tmp_path):
  meta_train.run_meta_train(_TINY.replace(num_steps=1), checkpoint_dir=tmp_path)
  before = (tmp_path / 'step_00000001' / 'state.npz').read_bytes()
  with pytest.raises(checkpoint.CheckpointExistsError, match='resume=True'):
    meta_train.run_meta_train(_TINY, checkpoint_dir=tmp_path)
  with pytest.raises(checkpoint.CheckpointNotFoundError):
    meta_train.run_meta_train(
        _TINY, checkpoint_dir=tmp_path / 'empty', resume=True
    )
  with pytest.raises(ValueError, match='checkpoint_dir'):
    meta_train.run_meta_train(_TINY, resume=True)
  assert (tmp_path / 'step_00000001' / 'state.npz').read_bytes() == before


def test_mismatched_or_corrupt_checkpoints_are_refused(tmp_path):
  meta_train.run_meta_train(_TINY.replace(num_steps=1), checkpoint_dir=tmp_path)
  step_dir = checkpoint.step_path(tmp_path, 1)

  with pytest.raises(checkpoint.CheckpointMismatchError, match='agent_dense'):
    meta_train.run_meta_train(
        _TINY.replace(agent_dense=(32,)), checkpoint_dir=tmp_path, resume=True
    )
  other_init = jax.tree.map(
      lambda x: x + 1.0,
      meta_train.random_init_params(_TINY),
  )
  with pytest.raises(checkpoint.CheckpointMismatchError, match='initial'):
    meta_train.run_meta_train(
        _TINY,
        update_rule_params=other_init,
        checkpoint_dir=tmp_path,
        resume=True,
    )

  # A checkpoint of a 2-device run cannot continue on 1 device.
  record_path = step_dir / checkpoint.METADATA_FILENAME
  record = json.loads(record_path.read_text())
  record['metadata']['num_local_devices'] = 2
  record_path.write_text(json.dumps(record))
  with pytest.raises(checkpoint.CheckpointMismatchError, match='2 device'):
    meta_train.run_meta_train(_TINY, checkpoint_dir=tmp_path, resume=True)
  record['metadata']['num_local_devices'] = 1
  record_path.write_text(json.dumps(record))

  state = step_dir / checkpoint.STATE_FILENAME
  state.write_bytes(state.read_bytes()[:-10])
  damaged = state.read_bytes()
  with pytest.raises(checkpoint.CheckpointCorruptError, match='state.npz'):
    meta_train.run_meta_train(_TINY, checkpoint_dir=tmp_path, resume=True)
  assert state.read_bytes() == damaged
  assert checkpoint.list_steps(tmp_path) == [1]


def test_fine_tuning_disco103_and_bad_params(tmp_path):
  disco103 = weights.load_disco103()
  config = _TINY.replace(num_steps=1)
  result = meta_train.run_meta_train(config, update_rule_params=disco103)
  deltas = jax.tree.map(
      lambda a, b: np.max(np.abs(a - b)), result.update_rule_params, disco103
  )
  # One Adam step: every parameter moves by at most the learning rate.
  assert 0 < max(jax.tree.leaves(deltas)) <= 5e-4 + 1e-6  # + float32 ulp.
  # The same run from the config's source, and with the deprecated keyword.
  from_config = meta_train.run_meta_train(
      config.replace(update_rule_params='disco103')
  )
  chex.assert_trees_all_equal(
      from_config.update_rule_params, result.update_rule_params
  )
  with pytest.warns(DeprecationWarning, match='update_rule_params'):
    deprecated = meta_train.run_meta_train(config, init_params=disco103)
  chex.assert_trees_all_equal(
      deprecated.update_rule_params, result.update_rule_params
  )
  with pytest.raises(TypeError, match='init_params'):
    meta_train.run_meta_train(
        config, update_rule_params=disco103, init_params=disco103
    )
  bad = dict(disco103)
  del bad['lstm/linear']
  with pytest.raises(weights.StructureError, match='lstm/linear'):
    meta_train.run_meta_train(_TINY, update_rule_params=bad)
  path = weights.save_update_rule_params(bad, tmp_path / 'bad.npz')
  with pytest.raises(weights.StructureError, match='lstm/linear'):
    meta_train.run_meta_train(_TINY.replace(update_rule_params=str(path)))


def test_random_sources_start_from_random_init_params():
  config = _TINY.replace(num_steps=1)
  default = meta_train.run_meta_train(config)
  for run in (
      lambda: meta_train.run_meta_train(
          config.replace(update_rule_params='random')
      ),
      lambda: meta_train.run_meta_train(
          config, update_rule_params=meta_train.random_init_params(config)
      ),
  ):
    chex.assert_trees_all_equal(
        run().update_rule_params, default.update_rule_params
    )


# Slow (~2.5 min on 2 cores, mostly compiling the per-agent loop's program):
# CI stays under its 20 minutes; run with `pytest -m slow`.
@pytest.mark.slow
def test_vmapped_population_matches_the_loop():
  # One inner step and short rollouts keep the two programs small.
  config = _TINY.replace(
      num_steps=1, num_inner_steps=1, rollout_len=3, envs_per_device=2
  )
  vmapped = meta_train.run_meta_train(config)
  loop = meta_train.run_meta_train(config.replace(vmap_agents=False))
  for key in _LOG_KEYS - {'pos_reward_fraction'}:
    np.testing.assert_allclose(
        vmapped.logs[key], loop.logs[key], rtol=1e-4, atol=1e-6, err_msg=key
    )
  np.testing.assert_array_equal(
      vmapped.logs['pos_reward_fraction'], loop.logs['pos_reward_fraction']
  )
  # Adam's first step moves a parameter by lr * g / (|g| + 1e-8): where a
  # meta-gradient is within rounding of zero the two may differ (by at most
  # 2 * lr); everywhere else they agree.
  diffs = np.concatenate([
      np.abs(a - b).ravel()
      for a, b in zip(
          jax.tree.leaves(vmapped.update_rule_params),
          jax.tree.leaves(loop.update_rule_params),
      )
  ])
  assert diffs.max() <= 2 * 5e-4 + 1e-6
  assert np.mean(diffs > 1e-6) <= 1e-3, np.mean(diffs > 1e-6)


def test_public_names():
  for name in (
      'MetaTrainConfig',
      'EXECUTION_FIELDS',
      'MetaTrainAgent',
      'MetaTrainState',
      'MetaTrainResult',
      'calculate_meta_gradient',
      'meta_update',
      'run_meta_train',
      'random_init_params',
      'progress_bar',
      'POLICY_ENTROPY_COST',
      'PREDICTION_ENTROPY_COST',
      'TARGET_MEAN_COST',
      'TARGET_KL_COST',
  ):
    assert hasattr(meta_train, name), name
    assert name in dir(meta_train), name
  assert meta_train.run_meta_train is meta_train_runtime.run_meta_train
  fields = {f.name for f in dataclasses.fields(meta_train.MetaTrainConfig)}
  assert {'remat', 'unroll_inner_steps', 'vmap_agents'} <= fields
  with pytest.raises(AttributeError):
    meta_train.no_such_name  # pylint: disable=pointless-statement


@pytest.mark.parametrize(
    'module',
    [
        'meta_train',
        'meta_train.loop',
        'meta_train.maths',
        'meta_train.meta_gradient',
        'meta_train.meta_agent',
    ],
)
def test_modules_import_in_either_order(module):
  result = subprocess.run(
      [
          sys.executable,
          '-c',
          f'import disco.{module}; from disco.meta_train import run_meta_train',
      ],
      capture_output=True,
      text=True,
      check=False,
      timeout=300,
  )
  assert result.returncode == 0, result.stderr


def test_progress_bar_is_a_progress_fn():
  with meta_train.progress_bar(3, initial=1) as bar:
    assert isinstance(bar, progress.ProgressBar)
    bar(2, {'meta_loss': 0.5, 'pos_reward_fraction': float('nan')})
    assert bar.total == 3


@pytest.mark.slow
def test_discovers_catch():
  """From a random init the agents learn to catch (the notebook's plot).

  The reference's run (default config, 800 meta-steps) shortened to 500.
  Measured on CPU: with a random rule the agents' policies stay uniform and
  about 0.20 of the finished episodes end in a catch (the random policy's
  rate) for ~350 meta-steps; then the rule starts to produce useful targets
  and the share (25-step mean) passes 0.5 at meta-step 386 (407 with
  `vmap_agents=False`, whose float rounding differs). Over steps 451-500
  it is 0.93 (0.86), over the last 50 of 800 0.998 (0.997). The thresholds
  leave ~90 meta-steps of slack for a later take-off.
  """
  result = meta_train.run_meta_train(meta_train.MetaTrainConfig(num_steps=500))
  fraction = result.logs['pos_reward_fraction']
  assert np.mean(fraction[:50]) <= 0.3
  assert np.mean(fraction[-50:]) >= 0.5


def test_reward_scale_reaches_every_rollout_the_meta_step_learns_from(
    monkeypatch,
):
  config = _TINY.replace(reward_scale=10.0, rollout_len=8)
  agent = meta_train.MetaTrainAgent.from_config(config)
  key = jax.random.PRNGKey(0)

  def meta_gradient_of(rule_params, state, train_rollouts, valid_rollout, rng):
    """What the inner updates and the meta-loss are given, as its logs."""
    del rng
    read = dict(train=train_rollouts.rewards, valid=valid_rollout.rewards)
    return jax.tree.map(jnp.zeros_like, rule_params), (state, {}, read)

  monkeypatch.setattr(
      meta_train_maths.meta_gradient,
      'configured_meta_gradient',
      lambda agent, config: meta_gradient_of,
  )
  step = functools.partial(
      meta_train_maths._agent_meta_step,  # pylint: disable=protected-access
      agent=agent,
      config=config,
  )
  _, _, _, read, reward_log = jax.jit(
      jax.vmap(step, in_axes=None, axis_size=1, axis_name=devices.AXIS_NAME)
  )(meta_train.random_init_params(config), agent.init_state(key), key, key)
  n, t, b = config.num_inner_steps, config.rollout_len, config.envs_per_device
  train_rewards, valid_rewards = read['train'][0], read['valid'][0]
  assert train_rewards.shape == (n, t, b)
  assert valid_rewards.shape == (2 * t, b)
  # Catch pays -1 or 1 at an episode's end (4 steps on 5x5 Catch): the
  # rollouts the rule and the meta-loss read pay -10 or 10.
  assert np.all(np.isin(train_rewards, [-10.0, 0.0, 10.0]))
  assert np.any(train_rewards != 0) and np.any(valid_rewards != 0)
  assert np.all(np.isin(valid_rewards, [-10.0, 0.0, 10.0]))
  # The logged rewards are the game's.
  np.testing.assert_allclose(
      reward_log['rewards'][0], train_rewards.mean() / 10
  )
  np.testing.assert_array_equal(
      reward_log['pos_rewards'][0], np.sum(train_rewards > 0)
  )
