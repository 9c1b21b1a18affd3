"""The builtin spec: every case's inputs drawn here, no golden set needed.

`builtin_spec.json` lists, per case, its config, its stored inputs
(`inputs/...` key -> [shape, dtype]) and how many output keys a recording
holds. `generate` makes those inputs from the case's seed: random draws
with numpy (normal logits, mostly-true discounts and masks, actions in
[0, A), small rewards, ...), rng keys as `PRNGKey(seed + i)`, and what a
real run would have produced (Catch rollouts from the agent's own actor
steps, network outputs, initial learner and value states) by running the
reference. The draws are not the shipped sets' (their generator's draws are
unknown), but they are valid inputs, so the recorder can record every case
on any machine from a clone of the reference alone:

    python -m tests.parity.record --reference ../disco_rl --spec builtin \\
        --out ../parity-here
"""

from collections.abc import Callable, Mapping
import functools
import json
import os
import pathlib
from typing import Any
import zlib

import jax
import numpy as np

from tests.parity import golden
from tests.parity.recorder import calls
from tests.parity.recorder import colab
from tests.parity.recorder import kinds

NAME = 'builtin'
SPEC_FILE = pathlib.Path(__file__).with_name('builtin_spec.json')
# Another spec of this format (e.g. variant.py's, other seeds and sizes), for
# the recorder's `--spec FILE.json`.
SPEC_ENV = 'DISCO_BUILTIN_SPEC'

# Jittable Catch's step types (dm_env.StepType).
_MID, _LAST = 1, 2


def spec_file() -> pathlib.Path:
  """`$DISCO_BUILTIN_SPEC` if set, else builtin_spec.json."""
  value = os.environ.get(SPEC_ENV)
  return pathlib.Path(value).resolve() if value else SPEC_FILE


def label() -> str:
  """The spec's name in a recording: `builtin`, or `builtin:<its file>`."""
  path = spec_file()
  return NAME if path == SPEC_FILE.resolve() else f'{NAME}:{path.name}'


def load() -> dict[str, dict[str, Any]]:
  """{case: its entry (`about`, `config`, `inputs`, `outputs`, ...)}."""
  return _load(spec_file())


@functools.cache
def _load(path: pathlib.Path) -> dict[str, dict[str, Any]]:
  return json.loads(path.read_text())['cases']


def cases() -> list[str]:
  return sorted(load())


# --- Plain random draws ------------------------------------------------------


class Draws:
  """A case's random draws, each key from its own stream of the case seed."""

  def __init__(self, name: str, entry: Mapping[str, Any]):
    self.name = name
    self.config = entry['config']
    self.inputs = entry['inputs']
    self.seed = int(self.config.get('seed', self.config.get('reset_seed', 0)))
    keys = [
        k for k, (shape, dtype) in self.inputs.items() if _is_rng(shape, dtype)
    ]
    self._rng_index = {k: i for i, k in enumerate(keys)}

  def rng(self, key: str) -> np.random.Generator:
    return np.random.default_rng([self.seed, zlib.crc32(key.encode())])

  def prng_key(self, key: str) -> np.ndarray:
    """A raw threefry key: PRNGKey(seed + i) for the case's i-th rng key."""
    index = self._rng_index.get(key, len(self._rng_index))
    return np.asarray(jax.random.PRNGKey(self.seed + index))

  def num_actions(self) -> int:
    """A: from the config, else the last axis of the case's logits."""
    for name in ('num_actions', 'A'):
      if name in self.config:
        return int(self.config[name])
    for key, (shape, _) in self.inputs.items():
      if key.endswith('logits') and len(shape) >= 3:
        return int(shape[-1])
    return 3

  def draw(self, key: str) -> np.ndarray:
    """A plausible value for `key`, by what its name says it is."""
    shape, dtype = self.inputs[key]
    shape = tuple(shape)
    leaf = key.rsplit('/', 1)[-1]
    rng = self.rng(key)
    if _is_rng(list(shape), dtype):
      return self.prng_key(key)
    if dtype == 'bool':
      # Terminal flags are rare; discounts and masks mostly true.
      p_true = 0.15 if 'terminal' in leaf else 0.85
      return rng.random(shape) < p_true
    if dtype == 'int32':
      if leaf == 'step_type':
        return np.where(rng.random(shape) < 0.15, _LAST, _MID).astype(np.int32)
      if leaf in ('actions', 'index'):
        return rng.integers(0, self.num_actions(), shape, dtype=np.int32)
      return rng.integers(0, 10, shape, dtype=np.int32)
    if dtype != 'float32':
      raise ValueError(f'{self.name}: no draw for {key} ({dtype}).')
    return _float(key, leaf, shape, rng).astype(np.float32)


