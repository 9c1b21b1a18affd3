"""The trainer's fast update (`forward_once`) against the reference's.

`Agent(forward_once=True)` runs the online network once per learner step
and takes the loss's gradient through `jax.vjp` of that pass; the
reference runs the network twice. The operations are the same, and on this
CPU the steps are the same bit for bit, for every rule and with or without
taken-action gradients. (`tests/parity/test_agent.py` and
`test_eval_curve.py` hold the trainer's whole fast update, which adds
taken-action gradients and shared meta-network inputs, to the reference's
goldens at the cross-platform tolerances.)
"""

import functools

import chex
import jax
import pytest

from disco import acting
from disco import agent as agent_lib
from disco import configs
from disco import learner
from disco import schedules
from disco import train
from disco import utils
from disco.value_fns import value_fn as value_fn_lib

_STEPS = 3


def _steps(rule: str, taken: bool):
  """`_STEPS` learner steps of each agent (forward_once True and False).

  Both agents run the same network, so they start from one state and learn
  from one rollout (acted by the first), with the same keys.
  """
  config = train.preset(
      'crafter',
      rule=rule,
      env='catch',
      env_settings={'rows': 5, 'columns': 4},
      frame_stack=1,
      agent='minatar',
      agent_dense=(32,),
      agent_lstm_size=16,
      agent_head_mlp_hiddens=(16,),
      num_envs=6,
  )
  env = learner.make_env(config, 6)
  rule_params = learner.build(config, None).update_rule_params
  agents = {
      forward_once: agent_lib.Agent(
          single_observation_spec=env.single_observation_spec(),
          single_action_spec=env.single_action_spec(),
          agent_settings=learner.make_agent_settings(config),
          batch_axis_name=None,
          taken_action_gradients=taken,
          forward_once=forward_once,
          optimizer=schedules.config_optimizer(config),
      )
      for forward_once in (True, False)
  }
  agent = agents[True]
  initial_state = agent.initial_learner_state(jax.random.key(0))
  actor_state = agent.initial_actor_state(jax.random.key(0))
  env_state, timestep = env.reset(jax.random.key(1))
  rollout, *_ = acting.unroll_jittable_actor(
      initial_state.params,
      actor_state,
      timestep,
      env_state,
      jax.random.key(2),
      env=env,
      rollout_len=9,
      actor_step_fn=agent.actor_step,
  )
  step_kwargs = [{} for _ in range(_STEPS)]
  if rule == 'policy_gradient':
    # `learner.make_value_function`'s, without a device axis.
    value_fn = value_fn_lib.ValueFunction(
        configs.value_fn_config(
            config,
            max_abs_update=agent.settings.max_abs_update,
            discount_factor=agent.settings.hyper_params.discount_factor,
            outer_value_cost=1.0,
        ),
        axis_name=None,
    )
    value_state = value_fn.initial_state(
        jax.random.key(5),
        utils.zeros_like_spec(
            env.single_observation_spec(), prepend_shape=(1,)
        ),
    )
    update = jax.jit(value_fn.update)
    for kwargs in step_kwargs:
      value_state, kwargs['value_out'], _ = update(
          value_state, learner.value_fn_rollout(rollout), rollout.logits
      )
  outputs = {}
  for forward_once, each in agents.items():
    step = jax.jit(functools.partial(each.learner_step, is_meta_training=False))
    state, outputs[forward_once] = initial_state, []
    for i, kwargs in enumerate(step_kwargs):
      state, _, logs = step(
          jax.random.key(10 + i), rollout, state, actor_state, rule_params,
          **kwargs,
      )  # fmt: skip
      outputs[forward_once].append((state, logs))
  return outputs


# The trainer's taken-action gradients for each rule, and Disco's without
# (the parity tests run the reference's settings, without, for the others).
@pytest.mark.parametrize(
    'rule, taken',
    [
        ('disco', True),
        ('disco', False),
        ('actor_critic', True),
        ('policy_gradient', True),
    ],
)
def test_one_forward_pass_takes_the_references_steps(rule, taken):
  steps = _steps(rule, taken)
  chex.assert_trees_all_equal(steps[True], steps[False])
