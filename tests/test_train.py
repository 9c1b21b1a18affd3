"""The trainer (`disco.train`): batches, replay, evaluation, resume, devices."""

import json
import os
import pathlib
import subprocess
import sys
import threading

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import checkpoint
from disco import configs
from disco import devices as devices_lib
from disco import learner
from disco import logs
from disco import train
from disco import types
from disco.train import program as train_program
from disco.train import run as train_run

_REPO = pathlib.Path(__file__).resolve().parents[1]

# A small actor-critic agent on 5x5 Catch: cheap to compile and run.
_TINY = dict(
    rule='actor_critic',
    env_settings={'rows': 5, 'columns': 5},
    rollout_len=4,
    agent_dense=(16,),
    agent_lstm_size=8,
    agent_head_mlp_hiddens=(8,),
    agent_learning_rate=1e-3,
)


def _tiny(**changes) -> train.TrainConfig:
  return train.TrainConfig(**(_TINY | changes))


def test_presets_give_the_papers_batch_composition():
  colab = train.preset('colab')
  assert colab == train.TrainConfig()
  assert (colab.replay_per_batch, colab.fresh_per_batch) == (64, 0)
  assert colab.learner_steps_per_step == 1

  paper = train.preset('paper', env='gymnax:Breakout-MinAtar')
  assert paper.env == 'gymnax:Breakout-MinAtar'
  assert paper.learner_batch_size == 96 and paper.rollout_len == 29
  assert (paper.replay_per_batch, paper.fresh_per_batch) == (86, 10)
  assert paper.agent_learning_rate == 3e-4
  assert paper.learner_steps_per_step == 1
  assert paper.env_steps_per_step == 290
  # More environments: one learner step per fresh part of the rollout.
  assert paper.replace(num_envs=40).learner_steps_per_step == 4
  assert paper.num_steps_for(1000) == 4


@pytest.mark.parametrize(
    'changes, message',
    [
        (dict(replay_fraction=1.5), 'replay_fraction'),
        (dict(num_envs=3, replay_fraction=0.5), 'multiple of the fresh'),
        (dict(buffer_capacity=63), 'multiple of num_envs'),
        (dict(learning_starts=2000), 'learning_starts'),
        (dict(num_envs=2.5), 'num_envs must be an int'),
        (dict(eval_envs=0), 'eval_envs'),
        (dict(env='pong'), 'Unknown environment'),
        (dict(rule='ppo'), 'Unknown rule'),
        (dict(rule='actor_critic', update_rule_params='x.npz'), 'disco rule'),
    ],
)
def test_bad_settings_are_named(changes, message):
  with pytest.raises(configs.ConfigError, match=message):
    train.TrainConfig(**changes)
  with pytest.raises(configs.ConfigError, match='Unknown preset'):
    train.preset('nonsense')


def test_the_learning_program_compiles_once_in_the_background(monkeypatch):
  # Two acting-only iterations, then learning: the learning program
  # compiles in a thread while the state is built and the first iterations
  # act, and its first call finds it compiled. A fresh trainer, so that no
  # earlier test's programs are reused.
  config = _tiny(num_steps=3, learning_starts=4, buffer_capacity=8)
  trainer = train.Trainer(config, [config.seed])
  monkeypatch.setattr(train_run, '_TRAINERS', lambda *_: trainer)
  compiles = []

  def listener(name: str, duration: float, **kwargs) -> None:
    if name == '/jax/core/compile/backend_compile_duration':
      compiles.append(
          (threading.current_thread(), kwargs.get('fun_name'), duration)
      )

  def in_foreground() -> int:
    return sum(c[0] is threading.main_thread() for c in compiles)

  after_chunks = []
  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    train.run_train(
        config, progress_fn=lambda *_: after_chunks.append(in_foreground())
    )
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)
  in_background = [c for c in compiles if c[0] is not threading.main_thread()]
  assert len(in_background) == 1, compiles
  # Chunks end at iterations 1 (acting only) and 3 (learning): the second
  # compiled nothing in the foreground.
  assert len(after_chunks) == 2, after_chunks
  assert after_chunks[0] == after_chunks[1], after_chunks


