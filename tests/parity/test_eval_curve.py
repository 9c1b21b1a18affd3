"""Golden parity of the faithful eval loop (case `eval_curve_catch`).

The reference colab's loop with Disco103 on one device, with the settings
of the case's JSON (120 iterations of the default config in the recorded
sets). Native mode: every rollout's actions, rewards and discounts, the
replay buffer's samples and the average returns match exactly, the
learner's scalar logs to rtol 1e-3 and the final parameters' checksums as
the manifest states.

Cross-platform mode: sampling makes the loop chaotic, so last-bit
differences eventually flip an action and the runs part. The reference
itself, run on an AVX2 and on an AVX-512 machine, keeps the same actions
for only 42 to 103 iterations (MANIFEST.md 3a), and its parameters drift
apart long before (learning rate 1e-2, sign-like Adam steps): its logs
differ by 4e-6 relative at the first learner step, then 5e-5, 4e-4, 1e-3,
and by 1e-2 after about 12 steps; its final parameters by 19%. So:

* actions, rewards, discounts and returns: exactly, up to the first
  iteration whose actions differ; that iteration must come at least
  `_CROSS_MIN_AGREEING_STEPS` learner steps after learning starts;
* the replay buffer's samples, which depend on its seed and size only:
  exactly, throughout;
* learner logs: learner step k within 1e-4 * 10**k (3e-4 * 10**k on a
  GPU) of the larger of the expected value and the log's scale over the
  curve (the root mean square of its recorded learner steps), for the first
  4 steps. A mean of signed terms (`td`, `z`) can pass near zero at one
  step while the platform's error follows the terms' size; relative to its
  own value that error looked like a bug (14% at learner step 3 of another
  seed on an emulated platform without FMA, 8% in `z` in a recording with
  other seeds and sizes; issue 38). See `cross_log_tolerance`;
* after the divergence, the mean average return of the last iterations
  within 0.25 (the manifest's statistical check); the final parameters not
  at all (they are compared step by step in test_agent.py).
"""

from collections.abc import Mapping
import contextlib
import functools
import math
import re
from typing import Any
from unittest import mock

import numpy as np
import pytest

from disco import eval as eval_lib
from disco import learner
from disco import rule_diagnostics
from tests.parity import builders
from tests.parity import golden

_CASE = 'eval_curve_catch'
_LOG_RTOL = 1e-3
# Cross-platform: learner step k's logs within 1e-4 * 10**k of the larger of
# the expected value and the log's RMS over the curve, for the first
# `_CROSS_LOG_STEPS` steps (a budget of 1 or more says nothing). Measured,
# error / max(|value|, RMS) per step k = 0..3, across the shipped sets:
# 1.4e-6, 2.0e-5, 4.1e-4, 1.8e-4; on emulated platforms with other seeds at
# most 0.29 of the budget (docs/parity.md).
_CROSS_LOG_RTOL0 = 1e-4
# On a GPU (an H100 against the AVX-512 set), agent_q_mean reached 0.96 of
# that budget (of its value, before the RMS floor; the floor only widens
# it): three times it there, which the bugs that this check catches exceeded
# by 20 times or more.
_CROSS_LOG_RTOL0_ACCELERATOR = 3e-4
_CROSS_LOG_GROWTH = 10.0
_CROSS_LOG_STEPS = 4
# Issue 38: `z` at a learner step of a recording with other seeds and sizes,
# on an Intel AVX-512 and on an AMD AVX2 machine, 8% apart near zero.
_ISSUE_38_Z = (7.43e-5, 6.88e-5)
# Measured with seed 1 and buffer seed 5, our loop on this machine against
# itself on an emulated platform without FMA (XLA_FLAGS=
# --xla_cpu_max_isa=AVX): `td` at learner step 3 was 0.136 and 0.117, 14%
# apart, at 0.207 of its RMS over the curve and 0.029 of it apart.
_EMULATED_TD = (3, 0.207, 0.0288)
# The bug of tests/parity/mutations.py that the logs catch by the least,
# against every shipped set: `retrace_late_traces`, whose largest error
# there moves `q_target` at learner step 1 by 0.77% of its RMS over the
# curve (7.7 times the budget).
_RETRACE_Q_TARGET = (1, 7.7e-3)
# After a divergence: the mean average return of the last iterations.
_TAIL = 30
_TAIL_ATOL = 0.25
# Cross-platform: the fewest learner steps after which the actions must
# still agree. The reference itself, on an AVX2 and on an AVX-512 machine,
# held them for 72 learner steps here (iterations 31 to 102) and for 11 in
# another recording of the case (42 iterations, MANIFEST.md 3a); an
# emulated third platform (XLA without optimisations) for 28. The bugs of
# tests/parity/mutations.py that change this loop part it within 1 to 16
# steps, most within 6.
_CROSS_MIN_AGREEING_STEPS = 11


