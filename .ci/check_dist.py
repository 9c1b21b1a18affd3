"""Checks the built sdist and wheel of disco-jax against the repository.

Usage: python .ci/check_dist.py REPO DIST_DIR PYTHON_VERSION...

* The wheel is pure Python and holds exactly the files of the packages that
  pyproject.toml's `packages.find` includes (`py.typed` among them), and
  its `.dist-info`: no tests, benchmarks, data or weights. A file added
  under a package that setuptools would leave out (a data file without
  `package-data`) fails here, not on a user's machine.
* Its metadata has pyproject.toml's name, version, Requires-Python and
  console scripts, and a classifier for each Python version CI tests.
* The sdist holds the repository's files (`git ls-files`, with untracked
  files that are not ignored) but those MANIFEST.in leaves out.

Standard library only: it runs with any Python 3.11+.
"""

from collections.abc import Iterable, Sequence
import configparser
import email.parser
import fnmatch
import pathlib
import subprocess
import sys
import tarfile
import tomllib
import zipfile

# What MANIFEST.in leaves out of the sdist (prefixes and suffixes of paths).
SDIST_EXCLUDED_PREFIXES = ('benchmarks/results/', '.gitignore')
SDIST_EXCLUDED_SUFFIXES = ('.npz',)
# What setuptools adds to an sdist besides the repository's files.
SDIST_GENERATED = ('PKG-INFO', 'setup.cfg')
SDIST_GENERATED_PREFIXES = ('disco_jax.egg-info/',)


def repo_files(repo: pathlib.Path) -> list[str]:
  """The repository's files that exist: tracked, or untracked and not ignored."""
  out = subprocess.run(
      ['git', 'ls-files', '--cached', '--others', '--exclude-standard'],
      cwd=repo,
      capture_output=True,
      text=True,
      check=True,
  ).stdout
  return sorted({p for p in out.splitlines() if (repo / p).is_file()})


def _one(directory: pathlib.Path, pattern: str) -> pathlib.Path:
  found = sorted(directory.glob(pattern))
  if len(found) != 1:
    raise SystemExit(f'check_dist: want one {pattern} in {directory}: {found}')
  return found[0]


def _difference(
    what: str, expected: Iterable[str], actual: Iterable[str]
) -> list[str]:
  expected, actual = set(expected), set(actual)
  problems = [f'{what} lacks {p}' for p in sorted(expected - actual)]
  problems += [f'{what} has unexpected {p}' for p in sorted(actual - expected)]
  return problems


def check_wheel(
    wheel: pathlib.Path,
    project: dict,
    files: Sequence[str],
    pythons: Sequence[str],
) -> list[str]:
  """Problems with the wheel (empty when it is right)."""
  problems = []
  if not wheel.name.endswith('-py3-none-any.whl'):
    problems.append(f'{wheel.name} is not a pure-Python (py3-none-any) wheel')
  find = project['tool']['setuptools']['packages']['find']
  top_level = {p.split('/', 1)[0] for p in files if p.endswith('/__init__.py')}
  packages = sorted(
      name
      for name in top_level
      if any(fnmatch.fnmatch(name, pattern) for pattern in find['include'])
  )
  if 'disco' not in packages:
    problems.append(f'no disco package among {packages}')
  expected = [p for p in files if p.split('/', 1)[0] in packages]
  with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    dist_info = sorted(
        {n.split('/', 1)[0] for n in names if '.dist-info/' in n}
    )
    if len(dist_info) != 1:
      return problems + [f'want one .dist-info directory, found {dist_info}']
    info = dist_info[0]
    metadata = email.parser.Parser().parsestr(
        z.read(f'{info}/METADATA').decode()
    )
    entry_points = configparser.ConfigParser()
    entry_points.optionxform = str  # Script names keep their case.
    entry_points.read_string(z.read(f'{info}/entry_points.txt').decode())
  contents = [n for n in names if not n.startswith(f'{info}/')]
  problems += _difference(wheel.name, expected, contents)
  if 'disco/py.typed' not in contents:
    problems.append(f'{wheel.name} lacks disco/py.typed (PEP 561)')

  meta = project['project']
  for field, want in (
      ('Name', meta['name']),
      ('Version', meta['version']),
      ('Requires-Python', meta['requires-python']),
  ):
    if metadata[field] != want:
      problems.append(f'METADATA {field}: {metadata[field]!r}, want {want!r}')
  classifiers = metadata.get_all('Classifier') or []
  for version in pythons:
    classifier = f'Programming Language :: Python :: {version}'
    if classifier not in classifiers:
      problems.append(f'METADATA lacks the classifier {classifier!r}')
  scripts = dict(entry_points['console_scripts'])
  if scripts != meta['scripts']:
    problems.append(f'console scripts {scripts}, want {meta["scripts"]}')
  return problems


def check_sdist(sdist: pathlib.Path, files: Sequence[str]) -> list[str]:
  """Problems with the sdist (empty when it is right)."""
  with tarfile.open(sdist) as t:
    members = [m.name for m in t.getmembers() if m.isfile()]
  root = sdist.name.removesuffix('.tar.gz') + '/'
  outside = [m for m in members if not m.startswith(root)]
  if outside:
    return [f'{sdist.name} has files outside {root}: {outside[:5]}']
  contents = [m.removeprefix(root) for m in members]
  contents = [
      p
      for p in contents
      if p not in SDIST_GENERATED and not p.startswith(SDIST_GENERATED_PREFIXES)
  ]
  expected = [
      p
      for p in files
      if not p.startswith(SDIST_EXCLUDED_PREFIXES)
      and not p.endswith(SDIST_EXCLUDED_SUFFIXES)
  ]
  return _difference(sdist.name, expected, contents)


def main(argv: Sequence[str]) -> int:
  if len(argv) < 4:
    print(__doc__.split('\n\n')[1], file=sys.stderr)
    return 2
  repo, dist = pathlib.Path(argv[1]), pathlib.Path(argv[2])
  pythons = argv[3:]
  project = tomllib.loads((repo / 'pyproject.toml').read_text())
  files = repo_files(repo)
  wheel = _one(dist, '*.whl')
  sdist = _one(dist, '*.tar.gz')
  problems = check_wheel(wheel, project, files, pythons)
  problems += check_sdist(sdist, files)
  for problem in problems:
    print(f'check_dist: {problem}', file=sys.stderr)
  if problems:
    return 1
  with zipfile.ZipFile(wheel) as z:
    count = len(z.namelist())
  print(
      f'check_dist: {wheel.name} ({count} files) and {sdist.name} hold what'
      ' they should'
  )
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
