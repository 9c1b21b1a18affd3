"""Parity of the meta-network input transforms (case `input_transforms`).

Every entry of `input_transforms.TRANSFORMS`, called as
`TRANSFORMS[name]()(x, actions, policy, None)`, and the Haiku state of the
'normalize' transform over two calls. Tolerance: rtol 1e-6, atol 1e-6.

Eager calls reproduce these goldens bit for bit.
"""

import haiku as hk
import jax
import jax.numpy as jnp
import pytest

from disco.update_rules import input_transforms
from tests.parity import golden

_NAME = 'input_transforms'
_TOL = dict(rtol=1e-6, atol=1e-6)

# transform -> the golden inputs it is applied to (keys of `expected/<name>`).
_APPLIED_TO = {
    'identity': ('x3',),
    'softmax': ('x3',),
    'stop_grad': ('x3',),
    'clip': ('x3',),
    'sign': ('x3',),
    'sign_log': ('x3',),
    'sign_hyp': ('x3',),
    'drop_last': ('x3',),
    'td_pair': ('x3',),
    'masks_to_discounts': ('x3', 'mask'),
    'max_a': ('x4',),
    'select_a': ('x4', 'x3'),
    'pi_weighted_avg': ('x4',),
}


@pytest.fixture(scope='module')
def case():
  return golden.Case(_NAME)


def test_every_transform_is_covered(case):
  assert sorted(input_transforms.TRANSFORMS) == case.config['transforms']
  assert set(_APPLIED_TO) | {'normalize'} == set(input_transforms.TRANSFORMS)


@pytest.mark.parametrize('name', sorted(_APPLIED_TO))
def test_transform(case, name):
  actions = jnp.asarray(case['inputs/actions'])
  policy = jnp.asarray(case['inputs/policy'])
  inputs = dict(
      x3=case['inputs/x3'],
      x4=case['inputs/x4'],
      mask=case['inputs/mask'],
  )
  if name == 'select_a':
    # select_a reads one entry per transition: x3 without its last step.
    inputs['x3'] = inputs['x3'][:-1]
  transform = input_transforms.TRANSFORMS[name]()
  got = {
      key: transform(jnp.asarray(inputs[key]), actions, policy, None)
      for key in _APPLIED_TO[name]
  }
  golden.assert_close(
      golden.flatten(got),
      case.subtree(f'expected/{name}'),
      **_TOL,
      case=_NAME,
      label=name,
  )


def test_normalize(case):
  normalize = hk.transform_with_state(
      lambda x: input_transforms.TRANSFORMS['normalize']()(x, None, None, None)
  )
  x1 = case['inputs/normalize/x1']
  x2 = case['inputs/normalize/x2']
  params, state_init = normalize.init(jax.random.PRNGKey(0), x1)
  assert not params
  out1, state1 = normalize.apply(params, state_init, None, x1)
  out2, state2 = normalize.apply(params, state1, None, x2)
  got = dict(
      state_init=state_init,
      out1=out1,
      state1=state1,
      out2=out2,
      state2=state2,
  )
  golden.assert_close(
      golden.flatten(got),
      case.subtree('expected/normalize'),
      **_TOL,
      case=_NAME,
      label='normalize',
  )
