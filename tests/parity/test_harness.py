"""The parity harness itself: modes, comparison measures and mutations.

Hand-worked numbers; no goldens needed. The choice of golden sets is
tested in test_platforms.py.
"""

import json

import jax
import numpy as np
import pytest

from tests.parity import golden
from tests.parity import mutations
from tests.parity import report

pytestmark = pytest.mark.without_goldens


def test_pick_by_mode_and_backend(monkeypatch):
  case = object.__new__(golden.Case)  # No files needed to pick.
  case.mode = golden.NATIVE
  assert case.pick(native=1, cross=2, accelerator=3) == 1
  case.mode = golden.CROSS
  monkeypatch.setattr(jax, 'default_backend', lambda: 'cpu')
  assert case.pick(native=1, cross=2, accelerator=3) == 2
  monkeypatch.setattr(jax, 'default_backend', lambda: 'gpu')
  assert case.pick(native=1, cross=2, accelerator=3) == 3
  assert case.pick(native=1, cross=2) == 2
  # A GPU's own recording: no allowance for CPU-vs-GPU maths.
  case.set_backend = 'gpu'
  assert case.pick(native=1, cross=2, accelerator=3) == 2


def test_native_mode_on_a_gpu_takes_cross_tolerances(monkeypatch):
  monkeypatch.setattr(jax, 'default_backend', lambda: 'cpu')
  assert golden.cross_reason(golden.NATIVE) is None
  assert golden.cross_reason(golden.CROSS) is None
  monkeypatch.setattr(jax, 'default_backend', lambda: 'gpu')
  assert golden.cross_reason(golden.NATIVE) == golden.GPU_NOT_REPRODUCIBLE
  assert golden.cross_reason(golden.CROSS) is None


def test_report_summary_counts_and_finds_the_worst(tmp_path):
  rows = [
      dict(case='a', set='main', mode='cross', leaf='x', ratio=0.0),
      dict(case='a', set='main', mode='cross', leaf='y', ratio=1.5),
      dict(case='a', set='main', mode='cross', leaf='z', ratio=0.2),
      dict(case='a', set='main', mode='cross', leaf='x', ratio=9.0,
           mutation='bug'),
      dict(case='a', set='avx2', mode='cross', leaf='x', ratio=0.0),
      dict(case='b', set='gpu', mode='cross', leaf='x', ratio=float('nan'),
           why_cross='why'),
  ]  # fmt: skip
  summary = report.summarise(rows)
  assert [(r['set'], r['comparisons']) for r in summary] == [
      ('avx2', 1), ('main', 3), ('gpu', 1)
  ]  # fmt: skip
  assert summary[2]['mode'] == 'cross (why)'
  assert summary[2]['out_of_tolerance'] == 1
  main = summary[1]
  assert (main['bit_for_bit'], main['out_of_tolerance']) == (1, 1)
  assert (main['worst_ratio'], main['worst_leaf']) == (1.5, 'y')
  path = tmp_path / 'r.jsonl'
  path.write_text('\n'.join(json.dumps(r) for r in rows))
  assert report.main([str(path), '--out', str(tmp_path / 's.csv')]) == 0
  lines = (tmp_path / 's.csv').read_text().splitlines()
  assert lines[0].startswith('case,set,mode') and len(lines) == 4


def test_elementwise_and_norm_wise():
  want = {'x': np.array([100.0, 0.001])}
  # 0.01 off on the small entry: 10x relative there, 1e-4 of the norm.
  got = {'x': np.array([100.0, 0.011])}
  with pytest.raises(AssertionError, match='out of tolerance'):
    golden.assert_close(got, want, rtol=1e-3, atol=0.0, norm=False)
  ratio = golden.assert_close(got, want, rtol=1e-3, atol=0.0, norm=True)
  np.testing.assert_allclose(ratio, 0.01 / (1e-3 * np.hypot(100, 0.001)))
  with pytest.raises(AssertionError, match='norm'):
    golden.assert_close(got, want, rtol=1e-5, atol=0.0, norm=True)
  # Integers are exact in either measure.
  with pytest.raises(AssertionError, match='exact'):
    golden.assert_close(
        {'n': np.array([1, 2])}, {'n': np.array([1, 3])}, rtol=1, atol=1
    )


def test_as_steps_groups_parameter_trees():
  before = {
      'params/a/w': np.zeros(3),
      'params/b/b': np.zeros(1),
      'rnn/h': np.ones(2),
  }
  want = {
      'params/a/w': np.array([1.0, 1.0, 1.0]),
      'params/b/b': np.array([1.0]),
      'rnn/h': np.array([2.0, 2.0]),
  }
  # The one-entry leaf is off by its whole step: alone that is a relative
  # error of 1, as part of the parameters 1/2 (one of four unit steps).
  got = dict(want, **{'params/b/b': np.array([0.0])})
  got_steps, want_steps, tol = golden.as_steps(
      got, want, before, rtol=0.6, value_rtol=0.0
  )
  assert sorted(want_steps) == ['params', 'rnn/h']
  np.testing.assert_array_equal(want_steps['params'], np.ones(4))
  np.testing.assert_array_equal(want_steps['rnn/h'], np.ones(2))
  assert golden.assert_close(got_steps, want_steps, **tol) == pytest.approx(
      0.5 / 0.6
  )
  assert golden.step_group('opt_state/0/mu/mlp/linear/b') == 'opt_state/0/mu'
  assert golden.step_group('meta_state/rnn_state/h') == 'meta_state/rnn_state/h'


def test_every_mutation_is_described_and_applies():
  assert len(mutations.MUTATIONS) >= 10
  for name, mutation in mutations.MUTATIONS.items():
    assert mutation.name == name and mutation.description
    patch = pytest.MonkeyPatch()
    try:
      assert mutations.apply(name, patch) is mutation
      assert patch._setattr or patch._setitem  # pylint: disable=protected-access
    finally:
      patch.undo()
  with pytest.raises(ValueError, match='Unknown mutation'):
    mutations.apply('no_such_bug', pytest.MonkeyPatch())
