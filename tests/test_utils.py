"""Unit tests for `disco.utils`, with numbers worked by hand."""

import functools

from absl.testing import absltest
import chex
import jax.numpy as jnp
import numpy as np

from disco import types
from disco import utils


class MovingAverageTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_two_updates_by_hand(self):
    # decay 0.9; eps 0 so that the normalisation is exactly
    # (x - mean) / sqrt(var + 1e-12).
    ema = utils.MovingAverage({'x': jnp.zeros(())}, decay=0.9, eps=0.0)
    update = self.variant(
        functools.partial(ema.update_state, pmean_axis_name=None)
    )
    normalize = self.variant(ema.normalize)
    normalize_no_mean = self.variant(
        functools.partial(ema.normalize, subtract_mean=False)
    )

    # Update 1 with [1, 3]: mean 2, mean of squares 5.
    #   m1 = 0.9 * 0 + 0.1 * 2 = 0.2;  m2 = 0.1 * 5 = 0.5;  d = 0.9
    # Debiased by 1 / (1 - 0.9) = 10: mean = 2, E[x^2] = 5, var = 5 - 4 = 1.
    state = update({'x': jnp.array([1.0, 3.0])}, ema.init_state())
    np.testing.assert_allclose(state.moment1['x'], 0.2, rtol=1e-6)
    np.testing.assert_allclose(state.moment2['x'], 0.5, rtol=1e-6)
    np.testing.assert_allclose(state.decay_product, 0.9, rtol=1e-6)
    np.testing.assert_allclose(
        normalize({'x': jnp.array(4.0)}, state)['x'], 2.0, rtol=1e-5
    )

    # Update 2 with [0, 2]: mean 1, mean of squares 2.
    #   m1 = 0.9 * 0.2 + 0.1 * 1 = 0.28;  m2 = 0.9 * 0.5 + 0.1 * 2 = 0.65
    #   d = 0.81, debias 1 / 0.19: mean = 28/19, E[x^2] = 65/19,
    #   var = 65/19 - (28/19)^2 = (65 * 19 - 784) / 361 = 451/361.
    # normalize(3) = (3 - 28/19) / (sqrt(451)/19) = 29/sqrt(451);
    # without the mean: 3 / (sqrt(451)/19) = 57/sqrt(451).
    state = update({'x': jnp.array([0.0, 2.0])}, state)
    np.testing.assert_allclose(state.moment1['x'], 0.28, rtol=1e-6)
    np.testing.assert_allclose(state.moment2['x'], 0.65, rtol=1e-6)
    np.testing.assert_allclose(state.decay_product, 0.81, rtol=1e-6)
    np.testing.assert_allclose(
        normalize({'x': jnp.array(3.0)}, state)['x'],
        29 / np.sqrt(451),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        normalize_no_mean({'x': jnp.array(3.0)}, state)['x'],
        57 / np.sqrt(451),
        rtol=1e-5,
    )

  def test_negative_variance_is_clipped_to_zero(self):
    # Moments with E[x^2] < mean^2 (rounding can cause that): mean = 1,
    # E[x^2] = 0.5 (decay_product 0, so no debiasing) would give a variance
    # of -0.5. It is clipped to 0, so normalize(2) = (2 - 1) / sqrt(1e-12).
    ema = utils.MovingAverage(jnp.zeros(()), decay=0.9, eps=0.0)
    state = types.EmaState(
        moment1=jnp.array(1.0),
        moment2=jnp.array(0.5),
        decay_product=jnp.array(0.0),
    )
    np.testing.assert_allclose(
        ema.normalize(jnp.array(2.0), state), 1e6, rtol=1e-5
    )


class BatchLookupTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_picks_one_entry_per_batch_element(self):
    table = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    index = np.array([[0, 3, 1], [2, 2, 0]], np.int32)
    # table[t, b, a] = 12 t + 4 b + a.
    expected = np.array([[0, 4 + 3, 8 + 1], [12 + 2, 16 + 2, 20 + 0]])
    out = self.variant(utils.batch_lookup)(table, index)
    np.testing.assert_array_equal(out, expected)

  @chex.variants(with_jit=True, without_jit=True)
  def test_trailing_axes_and_one_batch_axis(self):
    table = np.arange(3 * 4 * 2, dtype=np.float32).reshape(3, 4, 2)
    index = np.array([3, 0, 1], np.int32)
    lookup = self.variant(functools.partial(utils.batch_lookup, num_dims=1))
    # table[b, a, c] = 8 b + 2 a + c; rows picked: (0, 3), (1, 0), (2, 1).
    np.testing.assert_array_equal(
        lookup(table, index), [[6, 7], [8, 9], [18, 19]]
    )

  def test_index_shape_must_match_the_batch(self):
    with self.assertRaises(AssertionError):
      utils.batch_lookup(np.zeros((2, 3, 4)), np.zeros((3, 2), np.int32))


if __name__ == '__main__':
  absltest.main()
