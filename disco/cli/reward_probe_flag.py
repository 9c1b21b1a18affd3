"""`--probe-reward-scale`: a new run's reward scale from its environment.

The flag of every command that trains agents (`disco-train`, `disco-eval`,
`disco-meta-train`): before the run starts, a uniform random policy steps
the environment and `--reward-scale` is set to what `disco.reward_probe`
chooses. `config.json` keeps the scale in the config and the probe's
measurement under 'chosen'; a resumed run keeps both.
"""

import argparse
import dataclasses
from typing import Any

from disco import reward_probe
from disco import schedules
from disco.cli.errors import UsageError

FLAG = '--probe-reward-scale'
RECORD_KEY = 'reward_probe'


def add_flag(parser: argparse.ArgumentParser) -> None:
  """Adds `--probe-reward-scale [TARGET]` to `parser`, in its own group."""
  parser.add_argument_group('reward scale').add_argument(
      FLAG,
      type=float,
      nargs='?',
      const=reward_probe.DEFAULT_TARGET,
      default=None,
      metavar='TARGET',
      help=(
          'set --reward-scale before the run from a uniform random'
          " policy's returns on the environment: the scale that brings"
          ' their mean absolute discounted return to TARGET (default'
          f' {reward_probe.DEFAULT_TARGET:g}, calibrated on MinAtar,'
          ' CartPole and Catch; docs/training.md)'
      ),
  )


def resolve(
    args: argparse.Namespace, config: Any
) -> tuple[Any, dict[str, Any]]:
  """`config` with the probed scale; the record for `config.json`."""
  target = args.probe_reward_scale
  if target is None:
    return config, {}
  if getattr(args, 'reward_scale', None) is not None:
    raise UsageError(
        f'{FLAG} chooses --reward-scale itself; give one of the two.'
    )
  if not target > 0:
    raise UsageError(f'{FLAG} needs a TARGET > 0, got {target:g}.')
  config, result = reward_probe.with_probed_scale(
      config, target, discount=getattr(config, 'discount', schedules.DISCOUNT)
  )
  print(f'{FLAG}: {reward_probe.describe(result)}', flush=True)
  return config, {RECORD_KEY: dataclasses.asdict(result)}
