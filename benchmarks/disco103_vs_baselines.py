"""Past its warm-up, does Disco103 beat actor-critic and rejax's PPO?

One command per environment trains, at equal environment steps per seed:

* disco: Disco103 with the trainer's `paper` preset batches (96
  trajectories of 29 steps, 90% replayed, 10 environments: one learner
  update per 290 environment steps), the environment family's agent
  (`disco.train.AGENTS`) and the step size `breakout_diagnosis.py` chose on
  Breakout-MinAtar (`DISCO_LR`), fixed for every game;
* actor_critic: the same agent and batches, its own step size chosen the
  same way (`AC_LR`);
* ppo: rejax's PPO with rejax's settings (`disco.studies.ppo`) at the same
  environment steps (the nearest whole number of PPO iterations).

Budgets: MinAtar games `--updates` (5,000) learner updates after the
act-only warm-up of 9 iterations (1,452,610 environment steps per seed);
Craftax-Classic `--env-steps` (1M, the paper's Crafter budget: 3,440
updates).

The runs are a list (`runs`), each done in pieces (`disco.studies.runs`):
a stopped command, run again, resumes at its last checkpoint and skips
finished runs. Final return: the mean return of the last evaluation's
episodes (ours: 32 episodes on fresh environments after the last
iteration, actions sampled; PPO: rejax's evaluation of 128 episodes, 16 on
Craftax). `--report` writes results.csv, summary.csv (IQM [95% bootstrap
interval] per environment and algorithm), curves.csv and curves.png from
every finished run in `--out` (`disco.studies.report`).

  python benchmarks/disco103_vs_baselines.py --out DIR --env gymnax:Breakout-MinAtar
  python benchmarks/disco103_vs_baselines.py --out DIR --env craftax:Craftax-Classic-Symbolic-v1
  python benchmarks/disco103_vs_baselines.py --out DIR --report

Needs gymnax and matplotlib; rejax for ppo; craftax for Craftax.
"""

import argparse
import pathlib
import sys

from disco.studies import baseline_runs
from disco.studies import records
from disco.studies import report as report_lib
from disco.studies import runs as runs_lib

DISCO, ACTOR_CRITIC, PPO = report_lib.ALGOS
CRAFTAX = runs_lib.CRAFTAX
ENVS = runs_lib.MINATAR + (CRAFTAX,)
DISCO_LR = baseline_runs.DISCO_LR
AC_LR = baseline_runs.AC_LR
UPDATES = baseline_runs.UPDATES
CRAFTAX_ENV_STEPS = baseline_runs.CRAFTAX_ENV_STEPS


agent_for = baseline_runs.agent_for


def our_config(env: str, rule: str, seed: int, args: argparse.Namespace):
  """The `paper` preset for one seed of `rule` on `env`."""
  return baseline_runs.paper_batches_config(
      env,
      rule,
      seed,
      agent=args.agent,
      disco_lr=args.disco_lr,
      ac_lr=args.ac_lr,
      updates=args.updates,
      env_steps=args.env_steps,
  )


def run_name(env: str, algo: str, seeds=None, agent=None) -> str:
  """`<env>__<algo>[__<agent>][__s<seed>[-<last seed>]]`."""
  tags = [agent] if agent is not None and agent != agent_for(env) else []
  return runs_lib.run_name(env, algo, seeds, tags)


def runs(args: argparse.Namespace) -> list[runs_lib.TrainRun | runs_lib.PpoRun]:
  """`args.env`'s runs: ours seed by seed (or together), then PPO's."""
  env = args.env
  return runs_lib.seed_runs(
      env,
      args.algos,
      args.seeds,
      name_fn=lambda algo, seeds: (
          run_name(env, PPO)
          if algo == PPO
          else run_name(env, algo, seeds, args.agent)
      ),
      config_fn=lambda rule, seed: our_config(env, rule, seed, args),
      together=args.seeds_together,
  )


def report(out: pathlib.Path, include_partial: bool = False) -> None:
  """The report's files from every finished run in `out`."""
  rows = report_lib.per_seed_rows(records.load_records(out, include_partial))
  if not rows:
    print(f'no finished runs in {out}')
    return
  print(report_lib.markdown(report_lib.write(out, rows)))
  print(f'wrote results.csv, summary.csv, curves.csv and curves.png in {out}')


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  runs_lib.add_flags(parser, seeds=(0, 1, 2))
  parser.add_argument('--env', choices=ENVS, default=None)
  parser.add_argument(
      '--algos', nargs='+', choices=report_lib.ALGOS, default=report_lib.ALGOS
  )
  parser.add_argument(
      '--seeds-together',
      action='store_true',
      help='train the seeds as one vmapped run (for accelerators)',
  )
  parser.add_argument('--updates', type=int, default=UPDATES)
  parser.add_argument(
      '--env-steps',
      type=int,
      default=None,
      help=(
          'environment steps per seed (default: Craftax 1M; MinAtar --updates)'
      ),
  )
  parser.add_argument(
      '--agent',
      choices=('colab', 'minatar', 'craftax', 'conv'),
      default=None,
      help=(
          "agent sizes (default: the environment family's); conv: the"
          ' small convolutional agent'
      ),
  )
  parser.add_argument('--disco-lr', type=float, default=DISCO_LR)
  parser.add_argument('--ac-lr', type=float, default=AC_LR)
  args = parser.parse_args(argv)
  if args.env is None and not args.report:
    parser.error('give --env (one environment per command) or --report')
  return runs_lib.run_then_report(
      parser.prog,
      args,
      runs(args) if args.env is not None else None,
      (lambda: report(args.out, args.include_partial)) if args.report else None,
  )


if __name__ == '__main__':
  sys.exit(main())
