"""The spec: which cases to record, and each one's inputs, config and kind.

A spec is a golden set (a directory of `<case>.npz` and `<case>.json`,
whose stored inputs are taken as they are) or the builtin spec (builtin.py:
each case's config and input keys, its inputs drawn or produced here).
"""

import json
import pathlib

import numpy as np

from tests.parity import builtin
from tests.parity import platforms
from tests.parity.recorder import calls
from tests.parity.recorder import kinds


class Spec:
  """A spec case: its stored inputs, its key names, its config and kind.

  Attributes:
    name: the case.
    arrays: {key: array}: a golden set's every key, or the builtin spec's
      inputs (drawn and produced by `builtin.generate`).
    meta: the JSON sidecar (the builtin spec's: its `config` and `about`).
    config: the case's config.
    keys: every key name the spec knows: a golden set's all; the builtin
      spec's inputs and the outputs a recorder enumerates.
    builtin: whether the spec is the builtin one.
    kind: what the case is, from its config and keys (`kinds.kind_of`).
  """

  def __init__(self, directory: pathlib.Path | None, name: str, ref=None):
    self.name = name
    self.builtin = directory is None
    if self.builtin:
      entry = builtin.load()[name]
      self.arrays = builtin.generate(ref, name)
      self.meta = {'case': name, 'about': entry['about']}
      self.meta['config'] = entry['config']
      self.keys = set(self.arrays) | set(entry.get('listed_outputs', ()))
    else:
      with np.load(directory / f'{name}.npz', allow_pickle=False) as npz:
        self.arrays = {k: npz[k] for k in npz.files}
      self.meta = json.loads((directory / f'{name}.json').read_text())
      self.keys = set(self.arrays)
    self.config = self.meta['config']
    self.kind = kinds.kind_of(self.config, self.keys, name)

  def __getitem__(self, key: str) -> np.ndarray:
    return self.arrays[key]

  def sub(self, prefix: str) -> dict[str, np.ndarray]:
    """The stored arrays under `prefix/`, by the rest of their keys."""
    return calls.subtree(self.arrays, prefix)

  def names(self, prefix: str) -> list[str]:
    """The relative names of the keys under `prefix/` (stored or not)."""
    prefix = prefix.rstrip('/') + '/'
    return sorted(k[len(prefix) :] for k in self.keys if k.startswith(prefix))

  def count(self, prefix: str) -> int:
    """How many items `prefix/0`, `prefix/1`, ... the case stores."""
    return calls.count(self.arrays, prefix)


def case_kind(spec_dir: pathlib.Path | None, name: str) -> kinds.Kind:
  """A case's kind, read from its JSON and key names alone (no arrays)."""
  if spec_dir is None:
    entry = builtin.load()[name]
    return kinds.kind_of(entry['config'], entry['inputs'], name)
  config = json.loads((spec_dir / f'{name}.json').read_text())['config']
  with np.load(spec_dir / f'{name}.npz', allow_pickle=False) as npz:
    return kinds.kind_of(config, npz.files, name)


def spec_cases(spec_dir: pathlib.Path | None) -> list[str]:
  """A spec's cases (None: the builtin spec's)."""
  if spec_dir is None:
    return builtin.cases()
  return sorted(p.stem for p in spec_dir.glob('*.npz'))


def default_spec(root: pathlib.Path | None) -> platforms.GoldenSet | None:
  """The spec under `root`: the set recorded on this kind of machine, if any.

  Recording that set reproduces it bit for bit (its inputs are this
  machine's); elsewhere the set in `root` itself (the main set); without a
  set (or `root`), None: the builtin spec.

  Args:
    root: a golden directory (`$DISCO_PARITY_DIR`), or None.

  Returns:
    The set whose cases to record, or None for the builtin spec.
  """
  sets = platforms.golden_sets(root) if root and root.is_dir() else ()
  sets = tuple(s for s in sets if any(s.directory.glob('*.npz')))
  if not sets:
    return None
  machine = platforms.read_machine()
  for golden_set in sets:
    if platforms.matches(machine, golden_set.recorded)[0]:
      return golden_set
  return sets[0]
