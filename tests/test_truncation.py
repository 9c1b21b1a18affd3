"""Time limits told apart from terminations, and targets that bootstrap there.

gymnax's CartPole-v1 with its time limit set to 20 steps through the
registry's settings: a balancing policy reaches the limit (a truncation), a
policy that always pushes left drops the pole before it (a termination).
"""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import acting
from disco import configs
from disco import devices
from disco import frame_stack
from disco import learner
from disco import train
from disco import truncation
from disco import types
from disco.environments import registry
from disco.value_fns import value_utils
from tests import actors

pytest.importorskip('gymnax')

_LIMIT = 20
_STEPS = 26  # Rollout length: the limit, and a few steps of the next episode.
_ENV = 'gymnax:CartPole-v1'
_SETTINGS = {'max_steps_in_episode': _LIMIT}
_BALANCING, _FALLING = 0, 1  # The two environments of the batch.


def _config(**changes) -> train.TrainConfig:
  return train.TrainConfig(**(
      dict(
          rule='actor_critic',
          env=_ENV,
          env_settings=_SETTINGS,
          num_envs=2,
          rollout_len=_STEPS,
          learner_batch_size=2,
          buffer_capacity=4,
          learning_starts=2,
          agent_dense=(16,),
          agent_lstm_size=8,
          agent_head_mlp_hiddens=(8,),
          # Large initial heads: values far from 0, so that a bootstrap
          # shows in the targets.
          agent_head_w_init_std=1.0,
      )
      | changes
  ))


def _policy_step(params, rng, timestep, actor_state, num_actions=2):
  """Environment 0 balances the pole, environment 1 always pushes left."""
  del params, rng
  theta, theta_dot = timestep.observation[:, 2], timestep.observation[:, 3]
  balance = (theta + 0.5 * theta_dot > 0).astype(jnp.int32)
  actions = jnp.stack([balance[_BALANCING], jnp.zeros((), jnp.int32)])
  return actors.timestep_of(timestep, actions, actor_state, num_actions)


@functools.cache
def _env():
  return registry.make_environment(_ENV, batch_size=2, settings=_SETTINGS)


def _unroll(with_truncation: bool):
  env = _env()
  env_state, timestep = env.reset(jax.random.key(3))
  rollout, *_ = acting.unroll_jittable_actor(
      None,
      {},
      timestep,
      env_state,
      jax.random.key(4),
      env=env,
      rollout_len=_STEPS,
      actor_step_fn=_policy_step,
      truncation=with_truncation,
  )
  return jax.device_get(rollout)


@functools.cache
def _rollouts():
  return _unroll(True), _unroll(False)


def test_settings_reach_gymnax_params():
  assert _env().env_params.max_steps_in_episode == _LIMIT
  default = registry.make_environment(_ENV, batch_size=1)
  assert default.env_params.max_steps_in_episode == 500


def test_time_limit_is_a_truncation_and_a_fall_a_termination():
  rollout, plain = _rollouts()
  assert isinstance(rollout, truncation.TruncatedRollout)
  assert type(plain) is types.ActorRollout  # pylint: disable=unidiomatic-typecheck
  # The truncation fields come on top of exactly the same rollout.
  chex.assert_trees_all_equal(rollout.as_actor_rollout(), plain)
  last = np.logical_not(rollout.discounts)
  # The balancing episode ends at the limit: LAST, and truncated.
  assert np.flatnonzero(last[:, _BALANCING]).tolist() == [_LIMIT]
  assert np.flatnonzero(rollout.truncated[:, _BALANCING]).tolist() == [_LIMIT]
  # The pole pushed left falls before the limit: LAST, not truncated.
  falls = np.flatnonzero(last[:, _FALLING])
  assert falls.size and falls[0] < _LIMIT
  assert not rollout.truncated[:, _FALLING].any()
  # At the limit the stored observation is the next episode's first one
  # (gymnax starts within 0.05 of 0); the final one is the state reached.
  reset_obs = rollout.observations[_LIMIT, _BALANCING]
  final_obs = rollout.final_observations[_LIMIT, _BALANCING]
  assert np.all(np.abs(reset_obs) <= 0.05)
  assert not np.allclose(final_obs, reset_obs)
  # It continues the balancing episode: one physics step from step 19.
  before = rollout.observations[_LIMIT - 1, _BALANCING]
  np.testing.assert_allclose(final_obs[0], before[0] + 0.02 * before[1])
  # Elsewhere the final observation is the observation.
  not_last = np.logical_not(last)
  np.testing.assert_array_equal(
      rollout.final_observations[not_last], rollout.observations[not_last]
  )


