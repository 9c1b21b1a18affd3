"""Parity of the meta-network input transforms (case `input_transforms`).

Every entry of `input_transforms.TRANSFORMS`, called as
`TRANSFORMS[name]()(x, actions, policy, None)` on the inputs named by the
keys of `expected/<name>/`, and the Haiku state of the 'normalize' transform
over two calls. Tolerance: rtol 1e-6, atol 1e-6 in both modes (the
reference's spread across machines is at most 1.3e-7, MANIFEST.md 3a), per
leaf norm-wise in cross-platform mode.

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


@pytest.fixture
def case():
  return golden.Case(_NAME)


def test_every_transform_is_covered(case):
  assert sorted(input_transforms.TRANSFORMS) == case.config['transforms']
  for name in input_transforms.TRANSFORMS:
    assert case.subtree(f'expected/{name}'), name


@pytest.mark.parametrize(
    'name', sorted(set(input_transforms.TRANSFORMS) - {'normalize'})
)
def test_transform(case, name):
  actions = jnp.asarray(case['inputs/actions'])
  policy = jnp.asarray(case['inputs/policy'])
  expected = case.subtree(f'expected/{name}')
  transform = input_transforms.TRANSFORMS[name]()
  got = {}
  for key in expected:  # The input each output was computed from.
    x = case[f'inputs/{key}']
    if name == 'select_a':
      # select_a reads one entry per transition (e.g. x3 without its last
      # step): as many steps as there are actions.
      x = x[: actions.shape[0]]
    got[key] = transform(jnp.asarray(x), actions, policy, None)
  golden.assert_close(
      golden.flatten(got), expected, **_TOL, case=case, label=name
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
      case=case,
      label='normalize',
  )
