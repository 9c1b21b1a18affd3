"""Parity of the policy-gradient rule (case `policy_gradient_rule`).

The rule is called directly with a `value_out` (the reference's `Agent`
never passes one): unroll_meta_net, agent_loss (and its gradient with
respect to the logits) and agent_loss_no_meta, for two constructor
settings. Tolerance: rtol 1e-6, atol 1e-6 in both modes (the reference gives
the same bits on AVX2 and AVX-512 machines here, MANIFEST.md section 3a), per
leaf norm-wise in cross-platform mode.

Eager calls reproduce these goldens bit for bit.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import types
from disco.update_rules import policy_gradient
from tests.parity import golden

_NAME = 'policy_gradient_rule'
_TOL = dict(rtol=1e-6, atol=1e-6)


@pytest.fixture
def case():
  return golden.Case(_NAME)


@pytest.mark.parametrize(
    'setting', ['normalize_adv_true', 'normalize_adv_false']
)
def test_policy_gradient_rule(case, setting):
  rule = policy_gradient.PolicyGradientUpdate(**case.config[setting])
  flat = case.subtree('inputs/rollout')
  logits = flat['agent_out/logits']

  def rollout_with(logits):
    return types.UpdateRuleInputs(
        # Not read by the rule.
        observations=np.zeros(flat['actions'].shape, np.float32),
        actions=flat['actions'],
        rewards=flat['rewards'],
        is_terminal=flat['is_terminal'],
        agent_out={'logits': logits},
        value_out=types.ValueOuts(
            adv=flat['value_out/adv'],
            normalized_adv=flat['value_out/normalized_adv'],
        ),
    )

  rollout = rollout_with(logits)
  meta_out, meta_state = rule.unroll_meta_net(
      meta_params={'dummy': 0.0},
      params={},
      state={},
      meta_state={},
      rollout=rollout,
      hyper_params={},
      unroll_policy_fn=None,
      rng=jax.random.PRNGKey(0),
      axis_name=None,
  )
  assert meta_state == {}
  loss, log = rule.agent_loss(rollout, meta_out, {}, backprop=False)
  loss_no_meta, log_no_meta = rule.agent_loss_no_meta(rollout, meta_out, {})
  assert log_no_meta == {}

  def total_loss(logits):
    per_step, _ = rule.agent_loss(
        rollout_with(logits), meta_out, {}, backprop=False
    )
    return jnp.sum(per_step)

  got = dict(
      meta_out=meta_out,
      loss_per_step=loss,
      log=log,
      loss_no_meta=loss_no_meta,
      grad_logits=jax.grad(total_loss)(logits),
  )
  golden.assert_close(
      golden.flatten(got),
      case.subtree(f'expected/{setting}'),
      **_TOL,
      case=case,
      label=setting,
  )


def test_output_specs_and_state():
  """The case's notes: logits only, no meta-parameters, no state."""
  rule = policy_gradient.PolicyGradientUpdate()
  action_spec = types.specs.BoundedArray((), np.int32, 0, 2)
  # The rule declares no value head: the flat outputs are the logits only.
  assert list(rule.flat_output_spec(action_spec)) == ['logits']
  assert rule.flat_output_spec(action_spec)['logits'].shape == (3,)
  assert not rule.model_output_spec(action_spec)
  assert rule.init_meta_state(jax.random.PRNGKey(0), params={}) == {}
  params, state = rule.init_params(jax.random.PRNGKey(0))
  assert list(params) == ['dummy'] and float(params['dummy']) == 0.0
  assert state == {}
