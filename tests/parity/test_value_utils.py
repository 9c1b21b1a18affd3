"""Parity of `disco.value_fns.value_utils` with the reference's goldens.

Cases `value_utils_categorical_and_losses` (scalar <-> categorical values,
value losses and their gradients), `value_utils_estimators` (V-trace,
Retrace, importance weights) and `value_utils_get_value_outs_{actor_critic,
disco,value_fn}` (`get_value_outs` called as each of its three users calls
it). Tolerance: rtol 1e-5, atol 1e-5 for all five, in both modes (the
reference gives the same bits on AVX2 and AVX-512 machines here, MANIFEST.md
section 3a), per leaf norm-wise in cross-platform mode: on an emulated
platform without FMA single differences such as qv_adv = q - v move by
1e-4 relative (7 times the elementwise tolerance), the leaves by 2e-6.
On a GPU, 1e-4 (`_TOL_ACCELERATOR`): its own float32 elementary functions
move these leaves by up to 1.9e-4 relative (measured on an H100).

These goldens appear to have been computed op by op: eager calls reproduce
them bit for bit, so the calls here are eager. (The inverse signed-hyperbolic transform
loses ~1e-4 absolute near 0 in float32, so jitted and eager results of
`get_value_outs` differ by more than the tolerance there; see
test_value_fn.py, whose golden was jitted.)
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import types
from disco import utils
from disco.value_fns import value_utils
from tests.parity import builders
from tests.parity import golden

_TOL = dict(rtol=1e-5, atol=1e-5)
# On a GPU (measured on an H100 against the AVX-512 set): up to 2.4 times
# `_TOL` (grad_net_out of the scalar non-linear loss, 1.9e-4 relative; the
# get_value_outs leaves 1.4e-5), from its own float32 sqrt, exp and
# division; see the module docstring.
_TOL_ACCELERATOR = dict(rtol=1e-4, atol=1e-4)


def _tol(case: golden.Case) -> dict[str, float]:
  return case.pick(native=_TOL, cross=_TOL, accelerator=_TOL_ACCELERATOR)


# Loss configurations of `value_utils_categorical_and_losses`, by key tag
# (the case's recipe; its JSON config holds only sizes and the seed).
_LOSS_CONFIGS = {
    'disco_q': dict(
        nonlinear_transform=True, categorical_value=True, max_abs_value=300.0
    ),
    'categorical_linear': dict(
        nonlinear_transform=False, categorical_value=True, max_abs_value=300.0
    ),
    'scalar_default': dict(),
    'scalar_nonlinear': dict(nonlinear_transform=True),
}
# Range of the bins of the same case, by tag (the number of bins is read
# from the arrays).
_MAX_ABS_VALUE = {'b601': 300.0, 'b11': 5.0}


@pytest.fixture
def categorical_case():
  return golden.Case('value_utils_categorical_and_losses')


def test_categorical_tags_are_known(categorical_case):
  tags = {k.split('/')[0] for k in categorical_case.subtree('expected')}
  assert tags == set(_MAX_ABS_VALUE) | {f'loss_{t}' for t in _LOSS_CONFIGS}


@pytest.mark.parametrize('tag', sorted(_MAX_ABS_VALUE))
def test_categorical_conversions(categorical_case, tag):
  case = categorical_case
  max_abs_value = _MAX_ABS_VALUE[tag]
  num_bins = case[f'inputs/{tag}/logits'].shape[-1]
  got = dict(
      value_logits_to_scalar=value_utils.value_logits_to_scalar(
          case[f'inputs/{tag}/logits'], max_abs_value
      ),
      scalar_to_categorical_value=value_utils.scalar_to_categorical_value(
          num_bins, case[f'inputs/{tag}/scalars'], max_abs_value
      ),
  )
  golden.assert_close(
      golden.flatten(got),
      case.subtree(f'expected/{tag}'),
      **_tol(case),
      case=case,
      label=tag,
  )


@pytest.mark.parametrize('tag', sorted(_LOSS_CONFIGS))
def test_value_losses(categorical_case, tag):
  case = categorical_case
  kwargs = _LOSS_CONFIGS[tag]
  net_out = case[f'inputs/loss_{tag}/net_out']
  td = case['inputs/td']

  def loss_from_td(net_out):
    return value_utils.value_loss_from_td(net_out, td, **kwargs)

  got = dict(
      value_loss_from_td=loss_from_td(net_out),
      grad_net_out=jax.grad(lambda x: jnp.sum(loss_from_td(x)))(net_out),
      value_loss_from_target=value_utils.value_loss_from_target(
          net_out, case[f'inputs/loss_{tag}/value_target'], **kwargs
      ),
  )
  golden.assert_close(
      golden.flatten(got),
      case.subtree(f'expected/loss_{tag}'),
      **_tol(case),
      case=case,
      label=f'loss_{tag}',
  )


def test_estimators():
  case = golden.Case('value_utils_estimators')
  config = case.config
  args = [
      case[f'inputs/{k}']
      for k in (
          'rewards',
          'actions',
          'env_discounts',
          'rho',
          'values',
          'target_values',
      )
  ]
  got = dict(
      estimate_values=value_utils.estimate_values(
          *args, discount=config['discount'], lambda_=config['lambda_']
      ),
      estimate_q_values=value_utils.estimate_q_values(
          *args,
          case['inputs/q_values'],
          case['inputs/target_q_values'],
          discount=config['discount'],
          lambda_=config['lambda_'],
      ),
      importance_weight=value_utils.importance_weight(
          case['inputs/pi_logits'],
          case['inputs/mu_logits'],
          case['inputs/actions'],
      ),
  )
  golden.assert_close(
      golden.flatten(got),
      case.subtree('expected'),
      **_tol(case),
      case=case,
      label='estimators',
  )


def _update_rule_inputs(case):
  flat = case.subtree('inputs/rollout')
  actions = flat['actions']
  return types.UpdateRuleInputs(
      # Not read by get_value_outs.
      observations=np.zeros(actions.shape, np.float32),
      actions=actions,
      rewards=flat['rewards'],
      is_terminal=flat['is_terminal'],
      agent_out={'logits': case['inputs/pi_logits']},
      behaviour_agent_out={'logits': flat['behaviour_agent_out/logits']},
  )


def _actor_rollout(case):
  flat = case.subtree('inputs/rollout')
  return builders.actor_rollout(
      dict(
          flat,
          # Not read by get_value_outs.
          observations=np.zeros(flat['actions'].shape, np.float32),
      )
  )


# case -> (rollout builder, network-output keyword arguments).
_GET_VALUE_OUTS = {
    'value_utils_get_value_outs_actor_critic': (
        _update_rule_inputs,
        dict(value_net_out='value_net_out'),
    ),
    'value_utils_get_value_outs_disco': (
        _update_rule_inputs,
        dict(q_net_out='q_net_out', target_q_net_out='target_q_net_out'),
    ),
    'value_utils_get_value_outs_value_fn': (
        _actor_rollout,
        dict(value_net_out='value_net_out'),
    ),
}


@pytest.mark.parametrize('name', sorted(_GET_VALUE_OUTS))
def test_get_value_outs(name):
  case = golden.Case(name)
  config = case.config
  make_rollout, net_outs = _GET_VALUE_OUTS[name]
  ema = utils.MovingAverage(
      jnp.zeros(()), decay=config['ema_decay'], eps=config['ema_eps']
  )
  net_kwargs = dict(
      value_net_out=None,
      q_net_out=None,
      target_value_net_out=None,
      target_q_net_out=None,
  )
  net_kwargs.update({k: case[f'inputs/{v}'] for k, v in net_outs.items()})
  value_outs, adv_ema_state, td_ema_state = value_utils.get_value_outs(
      **net_kwargs,
      rollout=make_rollout(case),
      pi_logits=case['inputs/pi_logits'],
      discount=config['discount'],
      lambda_=config['lambda_'],
      nonlinear_transform=config['nonlinear_transform'],
      categorical_value=config['categorical_value'],
      max_abs_value=config.get('max_abs_value'),
      drop_last=config['drop_last'],
      adv_ema_state=builders.ema_state(case.subtree('inputs/adv_ema_state')),
      adv_ema_fn=ema,
      td_ema_state=builders.ema_state(case.subtree('inputs/td_ema_state')),
      td_ema_fn=ema,
      axis_name=None,
  )
  got = dict(
      value_outs=value_outs,
      adv_ema_state=adv_ema_state,
      td_ema_state=td_ema_state,
  )
  golden.assert_close(
      golden.flatten(got),
      case.subtree('expected'),
      **_tol(case),
      case=case,
      label='get_value_outs',
  )
