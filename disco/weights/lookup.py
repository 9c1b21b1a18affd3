"""Finding the Disco103 file on this machine, and naming any rule's source.

`load_disco103` looks in a fixed order (an explicit path, `$DISCO_WEIGHTS`,
the repository's `weights/`, the cache, then a download) and holds the
first file it finds to the published one; `load_update_rule_params_from`
turns a config's `update_rule_params` ('disco103' or a path) into
parameters.
"""

import logging
import os
import pathlib
from typing import Any

from disco import params_file
from disco.weights import downloads
from disco.weights import published

# The source (`load_update_rule_params_from`, the configs'
# `update_rule_params`) that stands for the published rule.
DISCO103 = 'disco103'

# The environment variable naming the file to use instead of searching.
WEIGHTS_ENV_VAR = 'DISCO_WEIGHTS'


def repo_weights_path() -> pathlib.Path | None:
  """`<repo>/weights/disco_103.npz`, the repo being the package's parent.

  None when the package is not in a source checkout (no `pyproject.toml`
  beside it, as when installed from a wheel): `site-packages/weights/` is
  nobody's place for the file.
  """
  # This file is <repo>/disco/weights/lookup.py.
  repo = pathlib.Path(__file__).resolve().parents[2]
  if not (repo / 'pyproject.toml').is_file():
    return None
  return repo / 'weights' / published.DISCO103_FILENAME


def _how_to_fetch(url: str) -> str:
  return (
      'To fetch it by hand:\n'
      f'  curl -L -o disco_103.npz {url}\n'
      f'  echo "{published.DISCO103_SHA256}  disco_103.npz" | sha256sum -c\n'
      f'  export {WEIGHTS_ENV_VAR}="$PWD/disco_103.npz"'
  )


def _load_disco103_file(
    path: pathlib.Path, source: str, hint: str
) -> params_file.HostParams:
  """Reads and verifies the Disco103 file at `path` (found via `source`)."""
  where = f'{path} (from {source})'
  try:
    data = params_file.read_file_bytes(path, where)
  except params_file.WeightsNotFoundError as e:
    raise params_file.WeightsNotFoundError(f'{e} {hint}') from None
  params = published.verify_disco103_bytes(data, where, hint)
  logging.info('Loaded Disco103 weights from %s (%s).', path, source)
  return params


def load_disco103(
    path: params_file.PathLike | None = None,
    *,
    download: bool = True,
    url: str | None = None,
    cache_dir: params_file.PathLike | None = None,
    timeout: float = downloads.DEFAULT_TIMEOUT_SECONDS,
) -> params_file.HostParams:
  """Finds, verifies and loads the published Disco103 update-rule parameters.

  Looks, in order, at `path`, `$DISCO_WEIGHTS`, `repo_weights_path()` (in a
  source checkout), the cache directory, and finally downloads into the
  cache. The first location that is set (for `path` and `$DISCO_WEIGHTS`)
  or holds a file (for the others) is used, and it must pass the checks: a
  wrong file is an error, not a reason to keep searching, so a typo never
  silently loads something else.

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
  url = downloads.resolve_url(url)
  cache = downloads.cache_dir_or_default(cache_dir)
  repo_file = repo_weights_path()
  cache_file = cache / published.DISCO103_FILENAME

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
      downloaded = downloads.download_disco103(cache, url=url, timeout=timeout)
    except downloads.DownloadError as e:
      failure = e
      looked.append(f'download from {url} into {cache}: {e.reason}')
    else:
      return _load_disco103_file(
          downloaded, f'a download of {url}', _how_to_fetch(url)
      )
  places = '\n'.join(f'  {i}. {place}' for i, place in enumerate(looked, 1))
  save_as = ' or '.join(str(c) for c, _, _ in candidates)
  raise params_file.WeightsNotFoundError(
      f'Could not find the Disco103 weights ({published.DISCO103_FILENAME}).'
      f' Looked at:\n{places}\n{_how_to_fetch(url)}\nor save it as'
      f' {save_as}. Expected SHA-256: {published.DISCO103_SHA256}.'
  ) from failure


def load_update_rule_params_from(
    source: params_file.PathLike,
) -> dict[str, dict[str, Any]]:
  """The parameters named by a config's `update_rule_params`.

  Args:
    source: 'disco103' (the published rule, `load_disco103`) or the path of
      an `.npz` file of update-rule parameters.

  Returns:
    The parameters as numpy arrays.
  """
  if str(source) == DISCO103:
    return load_disco103()
  return params_file.load_update_rule_params(source)
