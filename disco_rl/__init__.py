"""`disco_rl`, the reference's package name, served by `disco`.

Code written for DiscoRL (`import disco_rl`, `from disco_rl.networks import
nets`) runs on `disco` unchanged: importing `disco_rl.<path>` gives the
module `disco.<path>` itself, not a copy, so a function replaced on one is
replaced on the other (e.g. `disco_rl.networks.nets.get_network`, which
`disco.agent.Agent` calls). What is and is not compatible:
docs/disco_rl_compat.md.

The mechanism is one import hook (`_AliasFinder`, first on
`sys.meta_path`) that answers for names under `disco_rl.` with the already
imported (or freshly imported) `disco` module. Uninstall the reference's
`disco_rl` distribution first: both install a top-level `disco_rl`.
"""

# Every module-level name is private: a public one such as `types` would
# shadow the submodule of that name in `from disco_rl import types`.
import importlib as _importlib
import importlib.abc as _importlib_abc
import importlib.machinery as _importlib_machinery
import importlib.util as _importlib_util
import sys as _sys
import types as _types

import disco as _disco

_ALIAS = 'disco_rl'
_TARGET = 'disco'

__version__ = _disco.__version__


def _target_name(name: str) -> str:
  """The `disco` module that the `disco_rl` module `name` stands for."""
  if name != _ALIAS and not name.startswith(_ALIAS + '.'):
    raise ValueError(f'{name!r} is not a {_ALIAS} module name.')
  return _TARGET + name[len(_ALIAS) :]


class _AliasFinder(_importlib_abc.MetaPathFinder, _importlib_abc.Loader):
  """Imports `disco_rl.X.Y` as the module object `disco.X.Y`."""

  def find_spec(
      self,
      fullname: str,
      path: object = None,
      target: _types.ModuleType | None = None,
  ) -> _importlib_machinery.ModuleSpec | None:
    del path, target
    if not fullname.startswith(_ALIAS + '.'):
      return None
    name = _target_name(fullname)
    # Imports the parent packages of `name`; None if `name` does not exist,
    # which the import system reports as "No module named 'disco_rl.…'".
    if _importlib_util.find_spec(name) is None:
      return None
    return _importlib_util.spec_from_loader(fullname, self, origin=name)

  def create_module(
      self, spec: _importlib_machinery.ModuleSpec
  ) -> _types.ModuleType:
    module = _importlib.import_module(spec.origin)
    # The import system is about to set `module.__spec__` to the alias
    # spec; `exec_module` puts the module's own spec back from there.
    spec.loader_state = module.__spec__
    return module

  def exec_module(self, module: _types.ModuleType) -> None:
    module.__spec__ = module.__spec__.loader_state


def _install() -> None:
  if not any(isinstance(f, _AliasFinder) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _AliasFinder())


def __getattr__(name: str) -> _types.ModuleType:
  """`disco_rl.<submodule>` without importing it first (e.g. `agent`)."""
  if name.startswith('_'):
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
  try:
    return _importlib.import_module(f'{_ALIAS}.{name}')
  except ModuleNotFoundError as e:
    if e.name != f'{_ALIAS}.{name}':
      raise  # A dependency of that module is missing: say which.
    raise AttributeError(
        f'module {__name__!r} has no attribute {name!r}'
    ) from None


_install()
