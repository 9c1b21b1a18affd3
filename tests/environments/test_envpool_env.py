"""`disco.environments.envpool_env`: envpool's pools, episode by episode."""

import builtins
import types as pytypes

import dm_env
import numpy as np
import pytest

from disco.environments import envpool_env
from disco.environments import registry

gym = pytest.importorskip('gymnasium')
MID, LAST = int(dm_env.StepType.MID), int(dm_env.StepType.LAST)


class _ScriptedPool:
  """envpool's gymnasium API, NEXT_STEP autoreset, [C=1, H=2, W=3] frames
  filled with [episode]; copy k's episodes last 2 + k steps."""

  observation_space = gym.spaces.Box(0, 255, (1, 2, 3), np.uint8)
  action_space = gym.spaces.Discrete(4)

  def __init__(self, num_envs, seed):
    self.num_envs, self.seed = num_envs, seed
    self.episode = np.zeros(num_envs, int)
    self.t = np.zeros(num_envs, int)
    self.pending = np.zeros(num_envs, bool)
    self.actions = []

  def _frames(self, ids):
    out = np.zeros((len(ids), 1, 2, 3), np.uint8)
    out[:, 0, 0, 0] = self.episode[ids]
    out[:, 0, 0, 1] = self.t[ids]
    return out

  def reset(self, env_id=None):
    ids = np.arange(self.num_envs) if env_id is None else np.asarray(env_id)
    self.episode[ids] += env_id is not None
    self.t[ids] = 0
    self.pending[ids] = False
    # Newest first, as an asynchronous pool may answer.
    order = ids[::-1]
    return self._frames(order), {'env_id': order}

  def step(self, actions):
    assert not self.pending.any(), 'an action was spent on a reset step'
    self.actions.append(np.asarray(actions).tolist())
    self.t += 1
    done = self.t == 2 + np.arange(self.num_envs)
    self.pending = done
    ids = np.arange(self.num_envs)
    return self._frames(ids), self.t.astype(float), done, done & False, {}

  def close(self):
    pass


@pytest.fixture(name='pools')
def _fake_envpool(monkeypatch):
  made = []

  def make(task_id, env_type, num_envs, seed, **settings):
    assert env_type == 'gymnasium'
    made.append((task_id, seed, settings))
    return _ScriptedPool(num_envs, seed)

  module = pytypes.SimpleNamespace(
      make=make, list_all_envs=lambda: ['Pong-v5', 'CartPole-v1']
  )
  monkeypatch.setattr(envpool_env, '_require_envpool', lambda: module)
  return made


def test_next_step_pools_end_episodes_as_every_disco_env(pools):
  env = registry.make_environment('envpool:Pong-v5', batch_size=2)
  assert env.single_observation_spec().shape == (2, 3, 1)
  assert env.single_observation_spec().dtype == np.uint8
  _, first = env.reset(np.zeros(2, np.uint32))
  # Atari's preprocessing is stated, and envpool's frame stack is off.
  task, seed, settings = pools[-1]
  assert (task, settings['stack_num']) == ('Pong-v5', 1)
  assert settings['frame_skip'] == 4 and settings['noop_max'] == 30
  assert seed == pools[-1][1] and first.observation.shape == (2, 2, 3, 1)
  got = []
  for _ in range(4):
    _, timestep, truncation = env.step_with_truncation(None, np.ones(2))
    got.append((
        timestep.step_type.tolist(),
        timestep.observation[:, 0, :2, 0].tolist(),
        truncation.final_observation[:, 0, :2, 0].tolist(),
    ))
  assert got == [
      ([MID, MID], [[0, 1], [0, 1]], [[0, 1], [0, 1]]),
      # Copy 0's episode ends: its next episode's first frame, at once.
      ([LAST, MID], [[1, 0], [0, 2]], [[0, 2], [0, 2]]),
      ([MID, LAST], [[1, 1], [1, 0]], [[1, 1], [0, 3]]),
      ([LAST, MID], [[2, 0], [1, 1]], [[1, 2], [1, 1]]),
  ]


@pytest.mark.usefixtures('pools')
def test_an_unknown_task_is_named():
  with pytest.raises(ValueError, match="envpool has no task 'Pongg-v5'"):
    registry.make_environment('envpool:Pongg-v5', batch_size=2)
  assert not registry.is_jittable_name('envpool:Pong-v5')


def test_a_missing_package_names_the_extra(monkeypatch):
  real_import = builtins.__import__

  def no_envpool(name, *args, **kwargs):
    if name == 'envpool':
      raise ImportError('No module named envpool')
    return real_import(name, *args, **kwargs)

  monkeypatch.setattr(builtins, '__import__', no_envpool)
  with pytest.raises(ImportError, match=r'disco-jax\[atari\]'):
    registry.make_environment('envpool:Pong-v5', batch_size=1)
