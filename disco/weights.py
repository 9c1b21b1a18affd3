"""Finding, verifying and downloading Disco103; loading any update rule.

`load_disco103` finds the published Disco103 rule (or downloads it) and
checks it; `load_update_rule_params_from` takes a path or `'disco103'`. The
flat `.npz` layout itself (`load_update_rule_params`,
`save_update_rule_params`) is `disco.params_file`, re-exported here. The
Disco103 weights are by the DiscoRL authors (Google DeepMind), CC-BY 4.0.
"""

from collections.abc import Mapping
import contextlib
import hashlib
import http.client
import logging
import os
import pathlib
from typing import Any, BinaryIO
import urllib.request

import immutabledict

from disco import files

# pylint: disable=g-importing-member,useless-import-alias
from disco.params_file import HostParams as HostParams
from disco.params_file import Params as Params
from disco.params_file import PathLike as PathLike
from disco.params_file import StructureError as StructureError
from disco.params_file import WeightsError as WeightsError
from disco.params_file import WeightsNotFoundError as WeightsNotFoundError
from disco.params_file import flatten_params as flatten_params
from disco.params_file import load_update_rule_params as load_update_rule_params
from disco.params_file import params_from_npz_bytes
from disco.params_file import read_file_bytes
from disco.params_file import save_update_rule_params as save_update_rule_params
from disco.params_file import unflatten_params as unflatten_params
from disco.params_file import validate_params as validate_params

# The source (`load_update_rule_params_from`, the configs'
# `update_rule_params`) that stands for the published rule.
DISCO103 = 'disco103'

# --- Facts about the published Disco103 file. ---
DISCO103_FILENAME = 'disco_103.npz'
DISCO103_URL = (
    'https://raw.githubusercontent.com/google-deepmind/disco_rl/main/'
    'disco_rl/update_rules/weights/disco_103.npz'
)
DISCO103_SHA256 = (
    'dac840a15b81e8805326363458c33979626172618f620d9e6e170315388530aa'
)
DISCO103_NUM_BYTES = 2_803_507
DISCO103_NUM_TENSORS = 42
DISCO103_NUM_FLOATS = 754_778
# Flat key -> shape of every tensor in `disco_103.npz` (all float32).
DISCO103_SHAPES: Mapping[str, tuple[int, ...]] = immutabledict.immutabledict({
    'lstm/linear/b': (256,),
    'lstm/linear/w': (128, 256),
    'lstm/linear_1/b': (1,),
    'lstm/linear_1/w': (256, 1),
    'lstm/linear_2/b': (600,),
    'lstm/linear_2/w': (256, 600),
    'lstm/linear_3/b': (600,),
    'lstm/linear_3/w': (256, 600),
    'lstm/linear_4/b': (1,),
    'lstm/linear_4/w': (16, 1),
    'lstm/lstm/linear/b': (1024,),
    'lstm/lstm/linear/w': (283, 1024),
    'lstm/mlp/~/linear_0/b': (16,),
    'lstm/mlp/~/linear_0/w': (600, 16),
    'lstm/mlp/~/linear_1/b': (1,),
    'lstm/mlp/~/linear_1/w': (16, 1),
    'lstm/mlp_1/~/linear_0/b': (16,),
    'lstm/mlp_1/~/linear_0/w': (600, 16),
    'lstm/mlp_1/~/linear_1/b': (1,),
    'lstm/mlp_1/~/linear_1/w': (16, 1),
    'lstm/sequential/conv1_d/b': (16,),
    'lstm/sequential/conv1_d/w': (1, 18, 16),
    'lstm/sequential/conv1_d_1/b': (2,),
    'lstm/sequential/conv1_d_1/w': (1, 32, 2),
    'lstm/sequential_1/conv1_d/b': (16,),
    'lstm/sequential_1/conv1_d/w': (1, 516, 16),
    'lstm/~/meta_lstm/~unroll/lstm/linear/b': (512,),
    'lstm/~/meta_lstm/~unroll/lstm/linear/w': (144, 512),
    'lstm/~/meta_lstm/~unroll/mlp/~/linear_0/b': (16,),
    'lstm/~/meta_lstm/~unroll/mlp/~/linear_0/w': (600, 16),
    'lstm/~/meta_lstm/~unroll/mlp/~/linear_1/b': (1,),
    'lstm/~/meta_lstm/~unroll/mlp/~/linear_1/w': (16, 1),
    'lstm/~/meta_lstm/~unroll/mlp_1/~/linear_0/b': (16,),
    'lstm/~/meta_lstm/~unroll/mlp_1/~/linear_0/w': (600, 16),
    'lstm/~/meta_lstm/~unroll/mlp_1/~/linear_1/b': (1,),
    'lstm/~/meta_lstm/~unroll/mlp_1/~/linear_1/w': (16, 1),
    'lstm/~/meta_lstm/~unroll/mlp_2/~/linear_0/b': (16,),
    'lstm/~/meta_lstm/~unroll/mlp_2/~/linear_0/w': (29, 16),
    'lstm/~/meta_lstm/~unroll/sequential/conv1_d/b': (16,),
    'lstm/~/meta_lstm/~unroll/sequential/conv1_d/w': (1, 18, 16),
    'lstm/~/meta_lstm/~unroll/sequential/conv1_d_1/b': (2,),
    'lstm/~/meta_lstm/~unroll/sequential/conv1_d_1/w': (1, 32, 2),
})

