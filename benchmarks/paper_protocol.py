"""How does Disco103 do beside its baselines under the paper's protocol?

The paper evaluates Disco103 with other agent settings than it meta-trains
with (its Extended Data Table 6): on Crafter batches of 24 trajectories,
99% of them replayed (about 7 fresh environment steps per learner update,
40 times the updates per step of `disco103_vs_baselines.py`), 32 stacked
frames and weight decay 0.3; on Atari batches of 96, 95% replayed, 4
frames, a warmup-cosine step. One command per environment trains, at equal
environment steps per seed:

* disco: Disco103 with the trainer's `crafter` preset on Craftax-Classic
  (agent `craftax_frames`: a frame embedding shared by the 32 frames) or
  its `atari` preset on a MinAtar game (agent `minatar`; the schedule
  scaled to the budget);
* actor_critic: our actor-critic with the same preset and agent;
* ppo: rejax's PPO with rejax's settings (`disco.studies.ppo`), the same
  environment steps.

Unlike the paper: Craftax-Classic's symbolic observations, a shorter
budget, time limits as terminations, a replay buffer no larger than the run
fills (docs/results/paper_protocol.md lists them all). Each seed of ours is one run in
pieces (`disco.studies.runs`): the same command goes on from its
checkpoint. `--report` writes `disco.studies.report`'s files and
comparison.csv: this protocol's IQM beside the old settings' at the
evaluations of `benchmarks/results/disco103_vs_baselines/` around the same
steps, and the paper's Crafter row (Extended Data Table 5).

  python benchmarks/paper_protocol.py --out runs/protocol \\
      --env craftax:Craftax-Classic-Symbolic-v1 --algos disco --seeds 0
  python benchmarks/paper_protocol.py --out runs/protocol --report \\
      --include-partial

Needs craftax (Craftax), gymnax (MinAtar) and matplotlib; rejax for ppo.
"""

import argparse
import pathlib
import sys
from typing import Any

import numpy as np

from disco import replay
from disco import train
from disco.studies import records
from disco.studies import report as report_lib
from disco.studies import runs as runs_lib
from disco.studies import tables
from disco.train import presets as train_presets

DISCO, ACTOR_CRITIC, PPO = ALGOS = report_lib.ALGOS
CRAFTAX = runs_lib.CRAFTAX
ENVS = runs_lib.MINATAR + (
    CRAFTAX,
    # Craftax-Classic's pixels and grid too, for the convolutional agents.
    'craftax:Craftax-Classic-Pixels-v1',
    'craftax:Craftax-Classic-Symbolic-Grid-v1',
)
# Per environment family: the default budget.
CRAFTAX_ENV_STEPS = 100_000
MINATAR_ENV_STEPS = 1_452_610  # The old runs' budget per seed.
EVAL_ENVS = 32
EVALUATIONS = 8  # Evaluations over a run, besides the first.
CHECKPOINT_ITERATIONS = 40
STEPS_PER_CHUNK = 4
_RESULTS = pathlib.Path(__file__).resolve().parent / 'results'
OLD_RESULTS = _RESULTS / 'disco103_vs_baselines' / 'curves.csv'
OLD_SETTINGS = 'old (paper preset batches; PPO: rejax run to 1M)'
# Extended Data Table 5: Crafter, average return at 1M environment steps.
PAPER_CRAFTER_1M = {
    'random': 2.10,
    'PPO': 4.20,
    'Rainbow': 5.00,
    'Disco103': 6.59,
    'Disco57': 7.58,
    'DreamerV3': 11.70,
    'human': 14.30,
}


# The command's flags besides those of every study (`runs_lib.add_flags`).
FLAGS = {
    '--env': dict(choices=ENVS),
    '--algos': dict(nargs='+', choices=ALGOS, default=ALGOS),
    '--env-steps': dict(
        type=int,
        help=(
            f'per seed (default: Craftax {CRAFTAX_ENV_STEPS:,}; MinAtar'
            f" {MINATAR_ENV_STEPS:,}, the old runs')"
        ),
    ),
    '--agent': dict(
        choices=sorted(train.AGENTS),
        help='default: craftax_frames on Craftax, minatar on MinAtar',
    ),
    '--preset': dict(
        choices=sorted(train_presets.PROTOCOL_PRESETS),
        help=(
            'default: crafter on Craftax, atari on MinAtar; the'
            ' _rollout_per_update ones read the replay ratio per batch slot'
        ),
    ),
    '--num-envs': dict(
        type=int,
        help=(
            "environments per rollout (default: the protocol's, 6 or 24; the"
            ' replay ratio kept); give such runs an --out of their own'
        ),
    ),
    '--unroll-inner-scans': dict(
        action='store_true',
        help=(
            'unroll the scans in an environment step and a learner step'
            ' (default: unrolled on GPUs and TPUs, rolled on CPUs)'
        ),
    ),
    '--frame-stack': dict(type=int, help="default: the protocol's, 32 or 4"),
    '--evaluations': dict(type=int, default=EVALUATIONS, help='but the first'),
    '--checkpoint-every': dict(type=int, default=CHECKPOINT_ITERATIONS),
    '--steps-per-chunk': dict(type=int, default=STEPS_PER_CHUNK),
}


def protocol_for(env: str) -> str:
  return 'crafter' if env.startswith('craftax:') else 'atari'


def agent_for(env: str) -> str:
  return 'craftax_frames' if env.startswith('craftax:') else 'minatar'


