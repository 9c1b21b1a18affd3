"""The paper's evaluation protocols in the trainer.

Presets against Extended Data Table 6, the step-size schedule and weight
decay, the replay ratio spread over learner steps, and frame stacks that
the replay buffer keeps one frame at a time.
"""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import acting
from disco import configs
from disco import frame_stack
from disco import learner
from disco import optimizers
from disco import replay as replay_lib
from disco import schedules
from disco import train
from disco import truncation
from disco.environments import registry
from disco.train import program as train_program
from tests import actors

# Extended Data Table 6 of Oh et al. (Nature, 2025), the agents in
# evaluation, as printed.
TABLE_6 = {
    'atari': dict(
        learning_rate=3e-4,
        learning_rate_end=0.0,
        schedule='warmup_cosine',
        warmup_env_steps=5_000_000,
        weight_decay=0.1,
        max_abs_update=1.0,
        discount=0.997,
        frame_stack=4,
        batch_size=96,
        unroll_length=29,
        replay_ratio=0.95,
        buffer_env_steps=1_760_000,
        env_steps=200_000_000,
    ),
    'crafter': dict(
        learning_rate=3e-4,
        learning_rate_end=3e-4,
        schedule='constant',
        warmup_env_steps=0,
        weight_decay=0.3,
        max_abs_update=1.0,
        discount=0.997,
        frame_stack=32,
        batch_size=24,
        unroll_length=29,
        replay_ratio=0.99,
        buffer_env_steps=400_000,
        env_steps=50_000_000,
    ),
}

# A small actor-critic agent on 5x5 Catch: cheap to compile and run.
_TINY = dict(
    rule='actor_critic',
    env_settings={'rows': 5, 'columns': 5},
    rollout_len=4,
    agent_dense=(16,),
    agent_lstm_size=8,
    agent_head_mlp_hiddens=(8,),
)


def _paper_length(name: str, protocol: str | None = None) -> train.TrainConfig:
  """The preset run as long as the paper's runs (no schedule fitting)."""
  probe = train.preset(name)
  table = TABLE_6[protocol or name]
  return train.preset(name, num_steps=probe.num_steps_for(table['env_steps']))


@pytest.mark.parametrize('name', sorted(TABLE_6))
def test_presets_hold_table_6(name):
  table = TABLE_6[name]
  config = _paper_length(name)
  assert config.agent_learning_rate == table['learning_rate']
  assert config.agent_lr_schedule == table['schedule']
  if table['schedule'] == 'warmup_cosine':
    assert config.agent_learning_rate_end == table['learning_rate_end']
    assert config.agent_lr_warmup_env_steps == table['warmup_env_steps']
    assert config.agent_lr_decay_env_steps == table['env_steps']
  assert config.agent_weight_decay == table['weight_decay']
  assert config.agent_max_abs_update == table['max_abs_update']
  assert config.discount == table['discount']
  assert config.frame_stack == table['frame_stack']
  assert config.learner_batch_size == table['batch_size']
  assert config.rollout_len == table['unroll_length']
  assert config.replay_fraction == table['replay_ratio'] and config.spread_fresh
  # Fresh trajectories per update: batch x (1 - ratio), fractions kept.
  fresh = table['batch_size'] * (1 - table['replay_ratio'])
  assert math.isclose(float(config.fresh_per_update), fresh)
  assert math.isclose(
      config.env_steps_per_update, fresh * table['unroll_length']
  )
  # The buffer, read as environment steps, in whole rollouts.
  held = config.buffer_capacity * config.rollout_len
  assert table['buffer_env_steps'] <= held
  assert held < table['buffer_env_steps'] + config.env_steps_per_step


def test_crafter_gives_144_thousand_updates_per_million_steps():
  config = train.preset('crafter')
  assert config.learner_steps_per_step == 25 and config.num_envs == 6
  assert round(1_000_000 / config.env_steps_per_update) == 143_678


