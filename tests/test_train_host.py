"""`disco.train.host`: the trainer acting on the host, as the fused one."""

import dataclasses
import os
import signal

import chex
import jax
import numpy as np
import pytest

from disco import checkpoint
from disco import interrupts
from disco import train
from disco.train import host
from disco.train import run as train_run

# Actor-critic on gymnax's CartPole cut at 12 steps: truncations in every
# rollout, so the host's final observations and bootstraps are exercised.
_TINY = dict(
    rule='actor_critic',
    env='gymnax:CartPole-v1',
    env_settings={'max_steps_in_episode': 12},
    num_steps=8,
    num_envs=4,
    rollout_len=6,
    learner_batch_size=8,
    buffer_capacity=32,
    learning_starts=8,
    agent_dense=(16,),
    agent_lstm_size=8,
    agent_head_mlp_hiddens=(8,),
    eval_every=4,
    eval_envs=4,
    eval_max_steps=20,
    steps_per_chunk=2,
)


class _OnTheHost:
  """A jittable environment stepped from the host, one call a step."""

  def __init__(self, env):
    self._env = env
    self._state = None
    self._reset = jax.jit(env.reset)
    self._step = jax.jit(env.step_with_truncation)
    self.batch_size = env.batch_size

  def reset(self, key):
    self._state, timestep = self._reset(key)
    return None, jax.device_get(timestep)

  def step_with_truncation(self, state, actions):
    del state
    self._state, timestep, truncation = self._step(self._state, actions)
    return None, *jax.device_get((timestep, truncation))

  def step(self, state, actions):
    _, timestep, _ = self.step_with_truncation(state, actions)
    return None, timestep


def _host_trainer(config: train.TrainConfig) -> host.HostTrainer:
  trainer = host.HostTrainer(config, [config.seed])
  trainer.setup = dataclasses.replace(
      trainer.setup, env=_OnTheHost(trainer.setup.env)
  )
  trainer.eval_env = _OnTheHost(trainer.eval_env)
  return trainer


def _run(trainer, config, monkeypatch, **kwargs):
  """`run_train` of `config` with `trainer`'s programs."""
  with monkeypatch.context() as patch:
    patch.setattr(train_run, 'get_trainer', lambda *args: trainer)
    return train.run_train(config, **kwargs)


def test_acting_on_the_host_trains_as_the_fused_program(monkeypatch):
  # Without evaluations (the other test evaluates on the host).
  config = train.TrainConfig(**(_TINY | dict(eval_every=0)))
  fused = train.run_train(config)
  on_host = _run(_host_trainer(config), config, monkeypatch)
  assert set(on_host.logs) == set(fused.logs)
  for name in fused.logs:
    if name != 'elapsed':
      np.testing.assert_allclose(
          on_host.logs[name], fused.logs[name], rtol=1e-5, err_msg=name
      )
  assert np.nansum(fused.logs['train_episodes']) > 0
  chex.assert_trees_all_close(on_host.params, fused.params, rtol=1e-5)


def test_a_gymnasium_run_stopped_by_sigterm_resumes(tmp_path):
  pytest.importorskip('gymnasium')
  config = train.TrainConfig(
      **(_TINY | dict(env='gymnasium:CartPole-v1', env_settings={}))
  )
  seen = []

  def stop_after_the_first_chunks(step, row):
    seen.append(step)
    if step == 3:
      os.kill(os.getpid(), signal.SIGTERM)

  with pytest.raises(interrupts.Interrupted) as stopped:
    train.run_train(
        config,
        checkpoint_dir=tmp_path,
        handle_interrupts=True,
        progress_fn=stop_after_the_first_chunks,
    )
  assert stopped.value.signum == signal.SIGTERM
  # The chunk ended at the signal is the checkpoint: no learner work lost.
  assert checkpoint.latest_step(tmp_path) == 3
  resumed = train.run_train(config, checkpoint_dir=tmp_path, resume=True)
  straight = train.run_train(config)
  # Chunks end at 1 (the acting-only warm-up), 3, 5, 7 and 8.
  np.testing.assert_array_equal(resumed.logs['step'], [0, 1, 3, 5, 7, 8])
  # The learner went on from the checkpoint: as many updates as straight.
  np.testing.assert_array_equal(
      resumed.logs['learner_steps'], straight.logs['learner_steps']
  )
  # Up to the checkpoint the rows are the stopped run's, which (same seed,
  # same episodes) are the straight run's; after it the episodes restarted.
  for name in ('train_return', 'eval_return', 'logs/entropy'):
    np.testing.assert_array_equal(
        resumed.logs[name][:3], straight.logs[name][:3], err_msg=name
    )
  assert np.isfinite(resumed.logs['eval_return'][-1])
