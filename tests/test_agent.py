"""Bad inputs to `disco.agent.Agent` fail early, with errors that say why.

(Golden parity of the agent's numbers is in tests/parity/test_agent.py.)
"""

from dm_env import specs
import jax
import numpy as np
import pytest

from disco import agent as agent_lib
from disco import types

_OBS_SPEC = {'observation': specs.Array((5, 5, 1), np.float32)}
_ACTION_SPEC = specs.BoundedArray((), np.int32, 0, 2)
_T_PLUS_1, _B = 4, 2


def _settings(rule: str = 'actor_critic'):
  """Reference settings with a tiny network."""
  if rule == 'disco':
    settings = agent_lib.get_settings_disco()
    settings.net_settings.net_args.model_kwargs = dict(
        head_mlp_hiddens=(4,), lstm_size=4
    )
  else:
    settings = agent_lib.get_settings_actor_critic()
  settings.net_settings.net_args.dense = (8,)
  return settings


def _agent(settings=None, action_spec=_ACTION_SPEC):
  return agent_lib.Agent(
      single_observation_spec=_OBS_SPEC,
      single_action_spec=action_spec,
      agent_settings=settings if settings is not None else _settings(),
      batch_axis_name=None,
  )


def _zeros_like_shapes(tree):
  return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), tree)


def _rollout(**replaced):
  rollout = types.ActorRollout(
      observations=np.zeros((_T_PLUS_1, _B, 5, 5, 1), np.float32),
      actions=np.zeros((_T_PLUS_1, _B), np.int32),
      rewards=np.zeros((_T_PLUS_1, _B), np.float32),
      discounts=np.ones((_T_PLUS_1, _B), bool),
      logits=np.zeros((_T_PLUS_1, _B, 3), np.float32),
      agent_outs={'logits': np.zeros((_T_PLUS_1, _B, 3), np.float32)},
      states={},
  )
  return rollout.replace(**replaced)


@pytest.mark.parametrize(
    'spec,error,match',
    [
        (
            specs.BoundedArray((2,), np.int32, 0, 2),
            ValueError,
            r'action spec shape \(2,\).*scalar',
        ),
        (
            specs.BoundedArray((), np.float32, 0.0, 2.0),
            TypeError,
            'action spec dtype float32.*int32',
        ),
        (
            specs.BoundedArray((), np.int64, 0, 2),
            TypeError,
            'action spec dtype int64.*int32',
        ),
        (specs.Array((), np.int32), TypeError, 'bounded discrete spec'),
    ],
)
def test_unsupported_action_spec(spec, error, match):
  with pytest.raises(error, match=match):
    _agent(action_spec=spec)


def test_discrete_array_spec_is_accepted():
  agent = _agent(action_spec=specs.DiscreteArray(3))
  assert agent.update_rule.flat_output_spec(_ACTION_SPEC)['logits'].shape == (
      3,
  )


def test_unknown_update_rule():
  settings = _settings()
  settings.update_rule_name = 'not_a_rule'
  with pytest.raises(ValueError, match=r"update rule: 'not_a_rule'.*disco"):
    _agent(settings)


def test_unknown_network():
  settings = _settings()
  settings.net_settings.name = 'not_a_net'
  with pytest.raises(ValueError, match=r"network: 'not_a_net'.*mlp"):
    _agent(settings)


@pytest.fixture(scope='module')
def disco_agent():
  return _agent(_settings('disco'))


@pytest.fixture(scope='module')
def disco_args(disco_agent):
  """(learner_state, meta_params) of the right shapes, all zeros."""
  rng = jax.random.PRNGKey(0)
  learner_state = _zeros_like_shapes(
      jax.eval_shape(disco_agent.initial_learner_state, rng)
  )
  meta_params, _ = jax.eval_shape(disco_agent.update_rule.init_params, rng)
  return learner_state, _zeros_like_shapes(meta_params)


def _learner_step(agent, learner_state, meta_params, rollout=None, jit=False):
  step = agent.learner_step
  if jit:
    step = jax.jit(step, static_argnames='is_meta_training')
  return step(
      jax.random.PRNGKey(0),
      rollout if rollout is not None else _rollout(),
      learner_state,
      {},
      meta_params,
      is_meta_training=False,
  )


