"""Parity of the agent optimizer with the reference's goldens.

Cases `optimizer_adam_sg_clip0p5` and `optimizer_adam_sg_clip1p0`:
`optax.chain(scale_by_adam_sg_denom(), clip(c), scale(-lr))` for 3 steps,
plus the vector-Jacobian product of the last update with respect to its
gradient (which sees Adam's denominator as a constant). Tolerance: rtol
1e-6, atol 1e-7 in both modes (the reference gives the same bits on AVX2 and
AVX-512 machines here, MANIFEST.md section 3a), per leaf norm-wise in
cross-platform mode.

Eager calls reproduce these goldens bit for bit.
"""

import jax
import jax.numpy as jnp
import optax
import pytest

from disco import optimizers
from tests.parity import golden

_TOL = dict(rtol=1e-6, atol=1e-7)


def _tree(case, prefix):
  """A parameter-shaped tree of the case, e.g. {'layer': {'b', 'w'}, ...}."""
  return golden.nest(case.subtree(prefix))


@pytest.mark.parametrize(
    'name', ['optimizer_adam_sg_clip0p5', 'optimizer_adam_sg_clip1p0']
)
def test_adam_sg_denom_chain(name):
  case = golden.Case(name)
  config = case.config

  def check(got, prefix):
    golden.assert_close(
        golden.flatten(got),
        case.subtree(prefix),
        **_TOL,
        case=case,
        label=prefix,
    )

  optimizer = optax.chain(
      optimizers.scale_by_adam_sg_denom(
          b1=config['b1'], b2=config['b2'], eps=config['eps']
      ),
      optax.clip(config['clip_max_delta']),
      optax.scale(-config['learning_rate']),
  )
  # The reference's agent optimizer is this chain with default Adam betas.
  assert (config['b1'], config['b2'], config['eps']) == (0.9, 0.999, 1e-8)
  params = _tree(case, 'inputs/params')
  state = optimizer.init(params)
  check(state, 'expected/init_opt_state')

  num_steps = config['num_steps']
  for i in range(num_steps):
    grads = _tree(case, f'inputs/grads/{i}')
    if i == num_steps - 1:
      cotangent = _tree(case, 'inputs/vjp_cotangent')

      def weighted_update(g, state=state, params=params, cotangent=cotangent):
        updates, _ = optimizer.update(g, state, params)
        products = jax.tree.map(jnp.vdot, cotangent, updates)
        return sum(jax.tree.leaves(products))

      check(
          jax.grad(weighted_update)(grads),
          'expected/vjp_last_update_wrt_grads',
      )
    updates, state = optimizer.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    check(updates, f'expected/updates/{i}')
    check(state, f'expected/opt_state/{i}')
    check(params, f'expected/params/{i}')


@pytest.mark.parametrize(
    'name', ['optimizer_adam_sg_clip0p5', 'optimizer_adam_sg_clip1p0']
)
def test_get_agent_optimizer_is_the_chain(name):
  case = golden.Case(name)
  config = case.config
  optimizer = optimizers.get_agent_optimizer(
      learning_rate=config['learning_rate'],
      max_abs_update=config['clip_max_delta'],
  )
  params = _tree(case, 'inputs/params')
  grads = _tree(case, 'inputs/grads/0')
  updates, state = optimizer.update(grads, optimizer.init(params), params)
  golden.assert_close(
      golden.flatten((updates, state)),
      {
          **{
              f'0/{k}': v for k, v in case.subtree('expected/updates/0').items()
          },
          **{
              f'1/{k}': v
              for k, v in case.subtree('expected/opt_state/0').items()
          },
      },
      **_TOL,
      case=case,
      label='get_agent_optimizer step 0',
  )
