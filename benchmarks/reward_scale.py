"""Does the scale of an environment's rewards move Disco103?

Disco103 reads rewards, values and advantages through a signed log, and was
discovered on environments whose rewards reach tens to hundreds; MinAtar's
are 1. Each run is a recorded run of benchmarks/disco103_vs_baselines.py
(`paper` batches, the family's agent, Disco103 at step size 5e-4 or
actor-critic at 3e-3, time limits as terminations, 5,000 updates on
MinAtar) with every reward the learner sees multiplied by `--scales`
(`TrainConfig.reward_scale`); returns stay in the game's units. Scale 1 is
not run again on MinAtar: its records are those of disco103_vs_baselines
(same settings), read by `--report` from `--unscaled`. Catch runs at the
evaluation colab's settings (`colab` preset, 1,000 iterations) and
CartPole-v1 at benchmarks/discovery_heldout.py's (384,000 steps), scale 1
included. Acrobot-v1 runs at CartPole's settings; it is held out from the
calibration of `disco.reward_probe`, whose scale `--probe` adds to
`--scales` (the probe of seed 0, for every seed).

Each run goes in pieces (`disco.studies.runs`): the same command resumes a
stopped run and skips finished ones. `--report` writes runs.csv (per run:
the last evaluation's return; over the last 10% of rows the training
return, the policy's, y's and z's entropy and the meta-network's inputs;
the updates the policy spent near uniform), summary.csv (per game, rule
and scale: IQM [95% bootstrap interval] of the final return over seeds)
and curves.png.

  python benchmarks/reward_scale.py --out benchmarks/results/reward_scale \\
      --env gymnax:Asterix-MinAtar --scales 10 100 --seeds 0
  python benchmarks/reward_scale.py --out benchmarks/results/reward_scale \\
      --report --include-partial

Needs gymnax and matplotlib.
"""

import argparse
import pathlib
import sys

from disco.studies import baseline_runs
from disco.studies import runs as runs_lib

SCALES = (3.0, 10.0, 30.0, 100.0)
UNSCALED_RUNS = (
    pathlib.Path(__file__).resolve().parent
    / 'results'
    / 'disco103_vs_baselines'
)
RULES = ('disco', 'actor_critic')
CATCH, CARTPOLE = 'catch', 'gymnax:CartPole-v1'
# Held out from the calibration of `--probe` (`disco.reward_probe`).
ACROBOT = 'gymnax:Acrobot-v1'
HELDOUT_ENVS = (CARTPOLE, ACROBOT)
ENVS = runs_lib.MINATAR + (CATCH,) + HELDOUT_ENVS
# Catch at the evaluation colab's settings (`colab` preset, 1,000
# iterations), evaluated as the MinAtar runs are.
CATCH_ITERATIONS = 1000


def scaled_config(env: str, rule: str, seed: int, updates: int):
  """`env`'s recorded settings for one seed of `rule` (scale not set)."""
  if env == CATCH:
    # pylint: disable-next=g-import-not-at-top
    from disco import train

    return train.preset(
        'colab',
        env=CATCH,
        rule=rule,
        seed=seed,
        num_steps=CATCH_ITERATIONS,
        eval_every=baseline_runs.EVAL_EVERY,
        eval_envs=baseline_runs.EVAL_ENVS,
    )
  if env in HELDOUT_ENVS:
    # The held-out runs' settings, logged every 25 iterations.
    return baseline_runs.heldout_config(rule, env).replace(
        seed=seed, steps_per_chunk=baseline_runs.STEPS_PER_CHUNK
    )
  return baseline_runs.paper_batches_config(env, rule, seed, updates=updates)


def scale_tag(scale: float) -> str:
  """'x10', 'x0.1': the run name's tag of a reward scale."""
  return f'x{scale:g}'


def probed_scale(env: str, target: float) -> float:
  """The scale `disco.reward_probe` chooses for `env`'s runs (seed 0)."""
  # pylint: disable-next=g-import-not-at-top
  from disco import reward_probe

  config = scaled_config(env, RULES[0], 0, baseline_runs.UPDATES)
  _, result = reward_probe.with_probed_scale(config, target)
  print(f'{env}: --probe {target:g}: {reward_probe.describe(result)}')
  return result.reward_scale


def runs(args: argparse.Namespace) -> list[runs_lib.TrainRun]:
  """`args.env`'s runs: each scale, rule and seed in turn."""
  todo = []
  scales = list(args.scales)
  if args.probe is not None:
    scales.append(probed_scale(args.env, args.probe))
  for scale in scales:
    for rule in args.algos:
      for seed in args.seeds:
        config = scaled_config(args.env, rule, seed, args.updates)
        todo.append(
            runs_lib.TrainRun(
                runs_lib.run_name(args.env, rule, seed, [scale_tag(scale)]),
                config.replace(reward_scale=scale),
            )
        )
  return todo


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  runs_lib.add_flags(parser, seeds=(0,))
  parser.add_argument('--env', choices=ENVS, default=None)
  parser.add_argument(
      '--scales',
      nargs='*',
      type=runs_lib.positive(float),
      default=SCALES,
      help="the scales to run (none: only --probe's)",
  )
  parser.add_argument('--algos', nargs='+', choices=RULES, default=RULES[:1])
  parser.add_argument(
      '--probe',
      type=runs_lib.positive(float),
      nargs='?',
      const=3.0,
      default=None,
      metavar='TARGET',
      help='also run the scale disco.reward_probe chooses (seed 0 probe)',
  )
  parser.add_argument('--updates', type=int, default=baseline_runs.UPDATES)
  parser.add_argument(
      '--unscaled',
      type=pathlib.Path,
      default=UNSCALED_RUNS,
      help='the study whose records are scale 1 (same settings)',
  )
  args = parser.parse_args(argv)
  if args.env is None and not args.report:
    parser.error('give --env (one environment per command) or --report')
  # pylint: disable-next=g-import-not-at-top
  from disco.studies import scale_report

  return runs_lib.run_then_report(
      parser.prog,
      args,
      runs(args) if args.env is not None else None,
      (
          lambda: scale_report.report(
              args.out, args.unscaled, args.include_partial
          )
      )
      if args.report
      else None,
  )


if __name__ == '__main__':
  sys.exit(main())
