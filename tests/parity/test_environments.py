"""Parity of the Catch environments with the reference's goldens.

Cases `env_catch_jittable_5x5`, `env_catch_jittable_8x8` (batched jittable
Catch: reset, then 40 steps) and `env_catch_cpu` (batched numpy Catch). All
outputs are integers or 0/1 floats and must match exactly, in both modes.
"""

import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np
import pytest

from disco.environments import catch
from disco.environments import jittable_envs
from tests.parity import golden

_EXACT = dict(rtol=0.0, atol=0.0)


def _check_action_spec(spec, want):
  assert list(spec.shape) == want['shape']
  assert spec.dtype == np.dtype(want['dtype'])
  assert (spec.minimum, spec.maximum) == (want['minimum'], want['maximum'])


def _stack(trees):
  return jax.tree.map(lambda *xs: np.stack(xs), *trees)


@pytest.mark.parametrize(
    'name', ['env_catch_jittable_5x5', 'env_catch_jittable_8x8']
)
def test_jittable_catch(name):
  case = golden.Case(name)
  config = case.config
  env = jittable_envs.CatchJittableEnvironment(
      batch_size=config['batch_size'],
      env_settings=config_dict.ConfigDict(
          dict(rows=config['rows'], columns=config['columns'])
      ),
  )
  _check_action_spec(env.single_action_spec(), config['action_spec'])
  obs_spec = env.single_observation_spec()
  assert list(obs_spec) == ['observation']
  want_shape = config['single_observation_spec']['observation']
  assert list(obs_spec['observation'].shape) == want_shape
  assert obs_spec['observation'].dtype == np.dtype(config['observation_dtype'])

  env_state, timestep = jax.jit(env.reset)(
      jnp.asarray(case['inputs/reset_rng'])
  )
  golden.assert_close(
      golden.flatten(dict(env_state=env_state, timestep=timestep)),
      case.subtree('expected/reset'),
      **_EXACT,
      case=case,
      label='reset',
  )
  step = jax.jit(env.step)
  states, timesteps = [], []
  for actions in case['inputs/actions']:
    env_state, timestep = step(env_state, jnp.asarray(actions))
    states.append(env_state)
    timesteps.append(timestep)
  assert len(states) == config['num_steps']
  golden.assert_close(
      golden.flatten(
          dict(env_state=_stack(states), timestep=_stack(timesteps))
      ),
      case.subtree('expected/steps'),
      **_EXACT,
      case=case,
      label='steps',
  )


def test_cpu_catch():
  name = 'env_catch_cpu'
  case = golden.Case(name)
  config = case.config
  env = catch.CatchEnvironment(
      batch_size=config['batch_size'],
      env_settings=config_dict.ConfigDict(config['env_settings']),
  )
  obs_spec = env.single_observation_spec()
  want_obs_spec = config['single_observation_spec']
  assert list(obs_spec.shape) == want_obs_spec['shape']
  assert obs_spec.dtype == np.dtype(want_obs_spec['dtype'])
  assert obs_spec.name == want_obs_spec['name']
  _check_action_spec(env.single_action_spec(), config['action_spec'])

  # The constructor resets every env once; the wrapper keeps those steps.
  constructed = env._stacked_timesteps()  # pylint: disable=protected-access
  golden.assert_close(
      golden.flatten(constructed),
      case.subtree('expected/construct_timestep'),
      **_EXACT,
      case=case,
      label='construct_timestep',
  )
  _, reset = env.reset(jax.random.PRNGKey(0))
  golden.assert_close(
      golden.flatten(reset),
      case.subtree('expected/reset_timestep'),
      **_EXACT,
      case=case,
      label='reset_timestep',
  )
  # Each env's numpy seed: its first two draws are the ball columns of the
  # constructor's and reset's boards (the ball starts in row 0).
  for i, seed in enumerate(case['expected/per_env_seeds']):
    rng = np.random.RandomState(seed)
    columns = config['env_settings']['columns']
    for board in (constructed.observation[i], reset.observation[i]):
      assert board[0, rng.randint(columns)] == 1.0

  steps = [env.step(None, actions)[1] for actions in case['inputs/actions']]
  golden.assert_close(
      golden.flatten(_stack(steps)),
      case.subtree('expected/steps'),
      **_EXACT,
      case=case,
      label='steps',
  )
