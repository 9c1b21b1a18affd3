"""`disco.reward_probe`: the reward scale chosen from a random policy."""

import dm_env
from dm_env import specs
import numpy as np
import pytest

from disco import reward_probe
from disco import train
from disco import types
from disco.environments import base
from disco.environments import registry

_FIRST, _MID, _LAST = (
    dm_env.StepType.FIRST,
    dm_env.StepType.MID,
    dm_env.StepType.LAST,
)


class _ConstantReward(base.Environment):
  """A host environment paying `reward` on every step; episodes never end."""

  def __init__(self, batch_size: int, reward: float):
    self.batch_size = batch_size
    self.reward = reward
    self.actions = []

  def _timestep(self, step_type, reward):
    batch = self.batch_size
    return types.EnvironmentTimestep(
        observation=np.zeros((batch, 2), np.float32),
        step_type=np.full(batch, step_type, np.int32),
        reward=np.full(batch, reward, np.float32),
    )

  def reset(self, rng_key):
    return (), self._timestep(_FIRST, 0.0)

  def step(self, states, actions):
    self.actions.append(np.asarray(actions))
    return states, self._timestep(_MID, self.reward)

  def single_observation_spec(self):
    return {'obs': specs.Array((2,), np.float32)}

  def single_action_spec(self):
    return specs.BoundedArray((), np.int32, minimum=0, maximum=2)


def test_returns_to_go_cut_at_each_episodes_last_step():
  # One environment: rewards on arriving, an episode ending at step 2.
  rewards = np.array([[0.0], [1.0], [2.0], [0.0], [4.0], [8.0]])
  step_types = np.array([[_FIRST], [_MID], [_LAST], [_FIRST], [_MID], [_MID]])
  returns = reward_probe.returns_to_go(rewards, step_types, discount=0.5)
  # Step 0: 1 + 0.5 * 2; step 1: 2; step 2 ends; step 3: 4 + 0.5 * 8.
  np.testing.assert_allclose(returns[:, 0], [2.0, 2.0, 0.0, 8.0, 8.0, 0.0])


def test_probe_measures_a_known_return_and_scales_to_the_target(monkeypatch):
  discount, reward, measured = 0.9, 2.0, 50
  made = []

  def _make(name, batch_size, seed, settings):
    made.append(_ConstantReward(batch_size, reward))
    return made[-1]

  monkeypatch.setattr(registry, 'make_environment', _make)
  result = reward_probe.probe(
      'scripted', target=5.0, discount=discount, measured_steps=measured
  )
  steps = reward_probe.probe_steps(discount, measured)
  assert len(made[0].actions) == steps
  assert {int(a) for a in np.concatenate(made[0].actions)} == {0, 1, 2}
  # Step t's return sums the rewards of steps t + 1 .. steps - 1.
  remaining = steps - 1 - np.arange(measured)
  expected = np.mean(reward * (1 - discount**remaining) / (1 - discount))
  assert result.random_return == pytest.approx(expected, rel=1e-9)
  assert result.reward_scale == reward_probe.significant(5.0 / expected)
  assert result.nonzero_rewards == 1.0
  assert result.episodes == 0 and result.target == 5.0


def test_a_probe_that_sees_no_reward_is_named(monkeypatch):
  monkeypatch.setattr(
      registry,
      'make_environment',
      lambda name, batch_size, seed, settings: _ConstantReward(batch_size, 0),
  )
  with pytest.raises(reward_probe.ProbeError, match='no reward on scripted'):
    reward_probe.probe('scripted', discount=0.9, measured_steps=5)
  with pytest.raises(ValueError, match='target must be a finite number > 0'):
    reward_probe.probe('scripted', target=0.0, discount=0.9)


def test_the_jittable_and_host_catch_probe_alike_and_set_the_config():
  jitted = reward_probe.probe('catch', discount=0.9, measured_steps=50)
  host = reward_probe.probe('catch-cpu', discount=0.9, measured_steps=50)
  # A random policy's |return| on Catch is 1 discounted to the catch,
  # whichever paddle moves: both loops measure the same episodes.
  assert jitted.random_return == pytest.approx(host.random_return, rel=1e-12)
  assert jitted.episodes == host.episodes > 0
  config = train.TrainConfig(env='catch', seed=3, discount=0.9)
  probed, result = reward_probe.with_probed_scale(config, target=3.0)
  assert probed == config.replace(reward_scale=result.reward_scale)
  assert probed.reward_scale == reward_probe.significant(
      3.0 / result.random_return
  )
  assert 'a uniform random policy' in reward_probe.describe(result)


def test_significant_keeps_two_digits():
  assert reward_probe.significant(7.7298) == 7.7
  assert reward_probe.significant(0.018683) == 0.019
  assert reward_probe.significant(84.4) == 84.0
