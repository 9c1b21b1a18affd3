"""Tests for `disco.replay`: the host FIFO buffer and its on-device twin."""

import collections
import json

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import replay


def _batch(start: int, size: int) -> dict[str, np.ndarray]:
  """Trajectories numbered start, start+1, ... along axis 2 of [D=2, T=3, B]."""
  ids = np.arange(start, start + size, dtype=np.float32).reshape(1, 1, size)
  ids = ids * np.ones((2, 3, 1), np.float32)
  return {
      'obs': ids[..., None] * np.ones(4, np.float32),  # [2, 3, B, 4]
      'act': ids.astype(np.int32),  # [2, 3, B]
  }


class _DequeBuffer:
  """The reference's buffer, written plainly: a deque of trajectories."""

  def __init__(self, capacity, seed):
    self.items = collections.deque(maxlen=capacity)
    self.rng = np.random.default_rng(seed)

  def add(self, batch):
    for i in range(batch['act'].shape[2]):
      self.items.append(jax.tree.map(lambda x, i=i: x[:, :, i], batch))

  def sample(self, batch_size):
    indices = self.rng.integers(len(self.items), size=batch_size)
    chosen = [self.items[i] for i in indices]
    return jax.tree.map(lambda *xs: np.stack(xs, axis=2), *chosen)


def test_matches_a_deque_with_the_same_seed():
  buffer = replay.SimpleReplayBuffer(capacity=5, seed=17)
  reference = _DequeBuffer(capacity=5, seed=17)
  next_id = 0
  for size in (2, 2, 3, 1, 4, 2):
    batch = _batch(next_id, size)
    next_id += size
    buffer.add(batch)
    reference.add(batch)
    assert len(buffer) == len(reference.items)
    chex.assert_trees_all_equal(buffer.sample(7), reference.sample(7))


def test_fifo_keeps_the_newest_trajectories():
  buffer = replay.SimpleReplayBuffer(capacity=4, seed=0)
  buffer.add(_batch(0, 3))
  buffer.add(_batch(3, 3))
  assert len(buffer) == 4
  # Position 0 is the oldest trajectory still held: number 2.
  got = buffer.gather(np.arange(4))
  np.testing.assert_array_equal(got['act'][0, 0], [2, 3, 4, 5])
  assert got['obs'].shape == (2, 3, 4, 4)


def test_a_batch_larger_than_the_capacity_keeps_its_tail():
  buffer = replay.SimpleReplayBuffer(capacity=3, seed=0)
  buffer.add(_batch(0, 5))
  np.testing.assert_array_equal(
      buffer.gather(np.arange(3))['act'][1, 2], [2, 3, 4]
  )


def test_plain_time_major_batches_with_batch_axis_1():
  buffer = replay.SimpleReplayBuffer(capacity=8, seed=3, batch_axis=1)
  rollout = {'r': np.arange(12.0).reshape(3, 4)}  # [T, B]
  buffer.add(rollout)
  np.testing.assert_array_equal(
      buffer.gather(np.array([3, 0]))['r'], rollout['r'][:, [3, 0]]
  )


def test_errors():
  buffer = replay.SimpleReplayBuffer(capacity=4, seed=0)
  with pytest.raises(ValueError, match='empty'):
    buffer.sample(2)
  buffer.add(_batch(0, 2))
  with pytest.raises(ValueError, match='structure'):
    buffer.add({'obs': _batch(0, 2)['obs']})
  with pytest.raises(ValueError, match='shape'):
    buffer.add(jax.tree.map(lambda x: x[:, :2], _batch(0, 2)))
  with pytest.raises(ValueError, match='disagree'):
    buffer.add({'obs': _batch(0, 2)['obs'], 'act': _batch(0, 3)['act']})
  with pytest.raises(IndexError):
    buffer.gather(np.array([2]))
  with pytest.raises(ValueError, match='capacity'):
    replay.SimpleReplayBuffer(capacity=0, seed=0)


class DeviceReplayTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_add_wraps_around_and_keeps_the_newest(self):
    example = {'x': jnp.zeros((2, 3)), 'a': jnp.zeros((2, 3), jnp.int32)}
    state = replay.init_replay_state(example, capacity=4)
    add = self.variant(replay.add_to_replay)
    for start in (0, 3):
      ids = jnp.arange(start, start + 3)
      state = add(
          state, {'x': jnp.stack([ids, ids]) * 1.0, 'a': jnp.stack([ids, ids])}
      )
    self.assertEqual(int(state.size), 4)
    self.assertEqual(int(state.next_slot), 2)
    # Slots hold 4, 5, 2, 3: trajectory 2 is the oldest (position 0).
    np.testing.assert_array_equal(state.storage['a'][0], [4, 5, 2, 3])

  @chex.variants(with_jit=True, without_jit=True)
  def test_one_trajectory_a_row_draws_every_held_one_and_no_other(self):
    # Discovery's draw: a capacity that batches of 3 do not divide, wrapped.
    example = {'a': jnp.zeros((2, 3), jnp.int32)}
    state = replay.init_replay_state(example, capacity=7)
    for start in (10, 13, 16):
      ids = jnp.arange(start, start + 3)
      state = replay.add_to_replay(state, {'a': jnp.stack([ids, -ids])})
    draw = self.variant(replay.sample_grid, static_argnames=('num', 'num_envs'))
    batch = draw(state, jax.random.PRNGKey(1), num=256, num_envs=1)
    self.assertEqual(batch['a'].shape, (2, 256))
    # The leaves stay together: row 1 is row 0 negated.
    np.testing.assert_array_equal(batch['a'][1], -batch['a'][0])
    # The newest 7 (12 to 18) are held; 10 and 11 were overwritten.
    self.assertEqual(
        set(np.asarray(batch['a'][0]).tolist()), set(range(12, 19))
    )
    # Before it wraps, only the filled slots are drawn.
    state = replay.init_replay_state(example, capacity=7)
    state = replay.add_to_replay(state, {'a': jnp.stack([ids, -ids])})
    batch = draw(state, jax.random.PRNGKey(2), num=64, num_envs=1)
    self.assertEqual(set(np.asarray(batch['a'][0]).tolist()), {16, 17, 18})

  def test_adding_more_than_the_capacity_is_an_error(self):
    state = replay.init_replay_state({'a': jnp.zeros((1, 3))}, capacity=2)
    with self.assertRaisesRegex(ValueError, 'Cannot add 3'):
      replay.add_to_replay(state, {'a': jnp.zeros((1, 3))})


def test_state_round_trip_continues_exactly():
  original = replay.SimpleReplayBuffer(capacity=5, seed=3)
  empty_state = original.get_state()
  assert empty_state['storage'] is None and empty_state['size'] == 0
  for start in (0, 2, 4):
    original.add(_batch(start, 2))
  original.sample(3)
  state = original.get_state()
  # Through JSON, as a checkpoint keeps the generator state.
  state['rng_state'] = json.loads(json.dumps(state['rng_state']))
  restored = replay.SimpleReplayBuffer(capacity=5, seed=99)
  restored.set_state(state)
  assert len(restored) == len(original) == 5
  # The state is a copy: later additions to the original leave it alone.
  for buffer in (original, restored):
    buffer.add(_batch(6, 3))
  for _ in range(3):
    chex.assert_trees_all_equal(restored.sample(4), original.sample(4))
  fresh = replay.SimpleReplayBuffer(capacity=5, seed=3)
  fresh.set_state(empty_state)
  assert len(fresh) == 0


def test_set_state_rejects_another_capacity():
  buffer = replay.SimpleReplayBuffer(capacity=4, seed=0)
  buffer.add(_batch(0, 2))
  with pytest.raises(ValueError, match='trajectories along axis 2'):
    replay.SimpleReplayBuffer(capacity=6, seed=0).set_state(buffer.get_state())


