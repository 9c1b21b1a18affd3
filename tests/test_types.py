"""Unit tests for `disco.types`: the reset masks of `UpdateRuleInputs`."""

from absl.testing import absltest
import numpy as np

from disco import types


def _inputs(is_terminal):
  is_terminal = np.asarray(is_terminal, bool)
  t, b = is_terminal.shape
  return types.UpdateRuleInputs(
      observations=np.zeros((t + 1, b)),
      actions=np.zeros((t + 1, b), np.int32),
      rewards=np.zeros((t, b)),
      is_terminal=is_terminal,
      agent_out={},
  )


class ShouldResetMaskTest(absltest.TestCase):
  # Two columns over T = 3 transitions; transition 1 of column 0 and
  # transition 2 of column 1 end their episodes.
  IS_TERMINAL = [[False, False], [True, False], [False, True]]

  def test_forward_mask_marks_the_step_after_a_termination(self):
    # A forward RNN resets when it *enters* step t+1 after a terminal
    # transition t: [0, is_terminal] along time.
    mask = _inputs(self.IS_TERMINAL).should_reset_mask_fwd
    np.testing.assert_array_equal(
        mask,
        [[False, False], [False, False], [True, False], [False, True]],
    )

  def test_backward_mask_marks_the_terminal_step(self):
    # A backward RNN starts afresh at the last step of each episode:
    # [is_terminal, 0] along time.
    mask = _inputs(self.IS_TERMINAL).should_reset_mask_bwd
    np.testing.assert_array_equal(
        mask,
        [[False, False], [True, False], [False, True], [False, False]],
    )

  def test_masks_cover_every_step(self):
    inputs = _inputs(self.IS_TERMINAL)
    for mask in (inputs.should_reset_mask_fwd, inputs.should_reset_mask_bwd):
      self.assertEqual(mask.shape, inputs.actions.shape)
      self.assertEqual(mask.dtype, np.bool_)


if __name__ == '__main__':
  absltest.main()