def _config(case: golden.Case) -> eval_lib.EvalConfig:
  """The `EvalConfig` of the case's recorded settings."""
  recorded = case.config
  net_args = recorded['agent_settings']['net_settings']['net_args']
  seed = re.fullmatch(r'PRNGKey\((\d+)\)', recorded['rng'])
  assert seed, recorded['rng']
  config = eval_lib.EvalConfig(
      rule=recorded['agent_settings']['update_rule_name'],
      env_settings=(
          ('columns', recorded['catch_columns']),
          ('rows', recorded['catch_rows']),
      ),
      num_steps=recorded['num_steps'],
      learner_batch_size=recorded['batch_size'],
      rollout_len=recorded['rollout_len'],
      replay_ratio=recorded['replay_ratio'],
      buffer_capacity=recorded['buffer']['capacity'],
      buffer_seed=recorded['buffer']['seed'],
      min_buffer_size=recorded['buffer']['min_buffer_size'],
      seed=int(seed.group(1)),
      agent_learning_rate=recorded['agent_settings']['learning_rate'],
      agent_dense=tuple(net_args['dense']),
      agent_lstm_size=net_args['model_kwargs']['lstm_size'],
      agent_head_mlp_hiddens=tuple(
          net_args['model_kwargs']['head_mlp_hiddens']
      ),
      agent_head_w_init_std=net_args['head_w_init_std'],
      max_devices=recorded['devices'],
      record_rollouts=True,
  )
  assert (
      recorded['num_envs'] == config.learner_batch_size // config.replay_ratio
  )
  # Every other setting of the recorded agent is ours.
  assert builders.jsonable(
      eval_lib.make_agent_settings(config)
  ) == builders.jsonable(recorded['agent_settings'])
  return config


def log_scales(curves: Mapping[str, np.ndarray]) -> dict[str, float]:
  """Each learner log's scale over the curve: the RMS of its learner steps.

  Args:
    curves: {log: values per iteration}, NaN before the first learner step.

  Returns:
    {log: root mean square of its non-NaN values} (0 for a log without
    any).
  """
  scales = {}
  for name, curve in curves.items():
    values = np.asarray(curve, np.float64)
    values = values[~np.isnan(values)]
    scales[name] = (
        float(np.sqrt(np.mean(np.square(values)))) if values.size else 0.0
    )
  return scales


def cross_log_tolerance(
    want: Mapping[str, np.ndarray],
    curves: Mapping[str, np.ndarray],
    rtol0: float,
) -> dict[str, Any]:
  """`golden.assert_close` arguments for the learner logs in cross mode.

  Learner step k (k = 0, 1, ...) of a log must satisfy

    |x_k - ref_k| <= rtol0 * 10**k * max(|ref_k|, RMS of the log's curve):

  the budget grows tenfold per step, as the platforms' parameters drift
  apart, and its floor is the log's scale over the curve, not its value at
  one step: a mean of signed terms can pass near zero at a step while the
  platform's error there still follows the terms' size.

  Args:
    want: {log: the expected values of the first learner steps}.
    curves: {log: the expected curve, every iteration}, for the scales.
    rtol0: the budget of learner step 0.

  Returns:
    Keyword arguments of `golden.assert_close` (elementwise, per-entry
    atol).
  """
  scales = log_scales(curves)
  atol = {}
  for name, values in want.items():
    values = np.asarray(values, np.float64)
    budget = rtol0 * _CROSS_LOG_GROWTH ** np.arange(values.size)
    atol[name] = budget * np.maximum(np.abs(values), scales[name])
  return dict(rtol=0.0, atol=atol, norm=False)


def _first_divergence(got: np.ndarray, want: np.ndarray) -> int:
  """The first iteration whose rollout actions differ (len if none)."""
  differs = np.any(got.reshape(len(got), -1) != want.reshape(len(want), -1), 1)
  hits = np.flatnonzero(differs)
  return int(hits[0]) if hits.size else len(got)


def _reference_divergence(case: golden.Case) -> int | None:
  """The reference's own divergence across machines: this set vs the others.

  The first iteration whose actions differ between this case's set and any
  other set of the goldens (None without another set).
  """
  divergences = [
      _first_divergence(
          golden.Case(_CASE, directory=directory, record=False)[
              'expected/rollout_actions'
          ],
          case['expected/rollout_actions'],
      )
      for directory in (s.directory for s in golden.selection().sets)
      if directory != case.directory
  ]
  return min(divergences, default=None)


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


