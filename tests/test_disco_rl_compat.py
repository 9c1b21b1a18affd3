"""Code written for the reference package `disco_rl` runs on `disco`.

One test per way published projects use the reference (see
docs/disco_rl_compat.md): its module paths and public names, the private
attributes they read, mutable rollouts, Hydra-style configs, the rule under
`jax.grad`, `vmap` and `pmap`, the device helpers on current JAX, the
jittable environments; and a short training run, written against
`disco_rl` names only, that learns Catch.
"""

import functools
import importlib
import json
import os
import textwrap

import chex
from dm_env import specs
import haiku as hk
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np
import optax
import pytest

import disco
import disco_rl
from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl import utils
from disco_rl.environments import jittable_envs
from disco_rl.environments.wrappers import batched_jittable_env
from disco_rl.networks import meta_nets
from disco_rl.networks import nets
from disco_rl.update_rules import disco as disco_rule
from disco_rl.value_fns import value_utils
from tests import forced_devices

# The reference's modules (below `disco_rl.`) and the public names each
# defines.
_REFERENCE_NAMES = {
    'agent': (
        'Agent',
        'LearnerState',
        'get_settings_actor_critic',
        'get_settings_disco',
    ),
    'environments': (),
    'environments.base': ('Environment',),
    'environments.catch': (
        'CatchEnvironment',
        'SingleStreamCatch',
        'get_config',
    ),
    'environments.jittable_envs': (
        'CatchJittableEnvironment',
        'get_config_catch',
    ),
    'environments.wrappers': (),
    'environments.wrappers.batched_env': (
        'BatchedSingleStreamEnvironment',
        'UnusedEnvState',
    ),
    'environments.wrappers.batched_jittable_env': (
        'BatchedJittableEnvironment',
        'EnvState',
    ),
    'environments.wrappers.single_stream_env': (
        'SingleStreamEnv',
        'UnusedEnvState',
    ),
    'networks': (),
    'networks.action_models': ('LSTMModel', 'get_action_model'),
    'networks.meta_nets': ('LSTM', 'MetaLSTM', 'MetaNet'),
    'networks.nets': ('MLP', 'MLPHeadNet', 'get_network'),
    'optimizers': ('scale_by_adam_sg_denom',),
    'types': (
        'ActionSpec',
        'ActorRollout',
        'ActorTimestep',
        'AgentOuts',
        'AgentParams',
        'AgentStepFn',
        'AgentUnrollFn',
        'Array',
        'ArraySpec',
        'EmaState',
        'EnvironmentTimestep',
        'HaikuState',
        'HyperParams',
        'LogDict',
        'MetaNetInputOption',
        'MetaParams',
        'MetaParamsEMA',
        'MetaState',
        'OptState',
        'PolicyNetwork',
        'RNNState',
        'SampleActionFn',
        'Specs',
        'SpecsTree',
        'TransformConfig',
        'UpdateRuleInputs',
        'UpdateRuleLog',
        'UpdateRuleOuts',
        'ValueFnConfig',
        'ValueOuts',
        'ValueState',
    ),
    'update_rules': (),
    'update_rules.actor_critic': ('ActorCritic',),
    'update_rules.base': ('UpdateRule', 'get_agent_out_spec'),
    'update_rules.disco': ('DiscoUpdateRule', 'get_input_option'),
    'update_rules.input_transforms': (
        'EmaNorm',
        'InputTransform',
        'Normalize',
        'PiWeightedAvg',
        'SelectByAction',
        'td_pair',
        'tx_factory',
    ),
    'update_rules.policy_gradient': ('PolicyGradientUpdate',),
    'utils': (
        'MovingAverage',
        'batch_lookup',
        'broadcast_specs',
        'cast_to_single_precision',
        'differentiable_policy_gradient_loss',
        'gather_from_devices',
        'get_logits_specs',
        'get_num_actions_from_spec',
        'shard_across_devices',
        'tree_stack',
        'zeros_like_spec',
    ),
    'value_fns': (),
    'value_fns.value_fn': ('ValueFunction',),
    'value_fns.value_utils': (
        'estimate_q_values',
        'estimate_values',
        'extract_scalar_values_from_net_out',
        'get_value_outs',
        'get_values_from_net_outs',
        'importance_weight',
        'scalar_to_categorical_value',
        'value_logits_to_scalar',
        'value_loss_from_target',
        'value_loss_from_td',
    ),
}