def test_replayed_positions_are_uniform_over_the_filled_rows():
  # A buffer of 4 environments x 8 rows holding 3 rows (12 trajectories),
  # each leaf holding its own slot index.
  storage = jnp.broadcast_to(jnp.arange(32, dtype=jnp.float32), (2, 32))
  state = replay.ReplayState(
      storage={'x': storage}, size=jnp.int32(12), next_slot=jnp.int32(12)
  )
  drawn = np.asarray(
      replay.sample_grid(state, jax.random.PRNGKey(0), 4000, 4)['x']
  )[0]
  counts = np.bincount(drawn.astype(int), minlength=32)
  assert counts[12:].sum() == 0
  # 4000 draws over 12 slots: each about 333 (binomial std ~17).
  np.testing.assert_allclose(counts[:12], 4000 / 12, rtol=0.2)


def _slot_buffer(capacity: int, size: int) -> replay.ReplayState:
  """A ring of [2, capacity] whose every slot holds its own index + 100."""
  storage = jnp.broadcast_to(
      jnp.arange(capacity, dtype=jnp.float32) + 100, (2, capacity)
  )
  return replay.ReplayState(
      storage={'x': storage}, size=jnp.int32(size), next_slot=jnp.int32(size)
  )


def _rollout(num_envs: int) -> dict[str, jax.Array]:
  """[2, N] trajectories holding their own index (fresh: below 100)."""
  return {
      'x': jnp.broadcast_to(
          jnp.arange(num_envs, dtype=jnp.float32), (2, num_envs)
      )
  }


def test_fresh_then_replayed_puts_the_fresh_part_first():
  state = _slot_buffer(capacity=16, size=8)
  fresh = {'x': jnp.full((2, 3), 7.0)}
  batch = replay.fresh_then_replayed(
      fresh, state, jax.random.PRNGKey(1), 5, num_envs=4
  )['x']
  assert batch.shape == (2, 8)
  np.testing.assert_array_equal(batch[:, :3], 7.0)
  # The draws come from the 8 filled slots only.
  assert np.all((batch[:, 3:] >= 100) & (batch[:, 3:] < 108))
  only_drawn = replay.fresh_then_replayed(
      None, state, jax.random.PRNGKey(1), 5, num_envs=4
  )['x']
  np.testing.assert_array_equal(only_drawn, batch[:, 3:])


@pytest.mark.parametrize('fraction', [0.0, 1.0])
def test_each_slot_is_drawn_with_the_replay_fraction(fraction):
  state = _slot_buffer(capacity=16, size=16)
  batch = replay.each_slot_drawn(
      _rollout(4), state, jax.random.PRNGKey(2), 64, fraction, num_envs=4
  )['x']
  assert batch.shape == (2, 64)
  replayed = np.asarray(batch[0] >= 100)
  assert np.all(replayed == bool(fraction))


def test_a_coin_per_slot_mixes_fresh_and_replayed():
  state = _slot_buffer(capacity=16, size=16)
  batch = replay.each_slot_drawn(
      _rollout(4), state, jax.random.PRNGKey(3), 2000, 0.75, num_envs=4
  )['x']
  share = float(np.mean(np.asarray(batch[0]) >= 100))
  assert abs(share - 0.75) < 0.05  # 2000 coins: std ~0.01.


@pytest.mark.parametrize('num_envs, num_steps', [(6, 4), (4, 2)])
def test_spread_batches_take_each_trajectory_once(num_envs, num_steps):
  state = _slot_buffer(capacity=4 * num_envs, size=2 * num_envs)
  slots = replay.spread_fresh_slots(num_envs, num_steps)
  batch_size = 5
  fresh_seen = []
  for k in range(num_steps):
    batch = replay.spread_fresh(
        _rollout(num_envs),
        state,
        jax.random.PRNGKey(k),
        slots,
        jnp.int32(k),
        batch_size,
        num_envs,
    )['x']
    assert batch.shape == (2, batch_size)
    row = np.asarray(batch[0])
    fresh_seen += [int(x) for x in row if x < 100]
    assert np.all(row[row >= 100] < 100 + 2 * num_envs)
  # Over the K steps the rollout's N trajectories appear once each.
  assert sorted(fresh_seen) == list(range(num_envs))
