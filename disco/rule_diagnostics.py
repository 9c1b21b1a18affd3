"""What a learned rule was given and what it asked for, as scalar logs.

Disco103's targets come from its meta-network, which reads rewards, q
values and advantages through a signed log (`rlax.signed_logp1`). A run
whose policy stays uniform shows why in these columns: the size of what
the meta-network read (near 0 when the rewards are small next to 1), and
how far its targets are from the agent's outputs. The entropy of pi-hat and
KL(pi-hat || pi) are the rule's own logs (`pi_hat_entropy`, `pi_loss`).
Columns: `docs/logging.md`.
"""

from collections.abc import Mapping
from typing import Any

import chex
import distrax
import jax
import jax.numpy as jnp
import rlax

# The learner's logs gain these, under the rule's `meta_out`.
TARGET_LOGS = ('y_hat_entropy', 'z_hat_entropy')
INPUT_LOGS = (
    'meta_input/reward',
    'meta_input/q',
    'meta_input/adv',
    'meta_input/qv_adv',
    'meta_input/nonzero_reward',
)
# `meta_out` keys a rule must give for the logs above (Disco103's do).
_NEEDS = ('pi', 'y', 'z', 'q_value', 'adv', 'qv_adv')


def _entropy(logits: chex.Array) -> chex.Array:
  return jnp.mean(distrax.Softmax(logits).entropy())


def _mean_abs_sign_log(x: chex.Array) -> chex.Array:
  return jnp.mean(jnp.abs(rlax.signed_logp1(x)))


def rule_logs(
    meta_out: Mapping[str, Any] | None, rewards: chex.Array
) -> dict[str, jax.Array]:
  """The rule's target entropies and the scale of its meta-network's inputs.

  Args:
    meta_out: the rule's outputs for a learner batch (`Agent.learner_step`
      logs them as 'meta_out'): pi [T, B, A], y and z [T, B, Y] logits,
      q_value and qv_adv [T+1, B, A], adv [T, B].
    rewards: [T+1, B] the batch's rewards as the rule read them (index t+1
      is the reward of transition t).

  Returns:
    `TARGET_LOGS` (the entropies of y-hat and z-hat) and `INPUT_LOGS` (the
    mean absolute signed log of the rewards, q values and advantages; the
    fraction of non-zero rewards), or {} for a rule without those outputs (actor-critic,
    policy gradient).
  """
  if meta_out is None or not all(key in meta_out for key in _NEEDS):
    return {}
  chex.assert_rank(rewards, 2)
  rewards = rewards[1:]  # [T, B]
  return {
      'y_hat_entropy': _entropy(meta_out['y']),
      'z_hat_entropy': _entropy(meta_out['z']),
      'meta_input/reward': _mean_abs_sign_log(rewards),
      'meta_input/q': _mean_abs_sign_log(meta_out['q_value']),
      'meta_input/adv': _mean_abs_sign_log(meta_out['adv']),
      'meta_input/qv_adv': _mean_abs_sign_log(meta_out['qv_adv']),
      'meta_input/nonzero_reward': jnp.mean((rewards != 0).astype(jnp.float32)),
  }
