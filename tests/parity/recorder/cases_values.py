"""Recipes of the value and policy-gradient cases.

Value utilities (categorical conversions and losses, estimators,
`get_value_outs`), the policy-gradient rule and the value function. Each
takes (ref, spec) and returns the recomputed keys.
"""

import jax
import jax.numpy as jnp
import numpy as np

from tests.parity.recorder import calls
from tests.parity.recorder import spec as spec_lib

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
_MAX_ABS_VALUE = {'b601': 300.0, 'b11': 5.0}


def record_value_losses(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """Eagerly: categorical conversions, value losses and their gradients."""
  vu = ref.value_utils
  out = {}
  for tag, max_abs in _MAX_ABS_VALUE.items():
    logits = spec[f'inputs/{tag}/logits']
    out[f'expected/{tag}/value_logits_to_scalar'] = np.asarray(
        vu.value_logits_to_scalar(logits, max_abs)
    )
    out[f'expected/{tag}/scalar_to_categorical_value'] = np.asarray(
        vu.scalar_to_categorical_value(
            logits.shape[-1], spec[f'inputs/{tag}/scalars'], max_abs
        )
    )
  td = spec['inputs/td']
  for tag, kwargs in _LOSS_CONFIGS.items():
    net_out = spec[f'inputs/loss_{tag}/net_out']

    def loss(x, kw=kwargs):
      return vu.value_loss_from_td(x, td, **kw)

    out.update(
        calls.flat(
            f'expected/loss_{tag}',
            dict(
                value_loss_from_td=loss(net_out),
                grad_net_out=jax.grad(lambda x, f=loss: jnp.sum(f(x)))(net_out),
                value_loss_from_target=vu.value_loss_from_target(
                    net_out, spec[f'inputs/loss_{tag}/value_target'], **kwargs
                ),
            ),
        )
    )
  return out


def record_estimators(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  vu = ref.value_utils
  config = spec.config
  args = [
      spec[f'inputs/{k}']
      for k in ('rewards', 'actions', 'env_discounts', 'rho', 'values')
  ] + [spec['inputs/target_values']]
  got = dict(
      estimate_values=vu.estimate_values(
          *args, discount=config['discount'], lambda_=config['lambda_']
      ),
      estimate_q_values=vu.estimate_q_values(
          *args,
          spec['inputs/q_values'],
          spec['inputs/target_q_values'],
          discount=config['discount'],
          lambda_=config['lambda_'],
      ),
      importance_weight=vu.importance_weight(
          spec['inputs/pi_logits'],
          spec['inputs/mu_logits'],
          spec['inputs/actions'],
      ),
  )
  return calls.flat('expected', got)


# get_value_outs's network outputs, each an input where a case stores it.
_NET_OUTS = (
    'value_net_out',
    'q_net_out',
    'target_value_net_out',
    'target_q_net_out',
)


def record_get_value_outs(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """Eagerly, with the rollout type each user of get_value_outs passes."""
  config = spec.config
  rollout = spec.sub('inputs/rollout')
  zeros = np.zeros(rollout['actions'].shape, np.float32)
  if 'is_terminal' in rollout:
    rollout = ref.types.UpdateRuleInputs(
        observations=zeros,
        actions=rollout['actions'],
        rewards=rollout['rewards'],
        is_terminal=rollout['is_terminal'],
        agent_out={'logits': spec['inputs/pi_logits']},
        behaviour_agent_out=calls.subtree(rollout, 'behaviour_agent_out'),
    )
  else:
    rollout = calls.actor_rollout(ref, dict(rollout, observations=zeros))
  ema = ref.utils.MovingAverage(
      jnp.zeros(()), decay=config['ema_decay'], eps=config['ema_eps']
  )
  # The network outputs the case stores are those its caller passes; the
  # others are None (e.g. no value_net_out where Q-values are given).
  nets = {k: spec.arrays.get(f'inputs/{k}') for k in _NET_OUTS}
  value_outs, adv_ema, td_ema = ref.value_utils.get_value_outs(
      **nets,
      rollout=rollout,
      pi_logits=spec['inputs/pi_logits'],
      discount=config['discount'],
      lambda_=config['lambda_'],
      nonlinear_transform=config['nonlinear_transform'],
      categorical_value=config['categorical_value'],
      max_abs_value=config.get('max_abs_value'),
      drop_last=config['drop_last'],
      adv_ema_state=calls.ema_state(ref, spec.sub('inputs/adv_ema_state')),
      adv_ema_fn=ema,
      td_ema_state=calls.ema_state(ref, spec.sub('inputs/td_ema_state')),
      td_ema_fn=ema,
      axis_name=None,
  )
  return calls.flat(
      'expected',
      dict(value_outs=value_outs, adv_ema_state=adv_ema, td_ema_state=td_ema),
  )


def record_policy_gradient(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """Eagerly, the rule called directly with a value_out (MANIFEST 4.1)."""
  types = ref.types
  rollout_flat = spec.sub('inputs/rollout')
  out = {}
  for setting in ('normalize_adv_true', 'normalize_adv_false'):
    rule = ref.policy_gradient.PolicyGradientUpdate(**spec.config[setting])

    def rollout_with(logits, f=rollout_flat):
      return types.UpdateRuleInputs(
          observations=np.zeros(f['actions'].shape, np.float32),
          actions=f['actions'],
          rewards=f['rewards'],
          is_terminal=f['is_terminal'],
          agent_out={'logits': logits},
          value_out=types.ValueOuts(
              adv=f['value_out/adv'],
              normalized_adv=f['value_out/normalized_adv'],
          ),
      )

    logits = rollout_flat['agent_out/logits']
    rollout = rollout_with(logits)
    meta_out, _ = rule.unroll_meta_net(
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
    loss, log = rule.agent_loss(rollout, meta_out, {}, backprop=False)
    loss_no_meta, _ = rule.agent_loss_no_meta(rollout, meta_out, {})

    def total(lg, rule=rule, meta_out=meta_out, rollout_with=rollout_with):
      per_step, _ = rule.agent_loss(
          rollout_with(lg), meta_out, {}, backprop=False
      )
      return jnp.sum(per_step)

    out.update(
        calls.flat(
            f'expected/{setting}',
            dict(
                meta_out=meta_out,
                loss_per_step=loss,
                log=log,
                loss_no_meta=loss_no_meta,
                grad_logits=jax.grad(total)(logits),
            ),
        )
    )
  return out


def record_value_function(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """Initial state, then get_value_outs and two updates under `jit`."""
  config = calls.tuplify(spec.config['value_fn_config'])
  vf = ref.value_fn.ValueFunction(
      ref.types.ValueFnConfig(**config), axis_name=None
  )
  state = vf.initial_state(
      spec['inputs/init_rng'], spec.sub('inputs/dummy_observation')
  )
  out = calls.flat('expected/initial_state', state)
  value_outs, net_out, adv_ema, td_ema = jax.jit(vf.get_value_outs)(
      state,
      calls.actor_rollout(ref, spec.sub('inputs/rollouts/0')),
      spec['inputs/target_logits/0'],
  )
  out.update(
      calls.flat(
          'expected/get_value_outs',
          dict(
              value_outs=value_outs,
              net_out=net_out,
              adv_ema_state=adv_ema,
              td_ema_state=td_ema,
          ),
      )
  )
  update = jax.jit(vf.update)
  for i in range(spec.count('inputs/rollouts')):
    state, value_outs, log = update(
        state,
        calls.actor_rollout(ref, spec.sub(f'inputs/rollouts/{i}')),
        spec[f'inputs/target_logits/{i}'],
    )
    out.update(
        calls.flat(
            f'expected/updates/{i}',
            dict(value_state=state, value_outs=value_outs, log=log),
        )
    )
  return out
