"""Parity of `meta_train.calculate_meta_gradient` with the reference notebook.

Cases `meta_gradient_random` and `meta_gradient_disco103` (MANIFEST.md
section 6): one agent on 5x5 Catch, no `pmap` axis, 2 inner steps on
rollouts of 4 steps and a validation rollout of 8, with random-init and
Disco103 update-rule parameters.

The meta-gradients are compared leaf by leaf by relative norm error and the
meta-loss logs elementwise, at the manifest's tolerances, for the
reference's layout (inner steps in a rolled `lax.scan`) and for the
unrolled (and rematerialised) inner loop that `run_meta_train` uses by
default. In the reference's layout the learner logs and the agent's state
after the inner steps are compared too (at the manifest's rtol 1e-4 for
multi-step learner states); unrolling changes XLA's fusions and therefore
float rounding, which the meta-gradient tolerance absorbs but which makes
cancellation-prone logs (e.g. the mean TD error) move by more than 1e-4
relative.
"""

from collections.abc import Mapping
import functools
from typing import Any

import jax
import numpy as np
import pytest

from disco import meta_train
from disco import types
from tests.parity import golden

_CASES = ('meta_gradient_random', 'meta_gradient_disco103')
# Manifest: per leaf ||g - g_ref|| <= 1e-3 * ||g_ref|| + 1e-7.
_GRAD_RTOL = 1e-3
_GRAD_ATOL = 1e-7
# Manifest: meta_log rtol 1e-4; multi-step learner states rtol 1e-4.
_LOG_RTOL = 1e-4
_STATE_RTOL = 1e-4
_STATE_ATOL = 1e-6


def _tuples(value: Any) -> Any:
  if isinstance(value, list):
    return tuple(_tuples(v) for v in value)
  return value


def _config(case: golden.Case) -> meta_train.MetaTrainConfig:
  """The `MetaTrainConfig` whose agent the case describes."""
  cfg = case.config
  net_args = cfg['agent_settings']['net_settings']['net_args']
  value_fn = cfg['value_fn_config']
  config = meta_train.MetaTrainConfig(
      num_agents=cfg['num_agents'],
      num_inner_steps=cfg['num_inner_steps'],
      rollout_len=cfg['rollout_len'],
      batch_size_per_device=cfg['batch_size_per_device'],
      catch_rows=cfg['catch_rows'],
      catch_columns=cfg['catch_columns'],
      agent_dense=_tuples(net_args['dense']),
      agent_head_mlp_hiddens=_tuples(
          net_args['model_kwargs']['head_mlp_hiddens']
      ),
      agent_lstm_size=net_args['model_kwargs']['lstm_size'],
      agent_head_w_init_std=net_args['head_w_init_std'],
      agent_learning_rate=cfg['agent_settings']['learning_rate'],
      value_dense=_tuples(value_fn['net_args']['dense']),
      value_head_w_init_std=value_fn['net_args']['head_w_init_std'],
      value_learning_rate=value_fn['learning_rate'],
      value_max_abs_update=value_fn['max_abs_update'],
      value_discount_factor=value_fn['discount_factor'],
      value_td_lambda=value_fn['td_lambda'],
      value_outer_value_cost=value_fn['outer_value_cost'],
      value_ema_decay=value_fn['ema_decay'],
      value_ema_eps=value_fn['ema_eps'],
  )
  # Everything else in the case's settings must be our defaults.
  ours = config.agent_settings().to_dict()
  theirs = cfg['agent_settings']
  assert ours['hyper_params'] == theirs['hyper_params']
  assert ours['learning_rate'] == theirs['learning_rate']
  assert ours['max_abs_update'] == theirs['max_abs_update']
  assert ours['update_rule_name'] == theirs['update_rule_name']
  for key in ('max_abs_value', 'num_bins', 'value_discount'):
    assert ours['update_rule'][key] == theirs['update_rule'][key], key
  assert _tuples(value_fn['net_args']['action_spec']) == ()
  assert 2 * cfg['rollout_len'] == cfg['valid_rollout_len']
  return config


def _fill(template: Any, flat: Mapping[str, np.ndarray]) -> Any:
  """`template`'s structure with the golden leaves at the same key paths."""
  leaves, treedef = jax.tree.flatten(template)
  numbered = jax.tree.unflatten(treedef, list(range(len(leaves))))
  keys = {int(i): k for k, i in golden.flatten(numbered).items()}
  assert set(keys.values()) == set(flat), sorted(set(keys.values()) ^ set(flat))
  return jax.tree.unflatten(
      treedef, [flat[keys[i]] for i in range(len(leaves))]
  )


