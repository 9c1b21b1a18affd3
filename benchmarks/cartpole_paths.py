"""Does CartPole from Gymnasium (on the host) train as gymnax's (in JAX)?

The same MDP through the trainer's two paths: `gymnasium:CartPole-v1`,
stepped on the host (`disco.train.host`), and `gymnax:CartPole-v1`, fused
in the compiled program. Disco103 and actor-critic, seeds 0-2 each, at the
held-out runs' settings and budget
(`disco.studies.baseline_runs.heldout_config`: 1,500 iterations of 16 x 16
steps, 384,000 environment steps; time limits bootstrapped). Each run goes
in pieces (`disco.studies.runs`); `--report` writes results.csv,
summary.csv (IQM [95% bootstrap interval] of the final evaluation return
per path and rule), curves.csv and curves.png.

  python benchmarks/cartpole_paths.py --out benchmarks/results/cartpole_paths
  python benchmarks/cartpole_paths.py --out benchmarks/results/cartpole_paths \\
      --report

Needs gymnasium, gymnax and matplotlib.
"""

import argparse
import sys

from disco.studies import baseline_runs
from disco.studies import records
from disco.studies import report as report_lib
from disco.studies import runs as runs_lib

ENVS = ('gymnasium:CartPole-v1', 'gymnax:CartPole-v1')
RULES = ('disco', 'actor_critic')


def runs(args: argparse.Namespace) -> list[runs_lib.TrainRun]:
  """Every path, rule and seed asked, one run each."""
  return [
      runs_lib.TrainRun(
          f'{env.split(":")[0]}__{rule}__s{seed}',
          baseline_runs.heldout_config(rule, env).replace(seed=seed),
      )
      for env in args.envs
      for rule in args.algos
      for seed in args.seeds
  ]


def report(args: argparse.Namespace) -> None:
  rows = report_lib.per_seed_rows(
      records.load_records(args.out, args.include_partial)
  )
  if not rows:
    print(f'no finished runs in {args.out}')
    return
  summary = report_lib.write(args.out, rows)
  # Both paths' environment is CartPole-v1: name them by their package.
  print(report_lib.markdown([dict(r, env=_path(r['env'])) for r in summary]))


def _path(env: str) -> str:
  return env.replace(':', ' ')


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  runs_lib.add_flags(parser, seeds=(0, 1, 2))
  parser.add_argument('--envs', nargs='+', choices=ENVS, default=ENVS)
  parser.add_argument('--algos', nargs='+', choices=RULES, default=RULES)
  parser.add_argument('--run', action='store_true', help='run the runs')
  args = parser.parse_args(argv)
  return runs_lib.run_then_report(
      parser.prog,
      args,
      runs(args) if args.run or not args.report else None,
      (lambda: report(args)) if args.report else None,
  )


if __name__ == '__main__':
  sys.exit(main())
