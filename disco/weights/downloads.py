"""Downloading Disco103 into the user cache, verified before it is kept.

The network is used here only: `download_disco103` streams the published
file into `default_cache_dir()` (or another directory) and renames it into
place once its digest and tensors check out (`published`).
"""

import contextlib
import http.client
import logging
import os
import pathlib
from typing import BinaryIO
import urllib.request

from disco import files
from disco import params_file
from disco.weights import published

# --- Environment variables read here. ---
URL_ENV_VAR = 'DISCO_WEIGHTS_URL'
CACHE_DIR_ENV_VAR = 'DISCO_CACHE_DIR'

# Seconds a single blocking network operation may take during a download.
DEFAULT_TIMEOUT_SECONDS = 60.0
# A download larger than this cannot be the weights; stop instead of filling
# the disk when the URL points somewhere unexpected.
_MAX_DOWNLOAD_BYTES = 64 * 2**20
_CHUNK_BYTES = 2**16


class DownloadError(OSError):
  """Fetching a weights file over the network failed."""

  def __init__(self, url: str, reason: str):
    super().__init__(f'Could not download {url}: {reason}')
    self.url = url
    self.reason = reason


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


def cache_dir_or_default(
    cache_dir: params_file.PathLike | None,
) -> pathlib.Path:
  """`cache_dir` (with `~` expanded), or `default_cache_dir()` if None."""
  if cache_dir is None:
    return default_cache_dir()
  return pathlib.Path(cache_dir).expanduser()


def resolve_url(url: str | None) -> str:
  """The download address: argument, `$DISCO_WEIGHTS_URL`, else upstream."""
  return url or os.environ.get(URL_ENV_VAR, '') or published.DISCO103_URL


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
    cache_dir: params_file.PathLike | None = None,
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
      (only possible if the constants of `published` are inconsistent).
  """
  url = resolve_url(url)
  directory = cache_dir_or_default(cache_dir)
  destination = directory / published.DISCO103_FILENAME
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
      published.verify_disco103_bytes(
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
