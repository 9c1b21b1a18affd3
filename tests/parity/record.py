"""Records a golden set by running the reference on this machine.

    python -m tests.parity.record --reference ../disco_rl --out DIR

For every case of a spec (`--spec`) this runs the reference implementation
(google-deepmind/disco_rl, the checkout at `--reference`) as the case's
recipe says, and writes `DIR/<case>.npz` (flat keys), `DIR/<case>.json`
(the sidecar, its `versions` those that ran here) and `DIR/PLATFORM.json`
(this machine, as `platforms.py` reads it, and the spec's name).

The spec is a golden set (`--spec DIR`; by default, in `$DISCO_PARITY_DIR`,
the set recorded on this kind of machine if there is one, else the main
set) or, with `--spec builtin` and by default where `$DISCO_PARITY_DIR`
holds no set, the builtin spec (builtin.py, builtin_spec.json): each case's
config and input keys, its inputs drawn here from its seed or produced by
the reference, so a clone of the reference is all a recording needs.

Recomputed here: every `expected/...` key, the parameter trees that are a
case's output (`params/...` of `meta_net_init`, and of
`disco103_meta_params`, read from the reference's own weights file), and
the random update-rule parameters of `meta_gradient_random` (drawn as its
config says). Taken from a golden set, or made by `builtin.generate`: the
other stored inputs (`inputs/...`: rng keys, random draws, and the rollouts
and network outputs that feed the calls). The eval curve runs in full from
its config's seed.

Only the reference runs here: its package is imported from `--reference`
(never this project's `disco_rl` alias, nor `disco`), and every `disco_rl`
module is checked, before and after recording, to be the file of that name
under `--reference/disco_rl/`. In this process only, the reference gets
what it needs on the installed JAX (MANIFEST.md section 4.3): the removed
`jax.device_put_replicated` / `jax.device_put_sharded`, and
`chex.Array = jax.Array` (chex's union does not match tracers, which
changes a branch of the meta-network).
"""

import argparse
import collections
from collections.abc import Callable, Mapping
import functools
import importlib
from importlib import metadata
import json
import os
import pathlib
import platform as platform_lib
import re
import subprocess
import sys
import time
import types as pytypes
from typing import Any

import chex
import distrax
from dm_env import specs
import haiku as hk
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np
import optax
import rlax

from tests.parity import builtin
from tests.parity import golden
from tests.parity import platforms

PACKAGE = 'disco_rl'
REFERENCE_ENV = 'DISCO_REFERENCE'
_MODULES = (
    'agent',
    'optimizers',
    'types',
    'utils',
    'environments.catch',
    'environments.jittable_envs',
    'update_rules.disco',
    'update_rules.input_transforms',
    'update_rules.policy_gradient',
    'value_fns.value_fn',
    'value_fns.value_utils',
)


class ProvenanceError(Exception):
  """A `disco_rl` module was not loaded from the reference checkout."""


# --- The reference, and only it ---------------------------------------------


def _patch_jax() -> None:
  """What the reference needs on the installed JAX (MANIFEST.md 4.3)."""

  def device_put_sharded(shards, devices):
    assert len(shards) == len(devices), (len(shards), len(devices))
    return jax.tree.map(lambda *xs: jnp.stack(xs), *shards)

  def device_put_replicated(tree, devices):
    return device_put_sharded([tree] * len(devices), devices)

  if not hasattr(jax, 'device_put_sharded'):
    jax.device_put_sharded = device_put_sharded
  if not hasattr(jax, 'device_put_replicated'):
    jax.device_put_replicated = device_put_replicated
  chex.Array = jax.Array


def check_provenance(root: pathlib.Path) -> list[str]:
  """The loaded `disco_rl` modules; raises unless each is root's own file.

  Args:
    root: the reference checkout (holding `disco_rl/`).

  Returns:
    The names of the modules checked.

  Raises:
    ProvenanceError: a module whose file is not `root/disco_rl/<its path>`
      (e.g. this project's alias, which serves `disco` modules).
  """
  package = (root / PACKAGE).resolve()
  names = sorted(
      n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + '.')
  )
  if PACKAGE not in names:
    raise ProvenanceError(f'{PACKAGE} is not loaded.')
  for name in names:
    module = sys.modules[name]
    where = getattr(module, '__file__', None)
    parts = name.split('.')[1:]
    candidates = (
        package.joinpath(*parts, '__init__.py'),
        package.joinpath(*parts[:-1], parts[-1] + '.py') if parts else None,
    )
    if where is None or pathlib.Path(where).resolve() not in candidates:
      raise ProvenanceError(
          f'{name} was loaded from {where} (module {module.__name__}), not'
          f' from the reference at {package}: refusing to record. Point'
          ' --reference at a checkout of google-deepmind/disco_rl (e.g.'
          ' ../shared/reference), not at this project.'
      )
  return names


def load_reference(root: pathlib.Path) -> pytypes.SimpleNamespace:
  """Imports the reference's modules from `root`, and only from there."""
  root = root.resolve()
  if not (root / PACKAGE / '__init__.py').is_file():
    raise ProvenanceError(f'No {PACKAGE} package in {root}.')
  for name in [n for n in sys.modules if n.split('.')[0] == PACKAGE]:
    del sys.modules[name]
  # This project's alias answers `disco_rl.*` imports with an import hook.
  sys.meta_path[:] = [
      f for f in sys.meta_path if type(f).__module__.split('.')[0] != PACKAGE
  ]
  sys.path.insert(0, str(root))
  _patch_jax()
  ref = pytypes.SimpleNamespace(root=root)
  for name in _MODULES:
    module = importlib.import_module(f'{PACKAGE}.{name}')
    setattr(ref, name.rsplit('.', 1)[-1], module)
  check_provenance(root)
  return ref


# --- Shared helpers ----------------------------------------------------------


