"""Recipes of the cases that run a colab's loop.

The eval colab's training loop (the eval curve) and the meta-train colab's
meta-gradient. Each takes (ref, spec) and returns the recomputed keys.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from tests.parity.recorder import calls
from tests.parity.recorder import colab
from tests.parity.recorder import spec as spec_lib


def record_eval_curve(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """The eval colab's loop, pmapped over one device as the colab does."""
  config = spec.config
  ns = colab.namespace(ref)
  exec(  # pylint: disable=exec-used
      colab.notebook_cells(
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
  agent, rule_params = calls.make_agent(
      ref, dict(config, batch=num_envs), batch_axis_name=axis_name
  )
  ns['agent'] = agent
  env = calls.catch(
      ref, num_envs, config['catch_rows'], config['catch_columns']
  )
  devices = tuple(jax.devices()[: config['devices']])
  rng = jax.random.PRNGKey(calls.seed_of(config['rng']))
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
  out.update(calls.flat('expected/logs', logs))
  out.update(calls.checksums('expected/final_params_checksum', final))
  return out


def record_meta_gradient(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """The meta-train colab's calculate_meta_gradient, jitted, one agent."""
  config = spec.config
  ns, agent = colab.meta_train_agent(ref, config)
  key = jax.random.PRNGKey(0)
  template = jax.eval_shape(agent.init_state, key)
  env_state, env_timestep = agent.env.reset(key)
  state = ns['MetaTrainState'](
      learner_state=calls.fill(
          template.learner_state, spec.sub('inputs/agent_state/learner_state')
      ),
      actor_state={},
      value_state=calls.fill(
          template.value_state, spec.sub('inputs/agent_state/value_state')
      ),
      env_state=env_state,
      env_timestep=env_timestep,
  )
  out = {}
  if 'PRNGKey(' in config.get('update_rule_params', ''):
    # Random update-rule parameters, drawn as the config says (the colab's
    # `agent.update_rule.init_params(PRNGKey(seed))`, eagerly).
    seed = calls.seed_of(config['update_rule_params'])
    rule_params, _ = agent.agent.update_rule.init_params(
        jax.random.PRNGKey(seed)
    )
    out.update(calls.flat('params', rule_params))
  else:
    rule_params = calls.disco103(ref)

  def rollout(prefix):
    return calls.actor_rollout(ref, spec.sub(prefix))

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
      **calls.flat('expected/meta_grads', grads),
      **calls.flat('expected/meta_log', meta_log),
      **calls.flat('expected/train_metrics', train_metrics),
      **calls.flat(
          'expected/new_agent_state',
          dict(
              learner_state=new_state.learner_state,
              value_state=new_state.value_state,
          ),
      ),
  }
