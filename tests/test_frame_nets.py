"""`FrameEmbeddingMLP`'s unroll embeds each frame of consecutive stacks once.

Against the network that embeds every frame of every stack: the same
outputs and gradients on rollouts of a frame-stacked environment whose
episodes end inside them, and NaN where stacks do not follow each other.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import acting
from disco import agent as agent_lib
from disco import frame_nets
from disco import learner
from disco import train
from disco import types
from tests import actors

_FRAMES = 4
_T = 13  # Rollout length: Catch of 4 rows ends an episode every 3 steps.

# Measured on a Zen 4: outputs equal bit for bit, gradients differ by up to
# 4.6e-5 on entries up to 1,928 (float32 sums in another order), 6% of
# this tolerance. Each of these bugs fails a test below: a window off by
# one, stacks rebuilt from the oldest frames, zero frames not replaced, the
# gradient stopped, stacks never checked.
_RTOL = 1e-5
_ATOL = 1e-6


def _config() -> train.TrainConfig:
  return train.preset(
      'crafter',
      rule='disco',
      env='catch',
      env_settings={'rows': 4, 'columns': 5},
      frame_stack=_FRAMES,
      agent_frame_embedding=8,
      agent_dense=(16,),
      agent_lstm_size=8,
      agent_head_mlp_hiddens=(8,),
      num_envs=6,
  )


def _agent(config: train.TrainConfig, once: bool) -> agent_lib.Agent:
  settings = learner.make_agent_settings(config)
  settings.net_settings.net_args = dict(
      settings.net_settings.net_args, embed_each_frame_once=once
  )
  env = learner.make_env(config, config.num_envs)
  return agent_lib.Agent(
      agent_settings=settings,
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      batch_axis_name=None,
  )


def _rollouts(config: train.TrainConfig) -> list[types.ActorRollout]:
  """Two rollouts [T, B, K, 4, 5, 1]; the second starts mid-episode."""
  env = learner.make_env(config, config.num_envs)
  env_state, timestep = env.reset(jax.random.key(0))
  rollouts = []
  for i in range(2):
    rollout, _, timestep, env_state = acting.unroll_jittable_actor(
        None,
        {},
        timestep,
        env_state,
        jax.random.key(i + 1),
        env=env,
        rollout_len=_T,
        actor_step_fn=actors.random_actor,
    )
    rollouts.append(rollout)
  return rollouts


@pytest.fixture(scope='module')
def setup():
  config = _config()
  once, every = _agent(config, True), _agent(config, False)
  params = once.initial_learner_state(jax.random.key(3)).params
  state = once.initial_actor_state(jax.random.key(3))
  return once, every, params, state, _rollouts(config)


def test_stacks_hold_zeros_and_episode_ends(setup):
  *_, rollouts = setup
  obs = np.asarray(rollouts[1].observations)
  assert obs.shape == (_T, 6, _FRAMES, 4, 5, 1)
  assert not np.all(rollouts[1].discounts)  # Episodes end inside.
  frames_zero = ~np.any(obs.reshape(obs.shape[:3] + (-1,)), axis=-1)
  assert frames_zero.any() and not frames_zero.all()


def test_unroll_matches_embedding_every_frame(setup):
  once, every, params, state, rollouts = setup
  for rollout in rollouts:
    fast, _ = once.unroll_net(params, state, rollout)
    slow, _ = every.unroll_net(params, state, rollout)
    assert np.all(np.isfinite(jax.tree.leaves(fast)[0]))
    chex.assert_trees_all_close(fast, slow, rtol=_RTOL, atol=_ATOL)


def test_gradients_match_embedding_every_frame(setup):
  once, every, params, state, rollouts = setup

  def grads(agent):
    def loss(p):
      out, _ = agent.unroll_net(p, state, rollouts[1])
      return sum(jnp.sum(jnp.sin(x)) for x in jax.tree.leaves(out))

    # Jitted: one compilation per network rather than one per operation.
    # Measured on an Intel Xeon: 4.7% of the tolerance (6.2% eagerly).
    return jax.jit(jax.grad(loss))(params)

  fast, slow = grads(once), grads(every)
  key = 'frame_embedding_mlp/~_embedding_pass/frame_embedding'
  assert np.any(np.asarray(fast[key]['w']) != 0)
  chex.assert_trees_all_close(fast, slow, rtol=_RTOL, atol=_ATOL)


def test_stacks_that_do_not_follow_each_other_give_nan(setup):
  once, _, params, state, rollouts = setup
  # Step 5's second-newest frames become all ones, not step 4's newest.
  rollout = rollouts[0]
  broken = rollout.replace(
      observations=rollout.observations.at[5, :, -2].set(1.0)
  )
  out, _ = once.unroll_net(params, state, broken)
  logits = np.asarray(out['logits'])  # [T, B, A]
  nan_steps = np.isnan(logits).all(axis=(1, 2))
  np.testing.assert_array_equal(np.flatnonzero(nan_steps), [5])
  assert np.isfinite(np.delete(logits, 5, axis=0)).all()


def test_embed_consecutive_flags_what_breaks_the_chain():
  frames = jnp.arange(1.0, 9.0).reshape(1, 1, 8, 1)  # One stream of 8.
  stacks = jnp.concatenate(
      [frames[:, :, t : t + 3] for t in range(6)], axis=0
  )  # [6, 1, 3, 1], consecutive.
  # An episode restarts at step 3: zeros before its first frame.
  stacks = stacks.at[3, 0, :2].set(0.0).at[4, 0, 0].set(0.0)
  identity = lambda x: x  # noqa: E731
  embedded, follows = frame_nets.embed_consecutive(identity, stacks)
  np.testing.assert_array_equal(embedded, stacks)
  assert follows.all()
  one_step, follows = frame_nets.embed_consecutive(identity, stacks[:1])
  np.testing.assert_array_equal(one_step, stacks[:1])
  assert follows.shape == (1, 1) and follows.all()
  broken = stacks.at[4, 0, 1].set(7.0)  # Not step 3's newest (6).
  _, follows = frame_nets.embed_consecutive(identity, broken)
  np.testing.assert_array_equal(follows[:, 0], [1, 1, 1, 1, 0, 1])
