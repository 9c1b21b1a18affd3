"""Every bad update-rule file is a one-line named error in every command.

`--update-rule-params FILE` of `disco-eval`, `disco-train`,
`disco-meta-train` and `disco-discover`, with a file that is missing, random
bytes, truncated, has a wrong key, a leaf of the wrong shape or of an
integer dtype: exit status 1, one line on stderr that starts with the
command's name, names the file and says what is wrong, and no traceback.
The commands run in-process on tiny settings; every error comes before any
compilation.
"""

import pathlib

import numpy as np
import pytest

from disco import weights
from disco.discovery import cli as discovery_cli
from disco.eval import cli as eval_cli
from disco.meta_train import cli as meta_train_cli
from disco.train import cli as train_cli
from tests import tiny_args

_COMMANDS = {
    'disco-eval': (eval_cli, [*tiny_args.EVAL, '--rule=disco']),
    'disco-train': (train_cli, [*tiny_args.TRAIN, '--rule=disco']),
    'disco-meta-train': (meta_train_cli, list(tiny_args.META_TRAIN)),
    'disco-discover': (
        discovery_cli,
        ['--population', 'catch/rows=5/columns=5*2', '--num-inner-steps=2'],
    ),
}

# The leaf the bad files change, and a few words each error must contain.
_LEAF = 'lstm/linear/b'
_PROBLEMS = {
    'missing': 'No such file',
    'random_bytes': 'is not a valid .npz file',
    'truncated': 'is not a valid .npz file',
    'wrong_keys': f'1 missing: {_LEAF}; 1 unexpected: lstm/bogus/b',
    'wrong_shape': f'1 mismatched: {_LEAF} (expected (256,), got (3, 256))',
    'wrong_dtype': f"'{_LEAF}' has dtype int32",
}


def _write(kind: str, path: pathlib.Path) -> pathlib.Path:
  """A rule file with the Disco103 layout, spoilt as `kind` says."""
  flat = {
      k: np.zeros(s, np.float32) for k, s in weights.DISCO103_SHAPES.items()
  }
  assert _LEAF in flat and flat[_LEAF].shape == (256,)
  if kind == 'wrong_keys':
    flat['lstm/bogus/b'] = flat.pop(_LEAF)
  elif kind == 'wrong_shape':
    flat[_LEAF] = np.zeros((3, 256), np.float32)
  elif kind == 'wrong_dtype':
    flat[_LEAF] = np.zeros(256, np.int32)
  if kind != 'missing':
    np.savez(path, **flat)
  if kind == 'random_bytes':
    path.write_bytes(np.random.default_rng(0).bytes(4096))
  elif kind == 'truncated':
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
  return path


def test_a_good_file_gets_past_the_checks(tmp_path):
  """The unspoilt file loads and fits the rule (so each test changes one thing)."""
  path = _write('none', tmp_path / 'good.npz')
  weights.validate_params(
      weights.load_update_rule_params(path),
      weights.unflatten_params(weights.DISCO103_SHAPES),
  )


@pytest.mark.parametrize('kind', sorted(_PROBLEMS))
@pytest.mark.parametrize('command', sorted(_COMMANDS))
def test_bad_rule_file_is_a_named_error(command, kind, tmp_path, capsys):
  module, flags = _COMMANDS[command]
  path = _write(kind, tmp_path / f'{kind}.npz')
  argv = [
      *flags,
      f'--update-rule-params={path}',
      f'--out-dir={tmp_path / "out"}',
      '--num-steps=1',
      '--no-progress',
      '--no-plot',
  ]
  try:
    status = module.main(argv)
  except SystemExit as e:
    status = e.code
  err = capsys.readouterr().err
  assert status == 1, err
  assert 'Traceback' not in err, err
  lines = err.strip().splitlines()
  assert len(lines) == 1, err
  assert lines[0].startswith(f'{command}: error: '), err
  assert str(path) in lines[0] and _PROBLEMS[kind] in lines[0], err