def test_bootstrap_rewards_adds_discounted_final_values_where_truncated():
  rollout, _ = _rollouts()
  values = np.arange(_STEPS * 2, dtype=np.float32).reshape(_STEPS, 2) + 1.0
  out = truncation.bootstrap_rewards(rollout, values, 0.5)
  assert type(out) is types.ActorRollout  # pylint: disable=unidiomatic-typecheck
  expected = np.where(
      rollout.truncated, rollout.rewards + 0.5 * values, rollout.rewards
  )
  np.testing.assert_array_equal(out.rewards, expected)
  assert out.rewards[_LIMIT, _BALANCING] == 1.0 + 0.5 * values[_LIMIT, 0]
  # The step stays LAST: nothing looks past it into the next episode.
  np.testing.assert_array_equal(out.discounts, rollout.discounts)


def _value_targets(setup, learner_state, rollout):
  """The actor-critic rule's V-trace targets [T, B], on-policy (rho = 1)."""
  agent = setup.agent
  agent_out, _ = agent.unroll_net(learner_state.params, {}, rollout)
  inputs = types.UpdateRuleInputs(
      observations=rollout.observations,
      actions=rollout.actions,
      rewards=rollout.rewards[1:],
      is_terminal=rollout.discounts[1:] == 0,
      agent_out=agent_out,
      behaviour_agent_out={'logits': agent_out['logits']},
  )
  meta_out, _ = agent.update_rule.unroll_meta_net(
      meta_params=None,
      params=learner_state.params,
      state={},
      meta_state=learner_state.meta_state,
      rollout=inputs,
      hyper_params=agent.settings.hyper_params.to_dict(),
      unroll_policy_fn=agent.network.unroll,
      rng=jax.random.key(0),
  )
  return np.asarray(meta_out['value_target'])


def test_value_target_bootstraps_at_the_time_limit_only():
  rollout, plain = _rollouts()
  setup = learner.build(_config(), None)
  learner_state = setup.agent.initial_learner_state(jax.random.key(0))
  values_fn, discount = learner.truncation_values_fn(
      setup, learner_state, {}, None
  )
  assert discount == setup.agent.settings.hyper_params.discount_factor
  bootstrapped = truncation.bootstrap_if_truncated(rollout, values_fn, discount)
  targets = _value_targets(setup, learner_state, bootstrapped)
  plain_targets = _value_targets(setup, learner_state, plain)

  # The value of the final observation, as the rule reads its value head.
  final_out, _ = setup.agent.unroll_net(
      learner_state.params,
      {},
      plain.replace(observations=rollout.final_observations),
  )
  rule = setup.agent.settings.update_rule
  final_value = value_utils.get_values_from_net_outs(
      final_out['v'],
      categorical_value=rule.categorical_value,
      max_abs_value=rule.max_abs_value,
      nonlinear_transform=rule.nonlinear_value_transform,
  )[_LIMIT, _BALANCING]
  assert abs(discount * final_value) > 1e-2  # A bootstrap that shows.

  # Transition 19 -> 20 reached the limit: r + discount * V(final obs).
  t = _LIMIT - 1
  np.testing.assert_allclose(
      targets[t, _BALANCING], 1.0 + discount * final_value, rtol=1e-5
  )
  # Treated as a termination (the reference), the target is r alone.
  np.testing.assert_allclose(plain_targets[t, _BALANCING], 1.0, rtol=1e-6)
  # The fall is a termination in both: its target is its reward alone.
  fall = int(np.flatnonzero(np.logical_not(rollout.discounts[:, _FALLING]))[0])
  np.testing.assert_allclose(targets[fall - 1, _FALLING], 1.0, rtol=1e-6)
  np.testing.assert_array_equal(
      targets[:, _FALLING], plain_targets[:, _FALLING]
  )
  # Before the limit, the bootstrap reaches the targets through the trace.
  assert not np.allclose(targets[t - 1, _BALANCING], plain_targets[t - 1, 0])
  # The next episode's targets are untouched.
  np.testing.assert_array_equal(
      targets[_LIMIT:, _BALANCING], plain_targets[_LIMIT:, _BALANCING]
  )


