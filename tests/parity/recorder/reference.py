"""The reference, loaded from its checkout and guarded against any other.

Only the reference runs in a recording: its package is imported from the
checkout given (never this project's `disco_rl` alias, nor `disco`), and
`check_provenance` holds every loaded `disco_rl` module to be the file of
its name under that checkout. In this process only, the reference gets what
it needs on the installed JAX (MANIFEST.md section 4.3).
"""

import importlib
import pathlib
import sys
import types as pytypes

import chex
import jax
import jax.numpy as jnp

PACKAGE = 'disco_rl'
REFERENCE_ENV = 'DISCO_REFERENCE'
# The reference's modules the recipes call, as attributes of `load_reference`'s
# namespace (by their last name).
_MODULES = (
    'agent',
    'optimizers',
    'types',
    'utils',
    'environments.catch',
    'environments.jittable_envs',
    'update_rules.disco',
    'update_rules.input_transforms',
    'update_rules.policy_gradient',
    'value_fns.value_fn',
    'value_fns.value_utils',
)


class ProvenanceError(Exception):
  """A `disco_rl` module was not loaded from the reference checkout."""


def _patch_jax() -> None:
  """What the reference needs on the installed JAX (MANIFEST.md 4.3).

  The removed `jax.device_put_replicated` and `jax.device_put_sharded`, and
  `chex.Array = jax.Array` (chex's union does not match tracers, which
  changes a branch of the meta-network).
  """

  def device_put_sharded(shards, devices):
    assert len(shards) == len(devices), (len(shards), len(devices))
    return jax.tree.map(lambda *xs: jnp.stack(xs), *shards)

  def device_put_replicated(tree, devices):
    return device_put_sharded([tree] * len(devices), devices)

  if not hasattr(jax, 'device_put_sharded'):
    jax.device_put_sharded = device_put_sharded
  if not hasattr(jax, 'device_put_replicated'):
    jax.device_put_replicated = device_put_replicated
  chex.Array = jax.Array


def check_provenance(root: pathlib.Path) -> list[str]:
  """The loaded `disco_rl` modules; raises unless each is root's own file.

  Args:
    root: the reference checkout (holding `disco_rl/`).

  Returns:
    The names of the modules checked.

  Raises:
    ProvenanceError: a module whose file is not `root/disco_rl/<its path>`
      (e.g. this project's alias, which serves `disco` modules).
  """
  package = (root / PACKAGE).resolve()
  names = sorted(
      n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + '.')
  )
  if PACKAGE not in names:
    raise ProvenanceError(f'{PACKAGE} is not loaded.')
  for name in names:
    module = sys.modules[name]
    where = getattr(module, '__file__', None)
    parts = name.split('.')[1:]
    candidates = (
        package.joinpath(*parts, '__init__.py'),
        package.joinpath(*parts[:-1], parts[-1] + '.py') if parts else None,
    )
    if where is None or pathlib.Path(where).resolve() not in candidates:
      raise ProvenanceError(
          f'{name} was loaded from {where} (module {module.__name__}), not'
          f' from the reference at {package}: refusing to record. Point'
          ' --reference at a checkout of google-deepmind/disco_rl (e.g.'
          ' ../shared/reference), not at this project.'
      )
  return names


def load_reference(root: pathlib.Path) -> pytypes.SimpleNamespace:
  """Imports the reference's modules from `root`, and only from there.

  Args:
    root: the reference checkout (holding `disco_rl/`).

  Returns:
    A namespace: `root`, and each module of `_MODULES` by its last name
    (`ref.agent`, `ref.jittable_envs`, `ref.value_utils`, ...).

  Raises:
    ProvenanceError: no package at `root`, or a module loaded elsewhere.
  """
  root = root.resolve()
  if not (root / PACKAGE / '__init__.py').is_file():
    raise ProvenanceError(f'No {PACKAGE} package in {root}.')
  for name in [n for n in sys.modules if n.split('.')[0] == PACKAGE]:
    del sys.modules[name]
  # This project's alias answers `disco_rl.*` imports with an import hook.
  sys.meta_path[:] = [
      f for f in sys.meta_path if type(f).__module__.split('.')[0] != PACKAGE
  ]
  sys.path.insert(0, str(root))
  _patch_jax()
  ref = pytypes.SimpleNamespace(root=root)
  for name in _MODULES:
    module = importlib.import_module(f'{PACKAGE}.{name}')
    setattr(ref, name.rsplit('.', 1)[-1], module)
  check_provenance(root)
  return ref