_OBS_SPEC = {'observation': specs.Array((5, 5, 1), np.float32)}
_ACTION_SPEC = specs.BoundedArray((), np.int32, 0, 2)
_T, _B = 3, 2
# The keys `DiscoUpdateRule` reads from its hyper-parameters: the Disco103
# agent settings' hyper_params without `discount_factor`, which the rule
# takes as its `value_discount` argument instead.
_DISCO_HYPER_PARAMS = dict(
    pi_cost=1.0,
    y_cost=1.0,
    z_cost=1.0,
    aux_policy_cost=1.0,
    value_cost=0.2,
    target_params_coeff=0.9,
    value_fn_td_lambda=0.95,
)


def _small_rule_config() -> dict:
  """A Disco rule config as a Hydra-style one arrives: dicts and lists.

  The architecture of Disco103 with small sizes, for fast tests.
  """
  return dict(
      net=dict(
          name='lstm',
          prediction_size=8,
          hidden_size=8,
          embedding_size=[4, 1],
          policy_target_channels=[4],
          policy_channels=[4, 2],
          output_stddev=0.3,
          aux_stddev=0.3,
          policy_target_stddev=0.3,
          state_stddev=1.0,
          meta_rnn_kwargs=dict(
              policy_channels=[4, 2],
              embedding_size=[4],
              pred_embedding_size=[4, 1],
              hidden_size=8,
          ),
          input_option=disco_rule.get_input_option(),
      ),
      value_discount=0.997,
      num_bins=11,
      max_abs_value=5.0,
  )


def _as_tuples(tree):
  if isinstance(tree, dict):
    return config_dict.ConfigDict({k: _as_tuples(v) for k, v in tree.items()})
  if isinstance(tree, list):
    return tuple(tree)
  return tree


def _policy_network(rule) -> types.PolicyNetwork:
  return nets.get_network(
      'mlp',
      action_spec=_ACTION_SPEC,
      out_spec=rule.flat_output_spec(_ACTION_SPEC),
      model_out_spec=rule.model_output_spec(_ACTION_SPEC),
      dense=(8,),
      head_w_init_std=1e-2,
      model_arch_name='lstm',
      model_kwargs=dict(head_mlp_hiddens=(8,), lstm_size=8),
  )


def _observations(key) -> dict:
  return {'observation': jax.random.uniform(key, (_T + 1, _B, 5, 5, 1))}


def _rule_inputs(network, params, observations, key) -> types.UpdateRuleInputs:
  """A [T, B] rollout with the agent's outputs on it, built as users do."""
  agent_out, _ = network.unroll(params, {}, observations, None)
  actions_key, rewards_key = jax.random.split(key)
  return types.UpdateRuleInputs(
      observations=observations,
      actions=jax.random.randint(actions_key, (_T + 1, _B), 0, 3),
      rewards=jax.random.normal(rewards_key, (_T, _B)),
      is_terminal=jnp.zeros((_T, _B), bool).at[1, 0].set(True),
      agent_out=agent_out,
      behaviour_agent_out=jax.lax.stop_gradient(agent_out),
  )


def _tiny_agent_settings(rule: str = 'actor_critic'):
  if rule == 'disco':
    settings = agent_lib.get_settings_disco()
  else:
    settings = agent_lib.get_settings_actor_critic()
  settings.net_settings.net_args.dense = (8,)
  settings.net_settings.net_args.model_kwargs = dict(
      head_mlp_hiddens=(8,), lstm_size=8
  )
  return settings


def _agent(settings) -> agent_lib.Agent:
  return agent_lib.Agent(
      single_observation_spec=_OBS_SPEC,
      single_action_spec=_ACTION_SPEC,
      agent_settings=settings,
      batch_axis_name=None,
  )


def _actor_rollout(key) -> types.ActorRollout:
  keys = jax.random.split(key, 3)
  logits = jax.random.normal(keys[0], (_T + 1, _B, 3))
  return types.ActorRollout(
      observations=_observations(keys[1]),
      actions=jax.random.randint(keys[2], (_T + 1, _B), 0, 3),
      rewards=jnp.ones((_T + 1, _B)),
      discounts=jnp.ones((_T + 1, _B), bool),
      agent_outs={'logits': logits},
      states={},
      logits=logits,
  )


# --- Imports: the same modules, the reference's names. ---------------------


@pytest.mark.parametrize('module', sorted(_REFERENCE_NAMES))
def test_reference_module_is_the_disco_module(module):
  alias = importlib.import_module(f'disco_rl.{module}')
  assert alias is importlib.import_module(f'disco.{module}')
  parent, _, leaf = f'disco_rl.{module}'.rpartition('.')
  namespace = {}
  exec(f'from {parent} import {leaf}', namespace)  # pylint: disable=exec-used
  assert namespace[leaf] is alias
  for name in _REFERENCE_NAMES[module]:
    assert hasattr(alias, name), f'disco_rl.{module}.{name}'