@pytest.mark.parametrize('num_envs', [24, 96])
def test_more_environments_keep_the_crafter_buffer_and_ratio(num_envs):
  config = train.preset('crafter', num_envs=num_envs)
  # The same updates per environment step, in longer runs of updates.
  assert config.learner_steps_per_step == 25 * num_envs // 6
  assert round(1_000_000 / config.env_steps_per_update) == 143_678
  # The table's 400,000 steps, in whole rollouts of every environment.
  held = config.buffer_capacity * config.rollout_len
  assert config.buffer_capacity % num_envs == 0
  assert 400_000 <= held < 400_000 + config.env_steps_per_step
  # A buffer set with the change is kept as it is.
  assert (
      train.preset('crafter', num_envs=24, buffer_capacity=48).buffer_capacity
      == 48
  )


def test_the_atari_schedule_is_scaled_to_a_shorter_budget():
  probe = train.preset('atari')
  config = train.preset('atari', num_steps=probe.num_steps_for(1_000_000))
  budget = config.num_steps * config.env_steps_per_step
  assert config.agent_lr_decay_env_steps == budget
  # The paper's warmup is 5e6 of 2e8 steps: 2.5% of the run.
  assert config.agent_lr_warmup_env_steps == round(0.025 * budget)
  # Saved and read back, the scaled schedule stays as it is.
  assert train.TrainConfig.from_dict(config.to_dict()) == config


def test_the_warmup_cosine_schedule():
  schedule = schedules.learning_rate_schedule(
      schedule='warmup_cosine',
      learning_rate=3e-4,
      learning_rate_end=0.0,
      warmup_updates=10,
      decay_updates=110,
  )
  np.testing.assert_allclose(
      [schedule(0), schedule(5), schedule(10), schedule(60), schedule(110)],
      [0.0, 1.5e-4, 3e-4, 1.5e-4, 0.0],
      atol=1e-9,
  )
  assert float(schedule(500)) == 0.0
  constant = schedules.learning_rate_schedule(
      schedule='constant', learning_rate=3e-4
  )
  assert float(constant(12345)) == np.float32(3e-4)


def test_weight_decay_is_decoupled_and_comes_after_the_clip():
  params = {'w': jnp.array([2.0, -1.0, 0.5, 0.0])}
  grads = {'w': jnp.array([0.3, 0.3, -4.0, 1e-3])}
  opt = schedules.agent_optimizer(
      learning_rate=0.1, max_abs_update=0.5, weight_decay=0.3
  )
  updates, _ = opt.update(grads, opt.init(params), params)
  # Adam's first step is g / (|g| + eps), about +-1: clipped to +-0.5; the
  # decay (0.3 x parameter) is added after the clip, unclipped.
  adam = grads['w'] / (jnp.abs(grads['w']) + 1e-8)
  expected = -0.1 * (jnp.clip(adam, -0.5, 0.5) + 0.3 * params['w'])
  np.testing.assert_allclose(updates['w'], expected, rtol=1e-6)


def test_a_constant_step_without_decay_is_the_reference_optimizer():
  assert schedules.config_optimizer(train.preset('paper')) is None
  params = {'w': jnp.linspace(-1.0, 1.0, 5)}
  grads = {'w': jnp.array([0.1, -2.0, 3.0, 0.0, 1e-4])}
  ours = schedules.agent_optimizer(learning_rate=3e-4)
  reference = optimizers.get_agent_optimizer(3e-4, 1.0)
  chex.assert_trees_all_equal(
      ours.update(grads, ours.init(params), params),
      reference.update(grads, reference.init(params), params),
  )


@pytest.mark.parametrize('num_envs, num_steps', [(6, 25), (24, 5), (4, 2)])
def test_spread_slots_give_each_trajectory_one_learner_step(
    num_envs, num_steps
):
  slots = replay_lib.spread_fresh_slots(num_envs, num_steps)
  taken = slots[slots >= 0]
  np.testing.assert_array_equal(np.sort(taken), np.arange(num_envs))
  per_step = np.sum(slots >= 0, axis=1)
  share = num_envs / num_steps
  assert set(per_step) <= {math.floor(share), math.ceil(share)}
  # Spread evenly: any run of steps holds its share, up to one trajectory.
  cumulative = np.cumsum(per_step)
  np.testing.assert_array_less(
      np.abs(cumulative - share * np.arange(1, num_steps + 1)), 1.0 + 1e-9
  )