# --- Environment variables read by the loader. ---
WEIGHTS_ENV_VAR = 'DISCO_WEIGHTS'
URL_ENV_VAR = 'DISCO_WEIGHTS_URL'
CACHE_DIR_ENV_VAR = 'DISCO_CACHE_DIR'

# Seconds a single blocking network operation may take during a download.
DEFAULT_TIMEOUT_SECONDS = 60.0
# A download larger than this cannot be the weights; stop instead of filling
# the disk when the URL points somewhere unexpected.
_MAX_DOWNLOAD_BYTES = 64 * 2**20
_CHUNK_BYTES = 2**16


class ChecksumError(WeightsError):
  """The bytes of a weights file do not have the published SHA-256."""

  def __init__(self, message: str, *, expected: str, actual: str):
    super().__init__(message)
    self.expected = expected
    self.actual = actual


class DownloadError(OSError):
  """Fetching a weights file over the network failed."""

  def __init__(self, url: str, reason: str):
    super().__init__(f'Could not download {url}: {reason}')
    self.url = url
    self.reason = reason


# ----------------------------------------------------------------------------
# Disco103: locations, verification, download.


def repo_weights_path() -> pathlib.Path | None:
  """`<repo>/weights/disco_103.npz`, the repo being the package's parent.

  None when the package is not in a source checkout (no `pyproject.toml`
  beside it, as when installed from a wheel): `site-packages/weights/` is
  nobody's place for the file.
  """
  repo = pathlib.Path(__file__).resolve().parent.parent
  if not (repo / 'pyproject.toml').is_file():
    return None
  return repo / 'weights' / DISCO103_FILENAME


def default_cache_dir() -> pathlib.Path:
  """The user cache directory for downloaded weights.

  `$DISCO_CACHE_DIR` if set, else `$XDG_CACHE_HOME/disco`, else
  `~/.cache/disco`. Per the XDG spec an empty or relative `$XDG_CACHE_HOME`
  is ignored.
  """
  explicit = os.environ.get(CACHE_DIR_ENV_VAR, '')
  if explicit:
    return pathlib.Path(explicit).expanduser()
  xdg = os.environ.get('XDG_CACHE_HOME', '')
  if xdg and os.path.isabs(xdg):
    return pathlib.Path(xdg) / 'disco'
  return pathlib.Path('~/.cache/disco').expanduser()


def _resolve_url(url: str | None) -> str:
  """The download address: argument, `$DISCO_WEIGHTS_URL`, else upstream."""
  return url or os.environ.get(URL_ENV_VAR, '') or DISCO103_URL


def _how_to_fetch(url: str) -> str:
  return (
      'To fetch it by hand:\n'
      f'  curl -L -o disco_103.npz {url}\n'
      f'  echo "{DISCO103_SHA256}  disco_103.npz" | sha256sum -c\n'
      f'  export {WEIGHTS_ENV_VAR}="$PWD/disco_103.npz"'
  )