@pytest.mark.slow
def test_fresh_and_replayed_parts_make_the_learner_batch(monkeypatch):
  # Record the batches the learner step receives.
  batches = []
  make_learn_fn = train_program.learner.make_learn_fn

  def recording_make_learn_fn(setup):
    learn = make_learn_fn(setup)

    def wrapped(rng, batch, *args):
      batches.append(jax.tree.map(lambda x: x.shape, batch))
      return learn(rng, batch, *args)

    return wrapped

  monkeypatch.setattr(
      train_program.learner, 'make_learn_fn', recording_make_learn_fn
  )
  config = _tiny(
      num_steps=2,
      num_envs=4,
      learner_batch_size=6,
      replay_fraction=2 / 3,
      buffer_capacity=16,
      learning_starts=4,
  )
  assert (config.fresh_per_batch, config.replay_per_batch) == (2, 4)
  result = train.run_train(config)
  shapes = {
      s
      for b in batches
      for s in jax.tree.leaves(b, is_leaf=lambda x: isinstance(x, tuple))
  }
  # [T, batch, ...]: 2 fresh + 4 replayed trajectories.
  assert {s[1] for s in shapes} == {6}, shapes
  # Two learner steps per rollout of 4 environments (2 fresh each).
  np.testing.assert_array_equal(result.logs['learner_steps'], [4])


def _logs_without_time(result: train.TrainResult) -> dict[str, np.ndarray]:
  return {k: v for k, v in result.logs.items() if k != 'elapsed'}


def test_resume_is_exact(tmp_path):
  config = _tiny(
      num_steps=6,
      steps_per_chunk=2,
      eval_every=2,
      eval_envs=4,
      eval_max_steps=12,
      learning_starts=4,
      buffer_capacity=8,
  )
  straight = train.run_train(config, num_seeds=2)
  logged = dict(logger='csv', log_dir=tmp_path / 'logs')
  first = train.run_train(
      config.replace(num_steps=3),
      num_seeds=2,
      checkpoint_dir=tmp_path / 'ckpt',
      **logged,
  )
  # Chunks end at 1 (the iteration before learning), 3, 5 and 6.
  assert checkpoint.latest_step(tmp_path / 'ckpt') == 3
  assert len(first.logs['step']) < len(straight.logs['step'])
  resumed = train.run_train(
      config,
      num_seeds=2,
      checkpoint_dir=tmp_path / 'ckpt',
      resume=True,
      **logged,
  )
  # The logger got every row once, as series seed_<s>, across the resume.
  rows = logs.read_csv(tmp_path / 'logs' / 'log.csv')
  assert [(r['series'], r['step'], r['env_steps']) for r in rows] == [
      (f'seed_{int(seed)}', int(step), env_steps)
      for seed, step, env_steps in zip(
          straight.logs['seed'],
          straight.logs['step'],
          straight.logs['env_steps'],
      )
  ]
  chex.assert_trees_all_equal(
      _logs_without_time(resumed), _logs_without_time(straight)
  )
  chex.assert_trees_all_equal(resumed.params, straight.params)
  # Evaluations: at 0, at the first chunk end past each multiple of 2 (3,
  # 5) and at the end, for both seeds.
  evaluated = ~np.isnan(straight.logs['eval_return'])
  np.testing.assert_array_equal(
      straight.logs['step'][evaluated], [0, 0, 3, 3, 5, 5, 6, 6]
  )
  assert np.all(straight.logs['eval_episodes'][evaluated] == 4)


def test_resume_refuses_another_run(tmp_path):
  config = _tiny(num_steps=2, learning_starts=2, buffer_capacity=8)
  train.run_train(config, checkpoint_dir=tmp_path)
  with pytest.raises(checkpoint.CheckpointExistsError):
    train.run_train(config, checkpoint_dir=tmp_path)
  with pytest.raises(checkpoint.CheckpointMismatchError, match='rollout_len'):
    train.run_train(
        config.replace(rollout_len=5), checkpoint_dir=tmp_path, resume=True
    )
  with pytest.raises(checkpoint.CheckpointMismatchError, match='reward_scale'):
    train.run_train(
        config.replace(reward_scale=10.0), checkpoint_dir=tmp_path, resume=True
    )


def test_rows_per_iteration_add_up_to_the_chunk_rows():
  config = _tiny(
      num_steps=6,
      steps_per_chunk=2,
      eval_every=2,
      eval_envs=4,
      eval_max_steps=12,
      learning_starts=4,
      buffer_capacity=8,
  )
  chunked = train.run_train(config, num_seeds=2)
  reported = []
  per_iteration = train.run_train(
      config.replace(log_every_iteration=True),
      num_seeds=2,
      progress_fn=lambda step, row: reported.append(step),
  )
  # The same run: only the rows differ.
  chex.assert_trees_all_equal(per_iteration.params, chunked.params)
  assert reported == list(range(7))
  logs, rows = per_iteration.logs, chunked.logs
  names = [k for k in rows if k.startswith('logs/')]
  assert names and set(logs) == set(rows)
  for seed in (0, 1):
    mine = logs['seed'] == seed
    np.testing.assert_array_equal(logs['step'][mine], range(7))
    # Chunks end at 1 (the iteration before learning), 3, 5 and 6.
    ends = rows['step'][rows['seed'] == seed]
    np.testing.assert_array_equal(ends, [0, 1, 3, 5, 6])
    for previous, end in zip(ends[:-1], ends[1:]):
      at_end = (rows['seed'] == seed) & (rows['step'] == end)
      chunk = {k: v[at_end] for k, v in rows.items()}
      iterations = mine & (logs['step'] > previous) & (logs['step'] <= end)
      last = mine & (logs['step'] == end)
      for name in (
          'step',
          'env_steps',
          'learner_steps',
          'eval_return',
          'eval_episodes',
      ):
        np.testing.assert_array_equal(logs[name][last], chunk[name], name)
      inside = iterations & ~last
      assert np.all(logs['eval_episodes'][inside] == 0)
      assert np.all(np.isnan(logs['eval_return'][inside]))
      episodes = logs['train_episodes'][iterations]
      np.testing.assert_array_equal(episodes.sum(), chunk['train_episodes'])
      returns = np.nan_to_num(logs['train_return'][iterations]) * episodes
      if episodes.sum():
        np.testing.assert_allclose(
            returns.sum() / episodes.sum(), chunk['train_return'], rtol=1e-6
        )
      for name in names:
        np.testing.assert_allclose(
            np.mean(logs[name][iterations]), chunk[name], rtol=1e-5
        )


