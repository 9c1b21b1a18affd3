"""`disco.environments.gymnasium_env`: Gymnasium's episodes, step for step."""

import builtins

import dm_env
import numpy as np
import pytest

from disco.environments import gymnasium_env
from disco.environments import registry

gym = pytest.importorskip('gymnasium')
AutoresetMode = gym.vector.AutoresetMode
MID, LAST = int(dm_env.StepType.MID), int(dm_env.StepType.LAST)


class _Scripted(gym.Env):
  """Episodes of `length` steps; observation [episode, t]; reward t.

  Even episodes terminate, odd ones are truncated.
  """

  observation_space = gym.spaces.Box(-1e3, 1e3, (2,), np.float32)
  action_space = gym.spaces.Discrete(3, start=1)

  def __init__(self, length: int):
    self.length = length
    self.episode = -1
    self.t = 0
    self.actions = []

  def _obs(self):
    return np.array([self.episode, self.t], np.float32)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.episode += 1
    self.t = 0
    return self._obs(), {}

  def step(self, action):
    self.actions.append(int(action))
    self.t += 1
    done = self.t == self.length
    terminated = done and self.episode % 2 == 0
    truncated = done and self.episode % 2 == 1
    return self._obs(), float(self.t), terminated, truncated, {}


def _vector_env(mode: str, lengths=(2, 3)):
  return gym.vector.SyncVectorEnv(
      [lambda n=n: _Scripted(n) for n in lengths],
      autoreset_mode=AutoresetMode(mode),
  )


def _expected(length: int, steps: int):
  """Per step of one copy: (step type, reward, obs, final obs, truncated)."""
  episode, t, out = 0, 0, []
  for _ in range(steps):
    t += 1
    if t == length:
      out.append((LAST, t, (episode + 1, 0), (episode, t), episode % 2 == 1))
      episode, t = episode + 1, 0
    else:
      out.append((MID, t, (episode, t), (episode, t), False))
  return out


@pytest.mark.parametrize('mode', gymnasium_env.MODES)
def test_every_autoreset_mode_gives_the_same_episodes(mode):
  vector_env = _vector_env(mode)
  env = gymnasium_env.GymnasiumEnvironment(vector_env)
  assert env.autoreset_mode == mode
  assert env.single_action_spec().maximum == 2
  _, first = env.reset(np.zeros(2, np.uint32))
  np.testing.assert_array_equal(first.observation, [[0, 0], [0, 0]])
  np.testing.assert_array_equal(first.step_type, [MID, MID])
  steps = 7
  got = [[], []]
  for _ in range(steps):
    _, timestep, truncation = env.step_with_truncation(None, np.zeros(2))
    for k in range(2):
      got[k].append((
          int(timestep.step_type[k]),
          float(timestep.reward[k]),
          tuple(timestep.observation[k]),
          tuple(truncation.final_observation[k]),
          bool(truncation.truncated[k]),
      ))
  for k, length in enumerate((2, 3)):
    assert got[k] == _expected(length, steps), k
  # No action was spent on a reset step: every one reached a copy, shifted
  # by the action space's start.
  for scripted in vector_env.envs:
    assert scripted.unwrapped.actions == [1] * steps


def test_a_registered_environment_by_name():
  env = registry.make_environment('gymnasium:CartPole-v1', batch_size=3)
  assert not registry.is_jittable(env)
  assert registry.is_known_name('gymnasium:CartPole-v1')
  assert not registry.is_jittable_name('gymnasium:CartPole-v1')
  _, timestep = env.reset(np.zeros(2, np.uint32))
  assert timestep.observation.shape == (3, 4)
  assert timestep.observation.dtype == np.float32
  ended = 0
  for _ in range(60):
    _, timestep, truncation = env.step_with_truncation(None, np.zeros(3))
    last = timestep.step_type == LAST
    ended += last.sum()
    # Pushing left ends CartPole by termination, the final state out of
    # bounds, while the next episode starts near the centre.
    assert not truncation.truncated.any()
    if last.any():
      assert np.all(np.abs(truncation.final_observation[last, 2]) > 0.2)
      assert np.all(np.abs(timestep.observation[last]) < 0.06)
  assert ended >= 3


def test_a_discrete_observation_is_one_hot():
  env = registry.make_environment('gymnasium:FrozenLake-v1', batch_size=2)
  _, timestep = env.reset(np.zeros(2, np.uint32))
  assert env.single_observation_spec().shape == (16,)
  np.testing.assert_array_equal(timestep.observation[:, 0], [1, 1])
  assert timestep.observation.sum() == 2


@pytest.mark.parametrize(
    'env_id, message',
    [
        ('Pendulum-v1', 'Discrete action space'),
        ('Blackjack-v1', 'observes Tuple'),
    ],
)
def test_unsupported_spaces_are_named(env_id, message):
  with pytest.raises(gymnasium_env.UnsupportedEnvironmentError, match=message):
    registry.make_environment(f'gymnasium:{env_id}', batch_size=2)


def test_an_unregistered_id_is_named():
  with pytest.raises(ValueError, match="cannot make 'NoSuchGame-v0'"):
    registry.make_environment('gymnasium:NoSuchGame-v0', batch_size=2)
  with pytest.raises(registry.UnknownEnvironmentError, match='gymnasium:'):
    registry.make_environment('gymnasium:', batch_size=2)


def test_a_missing_package_names_the_extra(monkeypatch):
  real_import = builtins.__import__

  def no_gymnasium(name, *args, **kwargs):
    if name == 'gymnasium':
      raise ImportError('No module named gymnasium')
    return real_import(name, *args, **kwargs)

  monkeypatch.setattr(builtins, '__import__', no_gymnasium)
  with pytest.raises(ImportError, match=r'disco-jax\[gymnasium\]'):
    registry.make_environment('gymnasium:CartPole-v1', batch_size=2)
