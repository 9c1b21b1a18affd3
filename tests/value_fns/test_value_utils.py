"""Unit tests for `disco.value_fns.value_utils`, with numbers worked by hand.

V-trace (`estimate_values`) and Retrace (`estimate_q_values`) on a 3-step
example whose arithmetic is written out below, and the round trip through
the categorical (two-hot) value representation.
"""

import functools

from absl.testing import absltest
import chex
import jax.numpy as jnp
import numpy as np

from disco.value_fns import value_utils

# A 3-step example shared by the V-trace and Retrace tests (time-major,
# batch of one column). Transition 1 ends an episode (env discount 0).
_DISCOUNT = 0.5
_LAMBDA = 0.5
_REWARDS = [1.0, 0.0, 2.0]  # r_0, r_1, r_2
_ENV_DISCOUNTS = [1.0, 0.0, 1.0]  # gamma_t = 0.5 * this = [0.5, 0, 0.5]
_RHO = [2.0, 0.5, 1.0]  # min(rho, 1) = [1, 0.5, 1]; c = 0.5 * that
_TARGET_VALUES = [1.0, 2.0, 0.5, 4.0]  # V_0 .. V_3 (bootstrapping values)
_VALUES = [1.5, 1.0, 1.0, 1.0]  # online values: only enter td
_ACTIONS = [1, 0, 1]
# Target Q_t(a) for a in {0, 1}; Q_t(a_t) = [3, 2, -1].
_TARGET_Q = [[1.0, 3.0], [2.0, 0.0], [1.0, -1.0], [4.0, 4.0]]


def _column(values, dtype=np.float32):
  """[T] -> [T, 1]: the examples use a batch of one."""
  return np.asarray(values, dtype)[:, None]


