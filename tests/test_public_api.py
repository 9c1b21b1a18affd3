"""The public API imports quietly; the package avoids deprecated JAX API.

Every name in `disco.__all__` imports; `import disco` raises no
DeprecationWarning; and no module of the package uses `jax.tree_map`,
`jax.device_put_replicated`, `jax.device_put_sharded` or
`isinstance(..., chex.Array)` (found by parsing the source, so mentions in
comments and strings do not count).
"""

import ast
import pathlib
import subprocess
import sys

import pytest

import disco

_PACKAGE_DIR = pathlib.Path(disco.__file__).parent
# Removed or deprecated in current JAX (`jax.tree_util.tree_map` is fine).
_DEPRECATED_JAX = frozenset(
    {'tree_map', 'device_put_replicated', 'device_put_sharded'}
)
_DEPRECATED_JAX_ANY_PREFIX = frozenset(
    {'device_put_replicated', 'device_put_sharded'}
)


@pytest.mark.parametrize('name', disco.__all__)
def test_exported_name_imports(name):
  assert getattr(disco, name) is not None
  namespace = {}
  exec(f'from disco import {name}', namespace)  # pylint: disable=exec-used
  assert namespace[name] is getattr(disco, name)


def test_all_has_no_duplicates():
  assert len(set(disco.__all__)) == len(disco.__all__)


def test_import_raises_no_deprecation_warning():
  result = subprocess.run(
      [sys.executable, '-W', 'error::DeprecationWarning', '-c', 'import disco'],
      capture_output=True,
      text=True,
      check=False,
      timeout=120,
  )
  assert result.returncode == 0, result.stderr


def _package_sources():
  paths = sorted(_PACKAGE_DIR.rglob('*.py'))
  assert paths
  return paths


def _dotted(node: ast.AST) -> str:
  """'jax.tree_map' for the expression `jax.tree_map`, '' if not a name."""
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if not isinstance(node, ast.Name):
    return ''
  parts.append(node.id)
  return '.'.join(reversed(parts))


def _offences(tree: ast.AST) -> list[str]:
  """Uses of deprecated JAX API and isinstance checks against chex.Array."""
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute):
      dotted = _dotted(node)
      if dotted == 'jax.tree_map' or node.attr in _DEPRECATED_JAX_ANY_PREFIX:
        found.append(f'line {node.lineno}: {dotted or node.attr}')
    elif isinstance(node, ast.ImportFrom) and node.module == 'jax':
      for alias in node.names:
        if alias.name in _DEPRECATED_JAX:
          found.append(f'line {node.lineno}: from jax import {alias.name}')
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == 'isinstance'
        and len(node.args) == 2
    ):
      classes = node.args[1]
      if isinstance(classes, (ast.Tuple, ast.List)):
        candidates = classes.elts
      else:
        candidates = [classes]
      for candidate in candidates:
        if _dotted(candidate) == 'chex.Array':
          found.append(f'line {node.lineno}: isinstance(..., chex.Array)')
  return found


def test_no_deprecated_jax_api_in_the_package():
  offences = {}
  for path in _package_sources():
    found = _offences(ast.parse(path.read_text(), filename=str(path)))
    if found:
      offences[str(path.relative_to(_PACKAGE_DIR.parent))] = found
  assert not offences, offences


@pytest.mark.parametrize(
    'source,expected',
    [
        ('jax.tree_map(f, x)', 1),
        ('jax.tree_util.tree_map(f, x)', 0),
        ('jax.tree.map(f, x)', 0),
        ('jax.device_put_replicated(x, d)', 1),
        ('jax.device_put_sharded(xs, d)', 1),
        ('from jax import tree_map', 1),
        ('isinstance(x, chex.Array)', 1),
        ('isinstance(x, (np.ndarray, chex.Array))', 1),
        ('isinstance(x, jax.Array)', 0),
        ('"jax.tree_map is mentioned in a string"', 0),
    ],
)
def test_the_check_finds_what_it_should(source, expected):
  assert len(_offences(ast.parse(source))) == expected
