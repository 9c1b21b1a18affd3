"""Plausible porting bugs, applied one at a time to check the suite's teeth.

Each mutation monkeypatches the library (nothing in `disco/` changes) so
that it computes what a port with that bug would. `DISCO_PARITY_MUTATION=
<name>` applies one for a whole pytest session (see conftest.py), and
`python -m tests.parity.teeth` runs the parity suite under each of them, in
both modes, and tabulates which cases fail (docs/parity.md). The first ten
are the bugs issue 10 lists; the others are further ones seen in ports.
"""

from collections.abc import Callable
import dataclasses
import functools

import immutabledict
import jax.numpy as jnp
import optax
import pytest
import rlax

from disco import agent as agent_lib
from disco import meta_train as meta_train_api
from disco import optimizers
from disco.meta_train import maths as meta_train
from disco.meta_train import meta_gradient
from disco.update_rules import disco as disco_rule
from disco.update_rules import input_transforms
from disco.value_fns import value_utils


@dataclasses.dataclass(frozen=True)
class Mutation:
  """A bug: what it is, and how to put it into the library."""

  name: str
  description: str
  apply: Callable[[pytest.MonkeyPatch], None]


def _retrace_late_traces(mp: pytest.MonkeyPatch) -> None:
  original = rlax.general_off_policy_returns_from_q_and_v

  def late(q_t, v_t, r_t, discount_t, c_t, stop_target_gradients=True):
    # c_t[i] is read where c_t[i - 1] is due.
    c_t = jnp.concatenate([c_t[1:], c_t[-1:]], axis=0)
    return original(q_t, v_t, r_t, discount_t, c_t, stop_target_gradients)

  mp.setattr(rlax, 'general_off_policy_returns_from_q_and_v', late)


def _importance_weights_inverted(mp: pytest.MonkeyPatch) -> None:
  original = value_utils.importance_weight

  def importance_weight(pi_logits, mu_logits, actions):
    return original(mu_logits, pi_logits, actions)  # mu/pi for pi/mu

  mp.setattr(value_utils, 'importance_weight', importance_weight)


def _clip_before_adam(mp: pytest.MonkeyPatch) -> None:
  def get_agent_optimizer(learning_rate, max_abs_update):
    return optax.chain(
        optax.clip(max_delta=max_abs_update),
        optimizers.scale_by_adam_sg_denom(),
        optax.scale(-learning_rate),
    )

  mp.setattr(optimizers, 'get_agent_optimizer', get_agent_optimizer)


def _polyak_inverted(mp: pytest.MonkeyPatch) -> None:
  original = disco_rule.DiscoUpdateRule.unroll_meta_net

  @functools.wraps(original)
  def unroll_meta_net(self, *args, hyper_params, **kwargs):
    coeff = hyper_params['target_params_coeff']
    hyper_params = dict(hyper_params, target_params_coeff=1.0 - coeff)
    return original(self, *args, hyper_params=hyper_params, **kwargs)

  mp.setattr(disco_rule.DiscoUpdateRule, 'unroll_meta_net', unroll_meta_net)


def _vtrace_terminal_mask_inverted(mp: pytest.MonkeyPatch) -> None:
  original = value_utils.estimate_values

  def estimate_values(rewards, actions, env_discounts, *args, **kwargs):
    return original(rewards, actions, 1.0 - env_discounts, *args, **kwargs)

  mp.setattr(value_utils, 'estimate_values', estimate_values)


def _discount_0p99(mp: pytest.MonkeyPatch) -> None:
  original = disco_rule.DiscoUpdateRule.__init__

  @functools.wraps(original)
  def __init__(self, *args, **kwargs):
    original(self, *args, **kwargs)
    self._value_discount = 0.99  # pylint: disable=protected-access

  mp.setattr(disco_rule.DiscoUpdateRule, '__init__', __init__)


def _meta_target_no_stop_gradient(mp: pytest.MonkeyPatch) -> None:
  # Dropping the stop-gradient in `agent_loss` alone changes nothing, bit for
  # bit: `learner_step` computes the targets outside the function it
  # differentiates (as the reference does), so they are constants there. The
  # bug bites in a port that computes the targets inside the loss, where the
  # agent's gradient then also flows through the meta-network (its y and z
  # inputs): that is what this mutation does.
  original_step = agent_lib.Agent.learner_step
  original_loss = agent_lib.Agent._loss  # pylint: disable=protected-access

  @functools.wraps(original_step)
  def learner_step(self, rng, rollout, learner_state, agent_net_state,
                   update_rule_params, is_meta_training, value_out=None):  # fmt: skip
    self._live_targets = (update_rule_params, learner_state.meta_state, rng)
    try:
      return original_step(
          self, rng, rollout, learner_state, agent_net_state,
          update_rule_params, is_meta_training, value_out,
      )  # fmt: skip
    finally:
      del self._live_targets

  @functools.wraps(original_loss)
  def _loss(self, agent_net_params, agent_net_state, meta_state, rollout,
            meta_out, is_meta_training, value_out=None):  # fmt: skip
    del meta_out
    update_rule_params, rule_state, rng = self._live_targets
    agent_out, _ = self.unroll_net(agent_net_params, agent_net_state, rollout)
    live_meta_out, _ = self.update_rule.unroll_meta_net(
        meta_params=update_rule_params,
        params=agent_net_params,
        state=agent_net_state,
        meta_state=rule_state,
        rollout=self._update_rule_inputs(rollout, agent_out, value_out),
        hyper_params=self._hyper_params,
        unroll_policy_fn=self._network.unroll,
        rng=rng,
        axis_name=self._batch_axis_name,
    )
    return original_loss(
        self, agent_net_params, agent_net_state, meta_state, rollout,
        live_meta_out, True, value_out,  # True: no stop-gradient.
    )  # fmt: skip

  mp.setattr(agent_lib.Agent, 'learner_step', learner_step)
  mp.setattr(agent_lib.Agent, '_loss', _loss)


