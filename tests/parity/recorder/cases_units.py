"""Recipes of the cases that call one piece of the reference directly.

The environments, the helpers of `utils`, the agent's optimiser and the
input transforms. Each takes (ref, spec) and returns the recomputed keys.
"""

import functools

import haiku as hk
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np
import optax

from tests.parity import golden
from tests.parity.recorder import calls
from tests.parity.recorder import spec as spec_lib


def record_jittable_catch(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  config = spec.config
  env = calls.catch(
      ref, config['batch_size'], config['rows'], config['columns']
  )
  env_state, timestep = jax.jit(env.reset)(spec['inputs/reset_rng'])
  out = calls.flat(
      'expected/reset', dict(env_state=env_state, timestep=timestep)
  )
  step = jax.jit(env.step)
  states, timesteps = [], []
  for actions in spec['inputs/actions']:
    env_state, timestep = step(env_state, actions)
    states.append(env_state)
    timesteps.append(timestep)
  out.update(
      calls.flat(
          'expected/steps',
          dict(env_state=calls.stack(states), timestep=calls.stack(timesteps)),
      )
  )
  return out


def record_cpu_catch(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  config = spec.config
  settings = config['env_settings']
  env = ref.catch.CatchEnvironment(
      batch_size=config['batch_size'],
      env_settings=config_dict.ConfigDict(settings),
  )
  # The seeds the batched wrapper draws for its single-stream envs.
  seeds = jax.random.randint(
      jax.random.PRNGKey(settings['random_seed']),
      (config['batch_size'],),
      0,
      np.iinfo(np.int32).max,
  )
  out = {'expected/per_env_seeds': np.asarray(seeds)}
  constructed = env._stack_states()  # pylint: disable=protected-access
  out.update(calls.flat('expected/construct_timestep', constructed))
  out.update(calls.flat('expected/reset_timestep', env.reset(None)[1]))
  steps = [env.step(None, a)[1] for a in spec['inputs/actions']]
  out.update(calls.flat('expected/steps', calls.stack(steps)))
  return out


def record_utils(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """Eagerly, as the goldens were made (see test_utils.py)."""
  utils = ref.utils
  config = spec.config['moving_average']
  names = spec.sub('inputs/ema/values/0')
  ema = utils.MovingAverage(
      {k: jnp.zeros(()) for k in names},
      decay=config['decay'],
      eps=config['eps'],
  )
  state = ema.init_state()
  out = calls.flat('expected/ema/init_state', state)
  for i in range(spec.count('inputs/ema/values')):
    values = spec.sub(f'inputs/ema/values/{i}')
    state = ema.update_state(values, state, pmean_axis_name=None)
    out.update(calls.flat(f'expected/ema/state/{i}', state))
    root_eps = config['root_eps']
    out.update(
        calls.flat(
            f'expected/ema/normalize/{i}',
            ema.normalize(values, state, root_eps=root_eps),
        )
    )
    out.update(
        calls.flat(
            f'expected/ema/normalize_no_mean/{i}',
            ema.normalize(
                values, state, subtract_mean=False, root_eps=root_eps
            ),
        )
    )
  table3 = spec['inputs/batch_lookup/table3']
  index = spec['inputs/batch_lookup/index']
  out.update(
      calls.flat(
          'expected/batch_lookup',
          dict(
              out3=utils.batch_lookup(table3, index),
              out4=utils.batch_lookup(
                  spec['inputs/batch_lookup/table4'], index
              ),
              out_num_dims1=utils.batch_lookup(table3[0], index[0], num_dims=1),
          ),
      )
  )
  logits, actions, adv = (
      spec[f'inputs/pg/{k}'] for k in ('logits', 'actions', 'adv')
  )
  for backprop in (True, False):
    loss_fn = functools.partial(
        utils.differentiable_policy_gradient_loss,
        a_t=actions,
        backprop=backprop,
    )

    def total(lg, ad, f=loss_fn):
      return jnp.sum(f(lg, adv_t=ad))

    grad_logits, grad_adv = jax.grad(total, argnums=(0, 1))(logits, adv)
    out.update(
        calls.flat(
            f'expected/pg/backprop_{str(backprop).lower()}',
            dict(
                loss=loss_fn(logits, adv_t=adv),
                grad_logits=grad_logits,
                grad_adv=grad_adv,
            ),
        )
    )
  elems = [
      dict(
          x=spec[f'inputs/tree_stack/elems/{k}/x'],
          y=[
              spec[f'inputs/tree_stack/elems/{k}/y/{j}']
              for j in range(spec.count(f'inputs/tree_stack/elems/{k}/y'))
          ],
      )
      for k in range(spec.count('inputs/tree_stack/elems'))
  ]
  out.update(
      calls.flat('expected/tree_stack/axis0', utils.tree_stack(elems, axis=0))
  )
  pairs = [dict(x=e['x'], y0=e['y'][0]) for e in elems]
  out.update(
      calls.flat('expected/tree_stack/axis1', utils.tree_stack(pairs, axis=1))
  )
  return out


def record_optimizer(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """Eagerly: 3 updates and the vjp of the last one."""
  config = spec.config
  optimizer = optax.chain(
      ref.optimizers.scale_by_adam_sg_denom(
          b1=config['b1'], b2=config['b2'], eps=config['eps']
      ),
      optax.clip(config['clip_max_delta']),
      optax.scale(-config['learning_rate']),
  )
  params = golden.nest(spec.sub('inputs/params'))
  state = optimizer.init(params)
  out = calls.flat('expected/init_opt_state', state)
  for i in range(config['num_steps']):
    grads = golden.nest(spec.sub(f'inputs/grads/{i}'))
    if i == config['num_steps'] - 1:
      cotangent = golden.nest(spec.sub('inputs/vjp_cotangent'))

      def weighted(g, state=state, params=params, cotangent=cotangent):
        updates, _ = optimizer.update(g, state, params)
        return sum(jax.tree.leaves(jax.tree.map(jnp.vdot, cotangent, updates)))

      out.update(
          calls.flat(
              'expected/vjp_last_update_wrt_grads', jax.grad(weighted)(grads)
          )
      )
    updates, state = optimizer.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    out.update(calls.flat(f'expected/updates/{i}', updates))
    out.update(calls.flat(f'expected/opt_state/{i}', state))
    out.update(calls.flat(f'expected/params/{i}', params))
  return out


def record_input_transforms(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """Eagerly; 'clip' (broken on JAX >= 0.10, MANIFEST 4.2) as intended."""
  transforms = ref.input_transforms.TRANSFORMS
  actions = jnp.asarray(spec['inputs/actions'])
  policy = jnp.asarray(spec['inputs/policy'])
  out = {}
  for name in sorted(set(transforms) - {'normalize'}):
    transform = transforms[name]()
    for key in spec.names(f'expected/{name}'):
      x = jnp.asarray(spec[f'inputs/{key}'])
      if name == 'select_a':
        x = x[: actions.shape[0]]
      try:
        y = transform(x, actions, policy, None)
      except TypeError:
        if name != 'clip':
          raise
        y = jnp.clip(x, -2.0, 2.0)
      out[f'expected/{name}/{key}'] = np.asarray(y)
  normalize = hk.transform_with_state(
      lambda x: transforms['normalize']()(x, None, None, None)
  )
  x1, x2 = spec['inputs/normalize/x1'], spec['inputs/normalize/x2']
  params, state_init = normalize.init(jax.random.PRNGKey(0), x1)
  out1, state1 = normalize.apply(params, state_init, None, x1)
  out2, state2 = normalize.apply(params, state1, None, x2)
  out.update(
      calls.flat(
          'expected/normalize',
          dict(
              state_init=state_init,
              out1=out1,
              state1=state1,
              out2=out2,
              state2=state2,
          ),
      )
  )
  return out