@pytest.mark.parametrize(
    'changes, message',
    [
        (dict(spread_fresh=True, replay_fraction=0.99, learner_batch_size=24,
              num_envs=4), 'multiple of 6'),  # fmt: skip
        (dict(agent_lr_schedule='linear'), 'agent_lr_schedule'),
        (dict(agent_frame_embedding=8), 'frame_stack'),
        (dict(frame_stack=0), 'frame_stack'),
        (dict(discount=1.5), 'discount'),
        (dict(agent_weight_decay=-0.1), 'agent_weight_decay'),
        (dict(agent_lr_schedule='warmup_cosine',
              agent_lr_warmup_env_steps=10**9), 'warmup'),  # fmt: skip
    ],
)
def test_bad_protocol_settings_are_named(changes, message):
  with pytest.raises(configs.ConfigError, match=message):
    train.TrainConfig(**changes)


# ----------------------------------------------------------------------------
# Frame stacks.


def test_stacks_hold_each_episodes_newest_frames():
  num_frames, num_envs = 3, 4
  inner = registry.make_environment(
      'catch', batch_size=num_envs, settings={'rows': 4, 'columns': 3}
  )
  env = frame_stack.FrameStackEnvironment(inner, num_frames)
  spec = env.single_observation_spec()
  frame = inner.single_observation_spec()['observation'].shape
  assert spec['observation'].shape == (num_frames,) + frame
  state, timestep = env.reset(jax.random.key(0))
  inner_state, inner_timestep = inner.reset(jax.random.key(0))
  first = np.asarray(inner_timestep.observation)
  history = [[frame] for frame in first]
  step, inner_step = jax.jit(env.step), jax.jit(inner.step)
  rng = np.random.default_rng(0)
  ends = 0
  for _ in range(14):
    stacks = np.asarray(timestep.observation)
    for b in range(num_envs):
      newest = history[b][-num_frames:]
      zeros = [np.zeros_like(newest[0])] * (num_frames - len(newest))
      np.testing.assert_array_equal(stacks[b], np.stack(zeros + newest))
    actions = jnp.asarray(rng.integers(0, 3, num_envs), jnp.int32)
    state, timestep = step(state, actions)
    inner_state, inner_timestep = inner_step(inner_state, actions)
    frames = np.asarray(inner_timestep.observation)
    for b in range(num_envs):
      if inner_timestep.step_type[b] == 2:  # LAST: the next episode's frame.
        history[b] = []
        ends += 1
      history[b].append(frames[b])
  assert ends >= num_envs  # Catch of 4 rows ends every 3 steps.


@pytest.mark.parametrize('with_truncation', [True, False])
def test_packed_rollouts_unpack_bit_for_bit(with_truncation):
  pytest.importorskip('gymnax')
  inner = registry.make_environment(
      'gymnax:CartPole-v1',
      batch_size=3,
      settings={'max_steps_in_episode': 7},
  )
  env = frame_stack.FrameStackEnvironment(inner, 5)
  env_state, timestep = env.reset(jax.random.key(1))
  unroll = jax.jit(
      lambda timestep, env_state, key: acting.unroll_jittable_actor(
          None,
          {},
          timestep,
          env_state,
          key,
          env=env,
          rollout_len=9,
          actor_step_fn=lambda *a: actors.random_actor(*a, num_actions=2),
          truncation=with_truncation,
      )
  )
  # Three rollouts: later ones start mid-episode, with earlier frames.
  for i in range(3):
    rollout, _, timestep, env_state = unroll(
        timestep, env_state, jax.random.key(10 + i)
    )
    packed = frame_stack.pack(rollout)
    assert packed.observations['frames'].shape == (9, 3, 4)
    assert packed.observations['context'].shape == (4, 3, 4)
    chex.assert_trees_all_equal(frame_stack.unpack(packed), rollout)
  assert not np.all(rollout.discounts)  # Episodes ended inside.
  if with_truncation:
    assert isinstance(rollout, truncation.TruncatedRollout)
    assert np.any(rollout.truncated)


