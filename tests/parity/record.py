"""Records a golden set by running the reference on this machine.

    python -m tests.parity.record --reference ../disco_rl --out DIR

For every case of a spec (`--spec`) this runs the reference implementation
(google-deepmind/disco_rl, the checkout at `--reference`) as the case's
recipe says, and writes `DIR/<case>.npz` (flat keys), `DIR/<case>.json`
(the sidecar, its `versions` those that ran here) and `DIR/PLATFORM.json`
(this machine, as `platforms.py` reads it, and the spec's name).

The spec is a golden set (`--spec DIR`; by default, in `$DISCO_PARITY_DIR`,
the set recorded on this kind of machine if there is one, else the main
set) or, with `--spec builtin` and by default where `$DISCO_PARITY_DIR`
holds no set, the builtin spec (builtin.py, builtin_spec.json): each case's
config and input keys, its inputs drawn here from its seed or produced by
the reference, so a clone of the reference is all a recording needs.

A case's recipe is found by what its JSON says it is (its config's fields
and its stored keys, recorder/kinds.py), not by its file name, so a set
may name its cases for other sizes (`env_catch_jittable_10x5`).

Recomputed here: every `expected/...` key, the parameter trees that are a
case's output (`params/...` of the meta-network's initialisation, of the
Disco103 weights, read from the reference's own weights file, and the
random update-rule parameters of a meta-gradient case, drawn as its config
says). Taken from a golden set, or made by `builtin.generate`: the other
stored inputs (`inputs/...`: rng keys, random draws, and the rollouts and
network outputs that feed the calls). The eval curve runs in full from its
config's seed.

Only the reference runs here: its package is imported from `--reference`
(never this project's `disco_rl` alias, nor `disco`), and every `disco_rl`
module is checked, before and after recording, to be the file of that name
under `--reference/disco_rl/` (recorder/reference.py). In this process
only, the reference gets what it needs on the installed JAX (MANIFEST.md
section 4.3): the removed `jax.device_put_replicated` /
`jax.device_put_sharded`, and `chex.Array = jax.Array` (chex's union does
not match tracers, which changes a branch of the meta-network).

The recorder's parts are in `tests/parity/recorder/`; this module is its
command line.
"""

import argparse
import json
import os
import pathlib
import sys
import time

import jax

from tests.parity import builtin
from tests.parity import platforms
from tests.parity.recorder import kinds
from tests.parity.recorder import reference as reference_lib
from tests.parity.recorder import spec as spec_lib
from tests.parity.recorder import write


def main(argv: list[str] | None = None) -> int:
  """The command line: records the spec's cases; 2 where it refuses."""
  parser = argparse.ArgumentParser(
      prog=f'python -m {platforms.RECORDER}',
      description=__doc__.split('\n', 1)[0],
  )
  reference = os.environ.get(reference_lib.REFERENCE_ENV)
  parser.add_argument(
      '--reference',
      required=not reference,
      default=reference,
      type=pathlib.Path,
      help=(
          'a checkout of google-deepmind/disco_rl at 9059a29 (default:'
          f' ${reference_lib.REFERENCE_ENV})'
      ),
  )
  parser.add_argument('--out', required=True, type=pathlib.Path)
  parser.add_argument(
      '--spec',
      help=(
          f'the set whose cases to record, or {builtin.NAME!r}: inputs drawn'
          f' here from tests/parity/{builtin.SPEC_FILE.name}, or a spec file'
          ' of that format (FILE.json; e.g. tests.parity.variant makes one'
          ' with other seeds and sizes) (default: in $DISCO_PARITY_DIR, the'
          ' set recorded on this kind of machine, else the main set; without'
          f' a set there, {builtin.NAME})'
      ),
  )
  parser.add_argument('--cases', nargs='+', help='default: all of the spec')
  parser.add_argument(
      '--skip',
      nargs='+',
      default=[],
      help="the spec's cases not to record",
  )
  parser.add_argument(
      '--set-name', help="PLATFORM.json's set name (default: --out's name)"
  )
  args = parser.parse_args(argv)
  if jax.default_backend() != 'cpu':
    # As the suite runs there (tests/conftest.py): a recording at TF32 could
    # not be met natively by a suite at full precision.
    jax.config.update('jax_default_matmul_precision', 'highest')
  spec: platforms.GoldenSet | None
  if args.spec == builtin.NAME:
    spec = None
  elif args.spec is not None and args.spec.endswith('.json'):
    spec_file = pathlib.Path(args.spec).resolve()
    if not spec_file.is_file():
      parser.error(f'No spec file {spec_file}.')
    os.environ[builtin.SPEC_ENV] = str(spec_file)
    spec = None
  elif args.spec is not None:
    spec_dir = pathlib.Path(args.spec).resolve()
    if not any(spec_dir.glob('*.npz')):
      parser.error(f'No cases (*.npz) in the spec set {spec_dir}.')
    path = spec_dir / platforms.PLATFORM_FILE
    named = json.loads(path.read_text()).get('set') if path.is_file() else None
    spec = platforms.GoldenSet(named or spec_dir.name, spec_dir, None)
  else:
    root = os.environ.get(platforms.PARITY_DIR_ENV)
    spec = spec_lib.default_spec(pathlib.Path(root).resolve() if root else None)
  if spec is None:
    print(
        f'Spec: {builtin.label()} ({builtin.spec_file()}): inputs drawn here',
        flush=True,
    )
  else:
    print(f'Spec: set {spec.name!r} at {spec.directory}', flush=True)
  start = time.time()
  try:
    names = write.record(
        args.reference,
        args.out,
        spec,
        args.cases,
        args.set_name,
        skip=tuple(args.skip),
    )
  except (reference_lib.ProvenanceError, kinds.UnknownKindError) as e:
    print(f'record: {e}', file=sys.stderr)
    return 2
  except write.UnknownCaseError as e:  # --cases or --skip names one.
    parser.error(str(e))
  print(
      f'Recorded {len(names)} cases into {args.out} in'
      f' {time.time() - start:.0f} s.'
  )
  return 0


if __name__ == '__main__':
  raise SystemExit(main())
