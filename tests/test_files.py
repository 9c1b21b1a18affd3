"""Tests for `disco.files`: atomic writes, key paths, tree differences."""

import collections
import json
import os
import stat

import chex
import jax
import numpy as np
import optax
import pytest

from disco import files


class _Boom(Exception):
  pass


# ----------------------------------------------------------------------------
# Atomic writes.


def test_atomic_write_replaces_the_file_with_readable_bytes(tmp_path):
  path = tmp_path / 'out.bin'
  path.write_bytes(b'old')
  files.write_bytes_atomic(path, b'new contents')
  assert path.read_bytes() == b'new contents'
  assert stat.S_IMODE(path.stat().st_mode) == files.FILE_MODE
  assert [p.name for p in tmp_path.iterdir()] == ['out.bin']


def test_atomic_write_can_read_back_what_it_wrote(tmp_path):
  with files.atomic_write(tmp_path / 'a.bin') as f:
    f.write(b'abc')
    f.seek(0)
    assert f.read() == b'abc'


@pytest.mark.parametrize('existing', [None, b'previous'])
def test_an_exception_mid_write_leaves_no_partial_file(tmp_path, existing):
  path = tmp_path / 'out.bin'
  if existing is not None:
    path.write_bytes(existing)
  with pytest.raises(_Boom):
    with files.atomic_write(path) as f:
      f.write(b'half of it')
      raise _Boom
  if existing is None:
    assert not list(tmp_path.iterdir())
  else:
    assert path.read_bytes() == existing
    assert [p.name for p in tmp_path.iterdir()] == ['out.bin']


def test_a_failed_rename_leaves_no_temporary_file(tmp_path, monkeypatch):
  def _refuse(*args, **kwargs):
    raise OSError('no')

  monkeypatch.setattr(os, 'replace', _refuse)
  with pytest.raises(OSError, match='no'):
    files.write_text_atomic(tmp_path / 'x.txt', 'text')
  assert not list(tmp_path.iterdir())


def test_text_and_json_writes(tmp_path):
  files.write_text_atomic(tmp_path / 'a.txt', 'héllo\n')
  assert (tmp_path / 'a.txt').read_text(encoding='utf-8') == 'héllo\n'
  files.write_json_atomic(tmp_path / 'c.json', {'b': [1, 2], 'a': 'x'})
  text = (tmp_path / 'c.json').read_text()
  assert text.endswith('}\n')
  assert json.loads(text) == {'b': [1, 2], 'a': 'x'}


def test_unserialisable_json_writes_nothing(tmp_path):
  with pytest.raises(TypeError):
    files.write_json_atomic(tmp_path / 'c.json', {'bad': object()})
  assert not list(tmp_path.iterdir())


def test_atomic_directory_appears_complete_or_not_at_all(tmp_path):
  final = tmp_path / 'run'
  with pytest.raises(_Boom):
    with files.atomic_directory(final, prefix='.tmp-run-') as staging:
      assert staging.name.startswith('.tmp-run-')
      (staging / 'a').write_text('1')
      raise _Boom
  assert not list(tmp_path.iterdir())
  with files.atomic_directory(final) as staging:
    (staging / 'a').write_text('1')
    assert not final.exists()
  assert [p.name for p in tmp_path.iterdir()] == ['run']
  assert (final / 'a').read_text() == '1'


def test_atomic_directory_never_replaces_a_full_one(tmp_path):
  final = tmp_path / 'run'
  with pytest.raises(FileExistsError):
    with files.atomic_directory(final) as staging:
      (staging / 'new').write_text('new')
      final.mkdir()
      (final / 'old').write_text('old')
  assert [p.name for p in final.iterdir()] == ['old']
  assert [p.name for p in tmp_path.iterdir()] == ['run']


def test_file_sha256(tmp_path):
  (tmp_path / 'f').write_bytes(b'abc')
  assert files.file_sha256(tmp_path / 'f') == (
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'
  )


# ----------------------------------------------------------------------------
# Key paths.


