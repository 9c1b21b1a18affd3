"""Gradients through the taken actions only (`taken_only`).

The action model can give the per-action outputs' values for every action
(without gradient) and, under `types.TAKEN`, their values at the taken
actions with the gradient through those actions alone. That is exact when a
loss reads those outputs at the taken actions only (Disco's z, aux_pi and
q), and wrong otherwise: both are checked here, and the gradient of the
agent's loss with Disco's targets with and without the option.
"""

import chex
from dm_env import specs
import jax
import jax.numpy as jnp
import numpy as np

from disco import agent as agent_lib
from disco import types
from disco import weights
from disco.networks import nets

_NUM_ACTIONS = 4
_ACTION_SPEC = specs.BoundedArray((), np.int32, 0, _NUM_ACTIONS - 1)
_OUT = {'z': types.ArraySpec((6,), jnp.float32)}
_B = 5


def _network(out_spec=_OUT, lstm_size=3, **model_kwargs):
  return nets.get_network(
      'mlp',
      out_spec={'logits': types.ArraySpec((_NUM_ACTIONS,), jnp.float32)},
      dense=(8,),
      action_spec=_ACTION_SPEC,
      head_w_init_std=None,
      model_out_spec=out_spec,
      model_arch_name='lstm',
      model_kwargs=dict(
          head_mlp_hiddens=(7,), lstm_size=lstm_size, **model_kwargs
      ),
  )


def _inputs():
  obs = jax.random.normal(jax.random.PRNGKey(1), (_B, 10))
  actions = jnp.array([0, 3, 1, 1, 2], jnp.int32)
  return obs, actions


def _grads(weights_of_z, taken_only, read=lambda out: out['z']):
  """Gradient of sum(weights * read(out)) w.r.t. the network's parameters."""
  network = _network()
  obs, actions = _inputs()
  params, state = network.init(jax.random.PRNGKey(0), obs)

  def loss(params):
    out, _ = network.one_step(
        params, state, obs, None, taken_actions=actions, taken_only=taken_only
    )
    return jnp.sum(weights_of_z * read(out)), out

  return jax.grad(loss, has_aux=True)(params)


def test_values_are_unchanged_and_parameters_keep_their_names():
  network = _network()
  obs, actions = _inputs()
  params, state = network.init(jax.random.PRNGKey(0), obs)
  plain, _ = network.one_step(params, state, obs)
  taken, _ = network.one_step(
      params, state, obs, None, taken_actions=actions, taken_only=('z',)
  )
  for key in plain:
    np.testing.assert_array_equal(taken[key], plain[key], err_msg=key)
  assert plain['z'].shape == (_B, _NUM_ACTIONS, 6)
  assert set(taken) == set(plain) | {types.TAKEN}
  np.testing.assert_array_equal(
      taken[types.TAKEN]['z'], plain['z'][jnp.arange(_B), actions]
  )
  names = set(weights.flatten_params(params))
  assert 'mlp/action_cond/linear/w' in names, sorted(names)
  assert 'mlp/mlp/~/linear_1/w' in names, sorted(names)


def test_gradient_equals_the_full_one_when_the_loss_reads_taken_actions():
  _, actions = _inputs()
  w = jax.random.normal(jax.random.PRNGKey(2), (_B, 6))
  # The loss reads z at the taken action only, as Disco's losses do.
  at_taken = jax.nn.one_hot(actions, _NUM_ACTIONS)[:, :, None] * w[:, None]
  full, _ = _grads(at_taken, taken_only=())
  cheap, _ = _grads(w, taken_only=('z',), read=lambda o: o[types.TAKEN]['z'])
  jax.tree.map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
      full,
      cheap,
  )
  # Not vacuous: the action model's parameters do get a gradient.
  assert np.abs(full['mlp/mlp/~/linear_1']['w']).max() > 1e-3


def test_gradient_is_wrong_when_the_loss_reads_other_actions():
  # Why the option is opt-in per output: a loss that reads every action
  # gets no gradient from it (only the taken actions' entries carry one).
  w = jax.random.normal(jax.random.PRNGKey(2), (_B, _NUM_ACTIONS, 6))
  full, _ = _grads(w, taken_only=())
  cheap, _ = _grads(w, taken_only=('z',))
  difference = np.abs(
      full['mlp/mlp/~/linear_1']['w'] - cheap['mlp/mlp/~/linear_1']['w']
  ).max()
  assert difference > 1e-2, difference