def test_top_level_package_shadows_no_submodule():
  # `from disco_rl import types` must give the submodule, not a name that
  # the package itself happens to define.
  for name, value in vars(disco_rl).items():
    if not name.startswith('_'):  # Only submodules imported so far.
      assert value is importlib.import_module(f'disco.{name}'), name
  assert disco_rl.agent is disco.agent
  with pytest.raises(AttributeError):
    disco_rl.not_a_module  # pylint: disable=pointless-statement


def test_imports_in_a_fresh_interpreter():
  script = textwrap.dedent("""
      import importlib, sys
      import disco_rl.networks.nets as nets_alias
      assert 'disco_rl.networks.nets' in sys.modules
      import disco.networks.nets
      assert nets_alias is disco.networks.nets
      # The module keeps its own name and spec (reload, pickling).
      assert nets_alias.__name__ == 'disco.networks.nets'
      assert nets_alias.__spec__.name == 'disco.networks.nets'
      importlib.reload(nets_alias)
      try:
        import disco_rl.update_rules.weights
      except ModuleNotFoundError as e:
        assert e.name == 'disco_rl.update_rules.weights', e.name
      else:
        raise AssertionError('no error for a module that does not exist')
      print('OK')
  """)
  done = forced_devices.run_python(script)
  assert done.returncode == 0 and done.stdout.strip() == 'OK', done.stderr


# --- The agent: replaced network factory, subclassed heads, optimizer. ------


class _ConvNet(nets.MLPHeadNet):
  """A user's network: a conv torso under the reference's heads.

  `__call__` has the reference's signature (inputs, should_reset).
  """

  def __init__(self, channels: int, **kwargs):
    super().__init__(**kwargs)
    self._channels = channels

  def _embedding_pass(self, inputs, should_reset=None):
    del should_reset
    x = hk.Conv2D(self._channels, kernel_shape=3)(inputs['observation'])
    return jax.nn.relu(hk.Flatten()(x))

  def __call__(self, inputs, should_reset=None):
    inputs = jax.tree.map(lambda x: x.astype(jnp.float32), inputs)
    return super().__call__(inputs, should_reset)


def test_replaced_get_network_builds_the_agents_network(monkeypatch):
  original = nets.get_network
  calls = []

  def get_network(name, *args, **kwargs):
    calls.append(name)
    if name != 'conv':
      return original(name, *args, **kwargs)

    def one_step(inputs, should_reset=None):
      return _ConvNet(module_name='conv', **kwargs)(inputs, should_reset)

    def unroll(inputs, should_reset=None):
      net = _ConvNet(module_name='conv', **kwargs)
      return net.unroll(inputs, should_reset)

    init, one_step_fn = hk.without_apply_rng(hk.transform_with_state(one_step))
    _, unroll_fn = hk.without_apply_rng(hk.transform_with_state(unroll))
    return types.PolicyNetwork(
        init=init, one_step=one_step_fn, unroll=unroll_fn
    )

  monkeypatch.setattr(disco_rl.networks.nets, 'get_network', get_network)
  settings = _tiny_agent_settings()
  settings.net_settings = dict(
      name='conv',
      net_args=dict(
          channels=4,
          head_w_init_std=1e-2,
          model_arch_name='lstm',
          model_kwargs=dict(head_mlp_hiddens=(8,), lstm_size=8),
      ),
  )
  agent = _agent(settings)
  assert calls == ['conv']
  key = jax.random.PRNGKey(0)
  learner_state = agent.initial_learner_state(key)
  assert any(
      k.startswith('conv/') and 'conv2_d' in k for k in learner_state.params
  )
  rollout = _actor_rollout(key)
  new_state, _, logs = jax.jit(agent.learner_step, static_argnums=5)(
      key, rollout, learner_state, {}, None, False
  )
  assert np.isfinite(logs['total_loss'])
  moved = jax.tree.map(
      lambda a, b: not np.array_equal(a, b),
      learner_state.params,
      new_state.params,
  )
  assert all(jax.tree.leaves(moved))


def _learner_step(agent):
  return jax.jit(agent.learner_step, static_argnums=5)


