"""Parity of the meta-training value function (case `value_function`).

`ValueFunction` with the meta-train colab's config and a small dense torso:
initial state, `get_value_outs` on a rollout, then two `update`s (each also
started from the golden state before it, to localise errors). Tolerance:
rtol 1e-5, atol 1e-6.

Cross-platform mode: norm-wise per leaf, rtol 1e-3 with a root-mean-square
floor of 1e-4. The reference's spread across the two CPU kinds is only 3e-8
(MANIFEST.md section 3a), but the values carry an absolute rounding error
of their own, for the reason below (about float32's epsilon / 2e-3, 3e-5):
a platform that rounds differently moves them by 1.8e-5 (RMS; 1.7e-3
relative on values of 1e-2, measured on an emulated platform without FMA).
The bugs that reach the value function move its outputs by 0.3 and more.

This golden was made under `jit` and is reproduced bit for bit that way.
Eagerly, the values (~5e-3 here) differ by up to ~3e-5 (the normalised ones
by up to ~1e-4): the inverse signed-hyperbolic transform,
((sqrt(1 + 4e-3 (|x| + 1.001)) - 1) / 2e-3)^2 - 1, cancels catastrophically
near 0 in float32, and XLA's fused code rounds differently from op-by-op
execution.
"""

import jax
import jax.numpy as jnp
import pytest

from disco import types
from disco.value_fns import value_fn
from tests.parity import builders
from tests.parity import golden

_NAME = 'value_function'
_TOL = dict(rtol=1e-5, atol=1e-6)
_TOL_CROSS = dict(rtol=1e-3, atol=1e-4)


@pytest.fixture
def case():
  return golden.Case(_NAME)


@pytest.fixture
def value_function(case):
  config = builders.tuplify(case.config['value_fn_config'])
  return value_fn.ValueFunction(types.ValueFnConfig(**config), axis_name=None)


@pytest.fixture
def initial_state(case, value_function):
  return value_function.initial_state(
      jnp.asarray(case['inputs/init_rng']),
      case.subtree('inputs/dummy_observation'),
  )


def _check(case, got, prefix, label=''):
  golden.assert_close(
      golden.flatten(got),
      case.subtree(prefix),
      **case.pick(native=_TOL, cross=_TOL_CROSS),
      case=case,
      label=f'{prefix}{label}',
  )


def test_initial_state(case, initial_state):
  _check(case, initial_state, 'expected/initial_state')


def test_get_value_outs(case, value_function, initial_state):
  value_outs, net_out, adv_ema_state, td_ema_state = jax.jit(
      value_function.get_value_outs
  )(
      initial_state,
      builders.actor_rollout(case.subtree('inputs/rollouts/0')),
      case['inputs/target_logits/0'],
  )
  _check(
      case,
      dict(
          value_outs=value_outs,
          net_out=net_out,
          adv_ema_state=adv_ema_state,
          td_ema_state=td_ema_state,
      ),
      'expected/get_value_outs',
  )


def test_updates(case, value_function, initial_state):
  update = jax.jit(value_function.update)
  state = initial_state
  for i in range(case.count('inputs/rollouts')):
    rollout = builders.actor_rollout(case.subtree(f'inputs/rollouts/{i}'))
    target_logits = case[f'inputs/target_logits/{i}']
    prefix = f'expected/updates/{i}'
    if i > 0:
      # From the golden state before this update.
      previous = builders.like(
          initial_state, case.subtree(f'expected/updates/{i - 1}/value_state')
      )
      new_state, value_outs, log = update(previous, rollout, target_logits)
      _check(
          case,
          dict(value_state=new_state, value_outs=value_outs, log=log),
          prefix,
          ' (from the golden state)',
      )
    # Chained from our own states.
    state, value_outs, log = update(state, rollout, target_logits)
    _check(
        case,
        dict(value_state=state, value_outs=value_outs, log=log),
        prefix,
        ' (chained)',
    )