def test_disco_loss_gradient_is_the_same_with_taken_action_gradients():
  # The agent's loss with Disco's targets (random here: the meta-network
  # does not enter the gradient) and its declared `taken_action_outputs`.
  settings = agent_lib.get_settings_disco()
  settings.net_settings.net_args.dense = (32, 32)
  settings.net_settings.net_args.model_kwargs = dict(
      head_mlp_hiddens=(16,), lstm_size=16
  )
  obs_spec = {'observation': specs.Array((5, 5, 1), np.float32)}

  def agent(taken):
    return agent_lib.Agent(
        single_observation_spec=obs_spec,
        single_action_spec=_ACTION_SPEC,
        agent_settings=settings,
        batch_axis_name=None,
        taken_action_gradients=taken,
    )

  plain, cheap = agent(False), agent(True)
  assert cheap.update_rule.taken_action_outputs == {'z', 'aux_pi', 'q'}
  learner_state = jax.jit(plain.initial_learner_state)(jax.random.PRNGKey(0))
  t, b = 5, 3
  keys = iter(jax.random.split(jax.random.PRNGKey(3), 10))
  logits = jax.random.normal(next(keys), (t + 1, b, _NUM_ACTIONS))
  rollout = types.ActorRollout(
      observations=jax.random.uniform(next(keys), (t + 1, b, 5, 5, 1)),
      actions=jax.random.randint(next(keys), (t + 1, b), 0, _NUM_ACTIONS),
      rewards=jax.random.normal(next(keys), (t + 1, b)),
      discounts=jnp.ones((t + 1, b), bool).at[3, 1].set(False),
      logits=logits,
      agent_outs={'logits': logits},
      states={},
  )
  size = settings.update_rule.net.prediction_size
  meta_out = dict(
      pi=jax.random.normal(next(keys), (t, b, _NUM_ACTIONS)),
      y=jax.random.normal(next(keys), (t, b, size)),
      z=jax.random.normal(next(keys), (t, b, size)),
      q_td=jax.random.normal(next(keys), (t, b)),
  )
  meta_out |= dict(q_target=meta_out['q_td'], q_value=meta_out['q_td'])
  meta_out['normalized_q_td'] = meta_out['q_td']

  def grads(agent):
    return jax.grad(agent._loss, has_aux=True)(  # pylint: disable=protected-access
        learner_state.params,
        {},
        learner_state.meta_state,
        rollout,
        meta_out,
        False,
    )

  (full, (_, _, logs)), (cheap_grads, (_, _, cheap_logs)) = jax.jit(
      lambda: (grads(plain), grads(cheap))
  )()
  for key in logs:
    np.testing.assert_allclose(
        cheap_logs[key], logs[key], rtol=1e-6, atol=1e-7, err_msg=key
    )
  # Every parameter's gradient, the action model's included (non-zero).
  assert np.abs(full['mlp/mlp/~/linear_1']['w']).max() > 1e-4
  assert np.abs(full['mlp/action_cond/linear']['w']).max() > 1e-4
  jax.tree.map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7),
      cheap_grads,
      full,
  )


def _gates_network(share_state_gates: bool):
  out = _OUT | {'q': types.ArraySpec((5,), jnp.float32)}
  return _network(out, lstm_size=16, share_state_gates=share_state_gates)


def test_shared_state_gates_keep_the_parameters_and_outputs():
  obs, actions = _inputs()
  plain, shared = _gates_network(False), _gates_network(True)
  params, state = plain.init(jax.random.PRNGKey(0), obs)
  # The same parameter tree, initialised the same: checkpoints and weights
  # of either load in the other.
  chex.assert_trees_all_equal(
      params, shared.init(jax.random.PRNGKey(0), obs)[0]
  )

  def outputs(network):
    def loss(params):
      out, _ = network.one_step(
          params, state, obs, None, taken_actions=actions, taken_only=('z',)
      )
      taken = out[types.TAKEN]['z']
      return jnp.sum(jnp.cos(taken)) + jnp.sum(jnp.sin(out['q'])), out

    return jax.grad(loss, has_aux=True)(params)

  (plain_grads, plain_out), (shared_grads, shared_out) = map(
      outputs, (plain, shared)
  )
  # Float rounding apart (the gates' sums taken in another order), the same
  # per-action outputs [B, A, ...], taken-action outputs and gradients.
  tolerance = dict(rtol=1e-5, atol=1e-6)
  for key in ('z', 'q', 'logits'):
    np.testing.assert_allclose(shared_out[key], plain_out[key], **tolerance)
  np.testing.assert_allclose(
      shared_out[types.TAKEN]['z'], plain_out[types.TAKEN]['z'], **tolerance
  )
  chex.assert_trees_all_close(shared_grads, plain_grads, **tolerance)
  # Teeth: each action steps with its own row of the gates' weights (two
  # actions swapped fail), and the forget gate keeps its bias of 1 (the
  # forget gate's inputs 1 lower, as without it, fail).
  swapped = shared_out['z'][:, [1, 0, 2, 3]]
  assert not np.allclose(swapped, plain_out['z'], **tolerance)
  (gates,) = [k for k in params if k.endswith('action_cond/linear')]
  forget = np.zeros(64, np.float32)
  forget[32:48] = 1.0  # i, g, f, o: the third quarter of 4 x 16.
  no_bias = dict(params)
  no_bias[gates] = dict(params[gates], b=params[gates]['b'] - forget)
  off, _ = shared.one_step(no_bias, state, obs)
  assert not np.allclose(off['z'], plain_out['z'], **tolerance)
