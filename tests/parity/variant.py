"""A spec of the builtin cases with other seeds and sizes.

    python -m tests.parity.variant --out other.json [--seed-offset 7]
    python -m tests.parity.record --reference ../disco_rl --spec other.json \\
        --out ../parity-other

The cases and configs of builtin_spec.json, with every seed moved by
`--seed-offset` and, in the cases of `SIZES`, other sizes: batch, time,
action and board sizes, and the eval curve's batch, unroll, number of
environments, steps and board. A set recorded from it is written as the
shipped ones are, so it checks that the parity suite takes every size and
seed from a case's config and inputs, and that the cross-platform
tolerances, set from the shipped sets' spread, hold for other draws.

The cases left out of `SIZES` keep their sizes: the eval-size agent (its
sizes are its point), the meta-network's unroll and the meta-gradient cases
(their inputs hold network parameters and states, whose shapes follow the
architecture), and two without sized inputs. Their seeds move like every
other case's, and a case without a seed gets one.
"""

import argparse
import copy
import json
import pathlib
import re
from typing import Any

from tests.parity import builtin

# Config keys that hold a seed, wherever they are in a case's config.
_SEED_KEYS = ('seed', 'reset_seed', 'init_seed', 'random_seed')
_PRNG_KEY = re.compile(r'PRNGKey\((\d+)\)')

# Per case: (config changes, {path: value} with '/' between nested keys;
# {old size: new size} for every axis of its stored inputs). Where two sizes
# are equal in a case (B = A = 3), they change together.
_AGENT = (
    {'batch': 3, 'rollout_len_T_plus_1': 6, 'catch_rows': 6,
     'catch_columns': 6},
    {4: 3, 8: 6, 5: 6},
)  # fmt: skip
_TBA = ({'T': 9, 'B': 4, 'A': 4}, {6: 9, 7: 10, 3: 4})
SIZES: dict[str, tuple[dict[str, Any], dict[int, int]]] = {
    'agent_actor_critic_small': _AGENT,
    'agent_disco_small': _AGENT,
    'value_function': _AGENT,
    'env_catch_cpu': (
        {'env_settings/rows': 7, 'env_settings/columns': 9, 'batch_size': 2,
         'num_steps': 30, 'single_observation_spec/shape': [7, 9]},
        {40: 30, 3: 2},
    ),  # fmt: skip
    'env_catch_jittable_5x5': (
        {'rows': 6, 'columns': 7, 'batch_size': 3, 'num_steps': 25,
         'single_observation_spec/observation': [6, 7, 1]},
        {40: 25, 4: 3},
    ),  # fmt: skip
    'env_catch_jittable_8x8': (
        {'rows': 9, 'columns': 6, 'batch_size': 2, 'num_steps': 30,
         'single_observation_spec/observation': [9, 6, 1]},
        {40: 30, 4: 2},
    ),  # fmt: skip
    'eval_curve_catch': (
        {'num_steps': 80, 'batch_size': 32, 'buffer/min_buffer_size': 32,
         'rollout_len': 20, 'replay_ratio': 8, 'num_envs': 4, 'catch_rows': 6,
         'catch_columns': 7},
        {},
    ),  # fmt: skip
    'input_transforms': (
        {'T': 7, 'B': 2, 'A': 5, 'C': 3},
        {5: 7, 6: 8, 3: 2, 4: 5, 2: 3},
    ),
    'optimizer_adam_sg_clip0p5': ({}, {3: 5, 4: 2}),
    'optimizer_adam_sg_clip1p0': ({}, {3: 2, 4: 6}),
    'policy_gradient_rule': _TBA,
    'utils': ({'T': 4, 'B': 2, 'A': 5, 'C': 3}, {5: 4, 3: 2, 4: 5, 6: 3}),
    'value_utils_categorical_and_losses': ({'T': 9, 'B': 2}, {6: 9, 3: 2}),
    'value_utils_estimators': _TBA,
    'value_utils_get_value_outs_actor_critic': _TBA,
    'value_utils_get_value_outs_disco': _TBA,
    'value_utils_get_value_outs_value_fn': (
        {'T_plus_1': 10, 'B': 4, 'A': 4},
        {7: 10, 3: 4},
    ),
}


def _move_seeds(config: Any, offset: int) -> Any:
  """`config` with every seed (and every `PRNGKey(n)` in text) + offset."""
  if isinstance(config, dict):
    return {
        k: (
            v + offset
            if k in _SEED_KEYS and isinstance(v, int)
            else _move_seeds(v, offset)
        )
        for k, v in config.items()
    }
  if isinstance(config, list):
    return [_move_seeds(v, offset) for v in config]
  if isinstance(config, str):
    return _PRNG_KEY.sub(lambda m: f'PRNGKey({int(m[1]) + offset})', config)
  return config


def _set(config: dict[str, Any], path: str, value: Any) -> None:
  *parents, leaf = path.split('/')
  for key in parents:
    config = config[key]
  if leaf not in config:
    raise KeyError(f'No config field {path!r}.')
  config[leaf] = value


def _resize(shape: list[int], dtype: str, sizes: dict[int, int]) -> list[int]:
  if dtype == 'uint32' and shape == [2]:  # An rng key.
    return shape
  return [sizes.get(d, d) for d in shape]


def variant(
    spec: dict[str, Any], seed_offset: int, resize: bool = True
) -> dict[str, Any]:
  """The builtin spec (as loaded from its file) with other seeds and sizes."""
  out = copy.deepcopy(spec)
  for name, entry in out['cases'].items():
    config = _move_seeds(entry['config'], seed_offset)
    if 'seed' not in config:
      config['seed'] = seed_offset  # The builtin draws' seed (default 0).
    if resize and name in SIZES:
      changes, sizes = SIZES[name]
      for path, value in changes.items():
        _set(config, path, value)
      entry['inputs'] = {
          k: [_resize(shape, dtype, sizes), dtype]
          for k, (shape, dtype) in entry['inputs'].items()
      }
    entry['config'] = config
  out['about'] = f'builtin_spec.json with seeds moved by {seed_offset}' + (
      ' and other sizes (tests/parity/variant.py)' if resize else ''
  )
  return out


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
      prog='python -m tests.parity.variant',
      description=__doc__.split('\n', 1)[0],
  )
  parser.add_argument('--out', required=True, type=pathlib.Path)
  parser.add_argument('--seed-offset', type=int, default=7)
  parser.add_argument(
      '--same-sizes', action='store_true', help='move the seeds only'
  )
  args = parser.parse_args(argv)
  spec = json.loads(builtin.SPEC_FILE.read_text())
  out = variant(spec, args.seed_offset, resize=not args.same_sizes)
  args.out.parent.mkdir(parents=True, exist_ok=True)
  args.out.write_text(json.dumps(out, indent=1) + '\n')
  print(f'Wrote {args.out}: {out["about"]}.')
  return 0


if __name__ == '__main__':
  raise SystemExit(main())