# ----------------------------------------------------------------------------
# The protocol end to end, on Catch.


def _protocol(**changes) -> train.TrainConfig:
  # Learning from the first iteration (`learning_starts` at most
  # `num_envs`): a run compiles no acting-only program.
  return train.preset(
      'crafter',
      **(
          _TINY
          | dict(
              frame_stack=3,
              agent_frame_embedding=4,
              learner_batch_size=8,
              replay_fraction=0.75,  # 2 fresh per update: 1 step per rollout
              num_envs=2,
              buffer_capacity=16,
              learning_starts=2,
              num_steps=6,
              steps_per_chunk=2,
          )
          | changes
      ),
  )


def _record_batch_shapes(monkeypatch) -> list[tuple[int, ...]]:
  """The observation shape of every learner batch the trainer builds."""
  shapes = []
  make_learn_fn = train_program.learner.make_learn_fn

  def recording_make_learn_fn(setup, **kwargs):
    learn = make_learn_fn(setup, **kwargs)

    def wrapped(rng, batch, *args):
      shapes.append(batch.observations.shape)
      return learn(rng, batch, *args)

    return wrapped

  monkeypatch.setattr(
      train_program.learner, 'make_learn_fn', recording_make_learn_fn
  )
  return shapes


def test_spread_batches_have_the_batch_size_and_the_ratios_steps(
    monkeypatch,
):
  shapes = _record_batch_shapes(monkeypatch)
  # 0.9 of 8: 0.8 fresh trajectories per update, 4 per rollout: 5 updates.
  config = _protocol(replay_fraction=0.9, num_envs=4, num_steps=3)
  assert config.learner_steps_per_step == 5
  result = train.run_train(config)
  # [T, B, K, rows, columns]: the batch size, frames stacked.
  assert set(shapes) == {(4, 8, 3, 5, 5, 1)}, shapes
  assert result.logs['learner_steps'][-1] == 5 * 3


def test_the_protocol_resumes_exactly(tmp_path):
  config = _protocol(
      agent_lr_schedule='warmup_cosine',
      agent_learning_rate_end=1e-5,
      agent_lr_warmup_env_steps=16,
      agent_lr_decay_env_steps=40,
  )
  assert schedules.config_optimizer(config) is not None
  agent = learner.build(config, None).agent
  params = agent.initial_learner_state(jax.random.key(0)).params
  assert params['frame_embedding_mlp/~_embedding_pass/frame_embedding'][
      'w'
  ].shape == (25, 4)
  straight = train.run_train(config, num_seeds=2)
  train.run_train(
      config.replace(num_steps=3), num_seeds=2, checkpoint_dir=tmp_path
  )
  resumed = train.run_train(
      config, num_seeds=2, checkpoint_dir=tmp_path, resume=True
  )
  chex.assert_trees_all_equal(resumed.params, straight.params)
  finals = [np.asarray(p['frame_embedding_mlp/~_embedding_pass/torso/~/linear_0']['w'])
            for p in straight.params]  # fmt: skip
  assert not np.array_equal(finals[0], finals[1])


def test_a_buffer_the_run_never_fills_samples_as_a_larger_one():
  # 6 iterations of 2 environments: 12 trajectories, as many as the small
  # buffer holds.
  small = train.run_train(_protocol(buffer_capacity=12))
  large = train.run_train(_protocol(buffer_capacity=64))
  chex.assert_trees_all_equal(small.params, large.params)
  # 8 iterations: 16 trajectories, so the small buffer wraps and samples
  # otherwise (the same two programs: `num_steps` does not shape them).
  wrapped = train.run_train(_protocol(buffer_capacity=12, num_steps=8))
  unwrapped = train.run_train(_protocol(buffer_capacity=64, num_steps=8))
  assert not np.array_equal(
      jax.tree.leaves(wrapped.params)[0], jax.tree.leaves(unwrapped.params)[0]
  )