def test_reference_rounding_is_the_faithful_loops_learner_step():
  # Disco's losses read z, aux_pi and q at the taken actions only, so its
  # learner step is the one the option changes.
  config = _tiny(rule='disco', learning_starts=4, buffer_capacity=8)
  setups = dict(
      # The faithful loop's, which keeps the reference's rounding.
      faithful=learner.build(config, None),
      reference_rounding=train.Trainer(
          config.replace(taken_action_gradients=False, share_state_gates=False),
          [0],
      ).setup,
      taken_actions=train.Trainer(config, [0]).setup,
  )
  assert config.taken_action_gradients  # The default: today's trainer.
  t, b = config.rollout_len, 2
  keys = iter(jax.random.split(jax.random.PRNGKey(3), 8))
  spec = setups['faithful'].env.single_observation_spec()
  logits = jax.random.normal(next(keys), (t, b, 3))
  rollout = types.ActorRollout(
      observations=jax.tree.map(
          lambda s: jax.random.uniform(next(keys), (t, b) + s.shape, s.dtype),
          spec,
      ),
      actions=jax.random.randint(next(keys), (t, b), 0, 3),
      rewards=jax.random.normal(next(keys), (t, b)),
      discounts=jnp.ones((t, b), bool).at[2, 1].set(False),
      logits=logits,
      agent_outs={'logits': logits},
      states={},
  )

  def learner_step(setup):
    key = jax.random.PRNGKey(0)
    return learner.make_learn_fn(setup)(
        jax.random.PRNGKey(1),
        rollout,
        setup.agent.initial_learner_state(key),
        setup.agent.initial_actor_state(key),
        setup.update_rule_params,
        None,
    )

  steps = jax.pmap(
      lambda _: {k: learner_step(s) for k, s in setups.items()},
      axis_name=devices_lib.AXIS_NAME,
      devices=jax.devices()[:1],
  )
  out = jax.device_get(steps(np.zeros((1,))))
  # Bit for bit the faithful loop's learner step.
  chex.assert_trees_all_equal(out['reference_rounding'], out['faithful'])
  # Teeth: the trainer's default rounds otherwise (the same step up to
  # float rounding).
  faithful, cheap = out['faithful'][0].params, out['taken_actions'][0].params
  assert not all(
      np.array_equal(x, y)
      for x, y in zip(jax.tree.leaves(cheap), jax.tree.leaves(faithful))
  )
  np.testing.assert_allclose(
      out['taken_actions'][2]['global_gradient_norm'],
      out['faithful'][2]['global_gradient_norm'],
      rtol=1e-4,
  )


_DEVICES_WORKER = r"""
import json
import sys
import threading

import jax
import numpy as np

from disco import train
from disco.train import program as train_program

assert jax.device_count() == 4, jax.devices()
config = train.TrainConfig(**json.loads(sys.argv[1]))
counts = json.loads(sys.argv[2])
bug = sys.argv[3] if len(sys.argv) > 3 else ''
if bug == 'replay_per_device':
  # Teeth: each device draws its replay positions with its own key.
  from disco.replay import ring

  gather = ring.sample_grid

  def _per_device(state, key, *args):
    return gather(state, jax.random.fold_in(key, jax.lax.axis_index('i')), *args)

  ring.sample_grid = _per_device
elif bug == 'no_gradient_mean':
  # Teeth: each device keeps its own gradients.
  jax.lax.pmean = lambda x, axis_name, **kw: x
out = {}
for devices in counts:
  result = train.run_train(config.replace(max_devices=devices), num_seeds=2)
  assert result.num_devices == devices, result.num_devices
  out[devices] = dict(
      logs={k: v.tolist() for k, v in result.logs.items() if k != 'elapsed'},
      params=[x.tolist() for x in jax.tree.leaves(result.params)],
  )
print('RESULT', json.dumps(out))
"""


