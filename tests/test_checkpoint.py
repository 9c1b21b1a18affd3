"""Tests for `disco.checkpoint`: atomic saves, verification, clear errors."""

import json
import os
import pathlib

import chex
import jax
import numpy as np
import pytest

from disco import checkpoint
from disco import logs
from disco import weights


@chex.dataclass(frozen=True)
class _State:
  params: dict
  count: np.ndarray


def _params(seed: int = 0) -> dict:
  rng = np.random.default_rng(seed)
  return {
      'lstm/~/meta_lstm/~unroll/lstm/linear': {
          'w': rng.normal(size=(3, 4)).astype(np.float32),
          'b': rng.normal(size=(4,)).astype(np.float32),
      },
      'lstm/linear_1': {'w': rng.normal(size=(4, 1)).astype(np.float32)},
  }


def _state(seed: int = 0) -> _State:
  rng = np.random.default_rng(seed)
  return _State(
      params={
          'mlp/~/linear_0': {'w': rng.normal(size=(2, 5)).astype(np.float32)}
      },
      count=np.asarray(seed, np.int32),
  )


def _save(root: pathlib.Path, step: int, seed: int = 0, **kwargs):
  arrays = checkpoint.flatten_tree(_state(seed), 'state')
  arrays['rng'] = np.asarray([1, 2], np.uint32)
  return checkpoint.save(
      root,
      step,
      update_rule_params=_params(seed),
      arrays=arrays,
      metadata={'note': 'test', 'seed': seed},
      **kwargs,
  )


def test_round_trip_is_exact(tmp_path):
  path = _save(tmp_path, 7, seed=3)
  assert path == tmp_path / 'step_00000007'
  assert sorted(p.name for p in path.iterdir()) == sorted([
      checkpoint.METADATA_FILENAME,
      checkpoint.PARAMS_FILENAME,
      checkpoint.STATE_FILENAME,
  ])
  loaded = checkpoint.load(tmp_path)
  assert loaded.step == 7
  assert loaded.metadata == {'note': 'test', 'seed': 3}
  chex.assert_trees_all_equal(loaded.update_rule_params, _params(3))
  template = jax.eval_shape(lambda: _state(0))
  restored = checkpoint.restore_tree(template, loaded.arrays, 'state')
  chex.assert_trees_all_equal(restored, _state(3))
  np.testing.assert_array_equal(loaded.arrays['rng'], [1, 2])
  assert loaded.arrays['rng'].dtype == np.uint32


def test_some_arrays_are_read_alone_and_still_verified(tmp_path):
  rows = [dict(step=1, loss=0.5), dict(step=2, loss=0.25)]
  arrays = dict(logs.to_arrays(rows), state=np.arange(1000.0))
  checkpoint.save(
      tmp_path, 2, update_rule_params=_params(0), arrays=arrays, metadata={}
  )
  loaded = checkpoint.load(tmp_path, arrays=logs.is_log_array)
  assert 'state' not in loaded.arrays
  assert logs.from_arrays(loaded.arrays) == rows
  state = tmp_path / 'step_00000002' / checkpoint.STATE_FILENAME
  state.write_bytes(state.read_bytes()[:-10])
  with pytest.raises(checkpoint.CheckpointCorruptError):
    checkpoint.load(tmp_path, arrays=logs.is_log_array)


def test_params_file_loads_like_disco103(tmp_path):
  path = _save(tmp_path, 1)
  params = weights.load_update_rule_params(path / checkpoint.PARAMS_FILENAME)
  chex.assert_trees_all_equal(params, _params(0))
  with np.load(path / checkpoint.PARAMS_FILENAME) as flat:
    assert sorted(flat.files) == sorted(weights.flatten_params(_params(0)))


def test_latest_and_keep(tmp_path):
  assert checkpoint.latest_step(tmp_path) is None
  assert checkpoint.latest_step(tmp_path / 'missing') is None
  for step in (1, 2, 3, 10):
    _save(tmp_path, step, seed=step, keep=2)
  assert checkpoint.list_steps(tmp_path) == [3, 10]
  assert checkpoint.load(tmp_path).step == 10
  assert checkpoint.load(tmp_path, step=3).metadata['seed'] == 3
  with pytest.raises(checkpoint.CheckpointNotFoundError, match='step 2'):
    checkpoint.load(tmp_path, step=2)


def test_no_checkpoint_is_a_clear_error(tmp_path):
  with pytest.raises(checkpoint.CheckpointNotFoundError, match='No checkpoint'):
    checkpoint.load(tmp_path)


