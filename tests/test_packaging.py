"""CI's pinned versions (.ci/constraints.txt) against pyproject and goldens.

CI installs every requirement at the version .ci/constraints.txt pins, so
the pins must satisfy pyproject.toml's requirements, and the packages the
parity goldens record must be pinned at the versions they were recorded with.
"""

import json
import os
import pathlib
import re
import tomllib

from packaging import requirements
import pytest

from tests.parity import golden
from tests.parity import platforms

_REPO = pathlib.Path(__file__).resolve().parents[1]
_CONSTRAINTS = _REPO / '.ci' / 'constraints.txt'
# The extras CI installs (.ci/run): their requirements must be pinned too.
_CI_EXTRAS = ('test', 'docs')
# Fields of a case's `versions` that are not distributions.
_NOT_DISTRIBUTIONS = (
    'python',
    'disco_rl_commit',
    'disco_rl_source',
    'platform',
)


def _name(name: str) -> str:
  """A distribution's normalized name (PEP 503)."""
  return re.sub(r'[-_.]+', '-', name).lower()


def pins(text: str) -> dict[str, str]:
  """`{name: version}` of the `name==version` lines of a constraints file."""
  found = {}
  for number, line in enumerate(text.splitlines(), 1):
    line = line.split('#', 1)[0].strip()
    if not line:
      continue
    match = re.fullmatch(r'([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)', line)
    if not match:
      raise ValueError(f'line {number} is not `name==version`: {line!r}')
    name = _name(match.group(1))
    if name in found:
      raise ValueError(f'line {number} pins {name} a second time')
    found[name] = match.group(2)
  return found


def unpinned(
    reqs: list[str], pinned: dict[str, str]
) -> list[tuple[str, str | None]]:
  """The requirements that no pin satisfies: (requirement, its pin or None)."""
  bad = []
  for text in reqs:
    req = requirements.Requirement(text)
    if req.marker is not None and not req.marker.evaluate({'extra': ''}):
      continue
    version = pinned.get(_name(req.name))
    if version is None or not req.specifier.contains(version, prereleases=True):
      bad.append((text, version))
  return bad


def test_pins_parse_and_catch_a_repeat():
  assert pins('# c\nJax==0.10.2  # the goldens\n\ndm_haiku==0.0.17\n') == {
      'jax': '0.10.2',
      'dm-haiku': '0.0.17',
  }
  with pytest.raises(ValueError, match='not `name==version`'):
    pins('jax>=0.10\n')
  with pytest.raises(ValueError, match='second time'):
    pins('jax==0.10.2\nJAX==0.10.1\n')


def test_unpinned_finds_missing_and_unsatisfied_pins():
  pinned = {'jax': '0.10.2', 'numpy': '2.4.6'}
  reqs = ['jax>=0.10', 'numpy>=2.5', 'optax>=0.2', "six; extra == 'x'"]
  assert unpinned(reqs, pinned) == [
      ('numpy>=2.5', '2.4.6'),
      ('optax>=0.2', None),
  ]


def test_ci_pins_satisfy_the_requirements_ci_installs():
  project = tomllib.loads((_REPO / 'pyproject.toml').read_text())['project']
  reqs = list(project['dependencies'])
  for extra in _CI_EXTRAS:
    reqs += project['optional-dependencies'][extra]
  bad = unpinned(reqs, pins(_CONSTRAINTS.read_text()))
  assert not bad, (
      'CI installs with `-c .ci/constraints.txt`: pin each of these there at'
      f' a version that satisfies it (requirement, pin): {bad}'
  )


def test_ci_pins_are_the_versions_the_goldens_were_recorded_with():
  """The shipped sets' versions (CI's own recording has the pinned ones)."""
  shipped = os.environ.get(platforms.SHIPPED_ENV)
  root = pathlib.Path(shipped) if shipped else golden.root_dir()
  sets = [
      s for s in platforms.golden_sets(root) if not platforms.is_recording(s)
  ]
  if not sets:
    golden.missing(f'No shipped golden set in {root}.')
  recorded: dict[str, set[str]] = {}
  for golden_set in sets:
    for path in sorted(golden_set.directory.glob('*.json')):
      if path.name == platforms.PLATFORM_FILE:
        continue
      versions = json.loads(path.read_text()).get('versions', {})
      for name, version in versions.items():
        if name not in _NOT_DISTRIBUTIONS:
          recorded.setdefault(_name(name), set()).add(str(version))
  assert {'jax', 'jaxlib', 'dm-haiku', 'numpy'} <= set(recorded), recorded
  pinned = pins(_CONSTRAINTS.read_text())
  differ = {
      name: (sorted(versions), pinned.get(name))
      for name, versions in recorded.items()
      if versions != {pinned.get(name)}
  }
  assert not differ, (
      'the parity goldens were recorded with other versions than CI pins'
      f' (recorded, pinned): {differ}'
  )