def _select(tree, suffix):
  return {k: v for k, v in tree.items() if k.endswith(suffix)}


def _check_final_params(check, case, params):
  got_sums = _checksums(params)
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
  for suffix, tol in (
      ('/shape', dict(rtol=0, atol=0)),
      ('/sum', dict(rtol=0, atol=sum_atol)),
      ('/sumsq', dict(rtol=1e-3, atol=0)),
      ('/head', dict(rtol=0, atol=1e-4)),
  ):
    check(
        _select(got_sums, suffix),
        _select(want_sums, suffix),
        **tol,
        case=case,
        label=f'final params: {suffix[1:]}',
    )


@functools.cache
def _run(
    config: eval_lib.EvalConfig, fast: bool = False
) -> eval_lib.EvalHistory:
  """The loop's history; one run serves every set with the same config.

  With `fast`, its agent takes the trainer's fast update (`Agent`'s
  `forward_once`, `taken_action_gradients`, `share_meta_inputs` and
  `share_state_gates`) in place of the reference's.
  """
  fast_build = functools.partial(
      learner.build,
      forward_once=True,
      taken_action_gradients=True,
      share_meta_inputs=True,
      share_state_gates=True,
  )
  with (
      mock.patch.object(learner, 'build', fast_build)
      if fast
      else contextlib.nullcontext()
  ):
    return eval_lib.run_eval(config, update_rule_params=builders.disco103())


# The faithful loop, held to the reference's curve (natively: every action
# and log), and the same loop with the trainer's fast update, whose program
# XLA compiles and rounds differently: held to it as another machine's run,
# against every set the run compares with (one run, compared once per set).
# The fast loop is `pytest -m slow` (about 90 s of CI's 20 minutes); in CI,
# test_agent.py holds the fast update's learner steps to every set.
@pytest.mark.parametrize(
    'update', ['reference', pytest.param('fast', marks=pytest.mark.slow)]
)
def test_faithful_loop_reproduces_the_reference_curve(update):
  case = golden.Case(
      _CASE,
      cross="the trainer's fast update, compiled differently"
      if update == 'fast'
      else None,
  )
  config = _config(case)
  history = _run(config, fast=update == 'fast')
  record = history.rollouts
  expected = case.subtree('expected')
  num_steps = config.num_steps

  divergence = _first_divergence(record.actions, expected['rollout_actions'])
  learner_index = record.learner_step_index.astype(np.int32)
  if case.cross:
    first_learner_iteration = int(expected['learner_step_index'][0])
    floor = min(num_steps, first_learner_iteration + _CROSS_MIN_AGREEING_STEPS)
    upto = divergence
  else:
    # The loop must not diverge at all: the reference re-run with plain
    # `jit` reproduced every action of these iterations.
    floor = num_steps
    upto = num_steps

  # Learner steps on equal histories.
  compared_steps = int(np.sum(learner_index < upto))
  if case.cross:
    compared_steps = min(compared_steps, _CROSS_LOG_STEPS)
  exact = {
      'rollout_actions': record.actions[:upto],
      'rollout_rewards': record.rewards[:upto],
      'rollout_discounts': record.discounts[:upto],
      'avg_returns': history.avg_returns[:upto].astype(np.float32),
      'total_returns': history.total_returns[:upto].astype(np.float32),
      'total_episodes': history.num_episodes[:upto].astype(np.float32),
  }
  # The buffer's samples depend on its seed and size only: equal throughout.
  always = {
      'sample_indices': record.sample_indices.astype(np.int32),
      'learner_step_index': learner_index,
      'steps': history.steps.astype(np.int32),
  }
  expected_logs = case.subtree('expected/logs')
  # The reference's logs, and beside them only the rule's diagnostics.
  assert set(expected_logs) <= set(history.logs)
  assert set(history.logs) - set(expected_logs) <= set(
      rule_diagnostics.TARGET_LOGS + rule_diagnostics.INPUT_LOGS
  )
  got_logs, want_logs = {}, {}
  for name, want in expected_logs.items():
    got = history.logs[name]
    # NaN before the first learner step, in both.
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
    got_logs[name] = got[~np.isnan(want)][:compared_steps]
    want_logs[name] = want[~np.isnan(want)][:compared_steps]
  if case.cross:
    rtol0 = case.pick(
        native=_LOG_RTOL,
        cross=_CROSS_LOG_RTOL0,
        accelerator=_CROSS_LOG_RTOL0_ACCELERATOR,
    )
    log_tol = cross_log_tolerance(want_logs, expected_logs, rtol0)
  else:
    log_tol = dict(rtol=_LOG_RTOL, atol=0.0)

  with golden.checks() as check:
    reference = _reference_divergence(case) if case.cross else None
    check.scalar(
        'first divergence of the actions',
        float(divergence),
        at_least=float(floor),
        case=case,
        label=(
            'rollouts'
            + (
                f' (reference across machines: {reference})'
                if reference
                else ''
            )
        ),
    )
    check(
        exact,
        {k: expected[k][:upto] for k in exact},
        rtol=0,
        atol=0,
        case=case,
        label=f'rollouts and returns up to iteration {upto} (exact)',
    )
    check(
        always,
        {k: expected[k] for k in always},
        rtol=0,
        atol=0,
        case=case,
        label='replay samples (exact)',
    )
    check(
        got_logs,
        want_logs,
        **log_tol,
        case=case,
        label=f'learner logs of the first {compared_steps} learner steps',
    )
    if not case.cross:
      _check_final_params(check, case, history.params)
    elif divergence < num_steps:
      tail = slice(max(divergence, num_steps - _TAIL), num_steps)
      got_tail = float(np.nanmean(history.avg_returns[tail]))
      want_tail = float(np.nanmean(expected['avg_returns'][tail]))
      if not (math.isnan(got_tail) or math.isnan(want_tail)):
        check.scalar(
            'mean average return after the divergence: |got - expected|',
            abs(got_tail - want_tail),
            at_most=_TAIL_ATOL,
            case=case,
            label='returns after the divergence',
        )


