"""The house rules a newcomer relies on (issue 56), held as tests.

Modules stay small enough to read in one go, benchmarks stay short lists
of runs over `disco.studies`, and the README stays a front page.
"""

import ast
import pathlib

import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[1]
MODULE_LINES = 400
BENCHMARK_LINES = 300
README_LINES = 150
# The reference's modules ported 1:1: they keep the reference's shape.
CORE_PORTS = frozenset({
    'disco/agent.py',
    'disco/networks/meta_nets.py',
    'disco/update_rules/disco.py',
    'disco/value_fns/value_utils.py',
})


def _lines(path: pathlib.Path) -> int:
  return len(path.read_text().splitlines())


def _relative(paths) -> list[str]:
  return sorted(str(p.relative_to(_ROOT)) for p in paths)


def _benchmarks() -> list[pathlib.Path]:
  return sorted((_ROOT / 'benchmarks').glob('*.py'))


def test_no_module_is_over_the_limit():
  paths = [*(_ROOT / 'disco').rglob('*.py'), *(_ROOT / 'tests').rglob('*.py')]
  over = [
      f'{name}: {_lines(_ROOT / name)} lines'
      for name in _relative(paths)
      if name not in CORE_PORTS
      and not pathlib.Path(name).name.startswith('test_')
      and _lines(_ROOT / name) > MODULE_LINES
  ]
  assert not over, f'Over {MODULE_LINES} lines (split by job): {over}'


def test_the_core_ports_exist():
  # A renamed port would otherwise drop out of the exemption silently.
  missing = [name for name in CORE_PORTS if not (_ROOT / name).is_file()]
  assert not missing


def test_no_benchmark_is_over_the_limit():
  over = [
      f'{name}: {_lines(_ROOT / name)} lines'
      for name in _relative(_benchmarks())
      if _lines(_ROOT / name) > BENCHMARK_LINES
  ]
  assert not over, f'Over {BENCHMARK_LINES} lines: {over}'


@pytest.mark.parametrize('path', _benchmarks(), ids=lambda p: p.name)
def test_a_benchmark_neither_edits_sys_path_nor_imports_another(path):
  tree = ast.parse(path.read_text())
  siblings = {p.stem for p in _benchmarks()}
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and node.attr == 'path':
      assert not (
          isinstance(node.value, ast.Name) and node.value.id == 'sys'
      ), f'{path.name}:{node.lineno} uses sys.path'
    if isinstance(node, ast.Import):
      names = [alias.name.split('.')[0] for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      names = [(node.module or '').split('.')[0]]
    else:
      continue
    assert not siblings & set(
        names
    ), f'{path.name}:{node.lineno} imports another benchmark: {names}'


def test_readme_is_a_front_page():
  assert _lines(_ROOT / 'README.md') <= README_LINES
