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


def _steps(rule: str, taken: bool, forward_once: bool):
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
  agent = agent_lib.Agent(
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      agent_settings=learner.make_agent_settings(config),
      batch_axis_name=None,
      taken_action_gradients=taken,
      forward_once=forward_once,
      optimizer=schedules.config_optimizer(config),
  )
  state = agent.initial_learner_state(jax.random.key(0))
  actor_state = agent.initial_actor_state(jax.random.key(0))
  env_state, timestep = env.reset(jax.random.key(1))
  rollout, *_ = acting.unroll_jittable_actor(
      state.params,
      actor_state,
      timestep,
      env_state,
      jax.random.key(2),
      env=env,
      rollout_len=9,
      actor_step_fn=agent.actor_step,
  )
  value_state = None
  value_fn = None
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
  step = jax.jit(functools.partial(agent.learner_step, is_meta_training=False))
  outputs = []
  for i in range(_STEPS):
    kwargs = {}
    if value_fn is not None:
      if value_state is None:
        value_state = value_fn.initial_state(
            jax.random.key(5),
            utils.zeros_like_spec(
                env.single_observation_spec(), prepend_shape=(1,)
            ),
        )
      value_state, value_out, _ = value_fn.update(
          value_state, learner.value_fn_rollout(rollout), rollout.logits
      )
      kwargs['value_out'] = value_out
    state, _, logs = step(
        jax.random.key(10 + i), rollout, state, actor_state, rule_params,
        **kwargs,
    )  # fmt: skip
    outputs.append((state, logs))
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
  chex.assert_trees_all_equal(
      _steps(rule, taken, forward_once=True),
      _steps(rule, taken, forward_once=False),
  )
