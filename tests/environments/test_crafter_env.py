"""`disco.environments.crafter_env`: Crafter's episodes and achievements."""

import builtins
import types as pytypes

import dm_env
import numpy as np
import pytest

from disco.environments import crafter_env
from disco.environments import registry

MID, LAST = int(dm_env.StepType.MID), int(dm_env.StepType.LAST)


class _ScriptedCrafter:
  """Frames filled with [episode, t]; episode 0 dies at step 2 (discount 0)
  with 'collect_wood', episode 1 reaches the step limit, 3 (discount 1)."""

  def __init__(self, seed=None, length=3, **settings):
    del settings
    self.seed, self.length, self.episode, self.t = seed, length, -1, 0

  def _frame(self):
    frame = np.zeros((64, 64, 3), np.uint8)
    frame[..., 0], frame[..., 1] = self.episode, self.t
    return frame

  def reset(self):
    self.episode, self.t = self.episode + 1, 0
    return self._frame()

  def step(self, action):
    del action
    self.t += 1
    dead = self.episode == 0 and self.t == 2
    done = dead or self.t == self.length
    achievements = {'collect_wood': int(dead), 'place_table': 0}
    info = dict(discount=0.0 if dead else 1.0, achievements=achievements)
    return self._frame(), float(self.t), done, info


@pytest.fixture(name='scripted')
def _scripted(monkeypatch):
  module = pytypes.SimpleNamespace(
      Env=_ScriptedCrafter,
      constants=pytypes.SimpleNamespace(
          achievements=['collect_wood', 'place_table'], actions=list('ab')
      ),
  )
  monkeypatch.setattr(crafter_env, '_require_crafter', lambda: module)


@pytest.mark.usefixtures('scripted')
def test_death_terminates_the_step_limit_truncates_and_achievements_count():
  env = crafter_env.CrafterEnvironment(batch_size=1, settings={'length': 3})
  unlocked, first = env.reset(np.zeros(2, np.uint32))
  assert first.observation.dtype == np.uint8
  np.testing.assert_array_equal(unlocked, [[0, 0]])
  got = []
  for _ in range(6):
    unlocked, timestep, truncation = env.step_with_truncation(unlocked, [0])
    got.append((
        int(timestep.step_type[0]),
        float(timestep.reward[0]),
        tuple(timestep.observation[0, 0, 0, :2]),
        tuple(truncation.final_observation[0, 0, 0, :2]),
        bool(truncation.truncated[0]),
        tuple(unlocked[0]),
    ))
  assert got == [
      (MID, 1.0, (0, 1), (0, 1), False, (0, 0)),
      # Death: a termination, its achievement counted, the next frame first.
      (LAST, 2.0, (1, 0), (0, 2), False, (1, 0)),
      (MID, 1.0, (1, 1), (1, 1), False, (1, 0)),
      (MID, 2.0, (1, 2), (1, 2), False, (1, 0)),
      # The step limit: a truncation, its final frame kept.
      (LAST, 3.0, (2, 0), (1, 3), True, (1, 0)),
      (MID, 1.0, (2, 1), (2, 1), False, (1, 0)),
  ]
  assert env.achievement_names == ('collect_wood', 'place_table')
  np.testing.assert_array_equal(env.achievement_counts(unlocked), [[1, 0]])


@pytest.mark.usefixtures('scripted')
def test_crafter_by_name_steps_on_the_host():
  env = registry.make_environment('crafter', batch_size=2)
  assert not registry.is_jittable(env)
  assert registry.is_known_name('crafter')
  assert not registry.is_jittable_name('crafter')
  assert env.single_action_spec().maximum == 1
  with pytest.raises(ValueError, match="Unknown Crafter setting.*'speed'"):
    registry.make_environment('crafter', batch_size=2, settings={'speed': 2})


def test_a_missing_package_names_the_extra(monkeypatch):
  real_import = builtins.__import__

  def no_crafter(name, *args, **kwargs):
    if name == 'crafter':
      raise ImportError('No module named crafter')
    return real_import(name, *args, **kwargs)

  monkeypatch.setattr(builtins, '__import__', no_crafter)
  with pytest.raises(ImportError, match=r'disco-jax\[crafter\]'):
    registry.make_environment('crafter', batch_size=1)