class EstimateValuesTest(chex.TestCase):
  """V-trace, as rlax defines it, with clip thresholds of 1."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_three_steps_by_hand(self):
    # TD errors: delta_t = min(rho_t, 1) * (r_t + gamma_t V_{t+1} - V_t)
    #   delta_0 = 1.0 * (1 + 0.5 * 2.0 - 1.0) = 1.0
    #   delta_1 = 0.5 * (0 + 0.0 * 0.5 - 2.0) = -1.0
    #   delta_2 = 1.0 * (2 + 0.5 * 4.0 - 0.5) = 3.5
    # Traces c_t = lambda * min(rho_t, 1) = [0.5, 0.25, 0.5]; backwards,
    # e_t = delta_t + gamma_t c_t e_{t+1}:
    #   e_2 = 3.5
    #   e_1 = -1.0 + 0.0 * 0.25 * 3.5 = -1.0
    #   e_0 = 1.0 + 0.5 * 0.5 * (-1.0) = 0.75
    # value_target v_s = V_t + e_t = [1.75, 1.0, 4.0];
    # td = v_s - values_t = [1.75 - 1.5, 1.0 - 1.0, 4.0 - 1.0].
    # Policy-gradient advantage: bootstrap b_t = lambda v_{s,t+1} +
    # (1 - lambda) V_{t+1}, and V_T at the end:
    #   b_0 = 0.5 * 1.0 + 0.5 * 2.0 = 1.5
    #   b_1 = 0.5 * 4.0 + 0.5 * 0.5 = 2.25
    #   b_2 = V_3 = 4.0
    # adv_t = min(rho_t, 1) * (r_t + gamma_t b_t - V_t):
    #   adv_0 = 1.0 * (1 + 0.5 * 1.5 - 1.0) = 0.75
    #   adv_1 = 0.5 * (0 + 0.0 * 2.25 - 2.0) = -1.0
    #   adv_2 = 1.0 * (2 + 0.5 * 4.0 - 0.5) = 3.5
    estimate = self.variant(
        functools.partial(
            value_utils.estimate_values, discount=_DISCOUNT, lambda_=_LAMBDA
        )
    )
    out = estimate(
        _column(_REWARDS),
        _column(_ACTIONS, np.int32),
        _column(_ENV_DISCOUNTS),
        _column(_RHO),
        _column(_VALUES),
        _column(_TARGET_VALUES),
    )
    np.testing.assert_allclose(out.value_target, _column([1.75, 1.0, 4.0]))
    np.testing.assert_allclose(out.td, _column([0.25, 0.0, 3.0]))
    np.testing.assert_allclose(out.adv, _column([0.75, -1.0, 3.5]))
    np.testing.assert_array_equal(out.value, _column(_VALUES))
    np.testing.assert_array_equal(out.target_value, _column(_TARGET_VALUES))
    np.testing.assert_array_equal(out.rho, _column(_RHO))
    # No action values: the Q fields are zeros shaped like the actions.
    for field in (out.q_value, out.target_q_value, out.qv_adv):
      np.testing.assert_array_equal(field, np.zeros((3, 1), np.int32))
      self.assertEqual(field.dtype, jnp.int32)
    np.testing.assert_array_equal(out.q_target, np.zeros((3, 1)))
    np.testing.assert_array_equal(out.q_td, np.zeros((3, 1)))

  @chex.variants(with_jit=True, without_jit=True)
  def test_columns_are_independent(self):
    # Column 1 is the example above; column 2 has V = 0, r = 1, no
    # termination and rho = 1, so delta = [1, 1, 1], gamma c = 0.25:
    #   e = [1 + 0.25 * 1.25, 1 + 0.25 * 1, 1] = [1.3125, 1.25, 1]
    #   b = [0.5 * 1.25, 0.5 * 1.0, 0] = [0.625, 0.5, 0]
    #   adv = 1 + 0.5 * b = [1.3125, 1.25, 1.0]
    def two_columns(first, second):
      return np.stack([np.asarray(first), np.asarray(second)], axis=1)

    estimate = self.variant(
        functools.partial(
            value_utils.estimate_values, discount=_DISCOUNT, lambda_=_LAMBDA
        )
    )
    out = estimate(
        two_columns(_REWARDS, [1.0, 1.0, 1.0]).astype(np.float32),
        two_columns(_ACTIONS, [0, 0, 0]).astype(np.int32),
        two_columns(_ENV_DISCOUNTS, [1.0, 1.0, 1.0]).astype(np.float32),
        two_columns(_RHO, [1.0, 1.0, 1.0]).astype(np.float32),
        two_columns(_VALUES, [0.0] * 4).astype(np.float32),
        two_columns(_TARGET_VALUES, [0.0] * 4).astype(np.float32),
    )
    np.testing.assert_allclose(
        out.value_target, two_columns([1.75, 1.0, 4.0], [1.3125, 1.25, 1.0])
    )
    np.testing.assert_allclose(
        out.adv, two_columns([0.75, -1.0, 3.5], [1.3125, 1.25, 1.0])
    )


class EstimateQValuesTest(chex.TestCase):
  """Retrace targets for the taken actions, and what follows from them."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_three_steps_by_hand(self):
    # Retrace, backwards from a one-step bootstrap at the end:
    #   G_2 = r_2 + gamma_2 V_3 = 2 + 0.5 * 4 = 4.0
    #   G_t = r_t + gamma_t (V_{t+1} + c_{t+1} (G_{t+1} - Q_{t+1}(a_{t+1})))
    #   G_1 = 0 + 0.0 * (...) = 0.0
    #   G_0 = 1 + 0.5 * (2.0 + 0.25 * (0.0 - 2.0)) = 1 + 0.5 * 1.5 = 1.75
    # (c_0 never enters: a trace weights the step after the action.)
    # adv = G - V = [1.75 - 1.0, 0.0 - 2.0, 4.0 - 0.5] = [0.75, -2.0, 3.5]
    # value_target = V + min(rho, 1) adv
    #   = [1.0 + 0.75, 2.0 + 0.5 * (-2.0), 0.5 + 3.5] = [1.75, 1.0, 4.0]
    # td = value_target - values = [0.25, 0.0, 3.0]
    # The online Q is the target Q + 0.5, so Q_t(a_t) = [3.5, 2.5, -0.5] and
    # q_td = G - Q(a) = [1.75 - 3.5, 0.0 - 2.5, 4.0 + 0.5].
    # qv_adv = target Q - V, at every step and action.
    target_q = np.asarray(_TARGET_Q, np.float32)[:, None]  # [T+1, 1, A]
    estimate = self.variant(
        functools.partial(
            value_utils.estimate_q_values, discount=_DISCOUNT, lambda_=_LAMBDA
        )
    )
    out = estimate(
        _column(_REWARDS),
        _column(_ACTIONS, np.int32),
        _column(_ENV_DISCOUNTS),
        _column(_RHO),
        _column(_VALUES),
        _column(_TARGET_VALUES),
        target_q + 0.5,
        target_q,
    )
    np.testing.assert_allclose(out.q_target, _column([1.75, 0.0, 4.0]))
    np.testing.assert_allclose(out.adv, _column([0.75, -2.0, 3.5]))
    np.testing.assert_allclose(out.value_target, _column([1.75, 1.0, 4.0]))
    np.testing.assert_allclose(out.td, _column([0.25, 0.0, 3.0]))
    np.testing.assert_allclose(out.q_td, _column([-1.75, -2.5, 4.5]))
    np.testing.assert_allclose(
        out.qv_adv,
        np.asarray([[0.0, 2.0], [0.0, -2.0], [0.5, -1.5], [0.0, 0.0]])[:, None],
    )
    np.testing.assert_array_equal(out.q_value, target_q + 0.5)
    np.testing.assert_array_equal(out.target_q_value, target_q)