@pytest.mark.parametrize('jit', [False, True])
def test_missing_meta_params_are_named(disco_agent, disco_args, jit):
  learner_state, meta_params = disco_args
  meta_params = dict(meta_params)
  del meta_params['lstm/linear_4']
  with pytest.raises(
      ValueError,
      match=r'DiscoUpdateRule: 2 missing: lstm/linear_4/b, lstm/linear_4/w',
  ):
    _learner_step(disco_agent, learner_state, meta_params, jit=jit)


def test_wrong_meta_param_shapes_are_named(disco_agent, disco_args):
  learner_state, meta_params = disco_args
  meta_params = dict(meta_params)
  meta_params['lstm/linear_1'] = dict(
      meta_params['lstm/linear_1'], w=np.zeros((3, 1), np.float32)
  )
  meta_params['extra'] = {'w': np.zeros((2,), np.float32)}
  with pytest.raises(ValueError) as error:
    _learner_step(disco_agent, learner_state, meta_params)
  message = str(error.value)
  assert '1 unexpected: extra/w' in message
  assert (
      '1 mismatched: lstm/linear_1/w (expected (256, 1), got (3, 1))' in message
  )


def test_meta_params_of_another_rule(disco_agent, disco_args):
  learner_state, _ = disco_args
  with pytest.raises(
      ValueError, match=r'42 missing: .*\(37 more\); 1 unexpected: dummy\.'
  ):
    _learner_step(disco_agent, learner_state, {'dummy': 0.0})


@pytest.mark.parametrize(
    'replaced,error,match',
    [
        (
            dict(rewards=np.zeros((_T_PLUS_1 - 1, _B), np.float32)),
            ValueError,
            r'rollout.rewards has leading axes \(3, 2\) but rollout.actions'
            r' has \(4, 2\)',
        ),
        (
            dict(observations=np.zeros((_T_PLUS_1, _B + 1, 5, 5, 1))),
            ValueError,
            r'rollout.observations.* has leading axes \(4, 3\)',
        ),
        (
            dict(discounts=np.ones((_T_PLUS_1, 1), bool)),
            ValueError,
            r'rollout.discounts has leading axes \(4, 1\)',
        ),
        (
            dict(actions=np.zeros((1, _T_PLUS_1, _B), np.int32)),
            ValueError,
            r'rollout.actions must have shape \[T\+1, B\].*device axis',
        ),
        (
            dict(logits=np.zeros((_T_PLUS_1, _B, 4), np.float32)),
            ValueError,
            r'rollout.logits must be \[T\+1, B, 3\]',
        ),
        (
            dict(agent_outs={}),
            ValueError,
            "agent_outs must be a dict with 'logits'",
        ),
    ],
)
def test_inconsistent_rollouts(disco_agent, disco_args, replaced, error, match):
  learner_state, meta_params = disco_args
  with pytest.raises(error, match=match):
    _learner_step(disco_agent, learner_state, meta_params, _rollout(**replaced))


def test_rollout_needs_two_steps(disco_agent, disco_args):
  learner_state, meta_params = disco_args
  one_step = jax.tree.map(lambda x: x[:1], _rollout())
  with pytest.raises(ValueError, match='at least 2 time steps, got 1'):
    _learner_step(disco_agent, learner_state, meta_params, one_step)


def test_rollout_must_be_an_actor_rollout(disco_agent, disco_args):
  learner_state, meta_params = disco_args
  timestep = types.ActorTimestep.from_rollout(_rollout())
  with pytest.raises(TypeError, match='Expected a types.ActorRollout'):
    _learner_step(disco_agent, learner_state, meta_params, timestep)


def test_actor_critic_meta_params_shape():
  agent = _agent()
  learner_state = _zeros_like_shapes(
      jax.eval_shape(agent.initial_learner_state, jax.random.PRNGKey(0))
  )
  with pytest.raises(
      ValueError,
      match=r'ActorCritic: 1 mismatched: dummy \(expected \(\), got \(3,\)\)',
  ):
    _learner_step(agent, learner_state, {'dummy': np.zeros(3)})