def _verify_disco103_bytes(data: bytes, where: str, hint: str) -> HostParams:
  """Checks bytes against the published digest and shapes, then decodes."""
  actual = hashlib.sha256(data).hexdigest()
  if actual != DISCO103_SHA256:
    raise ChecksumError(
        f'SHA-256 mismatch for the Disco103 weights in {where}: expected '
        f'{DISCO103_SHA256}, got {actual} ({len(data):,} bytes; the published '
        f'file has {DISCO103_NUM_BYTES:,}). The file is truncated, corrupt or '
        'not disco_103.npz (other update-rule parameters load with '
        f'load_update_rule_params). {hint}',
        expected=DISCO103_SHA256,
        actual=actual,
    )
  params = params_from_npz_bytes(data, where)
  validate_params(
      params,
      unflatten_params(DISCO103_SHAPES),
      what=f'The Disco103 weights in {where}',
  )
  return params


def _load_disco103_file(
    path: pathlib.Path, source: str, hint: str
) -> HostParams:
  """Reads and verifies the Disco103 file at `path` (found via `source`)."""
  where = f'{path} (from {source})'
  try:
    data = read_file_bytes(path, where)
  except WeightsNotFoundError as e:
    raise WeightsNotFoundError(f'{e} {hint}') from None
  params = _verify_disco103_bytes(data, where, hint)
  logging.info('Loaded Disco103 weights from %s (%s).', path, source)
  return params


def _make_directories(directory: pathlib.Path) -> list[pathlib.Path]:
  """Creates `directory` and missing parents; returns those created."""
  created = []
  current = directory
  while not current.exists() and current != current.parent:
    created.append(current)
    current = current.parent
  for d in reversed(created):
    d.mkdir(exist_ok=True)
  return created


def _fetch(url: str, f: BinaryIO, timeout: float) -> None:
  """Streams `url` into the open binary file `f`."""
  try:
    response = urllib.request.urlopen(url, timeout=timeout)
  except (OSError, http.client.HTTPException, ValueError) as e:
    raise DownloadError(url, f'{type(e).__name__}: {e}') from e
  with response:
    announced = response.headers.get('Content-Length')
    received = 0
    while True:
      try:
        chunk = response.read(_CHUNK_BYTES)
      except (OSError, http.client.HTTPException) as e:
        raise DownloadError(url, f'{type(e).__name__}: {e}') from e
      if not chunk:
        break
      received += len(chunk)
      if received > _MAX_DOWNLOAD_BYTES:
        raise DownloadError(
            url, f'more than {_MAX_DOWNLOAD_BYTES:,} bytes; not the weights'
        )
      f.write(chunk)
  if announced is not None and announced.isdigit():
    if received != int(announced):
      raise DownloadError(
          url,
          f'the connection closed after {received:,} of {int(announced):,} '
          'bytes',
      )


