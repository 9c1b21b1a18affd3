"""The meta-network's inputs: shared transforms, `drop_last` moved later.

Disco103's values against the reference are the parity suite's
(tests/parity/test_disco_rule.py, test_meta_gradient.py); these tests hold
the reordering's rule and that a stateful transform is never shared.
"""

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import types
from disco.networks import meta_nets


@pytest.mark.parametrize(
    'transforms, expected',
    [
        (
            ('drop_last', 'softmax', 'z_net', 'select_a'),
            ('softmax', 'z_net', 'drop_last', 'select_a'),
        ),
        (
            ('drop_last', 'softmax', 'stop_grad'),
            ('softmax', 'stop_grad', 'drop_last'),
        ),
        # Not past what reads other steps or has a state of its own.
        (('drop_last', 'td_pair'), ('drop_last', 'td_pair')),
        (
            ('sign_log', 'drop_last', 'normalize', 'softmax'),
            ('sign_log', 'drop_last', 'normalize', 'softmax'),
        ),
        (
            ('drop_last', 'select_a', 'softmax'),
            ('drop_last', 'select_a', 'softmax'),
        ),
    ],
)
def test_drop_last_moves_past_per_step_transforms_only(transforms, expected):
  assert meta_nets._drop_last_later(transforms) == expected  # pylint: disable=protected-access


def _inputs(t=4, b=3, a=5, y=7):
  keys = iter(jax.random.split(jax.random.PRNGKey(0), 8))
  agent_out = dict(
      logits=jax.random.normal(next(keys), (t + 1, b, a)),
      y=jax.random.normal(next(keys), (t + 1, b, y)),
      z=jax.random.normal(next(keys), (t + 1, b, a, y)),
  )
  return types.UpdateRuleInputs(
      observations=jnp.zeros((t + 1, b, 1)),
      actions=jax.random.randint(next(keys), (t + 1, b), 0, a),
      rewards=jax.random.normal(next(keys), (t, b)),
      is_terminal=jnp.zeros((t, b), bool),
      behaviour_agent_out=agent_out,
      agent_out=agent_out,
  )


def _construct(option):
  def fn(inputs):
    return meta_nets._construct_input(  # pylint: disable=protected-access
        inputs,
        option,
        y_net=hk.BatchApply(hk.nets.MLP((4, 1)), num_dims=2),
        z_net=hk.BatchApply(hk.nets.MLP((4, 1)), num_dims=3),
        policy_net=lambda x: x,
    )[0]

  return hk.transform_with_state(fn)


def _entry(source, *transforms):
  return types.TransformConfig(source=source, transforms=transforms)


def test_each_stateful_transform_keeps_its_own_state():
  # Two readings with the same source and transforms before `normalize`
  # share those, but each `normalize` is a module with its own averages.
  option = types.MetaNetInputOption(
      base=(
          _entry('agent_out/z', 'drop_last', 'softmax', 'normalize', 'max_a'),
          _entry('agent_out/z', 'drop_last', 'softmax', 'normalize', 'max_a'),
      ),
      action_conditional=(),
  )
  inputs = _inputs()
  net = _construct(option)
  params, state = net.init(jax.random.PRNGKey(1), inputs)
  del params
  assert len(state) == 2 * 2, sorted(state)  # Two EMAs per normalize.


def test_shared_readings_give_each_reading_its_values():
  # z read at all steps and without the last one, through the same z_net:
  # the [T] reading is the [T+1] one's first T steps, the taken action's
  # entry is that of the per-action reading.
  option = types.MetaNetInputOption(
      base=(
          _entry('agent_out/z', 'softmax', 'z_net', 'max_a', 'td_pair'),
          _entry('agent_out/z', 'drop_last', 'softmax', 'z_net', 'select_a'),
      ),
      action_conditional=(),
  )
  inputs = _inputs()
  net = _construct(option)
  params, state = net.init(jax.random.PRNGKey(1), inputs)
  features, _ = net.apply(params, state, None, inputs)

  def z_net(x):
    return hk.BatchApply(hk.nets.MLP((4, 1)), num_dims=3)(x)

  embed = hk.transform(z_net)
  z_params = {k.replace('mlp_1', 'mlp'): v for k, v in params.items()}
  embedded = embed.apply(
      {k: v for k, v in z_params.items() if k.startswith('mlp/')},
      None,
      jax.nn.softmax(inputs.agent_out['z']),
  )[
      ..., 0
  ]  # [T+1, B, A]
  t = inputs.rewards.shape[0]
  best = embedded.max(axis=2)
  np.testing.assert_allclose(features[..., 0], best[:-1], rtol=1e-6)
  np.testing.assert_allclose(features[..., 1], best[1:], rtol=1e-6)
  taken = jnp.take_along_axis(
      embedded[:t], inputs.actions[:t, :, None], axis=2
  )[..., 0]
  np.testing.assert_allclose(features[..., 2], taken, rtol=1e-6)
