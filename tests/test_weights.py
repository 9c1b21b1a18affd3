"""Tests for `disco.weights`: layout, atomic saves, lookup and download.

Tests that need the published file read it from `$DISCO_WEIGHTS` as set when
the session starts (CI points it at the shared copy). Without it they are
skipped, unless `$CI` is set, in which case they fail. Every test runs with
the environment, the repository `weights/` location, the cache and the
default download address redirected to temporary places, and downloads are
served by a real HTTP server on 127.0.0.1.
"""

from collections.abc import Callable, Iterator
import dataclasses
import hashlib
import http.server
import os
import pathlib
import socket
import threading
import zipfile

import numpy as np
import pytest

from disco import files
from disco import weights
from disco.weights import lookup
from disco.weights import published

# Read before any test's monkeypatching removes it from the environment.
_REAL_WEIGHTS = os.environ.get('DISCO_WEIGHTS', '')
_ORIGINAL_REPO_WEIGHTS_PATH = weights.repo_weights_path
_GARBAGE = b'this is not the Disco103 weights file\n'


def _closed_port_url() -> str:
  """A URL on a localhost port that nothing listens on."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
  return f'http://127.0.0.1:{port}/disco_103.npz'


@dataclasses.dataclass
class Locations:
  """Where the loader looks during a test."""

  repo_file: pathlib.Path
  cache_dir: pathlib.Path

  @property
  def cache_file(self) -> pathlib.Path:
    return self.cache_dir / weights.DISCO103_FILENAME


@pytest.fixture(autouse=True)
def locations(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Locations:
  """Isolates each test from the real environment, repo, cache and network."""
  for name in (
      weights.WEIGHTS_ENV_VAR,
      weights.URL_ENV_VAR,
      'XDG_CACHE_HOME',
  ):
    monkeypatch.delenv(name, raising=False)
  monkeypatch.setenv('no_proxy', '127.0.0.1,localhost')
  monkeypatch.setenv('NO_PROXY', '127.0.0.1,localhost')
  loc = Locations(
      repo_file=tmp_path / 'repo' / 'weights' / weights.DISCO103_FILENAME,
      cache_dir=tmp_path / 'cache',
  )
  monkeypatch.setenv(weights.CACHE_DIR_ENV_VAR, str(loc.cache_dir))
  # Where `load_disco103` and the download read them.
  monkeypatch.setattr(lookup, 'repo_weights_path', lambda: loc.repo_file)
  monkeypatch.setattr(published, 'DISCO103_URL', _closed_port_url())
  return loc


@pytest.fixture
def real_path() -> pathlib.Path:
  if not _REAL_WEIGHTS:
    message = 'needs $DISCO_WEIGHTS pointing at disco_103.npz'
    if os.environ.get('CI'):
      pytest.fail(message + ' ($CI is set)')
    pytest.skip(message)
  return pathlib.Path(_REAL_WEIGHTS)


@pytest.fixture
def real_bytes(real_path: pathlib.Path) -> bytes:
  data = real_path.read_bytes()
  assert hashlib.sha256(data).hexdigest() == weights.DISCO103_SHA256
  return data


@dataclasses.dataclass
class Server:
  """A local HTTP server: `routes` maps a path to bytes or a handler."""

  base: str
  routes: dict[
      str, bytes | Callable[[http.server.BaseHTTPRequestHandler], None]
  ]
  hits: list[str]

  def url(self, route: str) -> str:
    return self.base + route


@pytest.fixture
def server() -> Iterator[Server]:
  routes = {}
  hits = []

  class Handler(http.server.BaseHTTPRequestHandler):

    def do_GET(self):  # pylint: disable=invalid-name
      hits.append(self.path)
      body = routes.get(self.path)
      if body is None:
        self.send_error(404)
      elif callable(body):
        body(self)
      else:
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
      del args  # Keep test output quiet.

  httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
  thread = threading.Thread(
      target=httpd.serve_forever, args=(0.01,), daemon=True
  )
  thread.start()
  try:
    yield Server(f'http://127.0.0.1:{httpd.server_address[1]}', routes, hits)
  finally:
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _write(path: pathlib.Path, data: bytes) -> pathlib.Path:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(data)
  return path


def _tree_bytes(params) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
  return {
      k: (str(np.asarray(v).dtype), np.shape(v), np.asarray(v).tobytes())
      for k, v in weights.flatten_params(params).items()
  }


def _example_params() -> dict[str, dict[str, np.ndarray]]:
  rng = np.random.default_rng(0)
  special = np.array(
      [np.nan, -0.0, np.inf, -np.inf, 1e-45, np.finfo(np.float32).max],
      dtype=np.float32,
  )
  return {
      'lstm/~/meta_lstm/~unroll/lstm/linear': {
          'w': rng.standard_normal((3, 4), dtype=np.float32),
          'b': special,
      },
      'net/conv': {
          'kernel': rng.standard_normal((1, 2, 3), dtype=np.float32),
          'offset': np.float32(0.5) * np.ones((), np.float32),
      },
  }


# ----------------------------------------------------------------------------
# Layout.


def test_flatten_joins_module_and_name():
  flat = weights.flatten_params(_example_params())
  assert sorted(flat) == [
      'lstm/~/meta_lstm/~unroll/lstm/linear/b',
      'lstm/~/meta_lstm/~unroll/lstm/linear/w',
      'net/conv/kernel',
      'net/conv/offset',
  ]


def test_unflatten_splits_on_last_slash():
  leaf = object()
  tree = weights.unflatten_params({'a/~/b/~unroll/c/w': leaf, 'a/scale': 2})
  assert tree == {'a/~/b/~unroll/c': {'w': leaf}, 'a': {'scale': 2}}


def test_flatten_unflatten_round_trip():
  params = _example_params()
  again = weights.unflatten_params(weights.flatten_params(params))
  assert _tree_bytes(again) == _tree_bytes(params)
  assert again.keys() == params.keys()


@pytest.mark.parametrize('key', ['w', '/w', 'module/', 'a/b/'])
def test_unflatten_rejects_keys_without_module_and_name(key):
  with pytest.raises(weights.WeightsError, match='module path'):
    weights.unflatten_params({key: 1})


@pytest.mark.parametrize(
    'params, match',
    [
        ({'m': {'a/b': 1}}, 'without "/"'),
        ({'m': {'': 1}}, 'without "/"'),
        ({'m': np.zeros(2)}, 'two levels'),
        ({'': {'w': 1}}, 'non-empty'),
        ([('m', {'w': 1})], 'Haiku params tree'),
    ],
)
def test_flatten_rejects_trees_it_cannot_round_trip(params, match):
  with pytest.raises(weights.WeightsError, match=match):
    weights.flatten_params(params)


# ----------------------------------------------------------------------------
# Saving and loading any update-rule parameters.


def test_save_load_round_trip_is_bit_identical(tmp_path):
  params = _example_params()
  path = weights.save_update_rule_params(params, tmp_path / 'rule.npz')
  loaded = weights.load_update_rule_params(path)
  assert _tree_bytes(loaded) == _tree_bytes(params)
  assert all(a.dtype == np.float32 for m in loaded.values() for a in m.values())


def test_save_is_deterministic_and_keeps_the_given_name(tmp_path):
  params = _example_params()
  first = weights.save_update_rule_params(params, tmp_path / 'a.weights')
  second = weights.save_update_rule_params(params, tmp_path / 'b.weights')
  assert first.read_bytes() == second.read_bytes()
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      'a.weights',
      'b.weights',
  ]


def test_save_stores_float32(tmp_path):
  params = {'m': {'w': np.array([0.1, 2.0], np.float64)}}
  path = weights.save_update_rule_params(params, tmp_path / 'rule.npz')
  loaded = weights.load_update_rule_params(path)
  np.testing.assert_array_equal(
      loaded['m']['w'], np.array([0.1, 2.0], np.float32)
  )
  assert loaded['m']['w'].dtype == np.float32


def test_save_of_disco103_reproduces_the_published_archive(tmp_path, real_path):
  params = weights.load_update_rule_params(real_path)
  path = weights.save_update_rule_params(params, tmp_path / 'copy.npz')
  with zipfile.ZipFile(real_path) as published, zipfile.ZipFile(path) as ours:
    assert ours.namelist() == published.namelist()
    for name in published.namelist():
      assert ours.read(name) == published.read(name), name


def test_save_leaves_no_temporary_files(tmp_path):
  weights.save_update_rule_params(_example_params(), tmp_path / 'rule.npz')
  weights.save_update_rule_params(_example_params(), tmp_path / 'rule.npz')
  assert [p.name for p in tmp_path.iterdir()] == ['rule.npz']


def test_failing_write_keeps_previous_file(tmp_path, monkeypatch):
  path = weights.save_update_rule_params(
      _example_params(), tmp_path / 'rule.npz'
  )
  before = path.read_bytes()

  def disk_full(file, **arrays):
    del arrays
    file.write(b'partial')
    raise OSError(28, 'No space left on device')

  monkeypatch.setattr(np, 'savez_compressed', disk_full)
  changed = {'m': {'w': np.ones(3, np.float32)}}
  with pytest.raises(OSError, match='No space left'):
    weights.save_update_rule_params(changed, path)
  assert path.read_bytes() == before
  assert [p.name for p in tmp_path.iterdir()] == ['rule.npz']


def test_failing_rename_keeps_previous_file(tmp_path, monkeypatch):
  path = weights.save_update_rule_params(
      _example_params(), tmp_path / 'rule.npz'
  )
  before = path.read_bytes()

  def refuse(src, dst):
    del src, dst
    raise PermissionError('read-only destination')

  monkeypatch.setattr(os, 'replace', refuse)
  with pytest.raises(PermissionError):
    weights.save_update_rule_params({'m': {'w': np.ones(3)}}, path)
  assert path.read_bytes() == before
  assert [p.name for p in tmp_path.iterdir()] == ['rule.npz']


@pytest.mark.parametrize(
    'params, match',
    [
        ({'m': {'w': np.arange(3)}}, 'floating point'),
        ({'m': {'w': np.array(['a'])}}, 'floating point'),
        ({}, 'empty'),
        ({'m': {'a/b': np.ones(1)}}, 'without "/"'),
    ],
)
def test_invalid_params_are_not_saved(tmp_path, params, match):
  path = weights.save_update_rule_params(
      _example_params(), tmp_path / 'rule.npz'
  )
  before = path.read_bytes()
  with pytest.raises(weights.WeightsError, match=match):
    weights.save_update_rule_params(params, path)
  assert path.read_bytes() == before
  assert [p.name for p in tmp_path.iterdir()] == ['rule.npz']


def test_load_missing_file(tmp_path):
  missing = tmp_path / 'nowhere.npz'
  with pytest.raises(weights.WeightsNotFoundError, match=str(missing)) as e:
    weights.load_update_rule_params(missing)
  assert isinstance(e.value, FileNotFoundError)


def test_load_truncated_file(tmp_path):
  path = weights.save_update_rule_params(
      _example_params(), tmp_path / 'rule.npz'
  )
  path.write_bytes(path.read_bytes()[:-40])
  with pytest.raises(weights.WeightsError, match='not a valid .npz') as e:
    weights.load_update_rule_params(path)
  assert str(path) in str(e.value)


def test_load_corrupt_member(tmp_path):
  path = weights.save_update_rule_params(
      {'m': {'w': np.zeros(10_000, np.float32)}}, tmp_path / 'rule.npz'
  )
  data = bytearray(path.read_bytes())
  data[len(data) // 3] ^= 0xFF  # Inside the compressed array data.
  path.write_bytes(bytes(data))
  with pytest.raises(weights.WeightsError, match='not a valid .npz'):
    weights.load_update_rule_params(path)


@pytest.mark.parametrize(
    'writer, match',
    [
        (lambda f: f.write(b''), 'not a valid .npz'),
        (lambda f: f.write(_GARBAGE), 'not a valid .npz'),
        (lambda f: np.save(f, np.zeros(3)), 'single .npy'),
        (lambda f: np.savez(f, **{'m/w': np.arange(3)}), 'floating point'),
        (lambda f: np.savez(f, w=np.zeros(3)), 'module path'),
        (lambda f: np.savez(f), 'no arrays'),
    ],
)
def test_load_rejects_bad_contents(tmp_path, writer, match):
  path = tmp_path / 'bad.npz'
  with open(path, 'wb') as f:
    writer(f)
  before = path.read_bytes()
  with pytest.raises(weights.WeightsError, match=match):
    weights.load_update_rule_params(path)
  assert path.read_bytes() == before


# ----------------------------------------------------------------------------
# Structure checks.


def test_disco103_shape_table_is_consistent():
  shapes = weights.DISCO103_SHAPES
  assert len(shapes) == weights.DISCO103_NUM_TENSORS == 42
  total = sum(int(np.prod(s)) for s in shapes.values())
  assert total == weights.DISCO103_NUM_FLOATS == 754_778


def test_disco103_shape_table_matches_the_file(real_path):
  params = weights.load_update_rule_params(real_path)
  flat = weights.flatten_params(params)
  assert {k: v.shape for k, v in flat.items()} == dict(weights.DISCO103_SHAPES)
  assert all(v.dtype == np.float32 for v in flat.values())


def test_validate_params_accepts_matching_trees():
  reference = weights.unflatten_params(weights.DISCO103_SHAPES)
  params = {
      m: {n: np.zeros(s, np.float32) for n, s in tree.items()}
      for m, tree in reference.items()
  }
  weights.validate_params(params, reference)
  weights.validate_params(params, params)  # Arrays as the reference.


def test_validate_params_names_the_first_differences():
  flat = {k: np.zeros(s) for k, s in weights.DISCO103_SHAPES.items()}
  del flat['lstm/linear/b']
  flat['lstm/linear/w'] = np.zeros((128, 255))
  flat['lstm/extra/w'] = np.zeros(3)
  reference = weights.unflatten_params(weights.DISCO103_SHAPES)
  with pytest.raises(weights.StructureError) as e:
    weights.validate_params(weights.unflatten_params(flat), reference)
  message = str(e.value)
  assert '1 missing: lstm/linear/b' in message
  assert '1 unexpected: lstm/extra/w' in message
  assert (
      '1 mismatched: lstm/linear/w (expected (128, 256), got (128, 255))'
      in message
  )
  assert e.value.missing == ['lstm/linear/b']
  assert e.value.unexpected == ['lstm/extra/w']
  assert e.value.mismatched == [('lstm/linear/w', (128, 256), (128, 255))]


def test_validate_params_lists_only_the_first_few():
  reference = weights.unflatten_params(weights.DISCO103_SHAPES)
  with pytest.raises(weights.StructureError) as e:
    weights.validate_params({}, reference, what='My rule')
  message = str(e.value)
  assert message.startswith('My rule do not match')
  first = sorted(weights.DISCO103_SHAPES)[:5]
  assert f'42 missing: {", ".join(first)}, ... (37 more)' in message
  assert sorted(weights.DISCO103_SHAPES)[5] not in message


# ----------------------------------------------------------------------------
# Disco103: the search order. Lower-priority places hold garbage, so loading
# succeeds only if the right place is used.


def _assert_is_disco103(params):
  flat = weights.flatten_params(params)
  assert {k: v.shape for k, v in flat.items()} == dict(weights.DISCO103_SHAPES)


def test_load_disco103_returns_the_file_contents(real_path):
  params = weights.load_disco103(real_path)
  with np.load(real_path) as archive:
    expected = {k: archive[k] for k in archive.files}
  assert _tree_bytes(params) == _tree_bytes(weights.unflatten_params(expected))
  assert all(a.dtype == np.float32 for m in params.values() for a in m.values())
  assert len(params) == 21


def test_explicit_path_comes_first(
    locations, monkeypatch, real_bytes, tmp_path
):
  _write(locations.repo_file, _GARBAGE)
  _write(locations.cache_file, _GARBAGE)
  env = _write(tmp_path / 'env.npz', _GARBAGE)
  monkeypatch.setenv('DISCO_WEIGHTS', str(env))
  explicit = _write(tmp_path / 'explicit.npz', real_bytes)
  _assert_is_disco103(weights.load_disco103(explicit))
  _assert_is_disco103(weights.load_disco103(str(explicit)))


def test_explicit_path_missing_does_not_fall_through(
    locations, monkeypatch, real_path, tmp_path
):
  _write(locations.repo_file, real_path.read_bytes())
  _write(locations.cache_file, real_path.read_bytes())
  monkeypatch.setenv('DISCO_WEIGHTS', str(real_path))
  missing = tmp_path / 'typo.npz'
  with pytest.raises(weights.WeightsNotFoundError) as e:
    weights.load_disco103(missing)
  assert str(missing) in str(e.value)
  assert 'explicit path' in str(e.value)


def test_explicit_path_with_wrong_file_does_not_fall_through(
    locations, real_bytes, tmp_path
):
  _write(locations.cache_file, real_bytes)
  wrong = _write(tmp_path / 'wrong.npz', _GARBAGE)
  with pytest.raises(weights.ChecksumError) as e:
    weights.load_disco103(wrong)
  assert str(wrong) in str(e.value)
  assert 'explicit path' in str(e.value)


def test_env_var_comes_before_repo_and_cache(locations, monkeypatch, real_path):
  _write(locations.repo_file, _GARBAGE)
  _write(locations.cache_file, _GARBAGE)
  monkeypatch.setenv('DISCO_WEIGHTS', str(real_path))
  _assert_is_disco103(weights.load_disco103())


def test_env_var_missing_file_fails_naming_the_variable(
    locations, monkeypatch, real_bytes, tmp_path
):
  _write(locations.repo_file, real_bytes)
  missing = tmp_path / 'gone.npz'
  monkeypatch.setenv('DISCO_WEIGHTS', str(missing))
  with pytest.raises(weights.WeightsNotFoundError) as e:
    weights.load_disco103()
  assert str(missing) in str(e.value)
  assert '$DISCO_WEIGHTS' in str(e.value)


def test_env_var_wrong_file_fails_naming_the_variable(
    locations, monkeypatch, real_bytes, tmp_path
):
  _write(locations.repo_file, real_bytes)
  wrong = _write(tmp_path / 'wrong.npz', real_bytes[:1000])
  monkeypatch.setenv('DISCO_WEIGHTS', str(wrong))
  with pytest.raises(weights.ChecksumError) as e:
    weights.load_disco103()
  assert '$DISCO_WEIGHTS' in str(e.value)
  assert str(wrong) in str(e.value)


def test_empty_env_var_counts_as_unset(locations, monkeypatch, real_bytes):
  _write(locations.repo_file, real_bytes)
  monkeypatch.setenv('DISCO_WEIGHTS', '')
  _assert_is_disco103(weights.load_disco103())


def test_repo_weights_come_before_the_cache(locations, real_bytes):
  _write(locations.repo_file, real_bytes)
  _write(locations.cache_file, _GARBAGE)
  _assert_is_disco103(weights.load_disco103())


def test_bad_repo_weights_are_reported_not_skipped(locations, real_bytes):
  _write(locations.repo_file, _GARBAGE)
  _write(locations.cache_file, real_bytes)
  with pytest.raises(weights.ChecksumError) as e:
    weights.load_disco103()
  assert str(locations.repo_file) in str(e.value)
  assert locations.repo_file.read_bytes() == _GARBAGE


def test_cache_comes_before_download(locations, real_bytes, server):
  _write(locations.cache_file, real_bytes)
  server.routes['/disco_103.npz'] = real_bytes
  _assert_is_disco103(weights.load_disco103(url=server.url('/disco_103.npz')))
  assert not server.hits


def test_bad_cached_copy_is_reported_not_replaced(
    locations, real_bytes, server
):
  _write(locations.cache_file, real_bytes[:-1])
  server.routes['/disco_103.npz'] = real_bytes
  with pytest.raises(weights.ChecksumError) as e:
    weights.load_disco103(url=server.url('/disco_103.npz'))
  assert str(locations.cache_file) in str(e.value)
  assert locations.cache_file.read_bytes() == real_bytes[:-1]
  assert not server.hits


def test_cache_dir_argument_overrides_the_environment(
    locations, real_bytes, tmp_path
):
  other = tmp_path / 'other-cache'
  _write(other / weights.DISCO103_FILENAME, real_bytes)
  _assert_is_disco103(weights.load_disco103(cache_dir=other, download=False))
  assert not locations.cache_dir.exists()


def test_default_cache_dir(monkeypatch, tmp_path):
  monkeypatch.setenv('DISCO_CACHE_DIR', str(tmp_path / 'explicit'))
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'xdg'))
  assert weights.default_cache_dir() == tmp_path / 'explicit'
  monkeypatch.delenv('DISCO_CACHE_DIR')
  assert weights.default_cache_dir() == tmp_path / 'xdg' / 'disco'
  monkeypatch.setenv('HOME', str(tmp_path / 'home'))
  monkeypatch.setenv('XDG_CACHE_HOME', 'relative/ignored')
  expected = tmp_path / 'home' / '.cache' / 'disco'
  assert weights.default_cache_dir() == expected
  monkeypatch.delenv('XDG_CACHE_HOME')
  assert weights.default_cache_dir() == expected


def test_repo_weights_path_is_next_to_the_package():
  package_dir = pathlib.Path(lookup.__file__).resolve().parents[1]
  assert _ORIGINAL_REPO_WEIGHTS_PATH() == (
      package_dir.parent / 'weights' / 'disco_103.npz'
  )


def test_an_installed_package_has_no_repo_weights_path(monkeypatch, tmp_path):
  # As from a wheel: site-packages/disco/, with no pyproject.toml beside it.
  installed = tmp_path / 'site-packages' / 'disco' / 'weights' / 'lookup.py'
  installed.parent.mkdir(parents=True)
  monkeypatch.setattr(lookup, '__file__', str(installed))
  assert _ORIGINAL_REPO_WEIGHTS_PATH() is None
  (tmp_path / 'site-packages' / 'pyproject.toml').write_text('')
  assert _ORIGINAL_REPO_WEIGHTS_PATH() == (
      tmp_path / 'site-packages' / 'weights' / 'disco_103.npz'
  )


def test_structure_is_checked_after_the_checksum(
    locations, monkeypatch, real_path, tmp_path
):
  flat = weights.flatten_params(weights.load_update_rule_params(real_path))
  del flat['lstm/linear/b']
  flat['lstm/linear_4/w'] = np.zeros((17, 1), np.float32)
  path = weights.save_update_rule_params(
      weights.unflatten_params(flat), tmp_path / 'odd.npz'
  )
  monkeypatch.setattr(published, 'DISCO103_SHA256', files.file_sha256(path))
  with pytest.raises(weights.StructureError) as e:
    weights.load_disco103(path)
  message = str(e.value)
  assert str(path) in message
  assert '1 missing: lstm/linear/b' in message
  assert 'lstm/linear_4/w (expected (16, 1), got (17, 1))' in message


def test_checksum_error_names_both_digests_and_the_path(real_bytes, tmp_path):
  wrong = _write(tmp_path / 'disco_103.npz', real_bytes[: len(real_bytes) // 2])
  actual = hashlib.sha256(wrong.read_bytes()).hexdigest()
  with pytest.raises(weights.ChecksumError) as e:
    weights.load_disco103(wrong)
  message = str(e.value)
  assert weights.DISCO103_SHA256 in message
  assert actual in message
  assert str(wrong) in message
  assert e.value.expected == weights.DISCO103_SHA256
  assert e.value.actual == actual
  assert isinstance(e.value, ValueError)


# ----------------------------------------------------------------------------
# Disco103: downloads, against a real local HTTP server.


def test_download_lands_in_cache_verified(locations, real_bytes, server):
  server.routes['/w/disco_103.npz'] = real_bytes
  url = server.url('/w/disco_103.npz')
  _assert_is_disco103(weights.load_disco103(url=url))
  assert server.hits == ['/w/disco_103.npz']
  assert locations.cache_file.read_bytes() == real_bytes
  assert [p.name for p in locations.cache_dir.iterdir()] == ['disco_103.npz']
  # The next call finds the cached copy and stays off the network.
  _assert_is_disco103(weights.load_disco103(url=url))
  assert len(server.hits) == 1


def test_download_url_from_environment(
    locations, monkeypatch, real_bytes, server
):
  server.routes['/env.npz'] = real_bytes
  monkeypatch.setenv('DISCO_WEIGHTS_URL', server.url('/env.npz'))
  _assert_is_disco103(weights.load_disco103())
  assert server.hits == ['/env.npz']
  assert locations.cache_file.read_bytes() == real_bytes


def test_url_argument_overrides_environment(monkeypatch, real_bytes, server):
  server.routes['/arg.npz'] = real_bytes
  monkeypatch.setenv('DISCO_WEIGHTS_URL', server.url('/env.npz'))
  _assert_is_disco103(weights.load_disco103(url=server.url('/arg.npz')))
  assert server.hits == ['/arg.npz']


def test_corrupted_download_keeps_good_cached_copy(
    locations, real_bytes, server
):
  good = _write(locations.cache_file, real_bytes)
  inode = good.stat().st_ino
  corrupted = bytearray(real_bytes)
  corrupted[len(corrupted) // 2] ^= 0xFF
  server.routes['/bad.npz'] = bytes(corrupted)
  with pytest.raises(weights.ChecksumError) as e:
    weights.download_disco103(url=server.url('/bad.npz'))
  message = str(e.value)
  assert weights.DISCO103_SHA256 in message
  assert hashlib.sha256(bytes(corrupted)).hexdigest() in message
  assert server.url('/bad.npz') in message
  assert server.hits == ['/bad.npz']
  assert good.read_bytes() == real_bytes
  assert good.stat().st_ino == inode
  assert [p.name for p in locations.cache_dir.iterdir()] == ['disco_103.npz']


def test_good_download_replaces_cached_copy(locations, real_bytes, server):
  _write(locations.cache_file, _GARBAGE)
  server.routes['/disco_103.npz'] = real_bytes
  path = weights.download_disco103(url=server.url('/disco_103.npz'))
  assert path == locations.cache_file
  assert path.read_bytes() == real_bytes
  assert [p.name for p in locations.cache_dir.iterdir()] == ['disco_103.npz']


def test_corrupted_download_via_loader_leaves_nothing(
    locations, real_bytes, server
):
  server.routes['/disco_103.npz'] = real_bytes[:-100]
  with pytest.raises(weights.ChecksumError):
    weights.load_disco103(url=server.url('/disco_103.npz'))
  assert not locations.cache_dir.exists()


def test_interrupted_download_leaves_nothing(locations, real_bytes, server):
  locations.cache_dir.mkdir()

  def hang_up_halfway(handler):
    handler.send_response(200)
    handler.send_header('Content-Length', str(len(real_bytes)))
    handler.end_headers()
    handler.wfile.write(real_bytes[: len(real_bytes) // 2])
    handler.close_connection = True

  server.routes['/disco_103.npz'] = hang_up_halfway
  with pytest.raises(weights.WeightsNotFoundError) as e:
    weights.load_disco103(url=server.url('/disco_103.npz'))
  assert 'closed after 1,401,753 of 2,803,507 bytes' in str(e.value)
  assert isinstance(e.value.__cause__, weights.DownloadError)
  assert not list(locations.cache_dir.iterdir())


def test_missing_everywhere_lists_every_place(locations):
  url = published.DISCO103_URL  # A closed localhost port (see `locations`).
  with pytest.raises(weights.WeightsNotFoundError) as e:
    weights.load_disco103()
  message = str(e.value)
  for expected in (
      '$DISCO_WEIGHTS: not set',
      str(locations.repo_file),
      str(locations.cache_file),
      f'download from {url}',
      'Connection refused',
      f'curl -L -o disco_103.npz {url}',
      'export DISCO_WEIGHTS=',
      weights.DISCO103_SHA256,
  ):
    assert expected in message
  assert not locations.cache_dir.exists()


def test_missing_everywhere_outside_a_checkout_names_only_the_cache(
    locations, monkeypatch
):
  monkeypatch.setattr(lookup, 'repo_weights_path', lambda: None)
  with pytest.raises(weights.WeightsNotFoundError) as e:
    weights.load_disco103()
  message = str(e.value)
  assert 'repository' not in message and str(locations.repo_file) not in message
  places = message.split('Looked at:\n', 1)[1].split('\nTo fetch', 1)[0]
  assert [line.split('. ', 1)[0].strip() for line in places.splitlines()] == [
      '1',
      '2',
      '3',
  ], places
  assert f'or save it as {locations.cache_file}.' in message


def test_http_error_is_reported(locations, server):
  with pytest.raises(weights.WeightsNotFoundError, match='HTTP Error 404'):
    weights.load_disco103(url=server.url('/missing.npz'))
  assert server.hits == ['/missing.npz']
  assert not locations.cache_dir.exists()


def test_download_can_be_disabled(locations, server):
  server.routes['/disco_103.npz'] = _GARBAGE
  with pytest.raises(weights.WeightsNotFoundError, match='download=False'):
    weights.load_disco103(download=False, url=server.url('/disco_103.npz'))
  assert not server.hits
  assert not locations.cache_dir.exists()


def test_download_error_for_direct_calls(locations):
  with pytest.raises(weights.DownloadError) as e:
    weights.download_disco103()
  assert e.value.url == published.DISCO103_URL
  assert isinstance(e.value, OSError)
  assert not locations.cache_dir.exists()