def test_reassigned_optimizer_is_the_one_used():
  key = jax.random.PRNGKey(1)
  rollout = _actor_rollout(key)
  agent = _agent(_tiny_agent_settings())
  agent._optimizer = optax.sgd(0.0)  # pylint: disable=protected-access
  state = agent.initial_learner_state(key)
  assert isinstance(state.opt_state[0], optax.EmptyState)  # sgd's state.
  new_state, _, _ = _learner_step(agent)(key, rollout, state, {}, None, False)
  chex.assert_trees_all_equal(new_state.params, state.params)
  # With its own optimizer the same step moves the parameters.
  agent = _agent(_tiny_agent_settings())
  state = agent.initial_learner_state(key)
  new_state, _, _ = _learner_step(agent)(key, rollout, state, {}, None, False)
  assert not np.array_equal(
      jax.tree.leaves(new_state.params)[0], jax.tree.leaves(state.params)[0]
  )


def test_hyper_params_edited_after_construction_apply():
  key = jax.random.PRNGKey(2)
  rollout = _actor_rollout(key)
  agent = _agent(_tiny_agent_settings())
  state = agent.initial_learner_state(key)
  _, _, before = _learner_step(agent)(key, rollout, state, {}, None, False)
  agent.settings.hyper_params.pg_cost = 0.0
  agent.settings.hyper_params.entropy_cost = 0.0
  agent.settings.hyper_params.value_cost = 0.0
  _, _, after = _learner_step(agent)(key, rollout, state, {}, None, False)
  assert before['total_loss'] != 0.0
  assert after['total_loss'] == 0.0


# --- The Disco rule as projects drive it. ------------------------------------


def test_disco_rule_from_a_hydra_style_config():
  key = jax.random.PRNGKey(0)
  config = _small_rule_config()
  rule = disco_rule.DiscoUpdateRule(**config)
  reference_style = disco_rule.DiscoUpdateRule(**_as_tuples(config))
  chex.assert_trees_all_equal(
      rule.init_params(key), reference_style.init_params(key)
  )
  # The input option may come as plain data too.
  option = disco_rule.get_input_option()
  config['net']['input_option'] = {
      group: [
          dict(source=c.source, transforms=list(c.transforms))
          for c in getattr(option, group)
      ]
      for group in ('base', 'action_conditional')
  }
  from_data = disco_rule.DiscoUpdateRule(**config)
  assert from_data._net_settings['input_option'] == option  # pylint: disable=protected-access


def test_disco_rule_rejects_a_malformed_input_option():
  config = _small_rule_config()
  config['net']['input_option'] = {'base': [{'source': 'rewards'}]}
  with pytest.raises(ValueError, match='"source" and "transforms"'):
    disco_rule.DiscoUpdateRule(**config)


def test_init_params_match_the_published_weights_file():
  path = os.environ.get('DISCO_WEIGHTS')
  if not path:
    pytest.skip('DISCO_WEIGHTS (the path of disco_103.npz) is not set.')
  with np.load(path) as flat:
    # 'lstm/~/meta_lstm/~unroll/lstm/linear/w' -> params[module]['w'].
    loaded = {}
    for key in flat.files:
      module, _, leaf = key.rpartition('/')
      loaded.setdefault(module, {})[leaf] = flat[key]
  rule = disco_rule.DiscoUpdateRule(
      **agent_lib.get_settings_disco().update_rule
  )
  # Abstractly: the shapes and dtypes without running the initialisers.
  params, _ = jax.eval_shape(rule.init_params, jax.random.PRNGKey(0))
  chex.assert_trees_all_equal_shapes_and_dtypes(params, loaded)


def test_init_meta_state_starts_the_target_at_the_users_params():
  rule = disco_rule.DiscoUpdateRule(**_small_rule_config())
  params = {'my_torso': {'w': jnp.arange(6.0).reshape(2, 3)}}
  meta_state = rule.init_meta_state(jax.random.PRNGKey(0), params=params)
  assert set(meta_state) == {
      'rnn_state',
      'adv_ema_state',
      'td_ema_state',
      'target_params',
  }
  chex.assert_trees_all_equal(meta_state['target_params'], params)


@pytest.fixture(name='small_disco', scope='module')
def _small_disco_fixture():
  """A small Disco rule, an agent network and a rollout's arguments."""
  rule = disco_rule.DiscoUpdateRule(**_small_rule_config())
  network = _policy_network(rule)
  obs_key, init_key, meta_key, rollout_key = jax.random.split(
      jax.random.PRNGKey(3), 4
  )
  observations = _observations(obs_key)
  params, _ = jax.jit(network.init)(
      init_key, jax.tree.map(lambda x: x[0], observations)
  )
  meta_params, _ = jax.jit(rule.init_params)(meta_key)
  meta_state = jax.jit(rule.init_meta_state)(meta_key, params)
  args = (params, meta_params, meta_state, observations, rollout_key)
  return rule, network, args


