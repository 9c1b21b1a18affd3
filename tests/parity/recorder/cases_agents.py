"""Recipes of the meta-network and agent cases.

The meta-network's initialisation and weights, its unroll with Disco103,
the small agents' chained steps and the full-size agent's checksums. Each
takes (ref, spec) and returns the recomputed keys.
"""

import functools

import jax
import numpy as np

from tests.parity import golden
from tests.parity.recorder import calls
from tests.parity.recorder import spec as spec_lib


def _disco_rule(ref):
  return ref.disco.DiscoUpdateRule(**ref.agent.get_settings_disco().update_rule)


def record_meta_net_init(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  params, state = jax.jit(_disco_rule(ref).init_params)(spec['inputs/rng'])
  return {
      **calls.flat('params', params),
      **calls.flat('expected/meta_rnn_state', state),
  }


def record_disco103(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  del spec
  return calls.flat('params', calls.disco103(ref))


def record_unroll_meta_net(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """Two chained jitted unrolls with Disco103, and both losses on each."""
  config = spec.config
  agent = calls.spec_agent(ref, config)
  rule = agent.update_rule
  hyper = config['hyper_params']
  params = golden.to_haiku(spec.sub('inputs/params'))
  meta_state = calls.fill(
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
  meta_params = calls.disco103(ref)
  out = {}
  for i in range(spec.count('inputs/rollout')):
    f = spec.sub(f'inputs/rollout/{i}')
    rollout = ref.types.UpdateRuleInputs(
        observations=f['observations'],
        actions=f['actions'],
        rewards=f['rewards'],
        is_terminal=f['is_terminal'],
        agent_out=calls.subtree(f, 'agent_out'),
        behaviour_agent_out=calls.subtree(f, 'behaviour_agent_out'),
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
        calls.flat(
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


def _learner_outputs(prefix: str, state, logs) -> dict[str, np.ndarray]:
  logs = dict(logs)
  meta_out = dict(logs.pop('meta_out'))
  meta_out.pop('target_out', None)
  return calls.flat(
      prefix, dict(learner_state=state, logs=logs, meta_out=meta_out)
  )


def record_small_agent(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  """Init, actor_step, unroll_net and chained learner steps, all jitted."""
  agent, rule_params = calls.make_agent(ref, spec.config)
  state = jax.jit(agent.initial_learner_state)(spec['inputs/init_rng'])
  out = calls.flat('expected/initial_learner_state', state)
  timestep = spec.sub('inputs/actor_step/timestep')
  actor_timestep, _ = jax.jit(agent.actor_step)(
      state.params,
      spec['inputs/actor_step/rng'],
      ref.types.EnvironmentTimestep(**timestep),
      {},
  )
  out.update(calls.flat('expected/actor_step/actor_timestep', actor_timestep))
  if spec.names('expected/unroll_net'):
    agent_out, _ = jax.jit(agent.unroll_net)(
        state.params,
        {},
        calls.actor_rollout(ref, spec.sub('inputs/rollouts/0')),
    )
    out.update(calls.flat('expected/unroll_net/0/agent_out', agent_out))
  step = jax.jit(functools.partial(agent.learner_step, is_meta_training=False))
  for i in range(spec.config['n_learner_steps']):
    state, _, logs = step(
        spec[f'inputs/learner_rngs/{i}'],
        calls.actor_rollout(ref, spec.sub(f'inputs/rollouts/{i}')),
        state,
        {},
        rule_params,
    )
    out.update(_learner_outputs(f'expected/learner_steps/{i}', state, logs))
  return out


def record_full_agent(ref, spec: spec_lib.Spec) -> dict[str, np.ndarray]:
  agent, rule_params = calls.make_agent(ref, spec.config)
  init = jax.jit(agent.initial_learner_state)(spec['inputs/init_rng'])
  step = jax.jit(functools.partial(agent.learner_step, is_meta_training=False))
  state, _, logs = step(
      spec['inputs/learner_rng'],
      calls.actor_rollout(ref, spec.sub('inputs/rollout')),
      init,
      {},
      rule_params,
  )
  logs = dict(logs)
  meta_out = logs.pop('meta_out')
  return {
      **calls.checksums('expected/initial_learner_state_checksum', init),
      **calls.checksums('expected/learner_step/learner_state_checksum', state),
      **calls.checksums('expected/learner_step/meta_out_checksum', meta_out),
      **calls.flat('expected/learner_step/logs', logs),
  }