def test_never_overwrites(tmp_path):
  path = _save(tmp_path, 5, seed=1)
  before = {p.name: p.read_bytes() for p in path.iterdir()}
  with pytest.raises(checkpoint.CheckpointExistsError, match='refusing'):
    _save(tmp_path, 5, seed=2)
  assert {p.name: p.read_bytes() for p in path.iterdir()} == before
  # No staging directory is left behind.
  assert [p.name for p in tmp_path.iterdir()] == ['step_00000005']


@pytest.mark.parametrize(
    'damage, match',
    [
        (lambda d: (d / 'state.npz').write_bytes(b'garbage'), 'SHA-256'),
        (
            lambda d: (d / 'update_rule_params.npz').write_bytes(
                (d / 'update_rule_params.npz').read_bytes()[:100]
            ),
            'SHA-256',
        ),
        (lambda d: (d / 'state.npz').unlink(), 'state.npz is missing'),
        (lambda d: (d / 'checkpoint.json').write_text('{'), 'unreadable'),
        (lambda d: (d / 'checkpoint.json').unlink(), 'missing'),
    ],
)
def test_corrupt_checkpoint_is_reported_and_left_alone(tmp_path, damage, match):
  path = _save(tmp_path, 4)
  damage(path)
  before = {p.name: p.read_bytes() for p in path.iterdir()}
  with pytest.raises(checkpoint.CheckpointCorruptError, match=match) as info:
    checkpoint.load(tmp_path)
  assert str(path) in str(info.value)
  assert {p.name: p.read_bytes() for p in path.iterdir()} == before


def test_other_format_version_is_a_mismatch(tmp_path):
  path = _save(tmp_path, 4)
  record = json.loads((path / 'checkpoint.json').read_text())
  record['format_version'] = 99
  (path / 'checkpoint.json').write_text(json.dumps(record))
  with pytest.raises(checkpoint.CheckpointMismatchError, match='version 99'):
    checkpoint.load(tmp_path)


def test_restore_reports_every_kind_of_mismatch():
  arrays = checkpoint.flatten_tree(_state(0), 'state')
  arrays['state/extra'] = np.zeros(3, np.float32)
  arrays['state/params/mlp/~/linear_0/w'] = np.zeros((2, 6), np.float32)
  template = {
      'params': {'mlp/~/linear_0': {'w': np.zeros((2, 5), np.float32)}},
      'count': np.zeros((), np.int32),
      'absent': np.zeros((), np.float32),
  }
  with pytest.raises(checkpoint.CheckpointMismatchError) as info:
    checkpoint.restore_tree(template, arrays, 'state')
  message = str(info.value)
  assert '1 missing: state/absent' in message
  assert '1 unexpected: state/extra' in message
  assert 'state/params/mlp/~/linear_0/w (expected float32[2, 5], got' in message


def test_dtype_change_is_a_mismatch():
  arrays = checkpoint.flatten_tree({'count': np.int64(3)})
  with pytest.raises(checkpoint.CheckpointMismatchError, match='int32'):
    checkpoint.restore_tree({'count': np.int32(0)}, arrays)


def test_bad_arguments_write_nothing(tmp_path):
  with pytest.raises(checkpoint.CheckpointError, match='JSON'):
    checkpoint.save(
        tmp_path,
        1,
        update_rule_params=_params(),
        arrays={},
        metadata={'bad': object()},
    )
  with pytest.raises(checkpoint.CheckpointError, match='keep'):
    _save(tmp_path, 1, keep=0)
  with pytest.raises(weights.WeightsError):
    checkpoint.save(
        tmp_path,
        1,
        update_rule_params={'m': {'w': np.zeros(2, np.int32)}},
        arrays={},
        metadata={},
    )
  assert not list(tmp_path.iterdir())


def test_staging_left_by_a_killed_writer_is_ignored_then_removed(tmp_path):
  stale = tmp_path / '.tmp-step_00000003-abc'
  stale.mkdir()
  (stale / 'state.npz').write_bytes(b'partial')
  assert checkpoint.latest_step(tmp_path) is None
  _save(tmp_path, 3)
  assert [p.name for p in tmp_path.iterdir()] == ['step_00000003']


def test_interrupted_write_leaves_no_checkpoint(tmp_path, monkeypatch):
  def _fail(*args, **kwargs):
    raise KeyboardInterrupt

  monkeypatch.setattr(os, 'rename', _fail)
  with pytest.raises(KeyboardInterrupt):
    _save(tmp_path, 1)
  assert not list(tmp_path.iterdir())
  assert checkpoint.latest_step(tmp_path) is None