def _disco_loss(rule, network, hyper_params, axis_name=None):
  """The per-step Disco loss of the agent parameters, averaged."""

  def loss(params, meta_params, meta_state, observations, key):
    inputs = _rule_inputs(network, params, observations, key)
    per_step, new_meta_state, _ = rule(
        meta_params=meta_params,
        params=params,
        state={},
        rollout=inputs,
        hyper_params=hyper_params,
        meta_state=meta_state,
        unroll_policy_fn=network.unroll,
        rng=key,
        axis_name=axis_name,
    )
    return jnp.mean(per_step), new_meta_state

  return loss


def test_disco_rule_under_grad_vmap_and_pmap_with_seven_hyper_params(
    small_disco,
):
  assert len(_DISCO_HYPER_PARAMS) == 7
  rule, network, args = small_disco
  params = args[0]

  grad_fn = jax.jit(
      jax.grad(_disco_loss(rule, network, _DISCO_HYPER_PARAMS), has_aux=True)
  )
  grads, new_meta_state = grad_fn(*args)
  norms = [float(jnp.abs(g).sum()) for g in jax.tree.leaves(grads)]
  assert all(np.isfinite(norms)) and sum(norms) > 0
  # The target network moved towards the (same) parameters: no change.
  chex.assert_trees_all_close(new_meta_state['target_params'], params)

  # pmap over the local devices (the EMAs averaged over the axis) of vmap
  # over hyper-parameter values, whose first row has the values above.
  def grad_for(hyper_params, args):
    loss = _disco_loss(rule, network, hyper_params, axis_name='i')
    return jax.grad(loss, has_aux=True)(*args)[0]

  batched = {k: jnp.array([v, v]) for k, v in _DISCO_HYPER_PARAMS.items()}
  batched['pi_cost'] = jnp.array([1.0, 0.0])
  num_devices = jax.local_device_count()
  mapped = jax.pmap(jax.vmap(grad_for, in_axes=(0, None)), axis_name='i')(
      *jax.tree.map(lambda x: jnp.stack([x] * num_devices), (batched, args))
  )
  rows = [jax.tree.map(lambda g, r=r: g[0, r], mapped) for r in range(2)]
  chex.assert_trees_all_close(rows[0], grads, rtol=1e-5, atol=1e-6)
  differ = jax.tree.map(lambda a, b: not np.allclose(a, b), *rows)
  assert any(jax.tree.leaves(differ))  # pi_cost 0 changes the gradient.


def test_private_attributes_rebuild_unroll_meta_net(small_disco):
  # What a project reading `_adv_ema`, `_td_ema` and `_eta_apply` does:
  # value outputs from `value_utils.get_value_outs`, assigned to
  # `extra_from_rule` of the rollout, then the meta-network.
  rule, network, args = small_disco
  params, meta_params, meta_state, observations, key = args
  inputs = jax.jit(functools.partial(_rule_inputs, network))(
      params, observations, key
  )
  hyper_params = _DISCO_HYPER_PARAMS
  assert isinstance(rule._adv_ema, utils.MovingAverage)  # pylint: disable=protected-access

  @jax.jit
  def by_hand(inputs, meta_state):
    target_out, _ = network.unroll(
        meta_state['target_params'],
        {},
        inputs.observations,
        inputs.should_reset_mask_fwd,
    )
    value_outs, adv_ema_state, _ = value_utils.get_value_outs(
        value_net_out=None,
        q_net_out=inputs.agent_out['q'],
        target_value_net_out=None,
        target_q_net_out=target_out['q'],
        rollout=inputs,
        pi_logits=inputs.agent_out['logits'],
        discount=0.997,
        lambda_=hyper_params['value_fn_td_lambda'],
        nonlinear_transform=True,
        categorical_value=True,
        max_abs_value=5.0,
        drop_last=False,
        adv_ema_state=meta_state['adv_ema_state'],
        adv_ema_fn=rule._adv_ema,  # pylint: disable=protected-access
        td_ema_state=meta_state['td_ema_state'],
        td_ema_fn=rule._td_ema,  # pylint: disable=protected-access
    )
    inputs.extra_from_rule = dict(
        v_scalar=value_outs.value,
        adv=value_outs.adv,
        normalized_adv=value_outs.normalized_adv,
        q=value_outs.target_q_value,
        qv_adv=value_outs.qv_adv,
        normalized_qv_adv=value_outs.normalized_qv_adv,
        target_out=target_out,
    )
    meta_out, rnn_state = rule._eta_apply(  # pylint: disable=protected-access
        meta_params, meta_state['rnn_state'], None, inputs, axis_name=None
    )
    return meta_out, rnn_state, adv_ema_state

  @jax.jit
  def by_rule(inputs, meta_state):
    return rule.unroll_meta_net(
        meta_params=meta_params,
        params=params,
        state={},
        meta_state=meta_state,
        rollout=inputs,
        hyper_params=hyper_params,
        unroll_policy_fn=network.unroll,
        rng=None,
    )

  meta_out, rnn_state, adv_ema_state = by_hand(inputs, meta_state)
  expected_out, expected_state = by_rule(inputs, meta_state)
  for name in ('pi', 'y', 'z'):
    chex.assert_trees_all_close(meta_out[name], expected_out[name], rtol=1e-6)
  chex.assert_trees_all_close(rnn_state, expected_state['rnn_state'])
  chex.assert_trees_all_close(adv_ema_state, expected_state['adv_ema_state'])