def flat(prefix: str, tree: Any) -> dict[str, np.ndarray]:
  """`tree` flattened with the goldens' keys, under `prefix/`.

  A Python scalar leaf (a `ValueOuts` field left at its default 0.0) takes
  JAX's dtype for it (float32), as the goldens store it.
  """
  out = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    key = jax.tree_util.keystr(path, simple=True, separator='/')
    if isinstance(leaf, (bool, int, float)):
      leaf = jnp.asarray(leaf)
    out[f'{prefix}/{key}' if key else prefix] = np.asarray(leaf)
  return out


def tuplify(value: Any) -> Any:
  """JSON lists -> tuples (the reference's configs use tuples)."""
  if isinstance(value, Mapping):
    return {k: tuplify(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return tuple(tuplify(v) for v in value)
  return value


def _jsonable(value: Any) -> Any:
  if hasattr(value, 'to_dict'):
    value = value.to_dict()
  if hasattr(value, '__dataclass_fields__') and not isinstance(value, type):
    value = {k: getattr(value, k) for k in value.__dataclass_fields__}
  if isinstance(value, Mapping):
    return {k: _jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  return value


def agent_settings(ref, config: Mapping[str, Any]):
  """The reference's `ConfigDict` for a case's `agent_settings`."""
  settings = tuplify(config)
  net = settings['update_rule'].get('net')
  if net is not None:
    option = ref.disco.get_input_option()
    if _jsonable(net['input_option']) != _jsonable(option):
      raise ValueError('The case input option is not get_input_option().')
    net['input_option'] = option
  return config_dict.ConfigDict(settings)


def subtree(arrays: Mapping[str, np.ndarray], prefix: str) -> dict[str, Any]:
  prefix = prefix.rstrip('/') + '/'
  return {
      k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)
  }


def count(arrays: Mapping[str, np.ndarray], prefix: str) -> int:
  return len({k.split('/', 1)[0] for k in subtree(arrays, prefix)})


def ema_state(ref, flat_state: Mapping[str, np.ndarray]):
  return ref.types.EmaState(
      moment1=flat_state['moment1'],
      moment2=flat_state['moment2'],
      decay_product=flat_state['decay_product'],
  )


def actor_rollout(ref, flat_rollout: Mapping[str, np.ndarray]):
  return ref.types.ActorRollout(
      observations=flat_rollout['observations'],
      actions=flat_rollout['actions'],
      rewards=flat_rollout['rewards'],
      discounts=flat_rollout['discounts'],
      agent_outs=subtree(flat_rollout, 'agent_outs'),
      states={},
      logits=flat_rollout['logits'],
  )


def fill(template: Any, flat_tree: Mapping[str, np.ndarray]) -> Any:
  """`template`'s structure holding the leaves of `flat_tree` (same keys)."""
  keys = list(golden.flatten(template))
  if set(keys) != set(flat_tree):
    raise KeyError(sorted(set(keys) ^ set(flat_tree))[:5])
  return jax.tree.unflatten(
      jax.tree.structure(template), [flat_tree[k] for k in keys]
  )


def disco103(ref) -> dict[str, dict[str, np.ndarray]]:
  """The Disco103 weights shipped with the reference."""
  path = ref.root / PACKAGE / 'update_rules' / 'weights' / 'disco_103.npz'
  with np.load(path) as npz:
    return golden.to_haiku({k: npz[k] for k in npz.files})


def catch(ref, batch: int, rows: int, columns: int):
  """The reference's jittable Catch."""
  return ref.jittable_envs.CatchJittableEnvironment(
      batch_size=batch,
      env_settings=config_dict.ConfigDict(dict(rows=rows, columns=columns)),
  )


def _stack(trees: list[Any]) -> Any:
  return jax.tree.map(lambda *xs: np.stack(xs), *trees)


# --- One function per case family -------------------------------------------
# Each takes (ref, spec) and returns the recomputed keys.


class Spec:
  """A spec case: its stored inputs, its key names and its config.

  Attributes:
    name: the case.
    arrays: {key: array}: a golden set's every key, or the builtin spec's
      inputs (drawn and produced by `builtin.generate`).
    meta: the JSON sidecar (the builtin spec's: its `config` and `about`).
    config: the case's config.
    keys: every key name the spec knows: a golden set's all; the builtin
      spec's inputs and the outputs a recorder enumerates.
    builtin: whether the spec is the builtin one.
  """

  def __init__(self, directory: pathlib.Path | None, name: str, ref=None):
    self.name = name
    self.builtin = directory is None
    if self.builtin:
      entry = builtin.load()[name]
      self.arrays = builtin.generate(ref, name)
      self.meta = {'case': name, 'about': entry['about']}
      self.meta['config'] = entry['config']
      self.keys = set(self.arrays) | set(entry.get('listed_outputs', ()))
    else:
      with np.load(directory / f'{name}.npz', allow_pickle=False) as npz:
        self.arrays = {k: npz[k] for k in npz.files}
      self.meta = json.loads((directory / f'{name}.json').read_text())
      self.keys = set(self.arrays)
    self.config = self.meta['config']

  def __getitem__(self, key: str) -> np.ndarray:
    return self.arrays[key]

  def sub(self, prefix: str) -> dict[str, np.ndarray]:
    return subtree(self.arrays, prefix)

  def names(self, prefix: str) -> list[str]:
    """The relative names of the keys under `prefix/` (stored or not)."""
    prefix = prefix.rstrip('/') + '/'
    return sorted(k[len(prefix) :] for k in self.keys if k.startswith(prefix))

  def count(self, prefix: str) -> int:
    return count(self.arrays, prefix)


def record_jittable_catch(ref, spec: Spec) -> dict[str, np.ndarray]:
  config = spec.config
  env = catch(ref, config['batch_size'], config['rows'], config['columns'])
  env_state, timestep = jax.jit(env.reset)(spec['inputs/reset_rng'])
  out = flat('expected/reset', dict(env_state=env_state, timestep=timestep))
  step = jax.jit(env.step)
  states, timesteps = [], []
  for actions in spec['inputs/actions']:
    env_state, timestep = step(env_state, actions)
    states.append(env_state)
    timesteps.append(timestep)
  out.update(
      flat(
          'expected/steps',
          dict(env_state=_stack(states), timestep=_stack(timesteps)),
      )
  )
  return out


def record_cpu_catch(ref, spec: Spec) -> dict[str, np.ndarray]:
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
  out.update(flat('expected/construct_timestep', constructed))
  out.update(flat('expected/reset_timestep', env.reset(None)[1]))
  steps = [env.step(None, a)[1] for a in spec['inputs/actions']]
  out.update(flat('expected/steps', _stack(steps)))
  return out


def record_utils(ref, spec: Spec) -> dict[str, np.ndarray]:
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
  out = flat('expected/ema/init_state', state)
  for i in range(spec.count('inputs/ema/values')):
    values = spec.sub(f'inputs/ema/values/{i}')
    state = ema.update_state(values, state, pmean_axis_name=None)
    out.update(flat(f'expected/ema/state/{i}', state))
    root_eps = config['root_eps']
    out.update(
        flat(
            f'expected/ema/normalize/{i}',
            ema.normalize(values, state, root_eps=root_eps),
        )
    )
    out.update(
        flat(
            f'expected/ema/normalize_no_mean/{i}',
            ema.normalize(
                values, state, subtract_mean=False, root_eps=root_eps
            ),
        )
    )
  table3 = spec['inputs/batch_lookup/table3']
  index = spec['inputs/batch_lookup/index']
  out.update(
      flat(
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
        flat(
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
  out.update(flat('expected/tree_stack/axis0', utils.tree_stack(elems, axis=0)))
  pairs = [dict(x=e['x'], y0=e['y'][0]) for e in elems]
  out.update(flat('expected/tree_stack/axis1', utils.tree_stack(pairs, axis=1)))
  return out


def record_optimizer(ref, spec: Spec) -> dict[str, np.ndarray]:
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
  out = flat('expected/init_opt_state', state)
  for i in range(config['num_steps']):
    grads = golden.nest(spec.sub(f'inputs/grads/{i}'))
    if i == config['num_steps'] - 1:
      cotangent = golden.nest(spec.sub('inputs/vjp_cotangent'))

      def weighted(g, state=state, params=params, cotangent=cotangent):
        updates, _ = optimizer.update(g, state, params)
        return sum(jax.tree.leaves(jax.tree.map(jnp.vdot, cotangent, updates)))

      out.update(
          flat('expected/vjp_last_update_wrt_grads', jax.grad(weighted)(grads))
      )
    updates, state = optimizer.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    out.update(flat(f'expected/updates/{i}', updates))
    out.update(flat(f'expected/opt_state/{i}', state))
    out.update(flat(f'expected/params/{i}', params))
  return out


def record_input_transforms(ref, spec: Spec) -> dict[str, np.ndarray]:
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
      flat(
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


def record_value_losses(ref, spec: Spec) -> dict[str, np.ndarray]:
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
        flat(
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


def record_estimators(ref, spec: Spec) -> dict[str, np.ndarray]:
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
  return flat('expected', got)


_NET_OUTS = {
    'value_utils_get_value_outs_actor_critic': ('value_net_out',),
    'value_utils_get_value_outs_disco': ('q_net_out', 'target_q_net_out'),
    'value_utils_get_value_outs_value_fn': ('value_net_out',),
}


def record_get_value_outs(ref, spec: Spec) -> dict[str, np.ndarray]:
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
        behaviour_agent_out=subtree(rollout, 'behaviour_agent_out'),
    )
  else:
    rollout = actor_rollout(ref, dict(rollout, observations=zeros))
  ema = ref.utils.MovingAverage(
      jnp.zeros(()), decay=config['ema_decay'], eps=config['ema_eps']
  )
  nets = dict.fromkeys(
      ('value_net_out', 'q_net_out', 'target_value_net_out', 'target_q_net_out')
  )
  nets.update({k: spec[f'inputs/{k}'] for k in _NET_OUTS[spec.name]})
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
      adv_ema_state=ema_state(ref, spec.sub('inputs/adv_ema_state')),
      adv_ema_fn=ema,
      td_ema_state=ema_state(ref, spec.sub('inputs/td_ema_state')),
      td_ema_fn=ema,
      axis_name=None,
  )
  return flat(
      'expected',
      dict(value_outs=value_outs, adv_ema_state=adv_ema, td_ema_state=td_ema),
  )


def record_policy_gradient(ref, spec: Spec) -> dict[str, np.ndarray]:
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
        flat(
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


def _disco_rule(ref):
  return ref.disco.DiscoUpdateRule(**ref.agent.get_settings_disco().update_rule)


def record_meta_net_init(ref, spec: Spec) -> dict[str, np.ndarray]:
  params, state = jax.jit(_disco_rule(ref).init_params)(spec['inputs/rng'])
  return {**flat('params', params), **flat('expected/meta_rnn_state', state)}


def record_disco103(ref, spec: Spec) -> dict[str, np.ndarray]:
  del spec
  return flat('params', disco103(ref))


def spec_agent(ref, config: Mapping[str, Any]):
  """The Agent of a case whose config gives observation spec and actions."""
  return ref.agent.Agent(
      single_observation_spec={
          'observation': specs.Array(
              tuple(config['single_observation_spec']['observation']),
              np.float32,
          )
      },
      single_action_spec=specs.BoundedArray(
          (), np.int32, 0, config['num_actions'] - 1
      ),
      agent_settings=agent_settings(ref, config['agent_settings']),
      batch_axis_name=None,
  )


def record_unroll_meta_net(ref, spec: Spec) -> dict[str, np.ndarray]:
  """Two chained jitted unrolls with Disco103, and both losses on each."""
  config = spec.config
  agent = spec_agent(ref, config)
  rule = agent.update_rule
  hyper = config['hyper_params']
  params = golden.to_haiku(spec.sub('inputs/params'))
  meta_state = fill(
      rule.init_meta_state(jax.random.PRNGKey(0), params),
      spec.sub('inputs/meta_state'),
  )
  unroll = jax.jit(
      functools.partial(
          rule.unroll_meta_net,
          hyper_params=hyper,
          unroll_policy_fn=agent._network.unroll,  # pylint: disable=protected-access
          axis_name=None,
      )
  )
  loss_fn = jax.jit(
      functools.partial(rule.agent_loss, hyper_params=hyper, backprop=False)
  )
  no_meta_fn = jax.jit(
      functools.partial(rule.agent_loss_no_meta, hyper_params=hyper)
  )
  meta_params = disco103(ref)
  out = {}
  for i in range(spec.count('inputs/rollout')):
    f = spec.sub(f'inputs/rollout/{i}')
    rollout = ref.types.UpdateRuleInputs(
        observations=f['observations'],
        actions=f['actions'],
        rewards=f['rewards'],
        is_terminal=f['is_terminal'],
        agent_out=subtree(f, 'agent_out'),
        behaviour_agent_out=subtree(f, 'behaviour_agent_out'),
    )
    meta_out, meta_state = unroll(
        meta_params=meta_params,
        params=params,
        state={},
        meta_state=meta_state,
        rollout=rollout,
        rng=jax.random.PRNGKey(0),
    )
    loss, log = loss_fn(rollout, meta_out)
    loss_nm, log_nm = no_meta_fn(rollout, meta_out)
    out.update(
        flat(
            f'expected/call/{i}',
            dict(
                meta_out=meta_out,
                agent_loss=dict(loss_per_step=loss, log=log),
                agent_loss_no_meta=dict(loss_per_step=loss_nm, log=log_nm),
                meta_state=meta_state,
            ),
        )
    )
  return out


def record_value_function(ref, spec: Spec) -> dict[str, np.ndarray]:
  """Initial state, then get_value_outs and two updates under `jit`."""
  config = tuplify(spec.config['value_fn_config'])
  vf = ref.value_fn.ValueFunction(
      ref.types.ValueFnConfig(**config), axis_name=None
  )
  state = vf.initial_state(
      spec['inputs/init_rng'], spec.sub('inputs/dummy_observation')
  )
  out = flat('expected/initial_state', state)
  value_outs, net_out, adv_ema, td_ema = jax.jit(vf.get_value_outs)(
      state,
      actor_rollout(ref, spec.sub('inputs/rollouts/0')),
      spec['inputs/target_logits/0'],
  )
  out.update(
      flat(
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
        actor_rollout(ref, spec.sub(f'inputs/rollouts/{i}')),
        spec[f'inputs/target_logits/{i}'],
    )
    out.update(
        flat(
            f'expected/updates/{i}',
            dict(value_state=state, value_outs=value_outs, log=log),
        )
    )
  return out


def make_agent(ref, config: Mapping[str, Any], batch_axis_name=None):
  """The Agent of a case on its Catch grid, and its update-rule params."""
  settings = agent_settings(ref, config['agent_settings'])
  env = catch(
      ref, config['batch'], config['catch_rows'], config['catch_columns']
  )
  agent = ref.agent.Agent(
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      agent_settings=settings,
      batch_axis_name=batch_axis_name,
  )
  if settings.update_rule_name == 'disco':
    return agent, disco103(ref)
  return agent, {'dummy': 0.0}


def _learner_outputs(prefix: str, state, logs) -> dict[str, np.ndarray]:
  logs = dict(logs)
  meta_out = dict(logs.pop('meta_out'))
  meta_out.pop('target_out', None)
  return flat(prefix, dict(learner_state=state, logs=logs, meta_out=meta_out))


def record_small_agent(ref, spec: Spec) -> dict[str, np.ndarray]:
  """Init, actor_step, unroll_net and chained learner steps, all jitted."""
  agent, rule_params = make_agent(ref, spec.config)
  state = jax.jit(agent.initial_learner_state)(spec['inputs/init_rng'])
  out = flat('expected/initial_learner_state', state)
  timestep = spec.sub('inputs/actor_step/timestep')
  actor_timestep, _ = jax.jit(agent.actor_step)(
      state.params,
      spec['inputs/actor_step/rng'],
      ref.types.EnvironmentTimestep(**timestep),
      {},
  )
  out.update(flat('expected/actor_step/actor_timestep', actor_timestep))
  if spec.names('expected/unroll_net'):
    agent_out, _ = jax.jit(agent.unroll_net)(
        state.params, {}, actor_rollout(ref, spec.sub('inputs/rollouts/0'))
    )
    out.update(flat('expected/unroll_net/0/agent_out', agent_out))
  step = jax.jit(functools.partial(agent.learner_step, is_meta_training=False))
  for i in range(spec.config['n_learner_steps']):
    state, _, logs = step(
        spec[f'inputs/learner_rngs/{i}'],
        actor_rollout(ref, spec.sub(f'inputs/rollouts/{i}')),
        state,
        {},
        rule_params,
    )
    out.update(_learner_outputs(f'expected/learner_steps/{i}', state, logs))
  return out


def checksums(prefix: str, tree: Any) -> dict[str, np.ndarray]:
  """Per leaf: shape, sum and sum of squares, first 8 values.

  The sums are taken in float64; the goldens store them, and the first
  values (of integer leaves too), as float32.
  """
  out = {}
  for key, leaf in flat(prefix, tree).items():
    values = np.asarray(leaf)
    as_float = values.astype(np.float64)
    out[f'{key}/shape'] = np.asarray(values.shape, np.int32)
    out[f'{key}/sum'] = np.float32(np.sum(as_float))
    out[f'{key}/sumsq'] = np.float32(np.sum(as_float**2))
    out[f'{key}/head'] = values.ravel()[:8].astype(np.float32)
  return out


def record_full_agent(ref, spec: Spec) -> dict[str, np.ndarray]:
  agent, rule_params = make_agent(ref, spec.config)
  init = jax.jit(agent.initial_learner_state)(spec['inputs/init_rng'])
  step = jax.jit(functools.partial(agent.learner_step, is_meta_training=False))
  state, _, logs = step(
      spec['inputs/learner_rng'],
      actor_rollout(ref, spec.sub('inputs/rollout')),
      init,
      {},
      rule_params,
  )
  logs = dict(logs)
  meta_out = logs.pop('meta_out')
  return {
      **checksums('expected/initial_learner_state_checksum', init),
      **checksums('expected/learner_step/learner_state_checksum', state),
      **checksums('expected/learner_step/meta_out_checksum', meta_out),
      **flat('expected/learner_step/logs', logs),
  }


def _seed(text: str) -> int:
  """The seed of a config's 'PRNGKey(seed)' (or '...PRNGKey(seed)...')."""
  match = re.search(r'PRNGKey\((\d+)\)', text)
  if not match:
    raise ValueError(f'No PRNGKey(seed) in {text!r}.')
  return int(match.group(1))


def notebook_cells(ref, name: str, titles: tuple[str, ...]) -> str:
  """The source of the reference colab's code cells with these titles."""
  cells = json.loads((ref.root / 'colabs' / name).read_text())['cells']
  sources = {}
  for cell in cells:
    source = ''.join(cell['source'])
    first = source.split('\n', 1)[0]
    if cell['cell_type'] == 'code' and first.startswith('# @title '):
      sources[first[len('# @title ') :]] = source
  return '\n'.join(sources[t] for t in titles)


def _colab_namespace(ref) -> dict[str, Any]:
  """The colabs' imports, from the reference."""
  base_env = importlib.import_module(f'{PACKAGE}.environments.base')
  return dict(
      Any=Any,
      config_dict=config_dict,
      optax=optax,
      chex=chex,
      distrax=distrax,
      hk=hk,
      jax=jax,
      jnp=jnp,
      np=np,
      rlax=rlax,
      collections=collections,
      types=ref.types,
      utils=ref.utils,
      base_env=base_env,
      jittable_envs=ref.jittable_envs,
      agent_lib=ref.agent,
      value_fn=ref.value_fn,
      axis_name='i',
  )


def record_eval_curve(ref, spec: Spec) -> dict[str, np.ndarray]:
  """The eval colab's loop, pmapped over one device as the colab does."""
  config = spec.config
  ns = _colab_namespace(ref)
  exec(  # pylint: disable=exec-used
      notebook_cells(
          ref,
          'eval.ipynb',
          (
              'Helper functions for interacting with environments.',
              'A simple Replay buffer.',
          ),
      ),
      ns,
  )
  axis_name = config['axis_name']
  num_envs = config['num_envs']
  assert num_envs == config['batch_size'] // config['replay_ratio']
  agent, rule_params = make_agent(
      ref, dict(config, batch=num_envs), batch_axis_name=axis_name
  )
  ns['agent'] = agent
  env = catch(ref, num_envs, config['catch_rows'], config['catch_columns'])
  devices = tuple(jax.devices()[: config['devices']])
  rng = jax.random.PRNGKey(_seed(config['rng']))
  buffer_config = config['buffer']
  buffer = ns['SimpleReplayBuffer'](
      buffer_config['capacity'], buffer_config['seed']
  )
  sampled = []

  class Recording:
    """The buffer's generator, keeping the indices it draws."""

    def __init__(self, generator: np.random.Generator):
      self.generator = generator

    def integers(self, *args, **kwargs):
      indices = self.generator.integers(*args, **kwargs)
      sampled.append(np.asarray(indices, np.int32))
      return indices

  buffer.np_rng = Recording(buffer.np_rng)

  env_state, ts = env.reset(rng)
  learner_state = agent.initial_learner_state(rng)
  actor_state = agent.initial_actor_state(rng)
  learner_step = jax.pmap(
      agent.learner_step,
      axis_name=axis_name,
      devices=devices,
      static_broadcasted_argnums=(5,),
  )
  unroll = jax.pmap(
      ns['unroll_jittable_actor'],
      axis_name=axis_name,
      devices=devices,
      static_broadcasted_argnums=(5, 6, 7, 8),
  )
  accumulate = jax.pmap(
      ns['accumulate_rewards'], axis_name=axis_name, devices=devices
  )
  learner_state = jax.device_put_replicated(learner_state, devices)
  actor_state = jax.device_put_replicated(actor_state, devices)
  rule_params = jax.device_put_replicated(rule_params, devices)
  acc = jnp.zeros((num_envs,))
  env_state, ts, acc = ref.utils.shard_across_devices(
      (env_state, ts, acc), devices
  )
  rollouts, returns, steps, metrics, learner_index = [], [], [], [], []
  total_steps = 0
  for iteration in range(config['num_steps']):
    rng, rng_actor, rng_learner = jax.random.split(rng, 3)
    rng_actor = jax.random.split(rng_actor, len(devices))
    rollout, actor_state, ts, env_state = unroll(
        learner_state.params,
        actor_state,
        ts,
        env_state,
        rng_actor,
        env,
        config['rollout_len'],
        None,
        devices,
    )
    buffer.add(rollout)
    total_steps += np.prod(rollout.rewards.shape)
    acc, episode_returns = accumulate(acc, (rollout.rewards, rollout.discounts))
    steps.append(total_steps)
    rollouts.append(jax.device_get(rollout))
    returns.append(jax.device_get(episode_returns))
    rng_learner = jax.random.split(rng_learner, len(devices))
    if len(buffer) >= buffer_config['min_buffer_size']:
      learner_rollout = buffer.sample(config['batch_size'])
      learner_state, _, logs = learner_step(
          rng_learner,
          learner_rollout,
          learner_state,
          actor_state,
          rule_params,
          False,
      )
      logs = dict(jax.device_get(logs))
      logs.pop('meta_out')  # MANIFEST 4.8.
      metrics.append(logs)
      learner_index.append(iteration)

  gather = ref.utils.gather_from_devices
  rewards = gather([r.rewards for r in rollouts])
  discounts = gather([r.discounts for r in rollouts])
  all_returns = np.array(gather(returns))
  ended = 1 - np.array(discounts)
  total_returns = (all_returns * ended).sum(axis=(1, 2))
  total_episodes = ended.sum(axis=(1, 2))
  pad = len(steps) - len(metrics)
  metrics = jax.tree.map(lambda x: x.mean(0), gather(metrics))
  logs = {
      k: np.pad(
          np.array([m[k] for m in metrics]), (pad, 0), constant_values=np.nan
      )
      for k in metrics[0]
  }
  final = jax.tree.map(lambda x: x[0], jax.device_get(learner_state.params))

  def as_f32(x):
    return np.asarray(x, np.float32)

  out = {
      'expected/avg_returns': as_f32(total_returns / total_episodes),
      'expected/total_returns': as_f32(total_returns),
      'expected/total_episodes': as_f32(total_episodes),
      'expected/steps': np.asarray(steps, np.int32),
      'expected/rollout_rewards': np.stack(rewards),
      'expected/rollout_discounts': np.stack(discounts),
      'expected/rollout_actions': np.stack(
          gather([r.actions for r in rollouts])
      ),
      'expected/sample_indices': np.stack(sampled),
      'expected/learner_step_index': np.asarray(learner_index, np.int32),
  }
  out.update(flat('expected/logs', logs))
  out.update(checksums('expected/final_params_checksum', final))
  return out


def meta_train_agent(ref, config: Mapping[str, Any]):
  """The meta-train colab's namespace and `MetaTrainAgent` for a case."""
  ns = _colab_namespace(ref)
  rows, columns = config['catch_rows'], config['catch_columns']
  ns['batch_size_per_device'] = config['batch_size_per_device']
  # The colab's get_env, with the case's grid (MANIFEST 4.7).
  ns['get_env'] = lambda batch_size: catch(ref, batch_size, rows, columns)
  exec(  # pylint: disable=exec-used
      notebook_cells(
          ref,
          'meta_train.ipynb',
          (
              'Helper functions for interacting with environments.',
              'Meta training agent',
              'Calculate meta gradients for a single agent.',
          ),
      ),
      ns,
  )
  value_config = tuplify(config['value_fn_config'])
  agent = ns['MetaTrainAgent'](
      batch_size_per_device=config['batch_size_per_device'],
      agent_settings=agent_settings(ref, config['agent_settings']),
      value_fn_config=ref.types.ValueFnConfig(**value_config),
      axis_name=config['axis_name'],
  )
  return ns, agent


def record_meta_gradient(ref, spec: Spec) -> dict[str, np.ndarray]:
  """The meta-train colab's calculate_meta_gradient, jitted, one agent."""
  config = spec.config
  ns, agent = meta_train_agent(ref, config)
  key = jax.random.PRNGKey(0)
  template = jax.eval_shape(agent.init_state, key)
  env_state, env_timestep = agent.env.reset(key)
  state = ns['MetaTrainState'](
      learner_state=fill(
          template.learner_state, spec.sub('inputs/agent_state/learner_state')
      ),
      actor_state={},
      value_state=fill(
          template.value_state, spec.sub('inputs/agent_state/value_state')
      ),
      env_state=env_state,
      env_timestep=env_timestep,
  )
  out = {}
  if 'PRNGKey(' in config.get('update_rule_params', ''):
    # Random update-rule parameters, drawn as the config says (the colab's
    # `agent.update_rule.init_params(PRNGKey(seed))`, eagerly).
    seed = _seed(config['update_rule_params'])
    rule_params, _ = agent.agent.update_rule.init_params(
        jax.random.PRNGKey(seed)
    )
    out.update(flat('params', rule_params))
  else:
    rule_params = disco103(ref)

  def rollout(prefix):
    return actor_rollout(ref, spec.sub(prefix))

  meta_gradient = jax.jit(
      functools.partial(
          ns['calculate_meta_gradient'],
          agent=agent,
          axis_name=config['axis_name'],
      )
  )
  grads, (new_state, train_metrics, meta_log) = meta_gradient(
      rule_params,
      state,
      rollout('inputs/train_rollouts'),
      rollout('inputs/valid_rollout'),
      spec['inputs/rng'],
  )
  return {
      **out,
      **flat('expected/meta_grads', grads),
      **flat('expected/meta_log', meta_log),
      **flat('expected/train_metrics', train_metrics),
      **flat(
          'expected/new_agent_state',
          dict(
              learner_state=new_state.learner_state,
              value_state=new_state.value_state,
          ),
      ),
  }


RECORDERS: dict[str, Callable[[Any, Spec], dict[str, np.ndarray]]] = {
    'env_catch_jittable_5x5': record_jittable_catch,
    'env_catch_jittable_8x8': record_jittable_catch,
    'env_catch_cpu': record_cpu_catch,
    'utils': record_utils,
    'optimizer_adam_sg_clip0p5': record_optimizer,
    'optimizer_adam_sg_clip1p0': record_optimizer,
    'input_transforms': record_input_transforms,
    'value_utils_categorical_and_losses': record_value_losses,
    'value_utils_estimators': record_estimators,
    'value_utils_get_value_outs_actor_critic': record_get_value_outs,
    'value_utils_get_value_outs_disco': record_get_value_outs,
    'value_utils_get_value_outs_value_fn': record_get_value_outs,
    'policy_gradient_rule': record_policy_gradient,
    'meta_net_init': record_meta_net_init,
    'disco103_meta_params': record_disco103,
    'disco_unroll_meta_net': record_unroll_meta_net,
    'value_function': record_value_function,
    'agent_disco_small': record_small_agent,
    'agent_actor_critic_small': record_small_agent,
    'agent_full_eval_config': record_full_agent,
    'eval_curve_catch': record_eval_curve,
    'meta_gradient_random': record_meta_gradient,
    'meta_gradient_disco103': record_meta_gradient,
}
# What each case recomputes; every other key is copied from the spec.
_OUTPUT_PREFIXES = {
    'meta_net_init': ('params/',),
    'disco103_meta_params': ('params/',),
    'meta_gradient_random': ('params/',),
}


def is_output(case: str, key: str) -> bool:
  return key.startswith(('expected/', *_OUTPUT_PREFIXES.get(case, ())))


# --- The set -----------------------------------------------------------------


def _commit(root: pathlib.Path) -> str | None:
  """The checkout's git commit, if it is a git checkout."""
  try:
    result = subprocess.run(
        ['git', '-C', str(root), 'rev-parse', 'HEAD'],
        capture_output=True,
        text=True,
        check=False,
    )
  except OSError:
    return None
  return result.stdout.strip() if result.returncode == 0 else None


def versions(root: pathlib.Path, spec: Mapping[str, str]) -> dict[str, str]:
  """The versions that ran, in the sidecars' `versions` fields.

  Args:
    root: the reference checkout; its git commit, if it is a git checkout,
      else the spec's (a checkout of files says none).
    spec: the spec case's `versions`.
  """
  out = {}
  for package in _VERSIONED:
    try:
      out[package] = metadata.version(package)
    except metadata.PackageNotFoundError:
      out[package] = 'unknown'
  out['python'] = platform_lib.python_version()
  commit = _commit(root)
  out['disco_rl_commit'] = commit or spec.get('disco_rl_commit', 'unknown')
  out['disco_rl_source'] = (
      'git checkout' if commit else 'files (commit as the spec says)'
  )
  out['platform'] = jax.default_backend()
  return out


_VERSIONED = (
    'jax',
    'jaxlib',
    'dm-haiku',
    'chex',
    'rlax',
    'distrax',
    'optax',
    'numpy',
)
# CPU flags that tell kinds of machine apart, listed in PLATFORM.json when
# present (`cpu_flags_known`) or, for the first three, absent.
_FLAGS = (
    'fma',
    'avx2',
    'avx512f',
    'avx512dq',
    'avx512bw',
    'avx512vl',
    'avx512_bf16',
    'avx512_vnni',
    'asimd',
    'sve',
)
_FLAGS_ABSENT = ('fma', 'avx2', 'avx512f')
RECORDER = platforms.RECORDER


def platform_record(
    name: str, spec: platforms.GoldenSet | None
) -> dict[str, Any]:
  """This machine's PLATFORM.json, as `platforms.py` reads the shipped ones.

  Args:
    name: the set's name.
    spec: the set whose cases (inputs, configs) were recorded; None: the
      builtin spec (inputs drawn here).

  Returns:
    The record: identity fields, model name, CPU flags, and which recorder
    and spec made it.
  """
  machine = platforms.read_machine()
  record: dict[str, Any] = {'set': name}
  for key in platforms.IDENTITY_FIELDS:
    if key in machine.fields:
      record[key] = machine.fields[key]
  record['model_name'] = machine.name
  if machine.flags is not None:
    record['cpu_flags_known'] = [f for f in _FLAGS if f in machine.flags]
    record['cpu_flags_absent'] = [
        f for f in _FLAGS_ABSENT if f not in machine.flags
    ]
  record['recorder'] = RECORDER
  record['spec'] = spec.name if spec else builtin.label()
  source = (
      f'the inputs and configs of set {spec.name!r}'
      if spec
      else f'inputs drawn from the spec {builtin.spec_file().name}'
  )
  record['note'] = (
      f'recorded {time.strftime("%Y-%m-%d")} by {RECORDER} from the'
      f' reference, with {source}'
  )
  return record


def default_spec(root: pathlib.Path | None) -> platforms.GoldenSet | None:
  """The spec under `root`: the set recorded on this kind of machine, if any.

  Recording that set reproduces it bit for bit (its inputs are this
  machine's); elsewhere the set in `root` itself (the main set); without a
  set (or `root`), None: the builtin spec.

  Args:
    root: a golden directory (`$DISCO_PARITY_DIR`), or None.

  Returns:
    The set whose cases to record, or None for the builtin spec.
  """
  sets = platforms.golden_sets(root) if root and root.is_dir() else ()
  sets = tuple(s for s in sets if any(s.directory.glob('*.npz')))
  if not sets:
    return None
  machine = platforms.read_machine()
  for golden_set in sets:
    if platforms.matches(machine, golden_set.recorded)[0]:
      return golden_set
  return sets[0]


def spec_cases(spec_dir: pathlib.Path | None) -> list[str]:
  """A spec's cases (None: the builtin spec's)."""
  if spec_dir is None:
    return builtin.cases()
  return sorted(p.stem for p in spec_dir.glob('*.npz'))


def _key_list(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
  return {k: [list(v.shape), str(v.dtype)] for k, v in arrays.items()}


def record_case(
    ref, spec_dir: pathlib.Path | None, name: str
) -> dict[str, np.ndarray]:
  """The case recorded here: the spec's inputs, this machine's outputs.

  Args:
    ref: the reference (`load_reference`).
    spec_dir: the spec set; None: the builtin spec, whose inputs are drawn
      (and produced by the reference) here.
    name: the case.

  Returns:
    Every key of the case.

  Raises:
    KeyError: no recorder for the case, or outputs that the spec has but
      the recorder did not recompute (for the builtin spec: not as many as
      it lists).
  """
  if name not in RECORDERS:
    raise KeyError(f'No recorder for case {name!r}.')
  spec = Spec(spec_dir, name, ref)
  computed = {k: np.asarray(v) for k, v in RECORDERS[name](ref, spec).items()}
  if spec.builtin:
    outputs = {k: v for k, v in computed.items() if is_output(name, k)}
    want = builtin.load()[name]['outputs']
    if len(outputs) != want or set(outputs) & set(spec.arrays):
      raise KeyError(
          f'{name}: {len(outputs)} outputs recorded, the builtin spec lists'
          f' {want}.'
      )
    return {**spec.arrays, **outputs}
  wanted = [k for k in spec.arrays if is_output(name, k)]
  missing = sorted(set(wanted) - set(computed))
  if missing:
    raise KeyError(f'{name}: not recomputed: {missing[:10]}')
  out = {}
  for key, value in spec.arrays.items():
    out[key] = computed[key] if is_output(name, key) else value
  return out


def _sidecar(
    ref, spec: platforms.GoldenSet | None, name: str, arrays
) -> dict[str, Any]:
  """The case's JSON: the spec set's, or the builtin spec's config."""
  if spec is not None:
    meta = json.loads((spec.directory / f'{name}.json').read_text())
  else:
    entry = builtin.load()[name]
    meta = dict(case=name, summary=entry['about'], config=entry['config'])
    meta['spec'] = builtin.label()
    meta['keys'] = _key_list(arrays)
  meta['versions'] = versions(ref.root, meta.get('versions', {}))
  return meta


def record(
    reference: pathlib.Path,
    out_dir: pathlib.Path,
    spec: platforms.GoldenSet | None,
    cases: list[str] | None = None,
    set_name: str | None = None,
) -> list[str]:
  """Records the cases of `spec` (None: builtin) into `out_dir`.

  Returns:
    The names of the cases recorded.
  """
  out_dir = out_dir.resolve()
  if spec is not None and out_dir == spec.directory.resolve():
    raise ValueError(f'--out is the spec set {spec.directory} itself.')
  spec_dir = spec.directory if spec is not None else None
  names = cases or spec_cases(spec_dir)
  unknown = sorted(set(names) - set(spec_cases(spec_dir)))
  if unknown:
    raise KeyError(f'Cases not in the spec: {unknown}')
  ref = load_reference(reference)
  out_dir.mkdir(parents=True, exist_ok=True)
  for name in names:
    start = time.time()
    arrays = record_case(ref, spec_dir, name)
    check_provenance(ref.root)
    np.savez_compressed(out_dir / f'{name}.npz', **arrays)
    meta = _sidecar(ref, spec, name, arrays)
    (out_dir / f'{name}.json').write_text(json.dumps(meta, indent=1) + '\n')
    print(
        f'{name}: {len(arrays)} keys, {time.time() - start:.0f} s', flush=True
    )
  machine = platform_record(set_name or out_dir.name, spec)
  (out_dir / platforms.PLATFORM_FILE).write_text(
      json.dumps(machine, indent=1) + '\n'
  )
  return names


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
      prog=f'python -m {RECORDER}', description=__doc__.split('\n', 1)[0]
  )
  reference = os.environ.get(REFERENCE_ENV)
  parser.add_argument(
      '--reference',
      required=not reference,
      default=reference,
      type=pathlib.Path,
      help=(
          'a checkout of google-deepmind/disco_rl at 9059a29 (default:'
          f' ${REFERENCE_ENV})'
      ),
  )
  parser.add_argument('--out', required=True, type=pathlib.Path)
  parser.add_argument(
      '--spec',
      help=(
          f'the set whose cases to record, or {builtin.NAME!r}: inputs drawn'
          f' here from tests/parity/{builtin.SPEC_FILE.name}, or a spec file'
          ' of that format (FILE.json; e.g. tests.parity.variant makes one'
          ' with other seeds and sizes) (default: in $DISCO_PARITY_DIR, the'
          ' set recorded on this kind of machine, else the main set; without'
          f' a set there, {builtin.NAME})'
      ),
  )
  parser.add_argument('--cases', nargs='+', help='default: all of the spec')
  parser.add_argument(
      '--set-name', help="PLATFORM.json's set name (default: --out's name)"
  )
  args = parser.parse_args(argv)
  if jax.default_backend() != 'cpu':
    # As the suite runs there (tests/conftest.py): a recording at TF32 could
    # not be met natively by a suite at full precision.
    jax.config.update('jax_default_matmul_precision', 'highest')
  spec: platforms.GoldenSet | None
  if args.spec == builtin.NAME:
    spec = None
  elif args.spec is not None and args.spec.endswith('.json'):
    spec_file = pathlib.Path(args.spec).resolve()
    if not spec_file.is_file():
      parser.error(f'No spec file {spec_file}.')
    os.environ[builtin.SPEC_ENV] = str(spec_file)
    spec = None
  elif args.spec is not None:
    spec_dir = pathlib.Path(args.spec).resolve()
    if not any(spec_dir.glob('*.npz')):
      parser.error(f'No cases (*.npz) in the spec set {spec_dir}.')
    path = spec_dir / platforms.PLATFORM_FILE
    named = json.loads(path.read_text()).get('set') if path.is_file() else None
    spec = platforms.GoldenSet(named or spec_dir.name, spec_dir, None)
  else:
    root = os.environ.get(platforms.PARITY_DIR_ENV)
    spec = default_spec(pathlib.Path(root).resolve() if root else None)
  if spec is None:
    print(
        f'Spec: {builtin.label()} ({builtin.spec_file()}): inputs drawn here',
        flush=True,
    )
  else:
    print(f'Spec: set {spec.name!r} at {spec.directory}', flush=True)
  start = time.time()
  try:
    names = record(args.reference, args.out, spec, args.cases, args.set_name)
  except ProvenanceError as e:
    print(f'record: {e}', file=sys.stderr)
    return 2
  print(
      f'Recorded {len(names)} cases into {args.out} in'
      f' {time.time() - start:.0f} s.'
  )
  return 0


if __name__ == '__main__':
  raise SystemExit(main())