def our_config(env: str, rule: str, seed: int, args: argparse.Namespace):
  """The protocol's preset for one seed of `rule` on `env`."""
  changes = {}
  if args.num_envs is not None:
    changes['num_envs'] = args.num_envs
  if args.unroll_inner_scans:
    changes['unroll_inner_scans'] = True
  if args.frame_stack is not None:
    changes['frame_stack'] = args.frame_stack
    if args.frame_stack == 1:
      changes['agent_frame_embedding'] = 0
  env_steps = args.env_steps or (
      CRAFTAX_ENV_STEPS if env.startswith('craftax:') else MINATAR_ENV_STEPS
  )
  preset = getattr(args, 'preset', None) or protocol_for(env)
  probe = train.preset(preset, **changes)
  num_steps = probe.num_steps_for(env_steps)
  config = train.preset(
      preset,
      agent=args.agent or agent_for(env),
      env=env,
      rule=rule,
      seed=seed,
      num_steps=num_steps,
      eval_envs=EVAL_ENVS,
      eval_max_steps=runs_lib.eval_max_steps(env),
      eval_every=max(1, num_steps // args.evaluations),
      steps_per_chunk=args.steps_per_chunk,
      checkpoint_every=args.checkpoint_every,
      truncation='terminate',
      **changes,
  )
  # A buffer the run never fills samples as the preset's larger one: the
  # smaller one it fills costs less memory (the run's record keeps it).
  made = replay.capacity_of_run(num_steps, config.num_envs)
  if made < config.buffer_capacity:
    config = config.replace(buffer_capacity=made)
  return config


def run_name(env, algo, seeds, agent=None, num_envs=None, preset=None) -> str:
  """'<env>__<algo>[__envs<n>][__<agent>][__<preset>]__s<seeds>'."""
  tags = [] if num_envs is None else [f'envs{num_envs}']
  if agent is not None and agent != agent_for(env):
    tags.append(agent)
  if preset is not None and preset != protocol_for(env):
    tags.append(preset)
  return runs_lib.run_name(env, algo, seeds, tags)


def runs(args: argparse.Namespace) -> list[runs_lib.TrainRun | runs_lib.PpoRun]:
  """`args.env`'s runs: ours seed by seed (or together), then PPO's."""
  env, tags = args.env, (args.agent, args.num_envs, args.preset)

  def name(algo: str, seeds: tuple[int, ...]) -> str:
    if algo == PPO:
      return runs_lib.run_name(env, PPO)
    return run_name(env, algo, seeds, *tags)

  return runs_lib.seed_runs(
      env,
      args.algos,
      args.seeds,
      name_fn=name,
      config_fn=lambda rule, seed: our_config(env, rule, seed, args),
      together=args.seeds_together,
      checkpoints=not args.no_checkpoints,
  )


def old_points(env: str, env_steps: int) -> list[dict[str, Any]]:
  """The old runs' IQM at their evaluations just before and after."""
  if not OLD_RESULTS.is_file():
    return []
  parsers = dict(env=str, algo=str, kind=str, env_steps=str, value=float)
  rows = [
      r
      for r in tables.read_csv(OLD_RESULTS, parsers)
      if r['env'] == env and r['kind'] == 'eval'
  ]
  out = []
  for algo in ALGOS:
    mine = [r for r in rows if r['algo'] == algo]
    steps = sorted({int(r['env_steps']) for r in mine})
    below = [s for s in steps if s <= env_steps]
    above = [s for s in steps if s > env_steps]
    for at in below[-1:] + above[:1]:
      values = np.array([r['value'] for r in mine if int(r['env_steps']) == at])
      out.append(
          dict(env=env, settings=OLD_SETTINGS, algo=algo, env_steps=at)
          | dict(seeds=len(values), **report_lib.iqm_interval(values))
          | dict(per_seed=report_lib.seed_values(values))
      )
  return out


def comparison(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """comparison.csv: this protocol's IQM, the old runs' and the paper's."""
  keep = ('env_steps', 'seeds', 'iqm', 'ci_low', 'ci_high', 'per_seed')
  rows = [
      dict(env=r['env'], settings=f'{protocol_for(r["env"])} protocol')
      | dict(algo=r['algo'])
      | {k: r[k] for k in keep}
      for r in summary
  ]
  for env in dict.fromkeys(r['env'] for r in summary):
    steps = max(r['env_steps'] for r in summary if r['env'] == env)
    rows += old_points(env, steps)
    if env.startswith('craftax:'):
      rows += [
          dict(
              env='Crafter (pixels)',
              settings='paper, Extended Data Table 5',
              algo=algo,
              env_steps=1_000_000,
              seeds=3,
              iqm=value,
              ci_low='',
              ci_high='',
              per_seed='',
          )
          for algo, value in PAPER_CRAFTER_1M.items()
      ]
  return rows


def report(out: pathlib.Path, include_partial: bool) -> None:
  rows = report_lib.per_seed_rows(records.load_records(out, include_partial))
  if not rows:
    print(f'no runs in {out}')
    return
  summary = report_lib.write(out, rows)
  tables.write_csv(out / 'comparison.csv', comparison(summary), digits=4)
  print(report_lib.markdown(summary))
  print(f'wrote results, summary, comparison and curves (CSV, PNG) in {out}')


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  runs_lib.add_flags(parser, seeds=(0, 1, 2), one_call=True)
  for flag, settings in FLAGS.items():
    parser.add_argument(flag, **settings)
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