def test_meta_network_lstm_runs_under_haiku():
  config = _small_rule_config()
  rule = disco_rule.DiscoUpdateRule(**config)
  inputs = rule._get_dummy_input(include_agent_adv=True)  # pylint: disable=protected-access

  def forward(inputs):
    return meta_nets.LSTM(**config['net'])(inputs, axis_name=None)

  init, apply = hk.transform_with_state(forward)
  key = jax.random.PRNGKey(5)
  params, state = init(key, inputs)
  # The same module tree, and initialisation, as the rule's own.
  expected_params, expected_state = rule.init_params(key)
  chex.assert_trees_all_equal(
      (params, state), (expected_params, expected_state)
  )
  out, new_state = jax.jit(apply)(params, state, None, inputs)
  t, b = inputs.rewards.shape
  num_actions = inputs.agent_out['logits'].shape[-1]
  assert out['pi'].shape == (t, b, num_actions)
  assert out['y'].shape == out['z'].shape == (t, b, 8)
  assert jax.tree.structure(new_state) == jax.tree.structure(state)


# --- Mutable rollouts. ------------------------------------------------------


def test_rollout_fields_can_be_assigned_and_stay_pytrees():
  inputs = types.UpdateRuleInputs(
      observations=jnp.zeros((3, 2)),
      actions=jnp.zeros((3, 2), jnp.int32),
      rewards=jnp.zeros((2, 2)),
      is_terminal=jnp.zeros((2, 2), bool),
      agent_out={'logits': jnp.zeros((3, 2, 4))},
  )
  num_leaves = len(jax.tree.leaves(inputs))
  inputs.extra_from_rule = {'adv': jnp.ones((2, 2))}
  assert len(jax.tree.leaves(inputs)) == num_leaves + 1
  doubled = jax.jit(lambda x: jax.tree.map(lambda v: v * 2, x))(inputs)
  assert isinstance(doubled, types.UpdateRuleInputs)
  np.testing.assert_array_equal(doubled.extra_from_rule['adv'], 2.0)
  assert inputs.replace(rewards=jnp.ones((2, 2))).extra_from_rule is not None

  rollout = _actor_rollout(jax.random.PRNGKey(0))
  rollout.rewards = rollout.rewards * 0.5
  np.testing.assert_array_equal(rollout.rewards, 0.5)
  outs = types.ValueOuts()
  outs.adv = jnp.ones(3)
  ema = utils.MovingAverage(jnp.zeros(())).init_state()
  ema.decay_product = jnp.zeros(())
  step = types.EnvironmentTimestep(
      observation=jnp.zeros(2), step_type=jnp.zeros(2), reward=jnp.zeros(2)
  )
  step.reward = jnp.ones(2)
  np.testing.assert_array_equal(step.reward, 1.0)


def test_actor_critic_learner_step_takes_no_meta_params():
  key = jax.random.PRNGKey(6)
  agent = _agent(_tiny_agent_settings())
  state = agent.initial_learner_state(key)
  rollout = _actor_rollout(key)
  step = _learner_step(agent)
  for no_params in (None, {}):
    _, _, logs = step(key, rollout, state, {}, no_params, False)
    assert np.isfinite(logs['total_loss'])
  # A rule with meta-parameters still checks them.
  disco_agent = _agent(_tiny_agent_settings('disco'))
  with pytest.raises(ValueError, match='do not match DiscoUpdateRule'):
    disco_agent.learner_step(
        key,
        rollout,
        disco_agent.initial_learner_state(key),
        {},
        {},
        False,
    )


# --- Devices and environments. ----------------------------------------------