def _run_on_forced_devices(
    config: train.TrainConfig, counts: tuple[int, ...], bug: str = ''
) -> dict[str, dict]:
  env = dict(os.environ)
  env['XLA_FLAGS'] = (
      env.get('XLA_FLAGS', '') + ' --xla_force_host_platform_device_count=4'
  ).strip()
  env['JAX_PLATFORMS'] = 'cpu'
  env['PYTHONPATH'] = str(_REPO)
  done = subprocess.run(
      [
          sys.executable,
          '-c',
          _DEVICES_WORKER,
          json.dumps(config.to_dict()),
          json.dumps(counts),
          bug,
      ],
      env=env,
      capture_output=True,
      text=True,
      check=False,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  lines = done.stdout.splitlines()
  line = [x for x in lines if x.startswith('RESULT ')][-1]
  return json.loads(line[len('RESULT ') :])


def _max_relative_difference(one: dict, other: dict) -> dict[str, float]:
  """Per log column and parameter leaf: max |a - b| / max |a|.

  Inf where the two disagree on which entries are NaN (e.g. a chunk with
  no finished episode in one run only).
  """

  def diff(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
      return np.inf
    a, b = np.nan_to_num(a), np.nan_to_num(b)
    scale = max(float(np.max(np.abs(a), initial=0.0)), 1e-6)
    return float(np.max(np.abs(a - b), initial=0.0)) / scale

  assert one['logs'].keys() == other['logs'].keys()
  out = {k: diff(v, other['logs'][k]) for k, v in one['logs'].items()}
  # Parameters: one L2 ratio over all of them (Adam turns rounding noise in
  # the near-zero gradients of a few weights into whole steps of size lr,
  # which a per-weight ratio would magnify).
  a, b = (
      np.concatenate([np.ravel(x) for x in run['params']])
      for run in (one, other)
  )
  out['params'] = float(np.linalg.norm(a - b) / np.linalg.norm(a))
  return out


# CI compares 1 and 2 devices; 4 devices is slow (`pytest -m slow`).
@pytest.mark.parametrize(
    'counts', [(1, 2), pytest.param((1, 2, 4), marks=pytest.mark.slow)]
)
def test_devices_train_as_one(counts):
  # 8 environments, batches of 4 fresh + 4 replayed trajectories: 2 learner
  # steps per rollout; every device holds a share of each part. Learning
  # starts at once (no warm-up program to compile).
  config = _tiny(
      num_steps=4,
      steps_per_chunk=2,
      num_envs=8,
      learner_batch_size=8,
      replay_fraction=0.5,
      buffer_capacity=32,
      learning_starts=8,
      eval_every=4,
      eval_envs=4,
      eval_max_steps=12,
  )
  runs = _run_on_forced_devices(config, counts)
  for devices in [str(n) for n in counts[1:]]:
    # The same actions, episodes and replayed positions: equal counts.
    for name in ('train_episodes', 'eval_episodes', 'learner_steps'):
      np.testing.assert_array_equal(
          runs[devices]['logs'][name], runs['1']['logs'][name]
      )
    # Float rounding only (gradients averaged over devices instead of over
    # one batch, then amplified by Adam). Measured (2026-11-23, AVX2 CPU):
    # logs at most 9.8e-3 of their column's largest value, parameters 3.4e-3
    # (L2). The bugs tried against these bounds: replay positions drawn per
    # device (other episodes: inf) and no gradient averaging (logs 0.57,
    # parameters 0.028 on 2 devices; 0.62 and 0.070 on 4).
    differences = _max_relative_difference(runs['1'], runs[devices])
    params = differences.pop('params')
    assert params < 1e-2, params
    assert max(differences.values()) < 5e-2, differences


@pytest.mark.parametrize(
    'field', ['forward_once', 'share_meta_inputs', 'share_state_gates']
)
def test_configs_saved_before_a_fast_update_option_resume_without_it(field):
  # A run resumes with the program it ran: on by default now, off where a
  # saved config predates the field.
  saved = train.TrainConfig().to_dict()
  assert saved[field] is True
  assert train.TrainConfig.from_dict(saved) == train.TrainConfig()
  del saved[field]
  assert getattr(train.TrainConfig.from_dict(saved), field) is False


def test_configs_saved_before_truncation_existed_read_as_terminate():
  assert train.TrainConfig().truncation == 'bootstrap'
  saved = train.TrainConfig().to_dict()
  assert train.TrainConfig.from_dict(saved).truncation == 'bootstrap'
  del saved['truncation']
  assert train.TrainConfig.from_dict(saved).truncation == 'terminate'