def _rollout(flat: Mapping[str, np.ndarray]) -> types.ActorRollout:
  return types.ActorRollout(
      observations=flat['observations'],
      actions=flat['actions'],
      rewards=flat['rewards'],
      discounts=flat['discounts'],
      agent_outs={'logits': flat['agent_outs/logits']},
      states={},
      logits=flat['logits'],
  )


def _params(case: golden.Case) -> dict[str, dict[str, np.ndarray]]:
  if any(k.startswith('params/') for k in case.arrays):
    return case.haiku('params')
  return golden.Case('disco103_meta_params').haiku('params')


@functools.lru_cache(maxsize=None)
def _agent(config: meta_train.MetaTrainConfig) -> meta_train.MetaTrainAgent:
  return meta_train.MetaTrainAgent.from_config(config, axis_name=None)


@functools.lru_cache(maxsize=None)
def _meta_gradient_fn(
    config: meta_train.MetaTrainConfig, unroll: bool, remat: bool
):
  return jax.jit(
      functools.partial(
          meta_train.calculate_meta_gradient,
          agent=_agent(config),
          unroll=unroll,
          remat=remat,
      )
  )


def _relative_norm_errors(got, want) -> dict[str, float]:
  errors = {}
  for key, expected in want.items():
    diff = np.linalg.norm((got[key] - expected).astype(np.float64).ravel())
    norm = np.linalg.norm(expected.astype(np.float64).ravel())
    assert diff <= _GRAD_RTOL * norm + _GRAD_ATOL, (
        f'{key}: ||g - g_ref|| = {diff:.3g} > {_GRAD_RTOL} * {norm:.3g}'
        f' + {_GRAD_ATOL}'
    )
    errors[key] = diff / max(norm, 1e-30)
  return errors


@pytest.mark.parametrize(
    'name, unroll, remat',
    [
        ('meta_gradient_random', False, False),
        ('meta_gradient_disco103', False, False),
        ('meta_gradient_random', True, False),
        ('meta_gradient_disco103', True, False),
        ('meta_gradient_disco103', True, True),
    ],
)
def test_calculate_meta_gradient_matches_reference(name, unroll, remat):
  case = golden.Case(name)
  config = _config(case)
  agent = _agent(config)
  key = jax.random.PRNGKey(0)
  template = jax.eval_shape(agent.init_state, key)
  state = meta_train.MetaTrainState(
      learner_state=_fill(
          template.learner_state,
          case.subtree('inputs/agent_state/learner_state'),
      ),
      actor_state={},
      value_state=_fill(
          template.value_state, case.subtree('inputs/agent_state/value_state')
      ),
      # Carried through unchanged; not part of the case.
      env_state=agent.env.reset(key)[0],
      env_timestep=agent.env.reset(key)[1],
  )
  train_rollouts = _rollout(case.subtree('inputs/train_rollouts'))
  valid_rollout = _rollout(case.subtree('inputs/valid_rollout'))

  meta_grads, (new_state, train_logs, meta_log) = _meta_gradient_fn(
      config, unroll, remat
  )(
      _params(case),
      state,
      train_rollouts,
      valid_rollout,
      case['inputs/rng'],
  )

  errors = _relative_norm_errors(
      golden.flatten(meta_grads), case.subtree('expected/meta_grads')
  )
  assert len(errors) == 42
  golden.assert_close(
      golden.flatten(meta_log),
      case.subtree('expected/meta_log'),
      rtol=_LOG_RTOL,
      atol=0.0,
      case=name,
      label='meta_log',
  )
  assert set(train_logs) == set(case.subtree('expected/train_metrics'))
  if unroll:
    return
  golden.assert_close(
      golden.flatten(train_logs),
      case.subtree('expected/train_metrics'),
      rtol=_STATE_RTOL,
      atol=_STATE_ATOL,
      case=name,
      label='train_metrics',
  )
  for part in ('learner_state', 'value_state'):
    golden.assert_close(
        golden.flatten(getattr(new_state, part)),
        case.subtree(f'expected/new_agent_state/{part}'),
        rtol=_STATE_RTOL,
        atol=_STATE_ATOL,
        case=name,
        label=f'new_agent_state/{part}',
    )
  # The environments are carried through untouched.
  same = jax.tree.map(
      np.array_equal,
      jax.device_get(new_state.env_state),
      jax.device_get(state.env_state),
  )
  assert all(jax.tree.leaves(same))