# ----------------------------------------------------------------------------
# The other reading of the replay ratio: one rollout of every environment per
# update, each batch slot replayed with probability `replay_fraction`.


@pytest.mark.parametrize(
    'name, protocol',
    [
        ('crafter_rollout_per_update', 'crafter'),
        ('atari_rollout_per_update', 'atari'),
    ],
)
def test_rollout_per_update_presets_differ_in_the_reading_alone(name, protocol):
  # At the paper's budget, so that no schedule is scaled to another one.
  drawn, shared = _paper_length(name, protocol), _paper_length(protocol)
  assert drawn.replay_per_slot and not drawn.spread_fresh
  assert shared.spread_fresh and not shared.replay_per_slot
  # 8 environments of 29 steps: 232 environment steps per update.
  assert drawn.num_envs == 8 and drawn.learner_steps_per_step == 1
  assert drawn.env_steps_per_update == 232
  # The table's buffer in whole rollouts of 8, and every other setting.
  held = drawn.buffer_capacity * drawn.rollout_len
  table = TABLE_6[protocol]
  assert table['buffer_env_steps'] <= held < table['buffer_env_steps'] + 232
  reading = {'num_envs', 'spread_fresh', 'replay_per_slot', 'buffer_capacity',
             'num_steps'}  # fmt: skip
  for field in train.TrainConfig.field_names():
    if field not in reading:
      assert getattr(drawn, field) == getattr(shared, field), field


@pytest.mark.parametrize(
    'changes, steps_per_update',
    [
        # 2 of 8 fresh per update, 2 environments of 4 steps: 1 update per
        # rollout, 8 steps each.
        (dict(), 8),
        # Drawn slots: one update per rollout of 3 environments, 12 steps.
        (dict(replay_per_slot=True, num_envs=3, buffer_capacity=18), 12),
        # Spread: 0.8 fresh per update, 4 environments: 5 updates of 16 / 5.
        (dict(spread_fresh=True, replay_fraction=0.9, num_envs=4), 16 / 5),
    ],
)
def test_each_reading_runs_its_environment_steps_per_update(
    changes, steps_per_update
):
  base = dict(spread_fresh=False) if 'spread_fresh' not in changes else {}
  config = _protocol(**base | changes)
  assert math.isclose(config.env_steps_per_update, steps_per_update)
  result = train.run_train(config)
  learned = result.logs['learner_steps'] > 0
  env_steps = result.logs['env_steps'][learned]
  updates = result.logs['learner_steps'][learned]
  # After the warm-up, each iteration adds its steps and its updates.
  np.testing.assert_allclose(
      np.diff(env_steps) / np.diff(updates), steps_per_update
  )


def test_drawn_slots_mix_fresh_and_replayed_trajectories(monkeypatch):
  fresh_shares = _record_batch_shapes(monkeypatch)
  base = dict(replay_per_slot=True, spread_fresh=False, num_envs=3,
              buffer_capacity=18, num_steps=4)  # fmt: skip
  # All fresh, all replayed and the mix each train, with the batch size.
  results = [
      train.run_train(_protocol(**base, replay_fraction=p))
      for p in (0.0, 0.5, 1.0)
  ]
  assert set(fresh_shares) == {(4, 8, 3, 5, 5, 1)}, fresh_shares
  finals = [jax.tree.leaves(r.params)[0] for r in results]
  assert not np.array_equal(finals[0], finals[1])
  assert not np.array_equal(finals[1], finals[2])


def test_the_two_readings_exclude_each_other():
  with pytest.raises(configs.ConfigError, match='choose one'):
    train.TrainConfig(spread_fresh=True, replay_per_slot=True)
