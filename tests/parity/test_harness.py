"""The parity harness itself: set selection, modes and comparison measures.

Hand-worked numbers; no goldens needed.
"""

import pathlib

import numpy as np
import pytest

from tests.parity import golden
from tests.parity import mutations
from tests.parity import platforms


@pytest.fixture
def sets(tmp_path: pathlib.Path) -> pathlib.Path:
  """A main set and an AVX2 set, one (empty) case each."""
  (tmp_path / 'a.npz').touch()
  avx2 = tmp_path / platforms.PLATFORMS_SUBDIR / 'avx2'
  avx2.mkdir(parents=True)
  (avx2 / 'a.npz').touch()
  return tmp_path


def _select(monkeypatch, root, machine, mode=None):
  platforms.select.cache_clear()
  monkeypatch.setenv(platforms.PLATFORM_ENV, machine)
  if mode is None:
    monkeypatch.delenv(platforms.MODE_ENV, raising=False)
  else:
    monkeypatch.setenv(platforms.MODE_ENV, mode)
  try:
    return platforms.select(root)
  finally:
    platforms.select.cache_clear()


@pytest.mark.parametrize(
    'machine, mode, want_mode, want_set',
    [
        ('avx2', None, 'native', 'avx2'),
        ('avx512', 'auto', 'native', 'avx512'),
        ('avx2', 'cross', 'cross', 'avx512'),
        ('avx512', 'cross', 'cross', 'avx2'),
        ('gpu', None, 'cross', 'avx512'),
        ('cpu-arm64', 'cross', 'cross', 'avx512'),
    ],
)
def test_selection(monkeypatch, sets, machine, mode, want_mode, want_set):
  chosen = _select(monkeypatch, sets, machine, mode)
  assert (chosen.mode, chosen.platform) == (want_mode, want_set)
  assert chosen.directory == platforms.golden_sets(sets)[want_set]
  assert want_mode in chosen.describe() and machine in chosen.describe()


def test_selection_errors(monkeypatch, sets, tmp_path_factory):
  with pytest.raises(platforms.SelectionError, match='no golden set'):
    _select(monkeypatch, sets, 'gpu', 'native')
  with pytest.raises(platforms.SelectionError, match='expected one of'):
    _select(monkeypatch, sets, 'avx2', 'loose')
  only_main = tmp_path_factory.mktemp('only_main')
  (only_main / 'a.npz').touch()
  with pytest.raises(platforms.SelectionError, match='another kind'):
    _select(monkeypatch, only_main, 'avx512', 'cross')


def test_detect_machine_reads_the_override(monkeypatch):
  monkeypatch.setenv(platforms.PLATFORM_ENV, 'avx2')
  assert platforms.detect_machine()[0] == 'avx2'
  monkeypatch.delenv(platforms.PLATFORM_ENV)
  kind, reason = platforms.detect_machine()
  assert kind and reason


def test_pick_by_mode_and_backend(monkeypatch):
  case = object.__new__(golden.Case)  # No files needed to pick.
  case.mode = platforms.NATIVE
  assert case.pick(native=1, cross=2, accelerator=3) == 1
  case.mode = platforms.CROSS
  monkeypatch.setattr(golden.jax, 'default_backend', lambda: 'cpu')
  assert case.pick(native=1, cross=2, accelerator=3) == 2
  monkeypatch.setattr(golden.jax, 'default_backend', lambda: 'gpu')
  assert case.pick(native=1, cross=2, accelerator=3) == 3
  assert case.pick(native=1, cross=2) == 2


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
