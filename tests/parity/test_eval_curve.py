"""Golden parity of the faithful eval loop (case `eval_curve_catch`).

120 iterations of the reference colab's loop with its default settings and
Disco103 on one device: every rollout's actions, rewards and discounts, the
replay buffer's samples and the average returns must match exactly, the
learner's scalar logs to rtol 1e-3 and the final parameters' checksums as
the manifest states. The run takes about a minute and a half on 2 CPU cores,
so it is a single test.
"""

import numpy as np

from disco import eval as eval_lib
from tests.parity import golden

_CASE = 'eval_curve_catch'
_LOG_RTOL = 1e-3


def _check_case_config(case: golden.Case, config: eval_lib.EvalConfig):
  """The golden's settings are those of `config` (the defaults)."""
  recorded = case.config
  settings = recorded['agent_settings']
  net_args = settings['net_settings']['net_args']
  assert settings['update_rule_name'] == config.rule
  assert recorded['num_steps'] == config.num_steps
  assert recorded['batch_size'] == config.batch_size
  assert recorded['rollout_len'] == config.rollout_len
  assert recorded['replay_ratio'] == config.replay_ratio
  assert recorded['num_envs'] == config.num_envs
  assert recorded['buffer']['capacity'] == config.buffer_capacity
  assert recorded['buffer']['seed'] == config.buffer_seed
  assert recorded['buffer']['min_buffer_size'] == config.learning_starts
  assert recorded['rng'] == f'PRNGKey({config.seed})'
  assert (recorded['catch_rows'], recorded['catch_columns']) == (8, 8)
  assert recorded['devices'] == config.max_devices
  assert settings['learning_rate'] == config.learning_rate
  assert tuple(net_args['dense']) == config.dense
  assert net_args['head_w_init_std'] == config.head_w_init_std
  model_kwargs = net_args['model_kwargs']
  assert model_kwargs['lstm_size'] == config.lstm_size
  assert tuple(model_kwargs['head_mlp_hiddens']) == config.head_mlp_hiddens


def _first_divergence(got: np.ndarray, want: np.ndarray) -> int | None:
  """The first iteration whose rollout actions differ, if any."""
  differs = np.any(got.reshape(len(got), -1) != want.reshape(len(want), -1), 1)
  hits = np.flatnonzero(differs)
  return int(hits[0]) if hits.size else None


def _checksums(
    params: dict[str, dict[str, np.ndarray]],
) -> dict[str, np.ndarray]:
  """The manifest's checksums of every leaf, keyed like the golden."""
  sums = {}
  for module, leaves in params.items():
    for name, leaf in leaves.items():
      flat = np.asarray(leaf, np.float32).reshape(-1).astype(np.float64)
      key = f'{module}/{name}'
      sums[f'{key}/shape'] = np.asarray(leaf.shape, np.int32)
      sums[f'{key}/sum'] = flat.sum()
      sums[f'{key}/sumsq'] = np.square(flat).sum()
      sums[f'{key}/head'] = flat[:8].astype(np.float32)
  return sums


def test_faithful_loop_reproduces_the_reference_curve():
  case = golden.Case(_CASE)
  # The default config, for the golden's 120 iterations on its one device.
  config = eval_lib.EvalConfig(
      num_steps=120, max_devices=1, record_rollouts=True
  )
  _check_case_config(case, config)
  disco103 = golden.Case('disco103_meta_params').haiku('params')

  history = eval_lib.run_eval(config, update_rule_params=disco103)
  record = history.rollouts
  expected = case.subtree('expected')

  # The loop must not diverge at all: the reference re-run with plain `jit`
  # reproduced every action of these 120 iterations.
  divergence = _first_divergence(record.actions, expected['rollout_actions'])
  assert (
      divergence is None
  ), f'Rollout actions first differ at iteration {divergence}.'
  exact = {
      'rollout_actions': record.actions,
      'rollout_rewards': record.rewards,
      'rollout_discounts': record.discounts,
      'sample_indices': record.sample_indices.astype(np.int32),
      'learner_step_index': record.learner_step_index.astype(np.int32),
      'steps': history.steps.astype(np.int32),
  }
  returns = {
      'avg_returns': history.avg_returns.astype(np.float32),
      'total_returns': history.total_returns.astype(np.float32),
      'total_episodes': history.num_episodes.astype(np.float32),
  }
  expected_logs = case.subtree('expected/logs')
  assert set(history.logs) == set(expected_logs)
  got_logs, want_logs = {}, {}
  for name, want in expected_logs.items():
    got = history.logs[name]
    # NaN before the first learner step, in both.
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
    got_logs[name] = got[~np.isnan(want)]
    want_logs[name] = want[~np.isnan(want)]
  got_sums = _checksums(history.params)
  want_sums = case.subtree('expected/final_params_checksum')
  # |sum - sum_ref| <= 1e-3 * sqrt(n * sumsq_ref), per leaf.
  sum_atol = {
      k: (
          1e-3
          * np.sqrt(
              np.prod(want_sums[k[: -len('sum')] + 'shape'])
              * want_sums[k[: -len('sum')] + 'sumsq']
          )
      )
      for k in want_sums
      if k.endswith('/sum')
  }

  def _select(tree, suffix):
    return {k: v for k, v in tree.items() if k.endswith(suffix)}

  with golden.checks() as check:
    check(
        exact,
        {k: expected[k] for k in exact},
        rtol=0,
        atol=0,
        case=_CASE,
        label='rollouts and replay samples (exact)',
    )
    check(
        returns,
        {k: expected[k] for k in returns},
        rtol=0,
        atol=0,
        case=_CASE,
        label='average returns (exact)',
    )
    check(
        got_logs,
        want_logs,
        rtol=_LOG_RTOL,
        atol=0,
        case=_CASE,
        label='learner logs',
    )
    check(
        _select(got_sums, '/shape'),
        _select(want_sums, '/shape'),
        rtol=0,
        atol=0,
        case=_CASE,
        label='final params: shapes',
    )
    check(
        _select(got_sums, '/sum'),
        _select(want_sums, '/sum'),
        rtol=0,
        atol=sum_atol,
        case=_CASE,
        label='final params: sums',
    )
    check(
        _select(got_sums, '/sumsq'),
        _select(want_sums, '/sumsq'),
        rtol=1e-3,
        atol=0,
        case=_CASE,
        label='final params: sums of squares',
    )
    check(
        _select(got_sums, '/head'),
        _select(want_sums, '/head'),
        rtol=0,
        atol=1e-4,
        case=_CASE,
        label='final params: first values',
    )