@chex.dataclass(frozen=True)
class _State:
  params: dict
  count: np.ndarray


_Pair = collections.namedtuple('_Pair', 'first second')


def test_key_names_of_containers():
  tree = {
      'a': [1.0, (2.0, _Pair(3.0, 4.0))],
      'mlp/~/linear_0': {'w': 5.0},
      'state': _State(params={'b': 6.0}, count=7.0),
  }
  assert list(files.named_leaves(tree, 'p')) == [
      'p/a/0',
      'p/a/1/0',
      'p/a/1/1/first',
      'p/a/1/1/second',
      'p/mlp/~/linear_0/w',
      'p/state/count',
      'p/state/params/b',
  ]


def test_key_names_of_an_optax_state():
  params = {'mlp/~/linear_0': {'w': np.zeros((2, 3))}}
  opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
  names = list(files.named_leaves(opt.init(params)))
  assert names == [
      '1/0/count',
      '1/0/mu/mlp/~/linear_0/w',
      '1/0/nu/mlp/~/linear_0/w',
  ]


def test_key_name_matches_the_leaf_order():
  tree = {'b': np.ones(2), 'a': {'x': np.zeros(1)}}
  named = files.named_leaves(tree)
  paths = [p for p, _ in jax.tree_util.tree_leaves_with_path(tree)]
  assert list(named) == [files.key_name(p) for p in paths] == ['a/x', 'b']
  for leaf, expected in zip(named.values(), jax.tree.leaves(tree)):
    assert leaf is expected


def test_colliding_names_are_an_error():
  with pytest.raises(files.KeyCollisionError, match="'a/b/c'"):
    files.named_leaves({'a/b': {'c': 1.0}, 'a': {'b/c': 2.0}})


# ----------------------------------------------------------------------------
# Tree differences.


def test_listed_counts_what_it_leaves_out():
  assert files.listed([]) == ''
  assert files.listed(range(3)) == '0, 1, 2'
  assert files.listed(list(range(7))) == '0, 1, 2, 3, 4, ... (2 more)'
  assert files.listed('abc', limit=1) == 'a, ... (2 more)'


def test_equal_trees_have_no_diff():
  diff = files.diff_trees({'a': (1,)}, {'a': (1,)})
  assert not diff
  assert diff.describe() == ''


def test_diff_names_every_kind_of_difference():
  expected = {'a': (2,), 'b': (3,), 'c': (4,)}
  got = {'a': (2,), 'c': (5,), 'z': ()}
  diff = files.diff_trees(got, expected)
  assert diff
  assert diff.missing == ['b']
  assert diff.unexpected == ['z']
  assert diff.mismatched == [('c', (4,), (5,))]
  assert diff.num_expected == 3
  assert diff.describe() == (
      '1 missing: b; 1 unexpected: z; 1 mismatched: c (expected (4,), got (5,))'
  )


def test_diff_lists_a_few_sorted_names_and_counts_the_rest():
  expected = {f'k{i:02d}': () for i in range(12)}
  diff = files.diff_trees({}, expected)
  assert diff.describe() == '12 missing: k00, k01, k02, k03, k04, ... (7 more)'


def test_diff_of_shapes_and_dtypes():
  got = files.named_leaves({'x': np.zeros((2, 6), np.float32)})
  want = files.named_leaves({'x': jax.ShapeDtypeStruct((2, 5), np.float32)})
  diff = files.diff_trees(
      {k: files.shape_dtype_of(v) for k, v in got.items()},
      {k: files.shape_dtype_of(v) for k, v in want.items()},
  )
  assert diff.describe() == (
      '1 mismatched: x (expected float32[2, 5], got float32[2, 6])'
  )
  int_diff = files.diff_trees(
      {'n': files.shape_dtype_of(np.int64(3))},
      {'n': files.shape_dtype_of(np.int32(0))},
  )
  assert int_diff.describe() == (
      '1 mismatched: n (expected int32[], got int64[])'
  )