def test_shard_and_gather_on_one_device():
  data = {'x': np.arange(12.0).reshape(4, 3), 'y': jnp.arange(4)}
  sharded = utils.shard_across_devices(data, jax.local_devices()[:1])
  assert sharded['x'].shape == (1, 4, 3)
  gathered = utils.gather_from_devices(sharded)
  chex.assert_trees_all_equal(gathered, jax.tree.map(np.asarray, data))


def test_shard_across_devices_names_an_uneven_leaf():
  with pytest.raises(ValueError, match=r"\['y'\] of shape \(3,\)"):
    utils.shard_across_devices(
        {'x': np.zeros((4,)), 'y': np.zeros((3,))}, jax.local_devices() * 2
    )


def test_shard_and_gather_over_two_devices_under_pmap():
  script = textwrap.dedent("""
      import jax, numpy as np
      from disco_rl import utils
      devices = jax.local_devices()
      assert len(devices) == 2, devices
      data = {'obs': np.arange(24.0).reshape(4, 6), 'step': np.arange(4)}
      sharded = utils.shard_across_devices(data, devices)
      assert sharded['obs'].shape == (2, 2, 6)
      for shard in sharded['obs'].addressable_shards:
        index = devices.index(shard.device)
        np.testing.assert_array_equal(
            np.asarray(shard.data)[0], data['obs'][2 * index:2 * index + 2])
      doubled = jax.pmap(lambda t: jax.tree.map(lambda x: 2 * x, t),
                         devices=devices)(sharded)
      gathered = utils.gather_from_devices(doubled)
      np.testing.assert_array_equal(gathered['obs'], 2 * data['obs'])
      np.testing.assert_array_equal(gathered['step'], 2 * data['step'])
      print('OK')
  """)
  done = forced_devices.run_python(script, env=forced_devices.env(2))
  assert done.returncode == 0 and done.stdout.strip() == 'OK', done.stderr


def test_catch_jittable_environment():
  env = jittable_envs.CatchJittableEnvironment(
      batch_size=3, env_settings=jittable_envs.get_config_catch()
  )
  assert env.single_observation_spec()['observation'].shape == (8, 8, 1)
  assert env.single_action_spec().maximum == 2
  state, timestep = jax.jit(env.reset)(jax.random.PRNGKey(0))
  assert timestep.observation.shape == (3, 8, 8, 1)
  step = jax.jit(env.step)
  rewards = []
  for _ in range(7):  # The ball falls from row 0 to row 7.
    state, timestep = step(state, jnp.ones(3, jnp.int32))
    rewards.append(np.asarray(timestep.reward))
  assert np.all(np.asarray(timestep.step_type) == 2)  # LAST.
  assert set(np.abs(rewards[-1])) == {1.0}
  assert not np.any(rewards[:-1])


class _Counter:
  """A user's single-stream environment: count up to `limit`, then reset."""

  def __init__(self, limit: int):
    self._limit = limit

  @property
  def num_actions(self):
    return 2

  def initial_state(self, rng):
    chex.assert_shape(rng, (2,))  # A raw key, as the reference gave it.
    return jnp.zeros((), jnp.int32)

  def episode_reset(self, rng, state):
    del state
    return self.initial_state(rng)

  def step(self, rng, state, action):
    del rng
    return state + action

  def is_terminal(self, state):
    return state >= self._limit

  def reward(self, state):
    return state.astype(jnp.float32)

  def render(self, state):
    return jnp.full((2,), state, jnp.float32)


@pytest.mark.parametrize(
    'settings', [config_dict.ConfigDict(dict(limit=2)), dict(limit=2)]
)
def test_batched_jittable_environment_wraps_a_users_class(settings):
  env = batched_jittable_env.BatchedJittableEnvironment(_Counter, 4, settings)
  assert env.batch_size == 4
  assert env.single_observation_spec()['observation'].shape == (2,)
  state, _ = env.reset(jax.random.PRNGKey(0))
  actions = jnp.array([0, 1, 1, 1], jnp.int32)
  state, timestep = env.step(state, actions)
  state, timestep = env.step(state, actions)
  np.testing.assert_array_equal(timestep.reward, [0.0, 2.0, 2.0, 2.0])
  np.testing.assert_array_equal(timestep.step_type, [1, 2, 2, 2])
  # Finished episodes restarted; the state is assignable, as it was.
  np.testing.assert_array_equal(state.state, [0, 0, 0, 0])
  state.state = state.state + 1
  stay = jnp.zeros(4, jnp.int32)
  np.testing.assert_array_equal(env.step(state, stay)[0].state, [1, 1, 1, 1])


def test_batched_jittable_environment_names_bad_settings():
  with pytest.raises(TypeError, match='env_settings must be'):
    batched_jittable_env.BatchedJittableEnvironment(_Counter, 4, [('limit', 2)])