def _meta_loss_entropy_sign(mp: pytest.MonkeyPatch) -> None:
  original = meta_train.calculate_meta_gradient

  @functools.wraps(original)
  def calculate_meta_gradient(*args, **kwargs):
    cost = kwargs.pop('policy_entropy_cost', meta_train.POLICY_ENTROPY_COST)
    return original(*args, policy_entropy_cost=-cost, **kwargs)

  # Where `meta_update` reads it (`meta_gradient`), and where `maths` and the
  # package re-export it (the parity tests call
  # `disco.meta_train.calculate_meta_gradient`).
  for module in (meta_gradient, meta_train, meta_train_api):
    mp.setattr(module, 'calculate_meta_gradient', calculate_meta_gradient)


def _meta_rnn_state_not_carried(mp: pytest.MonkeyPatch) -> None:
  original = disco_rule.DiscoUpdateRule.unroll_meta_net

  @functools.wraps(original)
  def unroll_meta_net(self, *args, meta_state, **kwargs):
    meta_out, new_meta_state = original(
        self, *args, meta_state=meta_state, **kwargs
    )
    return meta_out, new_meta_state | dict(rnn_state=meta_state['rnn_state'])

  mp.setattr(disco_rule.DiscoUpdateRule, 'unroll_meta_net', unroll_meta_net)


def _drop_last_skipped(mp: pytest.MonkeyPatch) -> None:
  transforms = dict(input_transforms.TRANSFORMS)
  transforms['drop_last'] = transforms['identity']
  mp.setattr(
      input_transforms,
      'TRANSFORMS',
      immutabledict.immutabledict(transforms),
  )


def _two_hot_shifted(mp: pytest.MonkeyPatch) -> None:
  def scalar_to_categorical_value(num_bins, value, max_abs_value):
    width = 2.0 * max_abs_value / (num_bins - 1)
    return rlax.transform_to_2hot(
        value,
        min_value=-max_abs_value + width,
        max_value=max_abs_value + width,
        num_bins=num_bins,
    )

  mp.setattr(
      value_utils, 'scalar_to_categorical_value', scalar_to_categorical_value
  )


def _adam_denominator_gradient(mp: pytest.MonkeyPatch) -> None:
  def scale_by_adam_sg_denom(b1=0.9, b2=0.999, eps=1e-8):
    # optax's Adam: gradients flow through the second moment too.
    return optax.scale_by_adam(b1=b1, b2=b2, eps=eps)

  mp.setattr(optimizers, 'scale_by_adam_sg_denom', scale_by_adam_sg_denom)


MUTATIONS: dict[str, Mutation] = {
    m.name: m
    for m in (
        Mutation(
            'retrace_late_traces',
            "Retrace's trace coefficients c_t read one step late.",
            _retrace_late_traces,
        ),
        Mutation(
            'clip_before_adam',
            'Agent optimizer clips gradients before, not after, the'
            ' Adam-style scaling.',
            _clip_before_adam,
        ),
        Mutation(
            'polyak_inverted',
            "Target network's Polyak coefficient inverted (0.1 for 0.9).",
            _polyak_inverted,
        ),
        Mutation(
            'vtrace_terminal_mask_inverted',
            'V-trace discounts with the terminal mask inverted.',
            _vtrace_terminal_mask_inverted,
        ),
        Mutation(
            'discount_0p99',
            'Disco rule discounts its Retrace targets with 0.99, not 0.997.',
            _discount_0p99,
        ),
        Mutation(
            'meta_target_no_stop_gradient',
            "No stop-gradient on the meta-network's targets, which are"
            " computed inside the agent's loss.",
            _meta_target_no_stop_gradient,
        ),
        Mutation(
            'meta_loss_entropy_sign',
            'Sign of the policy-entropy regulariser flipped in the meta-loss.',
            _meta_loss_entropy_sign,
        ),
        Mutation(
            'meta_rnn_state_not_carried',
            'Meta-RNN state not carried from one learner step to the next.',
            _meta_rnn_state_not_carried,
        ),
        Mutation(
            'drop_last_skipped',
            "Input transform 'drop_last' skipped (returns its input).",
            _drop_last_skipped,
        ),
        Mutation(
            'two_hot_shifted',
            "Two-hot encoding's bin edges shifted by one bin.",
            _two_hot_shifted,
        ),
        Mutation(
            'importance_weights_inverted',
            'Importance weights mu/pi instead of pi/mu (V-trace and Retrace).',
            _importance_weights_inverted,
        ),
        Mutation(
            'adam_denominator_gradient',
            "Meta-gradients flow through Adam's second moment (no"
            ' stop-gradient on the denominator).',
            _adam_denominator_gradient,
        ),
    )
}


def apply(name: str, mp: pytest.MonkeyPatch) -> Mutation:
  """Applies the mutation `name`; raises ValueError for an unknown one."""
  if name not in MUTATIONS:
    raise ValueError(
        f'Unknown mutation {name!r}; known: {", ".join(MUTATIONS)}.'
    )
  mutation = MUTATIONS[name]
  mutation.apply(mp)
  return mutation
