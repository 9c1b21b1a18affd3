"""`reward_scale`: what the learner sees scaled, returns in the env's units.

The runs at a scale (Disco103 reading Catch's rewards as +-10, returns and
evaluations in Catch's units) are `tests/test_eval.py`'s Disco smoke runs,
of the faithful loop and of the trainer; meta-training's is in
`tests/test_meta_train.py`.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from disco import configs
from disco import reward_scale
from disco import rule_diagnostics
from disco import train
from disco import types
from disco.train import config as train_config


def _rollout(rewards: np.ndarray) -> types.ActorRollout:
  shape = rewards.shape
  return types.ActorRollout(
      observations=jnp.ones(shape + (3,)),
      actions=jnp.zeros(shape, jnp.int32),
      rewards=jnp.asarray(rewards, jnp.float32),
      discounts=jnp.ones(shape),
      agent_outs={},
      states={},
      logits=jnp.zeros(shape + (2,)),
  )


def test_scale_rewards_scales_the_rewards_alone():
  rollout = _rollout(np.array([[0.0, 1.0], [-2.0, 0.5]]))
  assert reward_scale.scale_rewards(rollout, 1.0) is rollout
  scaled = reward_scale.scale_rewards(rollout, 10.0)
  np.testing.assert_array_equal(scaled.rewards, [[0, 10], [-20, 5]])
  np.testing.assert_array_equal(scaled.discounts, rollout.discounts)
  np.testing.assert_array_equal(scaled.observations, rollout.observations)


@pytest.mark.parametrize('value', [0.0, -1.0, math.nan, math.inf, True, '10'])
def test_a_bad_reward_scale_is_named(value):
  with pytest.raises(configs.ConfigError, match='reward_scale'):
    train.TrainConfig(reward_scale=value)


def test_rule_logs_measure_the_meta_networks_inputs():
  t, b, a, y = 3, 2, 4, 5
  meta_out = dict(
      pi=jnp.zeros((t, b, a)),
      y=jnp.zeros((t, b, y)),
      z=jnp.zeros((t, b, y)).at[..., 0].set(100.0),
      q_value=jnp.full((t + 1, b, a), -math.e + 1),
      adv=jnp.zeros((t, b)),
      qv_adv=jnp.ones((t + 1, b, a)),
  )
  # Index 0 starts no transition: its reward is not read.
  rewards = jnp.array([[50.0, 50.0], [1.0, 0.0], [0.0, 0.0], [-3.0, 0.0]])
  logs = rule_diagnostics.rule_logs(meta_out, rewards)
  assert set(logs) == set(
      rule_diagnostics.TARGET_LOGS + rule_diagnostics.INPUT_LOGS
  )
  np.testing.assert_allclose(logs['y_hat_entropy'], math.log(y), rtol=1e-6)
  np.testing.assert_allclose(logs['z_hat_entropy'], 0.0, atol=1e-6)
  np.testing.assert_allclose(
      logs['meta_input/reward'], (math.log(2) + math.log(4)) / 6, rtol=1e-6
  )
  np.testing.assert_allclose(logs['meta_input/nonzero_reward'], 2 / 6)
  np.testing.assert_allclose(logs['meta_input/q'], 1.0, rtol=1e-6)
  np.testing.assert_allclose(logs['meta_input/adv'], 0.0)
  np.testing.assert_allclose(logs['meta_input/qv_adv'], math.log(2), rtol=1e-6)
  # A rule without Disco103's outputs gets none of them.
  assert not rule_diagnostics.rule_logs({'pi': meta_out['pi']}, rewards)
  assert not rule_diagnostics.rule_logs(None, rewards)


def test_a_saved_config_keeps_its_reward_scale():
  config = train.TrainConfig(reward_scale=3.0)
  # Resume refuses another scale (tests/test_train.py), never drops it.
  assert 'reward_scale' not in train_config.EXECUTION_FIELDS
  assert train.TrainConfig.from_dict(config.to_dict()).reward_scale == 3.0
  # Configs saved before the setting existed ran unscaled.
  without = {k: v for k, v in config.to_dict().items() if k != 'reward_scale'}
  assert train.TrainConfig.from_dict(without).reward_scale == 1.0