def _per_value_tolerance(want: Mapping[str, np.ndarray]) -> dict[str, Any]:
  """The earlier cross-mode rule: learner step k at rtol 1e-4 * 10**k."""
  return dict(
      rtol=0.0,
      atol={
          k: (
              _CROSS_LOG_RTOL0
              * _CROSS_LOG_GROWTH ** np.arange(v.size)
              * np.abs(v)
          )
          for k, v in want.items()
      },
      norm=False,
  )


def test_cross_log_tolerance_follows_the_curve_not_the_value():
  """Near zero, a platform's few percent pass; a bug's error still fails.

  Built from this set's own curve (no loop is run): the logs of its first
  learner steps, with one entry moved to a value near zero and the compared
  value apart from it by what platforms were seen to do, or by what a bug
  does. The earlier rule, relative to each value, rejected the former.
  """
  case = golden.Case(_CASE, record=False)
  curves = case.subtree('expected/logs')
  want = {
      k: v[~np.isnan(v)][:_CROSS_LOG_STEPS].astype(np.float64)
      for k, v in curves.items()
  }
  assert all(v.size == _CROSS_LOG_STEPS for v in want.values())
  scales = log_scales(curves)

  def moved(
      name: str, step: int, expected: float, got: float
  ) -> list[dict[str, np.ndarray]]:
    """[got, expected]: the logs with `name` at `step` set to each value."""
    pair = []
    for value in (got, expected):
      logs = {k: v.copy() for k, v in want.items()}
      logs[name][step] = value
      pair.append(logs)
    return pair

  def ratio(
      got: Mapping[str, np.ndarray],
      expected: Mapping[str, np.ndarray],
      per_value: bool = False,
  ) -> float:
    """The comparison's worst error / tolerance; raises above 1."""
    if per_value:
      tolerance = _per_value_tolerance(expected)
    else:
      tolerance = cross_log_tolerance(expected, curves, _CROSS_LOG_RTOL0)
    return golden.assert_close(got, expected, **tolerance)

  step, value, apart = _EMULATED_TD
  platform_like = [
      # The issue's numbers, in this set's `z` at learner step 2.
      moved('z', 2, *_ISSUE_38_Z),
      moved('td', step, value * scales['td'], (value - apart) * scales['td']),
  ]
  for got, expected in platform_like:
    assert ratio(got, expected) < 0.5
    with pytest.raises(AssertionError, match='1 of 4 entries out'):
      ratio(got, expected, per_value=True)

  # A bug's error fails where it was measured, and in every log whose value
  # sits at zero there: the floor does not hide it.
  step, error = _RETRACE_Q_TARGET
  q_target = want['q_target'][step]
  bugs = [
      moved('q_target', step, q_target, q_target + error * scales['q_target'])
  ]
  bugs += [moved(name, step, 0.0, error * scales[name]) for name in want]
  for got, expected in bugs:
    with pytest.raises(AssertionError, match='1 of 4 entries out'):
      ratio(got, expected)