def _is_rng(shape: list[int], dtype: str) -> bool:
  """Raw threefry keys are uint32[2]."""
  return dtype == 'uint32' and list(shape) == [2]


def _float(
    key: str, leaf: str, shape: tuple[int, ...], rng: np.random.Generator
) -> np.ndarray:
  """Floats by kind: boards, rewards, discounts, EMA moments, logits..."""
  if leaf in ('observation', 'observations'):
    return _boards(shape, rng)
  if leaf in ('rewards', 'reward'):
    return rng.choice([-1.0, 0.0, 1.0], size=shape, p=[0.1, 0.8, 0.1])
  if leaf == 'env_discounts':
    return (rng.random(shape) < 0.85).astype(np.float64)
  if leaf == 'rho':
    return np.exp(0.3 * rng.standard_normal(shape))
  if leaf == 'decay_product':
    return 0.99 ** rng.integers(1, 50, shape)
  if leaf == 'moment1':
    return 0.1 * rng.standard_normal(shape)
  if leaf == 'moment2':
    return rng.uniform(0.05, 1.0, shape)
  if leaf == 'policy':
    logits = rng.standard_normal(shape)
    return np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  if leaf == 'scalars':
    # Values across the support, some beyond it (b11's is [-5, 5]).
    return (
        rng.uniform(-7.0, 7.0, shape)
        if '/b11/' in key
        else (40.0 * rng.standard_normal(shape))
    )
  if leaf == 'value_target':
    return 3.0 * rng.standard_normal(shape)
  return rng.standard_normal(shape)


