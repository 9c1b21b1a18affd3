"""Where does a Disco103 learner update spend its time, piece by piece?

On one learner batch of the `paper` preset (96 trajectories of 29 steps,
from a rollout of the initial agent), times jitted calls of:

  unroll       the agent network over the batch, every action's outputs
  meta_inputs  that, plus the target network's unroll, the value
               estimates and the meta-network (everything the rule does
               before the loss)
  update       the whole learner update (`Agent.learner_step`, with the
               trainer's taken-action gradients)
  ac_update    actor-critic's learner update with the same agent

so `update - meta_inputs` is the loss's forward and backward pass and
`meta_inputs - 2 * unroll` roughly the meta-network. Milliseconds per call,
best of `--repeats` means of `--calls` calls; one process per setting.

  python benchmarks/learner_profile.py
  python benchmarks/learner_profile.py --env catch --agents colab
"""

import argparse
import functools
import json
import sys
import time

from disco.studies import timing

_CHILD = '--child'


def _time(fn, args, calls: int, repeats: int) -> float:
  import jax  # pylint: disable=g-import-not-at-top

  fn = jax.jit(fn)
  jax.block_until_ready(fn(*args))
  best = float('inf')
  for _ in range(repeats):
    start = time.perf_counter()
    for _ in range(calls):
      out = fn(*args)
    jax.block_until_ready(out)
    best = min(best, (time.perf_counter() - start) / calls)
  return 1000.0 * best


def child(spec: dict) -> dict:
  """Times the pieces of one setting; returns milliseconds per piece."""
  # pylint: disable=g-import-not-at-top
  import jax
  import jax.numpy as jnp

  from disco import acting
  from disco import devices
  from disco import learner
  from disco import precision
  from disco import train

  # pylint: enable=g-import-not-at-top

  def build(rule):
    config = train.preset(
        'paper',
        agent=spec['agent'],
        env=spec['env'],
        rule=rule,
        compute_dtype=spec['dtype'],
    )
    setup = learner.build(config, None, taken_action_gradients=True)
    return config, setup

  config, setup = build('disco')
  agent, env = setup.agent, setup.env
  key = jax.random.PRNGKey(0)
  params_key, env_key, act_key = jax.random.split(key, 3)
  learner_state = agent.initial_learner_state(params_key)
  actor_state = agent.initial_actor_state(params_key)
  env_state, timestep = env.reset(env_key)
  unroll_fn = functools.partial(
      acting.unroll_jittable_actor,
      env=env,
      rollout_len=config.rollout_len,
      actor_step_fn=agent.actor_step,
  )
  rollout, *_ = jax.jit(unroll_fn)(
      learner_state.params, actor_state, timestep, env_state, act_key
  )
  # [T+1, num_envs] -> [T+1, 96]: the rollout repeated to a learner batch.
  reps = -(-config.learner_batch_size // config.num_envs)
  batch = jax.tree.map(
      lambda x: jnp.concatenate([x] * reps, 1)[:, : config.learner_batch_size],
      acting.trim_agent_outs(rollout),
  )
  rule_params = setup.update_rule_params
  dtype = spec['dtype']

  def on_device(fn):
    """`fn` under the agent's pmap axis (one device) and the dtype."""
    inner = precision.compute_in(dtype, fn)
    return lambda *xs: jax.vmap(inner, axis_name=devices.AXIS_NAME)(
        *jax.tree.map(lambda x: x[None], xs)
    )

  def unroll(params, state, batch):
    return agent.unroll_net(params, state, batch)[0]

  def meta_inputs(params, state, batch, learner_state, rule_params):
    agent_out, _ = agent.unroll_net(params, state, batch)
    meta_out, _ = agent.update_rule.unroll_meta_net(
        meta_params=rule_params,
        params=params,
        state=state,
        meta_state=learner_state.meta_state,
        rollout=agent._update_rule_inputs(batch, agent_out, None),  # pylint: disable=protected-access
        hyper_params=agent._hyper_params,  # pylint: disable=protected-access
        unroll_policy_fn=agent.network.unroll,
        rng=None,
        axis_name=devices.AXIS_NAME,
    )
    return meta_out['pi']

  def update_with(a):
    def update(state, batch, learner_state, rule_params):
      return a.learner_step(
          key, batch, learner_state, state, rule_params, False
      )[0].params

    return update

  calls, repeats = spec['calls'], spec['repeats']
  p = learner_state.params
  row = dict(
      unroll=_time(on_device(unroll), (p, actor_state, batch), calls, repeats),
      meta_inputs=_time(
          on_device(meta_inputs),
          (p, actor_state, batch, learner_state, rule_params),
          calls,
          repeats,
      ),
      update=_time(
          on_device(update_with(agent)),
          (actor_state, batch, learner_state, rule_params),
          calls,
          repeats,
      ),
  )
  _, ac_setup = build('actor_critic')
  ac_agent = ac_setup.agent
  ac_state = ac_agent.initial_learner_state(params_key)
  row['ac_update'] = _time(
      on_device(update_with(ac_agent)),
      (actor_state, batch, ac_state, ac_setup.update_rule_params),
      calls,
      repeats,
  )
  return row


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--env', default='gymnax:Breakout-MinAtar')
  parser.add_argument('--agents', nargs='+', default=('colab', 'minatar'))
  parser.add_argument('--dtypes', nargs='+', default=('float32', 'bfloat16'))
  parser.add_argument('--calls', type=int, default=5)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument(_CHILD, default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    print(json.dumps(child(json.loads(args.child))))
    return 0
  print(f'{args.env}: milliseconds per call (paper batch 96 x 29)')
  print('agent     dtype      unroll  meta_inputs  update  ac_update')
  for agent in args.agents:
    for dtype in args.dtypes:
      spec = dict(
          env=args.env,
          agent=agent,
          dtype=dtype,
          calls=args.calls,
          repeats=args.repeats,
      )
      row = timing.child_result(__file__, _CHILD, spec)
      if row is None:
        continue
      print(
          f'{agent:9} {dtype:9} {row["unroll"]:7.0f} {row["meta_inputs"]:12.0f}'
          f' {row["update"]:7.0f} {row["ac_update"]:10.0f}',
          flush=True,
      )
  return 0


if __name__ == '__main__':
  sys.exit(main())