class CategoricalValueTest(chex.TestCase):
  """Two-hot encoding over evenly spaced bins, and back."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_two_hot_by_hand(self):
    # 11 bins over [-5, 5] are the integers -5 .. 5 (bin i holds i - 5).
    # 2.25 lies a quarter of the way from bin 7 (value 2) to bin 8 (value
    # 3), so it puts 0.75 on bin 7 and 0.25 on bin 8, up to rlax's guard
    # against a zero bin width: p_lower = (3 - 2.25) / (1 + 1e-5). Values out
    # of range are clipped: 7 -> all on bin 10, -5 exactly -> all on bin 0
    # (there lower = upper, so p_lower = 0 / 1e-5 = 0 and p_upper = 1).
    to_categorical = self.variant(
        functools.partial(
            value_utils.scalar_to_categorical_value, 11, max_abs_value=5.0
        )
    )
    probs = to_categorical(jnp.array([2.25, 7.0, -5.0]))
    expected = np.zeros((3, 11), np.float32)
    p_lower = 0.75 / (1.0 + 1e-5)
    expected[0, 7], expected[0, 8] = p_lower, 1.0 - p_lower
    expected[1, 10] = 1.0
    expected[2, 0] = 1.0
    np.testing.assert_allclose(probs, expected, rtol=1e-6, atol=1e-7)

  @chex.variants(with_jit=True, without_jit=True)
  def test_round_trip(self):
    # Two-hot probabilities -> log-probabilities (the logits of the same
    # distribution) -> expected value gives back the clipped scalar, up to
    # the 1e-5 guard above (times the bin width, 1 here) and float32
    # rounding (~8e-6 at 123).
    def round_trip(values):
      probs = value_utils.scalar_to_categorical_value(601, values, 300.0)
      return value_utils.value_logits_to_scalar(jnp.log(probs), 300.0)

    values = np.array(
        [-300.0, -123.4, -1.5, -0.25, 0.0, 0.7, 42.42, 299.9, 300.0],
        np.float32,
    )
    np.testing.assert_allclose(
        self.variant(round_trip)(values), values, rtol=0.0, atol=2e-5
    )
    clipped = self.variant(round_trip)(np.array([-1e4, 1e4], np.float32))
    np.testing.assert_allclose(clipped, [-300.0, 300.0], rtol=1e-6)


if __name__ == '__main__':
  absltest.main()