def download_disco103(
    cache_dir: PathLike | None = None,
    *,
    url: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> pathlib.Path:
  """Downloads `disco_103.npz` into the cache, verified, even if one is there.

  The file is streamed to a temporary file in the cache directory, checked
  (SHA-256 and shapes) and only then renamed over `<cache_dir>/disco_103.npz`.
  On any failure the temporary file, and any directory created for it, is
  removed and an existing cached copy is left exactly as it was.

  Args:
    cache_dir: where to put the file; defaults to `default_cache_dir()`.
    url: where to fetch from; defaults to `$DISCO_WEIGHTS_URL`, else
      `DISCO103_URL`.
    timeout: seconds allowed for each blocking network operation.

  Returns:
    The path of the verified file.

  Raises:
    DownloadError: if the network request fails.
    ChecksumError: if the downloaded bytes are not the published file.
    WeightsError: if they pass the checksum but not the structure check
      (only possible if the constants of this module are inconsistent).
  """
  url = _resolve_url(url)
  directory = (
      pathlib.Path(cache_dir).expanduser()
      if cache_dir is not None
      else default_cache_dir()
  )
  destination = directory / DISCO103_FILENAME
  try:
    created = _make_directories(directory)
  except OSError as e:
    raise DownloadError(
        url, f'cannot create the cache directory {directory}: {e}'
    ) from e
  try:
    with files.atomic_write(destination) as f:
      _fetch(url, f, timeout)
      f.seek(0)
      data = f.read()
      _verify_disco103_bytes(
          data,
          f'the download from {url}',
          f'Nothing was written to {directory}; any cached copy is unchanged.',
      )
  except BaseException:
    for d in created:  # Innermost first; only directories made here.
      with contextlib.suppress(OSError):
        d.rmdir()
    raise
  logging.info('Downloaded Disco103 weights from %s to %s.', url, destination)
  return destination


def load_disco103(
    path: PathLike | None = None,
    *,
    download: bool = True,
    url: str | None = None,
    cache_dir: PathLike | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> HostParams:
  """Finds, verifies and loads the published Disco103 update-rule parameters.

  Looks, in order, at `path`, `$DISCO_WEIGHTS`, `repo_weights_path()` (in a
  source checkout), the cache directory, and finally downloads into the cache. The first location
  that is set (for `path` and `$DISCO_WEIGHTS`) or holds a file (for the
  others) is used, and it must pass the checks: a wrong file is an error, not
  a reason to keep searching, so a typo never silently loads something else.

  Args:
    path: an explicit file to use instead of searching.
    download: whether the last step may use the network.
    url: download address; defaults to `$DISCO_WEIGHTS_URL`, else
      `DISCO103_URL`.
    cache_dir: cache directory; defaults to `default_cache_dir()`.
    timeout: seconds allowed for each blocking network operation.

  Returns:
    A Haiku tree `{module_path: {'w': array, 'b': array}}` of float32 numpy
    arrays with the shapes of `DISCO103_SHAPES`.

  Raises:
    WeightsNotFoundError: if the chosen file is missing, or no location has
      it and the download is disabled or fails; the message lists every
      place looked and how to fetch the file.
    ChecksumError: if the file's SHA-256 is not the published one.
    WeightsError: if the file is not a valid `.npz` or has the wrong tensors.
  """
  url = _resolve_url(url)
  cache = (
      pathlib.Path(cache_dir).expanduser()
      if cache_dir is not None
      else default_cache_dir()
  )
  repo_file = repo_weights_path()
  cache_file = cache / DISCO103_FILENAME

  if path is not None:
    return _load_disco103_file(
        pathlib.Path(path).expanduser(),
        'the explicit path argument',
        'An explicit path is not searched for elsewhere: fix it, or pass no '
        'path to search $DISCO_WEIGHTS, the repository, the cache and then '
        'download.',
    )
  env_value = os.environ.get(WEIGHTS_ENV_VAR, '')
  if env_value:
    return _load_disco103_file(
        pathlib.Path(env_value).expanduser(),
        f'${WEIGHTS_ENV_VAR}',
        f'Fix ${WEIGHTS_ENV_VAR}, or unset it to search the repository, the '
        'cache and then download.',
    )
  looked = [f'${WEIGHTS_ENV_VAR}: not set']
  candidates = [(
      cache_file,
      'the user cache',
      (
          'Replace it with a verified copy by calling '
          'disco.weights.download_disco103(), or delete it.'
      ),
  )]
  if repo_file is not None:
    candidates.insert(
        0,
        (
            repo_file,
            'the repository weights/ directory',
            (
                'Replace it with the published file, or delete it to use the'
                ' cache or a download.'
            ),
        ),
    )
  for candidate, source, remedy in candidates:
    if candidate.exists():
      return _load_disco103_file(
          candidate, source, f'{remedy} {_how_to_fetch(url)}'
      )
    looked.append(f'{candidate} ({source}): no such file')

  failure = None
  if not download:
    looked.append('download: disabled (download=False)')
  else:
    try:
      downloaded = download_disco103(cache, url=url, timeout=timeout)
    except DownloadError as e:
      failure = e
      looked.append(f'download from {url} into {cache}: {e.reason}')
    else:
      return _load_disco103_file(
          downloaded, f'a download of {url}', _how_to_fetch(url)
      )
  places = '\n'.join(f'  {i}. {place}' for i, place in enumerate(looked, 1))
  save_as = ' or '.join(str(c) for c, _, _ in candidates)
  raise WeightsNotFoundError(
      f'Could not find the Disco103 weights ({DISCO103_FILENAME}). Looked '
      f'at:\n{places}\n{_how_to_fetch(url)}\nor save it as {save_as}. '
      f'Expected SHA-256: {DISCO103_SHA256}.'
  ) from failure


def load_update_rule_params_from(source: PathLike) -> dict[str, dict[str, Any]]:
  """The parameters named by a config's `update_rule_params`.

  Args:
    source: 'disco103' (the published rule, `load_disco103`) or the path of
      an `.npz` file of update-rule parameters.

  Returns:
    The parameters as numpy arrays.
  """
  if str(source) == DISCO103:
    return load_disco103()
  return load_update_rule_params(source)