# --- A training run written against `disco_rl` names only. ------------------

_TRAINING_SCRIPT = textwrap.dedent("""
    import json

    import jax
    import jax.numpy as jnp
    import numpy as np

    from disco_rl import agent as agent_lib
    from disco_rl import types
    from disco_rl.environments import jittable_envs

    NUM_ENVS, ROLLOUT_LEN, ITERATIONS = 32, 16, 250

    env = jittable_envs.CatchJittableEnvironment(
        batch_size=NUM_ENVS, env_settings=jittable_envs.get_config_catch())
    settings = agent_lib.get_settings_actor_critic()
    settings.net_settings.net_args.dense = (64,)
    settings.net_settings.net_args.model_kwargs = dict(
        head_mlp_hiddens=(32,), lstm_size=32)
    settings.learning_rate = 3e-2
    agent = agent_lib.Agent(
        single_observation_spec=env.single_observation_spec(),
        single_action_spec=env.single_action_spec(),
        agent_settings=settings,
        batch_axis_name=None,
    )

    def unroll_actor(params, actor_state, timestep, env_state, rng):
      def one_step(carry, step_rng):
        env_state, timestep, actor_state = carry
        actor_timestep, actor_state = agent.actor_step(
            params, step_rng, timestep, actor_state)
        env_state, timestep = env.step(env_state, actor_timestep.actions)
        return (env_state, timestep, actor_state), actor_timestep
      carry, steps = jax.lax.scan(
          one_step, (env_state, timestep, actor_state),
          jax.random.split(rng, ROLLOUT_LEN))
      return (steps,) + carry

    @jax.jit
    def iteration(learner_state, actor_state, timestep, env_state, previous,
                  rule_params, rng):
      actor_rng, learner_rng = jax.random.split(rng)
      steps, env_state, timestep, actor_state = unroll_actor(
          learner_state.params, actor_state, timestep, env_state, actor_rng)
      # The previous rollout's last step starts this one: [T+1, B].
      rollout = types.ActorRollout.from_timestep(jax.tree.map(
          lambda first, rest: jnp.concatenate([first[None], rest]),
          previous, steps))
      learner_state, _, _ = agent.learner_step(
          rng=learner_rng,
          rollout=rollout,
          learner_state=learner_state,
          agent_net_state=agent.initial_actor_state(learner_rng),
          update_rule_params=rule_params,
          is_meta_training=False,
      )
      ended = rollout.discounts[1:] == 0
      mean_return = jnp.sum(jnp.where(ended, rollout.rewards[1:], 0.0)) / (
          jnp.maximum(ended.sum(), 1))
      last = jax.tree.map(lambda x: x[-1], steps)
      return (learner_state, actor_state, timestep, env_state, last,
              mean_return)

    rng, env_rng, init_rng, first_rng = jax.random.split(
        jax.random.PRNGKey(0), 4)
    env_state, timestep = env.reset(env_rng)
    learner_state = agent.initial_learner_state(init_rng)
    actor_state = agent.initial_actor_state(init_rng)
    rule_params, _ = agent.update_rule.init_params(init_rng)
    previous, actor_state = agent.actor_step(
        learner_state.params, first_rng, timestep, actor_state)
    env_state, timestep = env.step(env_state, previous.actions)
    returns = []
    for _ in range(ITERATIONS):
      rng, step_rng = jax.random.split(rng)
      (learner_state, actor_state, timestep, env_state, previous,
       mean_return) = iteration(learner_state, actor_state, timestep,
                                env_state, previous, rule_params, step_rng)
      returns.append(float(mean_return))
    print('RESULT' + json.dumps(dict(
        first=float(np.mean(returns[:20])),
        last=float(np.mean(returns[-50:])),
        modules=sorted(m for m in __import__('sys').modules
                       if m.split('.')[0] in ('disco', 'disco_rl')),
    )))
""")


def test_a_script_written_for_disco_rl_learns_catch():
  # Actor-critic, 250 on-policy updates of 32 x 16 steps (~30 s on 2 CPU
  # cores). A random policy scores about -0.75 on 8x8 Catch. Measured:
  # -0.76 over the first 20 updates, 0.88 over the last 50.
  done = forced_devices.run_python(_TRAINING_SCRIPT, timeout=900)
  assert done.returncode == 0, done.stderr[-3000:]
  (line,) = [s for s in done.stdout.splitlines() if s.startswith('RESULT')]
  result = json.loads(line[len('RESULT') :])
  assert 'disco_rl.agent' in result['modules']
  assert result['first'] < -0.4, result
  assert result['last'] > 0.5, result