def test_a_rollout_without_truncation_learns_exactly_as_before():
  rollout, plain = _rollouts()
  setup = learner.build(_config(), None)
  learner_state = setup.agent.initial_learner_state(jax.random.key(0))
  values_fn, discount = learner.truncation_values_fn(
      setup, learner_state, {}, None
  )
  untruncated = rollout.replace(truncated=np.zeros_like(rollout.truncated))
  out = truncation.bootstrap_if_truncated(untruncated, values_fn, discount)
  chex.assert_trees_all_equal(out, plain)


@pytest.mark.parametrize('rule', ['disco', 'policy_gradient'])
def test_every_rule_has_bootstrap_values(rule):
  setup = learner.build(_config(rule=rule), None)
  key = jax.random.key(0)
  learner_state = setup.agent.initial_learner_state(key)
  values_fn, discount = learner.truncation_values_fn(
      setup, learner_state, {}, learner.init_value_state(setup, key)
  )
  rollout, _ = _rollouts()
  values = values_fn(rollout.final_observations)
  assert values.shape == rollout.rewards.shape
  assert np.all(np.isfinite(values))
  assert 0.9 < discount < 1.0


def test_config_names_the_modes():
  assert train.TrainConfig().truncation == truncation.BOOTSTRAP
  with pytest.raises(configs.ConfigError, match='bootstrap, terminate'):
    _config(truncation='ignore')
  with pytest.raises(ValueError, match='does not report time limits'):
    catch = registry.make_environment('catch', batch_size=2)
    acting.unroll_jittable_actor(
        None, {}, None, None, None, env=catch, rollout_len=2,
        actor_step_fn=None, truncation=True,
    )  # fmt: skip


@pytest.mark.parametrize('mode', truncation.MODES)
def test_training_runs_with_either_mode(mode):
  config = _config(
      truncation=mode, rollout_len=8, num_steps=4, steps_per_chunk=2
  )
  result = train.run_train(config)
  assert result.logs['learner_steps'][-1] > 0
  assert np.all(np.isfinite(result.logs['logs/total_loss']))


def test_final_stacks_made_where_read_take_the_same_step():
  # The trainer unpacks a batch's final frame stacks only where the learner
  # reads them (a truncated step): the same step as stacking them first.
  config = _config(frame_stack=3, agent_frame_embedding=0)
  setup = learner.build(config, None)
  env = setup.env

  def policy(params, rng, timestep, actor_state):
    newest = timestep.replace(observation=timestep.observation[:, -1])
    out, actor_state = _policy_step(params, rng, newest, actor_state)
    return out.replace(observations=timestep.observation), actor_state

  env_state, timestep = env.reset(jax.random.key(3))
  rollout, *_ = acting.unroll_jittable_actor(
      None,
      {},
      timestep,
      env_state,
      jax.random.key(4),
      env=env,
      rollout_len=_STEPS,
      actor_step_fn=policy,
      truncation=True,
  )
  assert rollout.truncated.any()
  packed = frame_stack.pack(rollout)
  learner_state = setup.agent.initial_learner_state(jax.random.key(0))

  def step(learn_fn, batch):
    def one(batch):
      return learn_fn(
          jax.random.key(1),
          batch,
          learner_state,
          {},
          setup.update_rule_params,
          None,
      )

    return jax.jit(jax.vmap(one, axis_name=devices.AXIS_NAME))(
        jax.tree.map(lambda x: x[None], batch)
    )

  eager = step(learner.make_learn_fn(setup), frame_stack.unpack(packed))
  lazy = step(
      learner.make_learn_fn(
          setup, final_observations=frame_stack.final_observations
      ),
      frame_stack.unpack(packed, final_stacks=False),
  )
  chex.assert_trees_all_equal(lazy, eager)
  # Not vacuous: the step reads the final stacks (zeros change it).
  blank = step(
      learner.make_learn_fn(
          setup,
          final_observations=lambda r, f: jax.tree.map(
              jnp.zeros_like, r.observations
          ),
      ),
      frame_stack.unpack(packed, final_stacks=False),
  )
  assert not np.array_equal(blank[2]['total_loss'], eager[2]['total_loss'])