def _boards(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
  """Catch-like boards [..., rows, cols(, 1)]: a ball and a bottom paddle."""
  spatial = 3 if shape[-1] == 1 else 2
  lead, (rows, cols) = shape[:-spatial], shape[-spatial:][:2]
  boards = np.zeros(lead + (rows, cols), np.float64)
  for index in np.ndindex(*lead):
    boards[index + (rng.integers(0, rows - 1), rng.integers(0, cols))] = 1.0
    boards[index + (rows - 1, rng.integers(0, cols))] = 1.0
  return boards.reshape(shape)


# --- Inputs the reference produces -------------------------------------------
# Each takes (ref, draws) and returns some of the case's inputs; the rest are
# drawn. `ref`: the reference's modules (recorder/reference.py).


def _rollout(
    agent, params, env, env_state, timestep, rng, length: int
) -> tuple[dict[str, np.ndarray], Any, Any]:
  """`length` actor steps on `env`: an ActorRollout, flat, time-major."""
  actor_step = jax.jit(agent.actor_step)
  env_step = jax.jit(env.step)
  steps = []
  for step_rng in jax.random.split(rng, length):
    actor_timestep, _ = actor_step(params, step_rng, timestep, {})
    steps.append(actor_timestep)
    env_state, timestep = env_step(env_state, actor_timestep.actions)
  stacked = jax.tree.map(lambda *xs: np.stack(xs), *steps)
  rollout = dict(
      observations=stacked.observations,
      actions=stacked.actions,
      rewards=stacked.rewards,
      discounts=stacked.discounts,
      logits=stacked.logits,
      # Upstream reads no other key of the behaviour outputs.
      agent_outs={'logits': stacked.agent_outs['logits']},
  )
  return golden.flatten(rollout), env_state, timestep


def _rollouts_of(
    agent, params, env, prefixes: list[str], length: int, seed: int
) -> dict[str, np.ndarray]:
  """Consecutive rollouts of one env run from `seed`, under `prefixes`."""
  env_state, timestep = jax.jit(env.reset)(jax.random.PRNGKey(seed + 100))
  rng = jax.random.PRNGKey(seed + 200)
  out = {}
  for prefix in prefixes:
    rng, step_rng = jax.random.split(rng)
    flat, env_state, timestep = _rollout(
        agent, params, env, env_state, timestep, step_rng, length
    )
    out.update({f'{prefix}{k}': v for k, v in flat.items()})
  return out


def _agent_case(ref, draws: Draws) -> dict[str, np.ndarray]:
  """Small and full agents: init key, reset timestep, their own rollouts."""
  config = draws.config
  agent, _ = calls.make_agent(ref, config)
  env = calls.catch(
      ref, config['batch'], config['catch_rows'], config['catch_columns']
  )
  out = {'inputs/init_rng': draws.prng_key('inputs/init_rng')}
  params = jax.jit(agent.initial_learner_state)(out['inputs/init_rng']).params
  if 'inputs/actor_step/rng' in draws.inputs:
    _, timestep = jax.jit(env.reset)(jax.random.PRNGKey(draws.seed + 100))
    out.update(calls.flat('inputs/actor_step/timestep', timestep))
  num = calls.count(draws.inputs, 'inputs/rollouts')
  names = [f'inputs/rollouts/{i}/' for i in range(num)] or ['inputs/rollout/']
  length = draws.inputs[f'{names[0]}actions'][0][0]
  out.update(_rollouts_of(agent, params, env, names, length, draws.seed))
  return out


def _value_function(ref, draws: Draws) -> dict[str, np.ndarray]:
  """Rollouts of the case's rollout agent; a zero dummy observation."""
  config = draws.config
  agent_config = dict(
      config, agent_settings=config['rollout_agent']['settings']
  )
  rollouts = {k: v for k, v in draws.inputs.items() if '/rollouts/' in k}
  entry = dict(config=agent_config, inputs=rollouts)
  out = _agent_case(ref, Draws(draws.name, entry))
  out['inputs/dummy_observation/observation'] = np.zeros(
      draws.inputs['inputs/dummy_observation/observation'][0], np.float32
  )
  return {k: v for k, v in out.items() if k in draws.inputs}


def _unroll_meta_net(ref, draws: Draws) -> dict[str, np.ndarray]:
  """Agent params, a meta state, and rollouts with the online outputs."""
  config = draws.config
  agent = calls.spec_agent(ref, config)
  init = jax.jit(agent.initial_learner_state)
  params = init(jax.random.PRNGKey(draws.seed)).params
  other = init(jax.random.PRNGKey(draws.seed + 1000)).params
  meta_state = agent.update_rule.init_meta_state(
      jax.random.PRNGKey(draws.seed + 1), params
  )
  # Target parameters that lag the online ones, as after some updates.
  meta_state['target_params'] = jax.tree.map(
      lambda p, q: 0.7 * p + 0.3 * q, params, other
  )
  out = {
      **calls.flat('inputs/params', params),
      **calls.flat('inputs/meta_state', meta_state),
  }
  batch, length = config['B'], config['T'] + 1
  rows, columns = config['single_observation_spec']['observation'][:2]
  env = calls.catch(ref, batch, rows, columns)
  env_state, timestep = jax.jit(env.reset)(jax.random.PRNGKey(draws.seed + 100))
  env_step = jax.jit(env.step)
  unroll = jax.jit(agent._network.unroll)  # pylint: disable=protected-access
  for i in range(calls.count(draws.inputs, 'inputs/rollout')):
    prefix = f'inputs/rollout/{i}'
    rng = draws.rng(prefix)
    observations, actions, rewards, step_types = [], [], [], []
    for _ in range(length):
      action = rng.integers(0, config['num_actions'], (batch,), dtype=np.int32)
      observations.append(np.asarray(timestep.observation))
      rewards.append(np.asarray(timestep.reward))
      step_types.append(np.asarray(timestep.step_type))
      actions.append(action)
      env_state, timestep = env_step(env_state, action)
    observations = np.stack(observations)
    is_terminal = np.stack(step_types)[1:] == _LAST
    should_reset = np.concatenate([np.zeros((1, batch), bool), is_terminal])
    agent_out, _ = unroll(params, {}, observations, should_reset)
    out.update({
        f'{prefix}/observations': observations,
        f'{prefix}/actions': np.stack(actions),
        f'{prefix}/rewards': np.stack(rewards)[1:],
        f'{prefix}/is_terminal': is_terminal,
        f'{prefix}/behaviour_agent_out/logits': draws.draw(
            f'{prefix}/behaviour_agent_out/logits'
        ),
    })
    out.update(calls.flat(f'{prefix}/agent_out', agent_out))
  return {k: v for k, v in out.items() if k in draws.inputs}


def _meta_gradient(ref, draws: Draws) -> dict[str, np.ndarray]:
  """The colab's initial agent state, and its own train/valid rollouts."""
  config = draws.config
  _, agent = colab.meta_train_agent(ref, config)
  state = agent.init_state(jax.random.PRNGKey(draws.seed))
  out = {
      **calls.flat('inputs/agent_state/learner_state', state.learner_state),
      **calls.flat('inputs/agent_state/value_state', state.value_state),
      'inputs/rng': draws.prng_key('inputs/rng'),
  }
  params = state.learner_state.params
  num, length, _ = draws.inputs['inputs/train_rollouts/actions'][0]
  env = agent.env
  names = [f'{i}/' for i in range(num)]
  train = _rollouts_of(agent.agent, params, env, names, length, draws.seed)
  stacked = {}
  for key in {k.split('/', 1)[1] for k in train}:
    stacked[f'inputs/train_rollouts/{key}'] = np.stack(
        [train[f'{i}/{key}'] for i in range(num)]
    )
  valid_length = draws.inputs['inputs/valid_rollout/actions'][0][0]
  valid = _rollouts_of(
      agent.agent,
      params,
      env,
      ['inputs/valid_rollout/'],
      valid_length,
      draws.seed + 1,
  )
  out.update(stacked)
  out.update(valid)
  return {k: v for k, v in out.items() if k in draws.inputs}


# By kind (recorder/kinds.py: what a case's config says it is, not its name).
_PRODUCED: dict[str, Callable[[Any, Draws], dict[str, np.ndarray]]] = {
    'agent_small': _agent_case,
    'agent_full_eval_config': _agent_case,
    'value_function': _value_function,
    'disco_unroll_meta_net': _unroll_meta_net,
    'meta_gradient': _meta_gradient,
}


def generate(ref, name: str) -> dict[str, np.ndarray]:
  """The case's inputs: drawn, or produced by the reference.

  Args:
    ref: the reference's modules (`reference.load_reference`).
    name: the case.

  Returns:
    {key: array} of every input the spec lists.

  Raises:
    ValueError: an input missing, extra, or not of its spec's shape/dtype.
  """
  entry = load()[name]
  draws = Draws(name, entry)
  kind = kinds.kind_of(entry['config'], entry['inputs'], name)
  produced = _PRODUCED.get(kind.name)
  out = dict(produced(ref, draws)) if produced else {}
  for key in entry['inputs']:
    if key not in out:
      out[key] = draws.draw(key)
  check(name, {k: np.asarray(v) for k, v in out.items()}, entry['inputs'])
  return {k: np.asarray(v) for k, v in out.items()}


def check(
    name: str, arrays: Mapping[str, np.ndarray], keys: Mapping[str, Any]
) -> None:
  """Raises unless `arrays` holds exactly `keys`, of their shapes/dtypes."""
  problems = []
  if set(arrays) != set(keys):
    problems.append(
        f'keys differ: missing {sorted(set(keys) - set(arrays))[:5]},'
        f' extra {sorted(set(arrays) - set(keys))[:5]}'
    )
  for key in sorted(set(arrays) & set(keys)):
    shape, dtype = keys[key]
    got = arrays[key]
    if list(got.shape) != list(shape) or got.dtype != np.dtype(dtype):
      problems.append(
          f'{key}: {list(got.shape)} {got.dtype}, spec {shape} {dtype}'
      )
  if problems:
    raise ValueError(f'{name}: ' + '; '.join(problems[:10]))
