"""Disco103 under the paper's evaluation protocol, beside its baselines.

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
* ppo: rejax's PPO with rejax's settings (`ppo_rejax.py`), the same
  environment steps.

Differences from the paper's runs: Craftax-Classic's symbolic
observations, not Crafter's pixels; a shorter budget; time limits as
terminations (as in `disco103_vs_baselines.py`, the reference's treatment);
a replay buffer allocated to what the run makes when that is less than the
preset's (the same samples: a buffer that never fills draws as a larger
one, `tests/test_train_protocols.py`). docs/benchmarks.md lists them all.

Each seed of ours is one run in pieces (`pieces.py`), resumed from its
checkpoint by running the command again. `--report` writes, from the runs
in `--out`, results.csv, summary.csv, curves.csv and curves.png as
`disco103_vs_baselines.py` does, and comparison.csv: this protocol's IQM
beside Disco103's and the baselines' with the old settings at the
evaluation points of `benchmarks/results/disco103_vs_baselines/` around
the same steps, and the paper's Crafter row (Extended Data Table 5).

  python benchmarks/paper_protocol.py --out runs/protocol \\
      --env craftax:Craftax-Classic-Symbolic-v1 --algos disco --seeds 0
  python benchmarks/paper_protocol.py --out runs/protocol --report \\
      --include-partial

Needs craftax (Craftax), gymnax (MinAtar) and matplotlib; rejax for ppo.
"""

import argparse
import csv
import pathlib
import sys
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# pylint: disable=g-import-not-at-top,wrong-import-position
import disco103_vs_baselines as old
import pieces

from disco import metrics
from disco.train import AGENTS
from disco.train.config import PROTOCOL_PRESETS

# pylint: enable=g-import-not-at-top,wrong-import-position

CRAFTAX = old.CRAFTAX
ALGOS = old.ALGOS
SEEDS = old.SEEDS
# Per environment family: the protocol, the agent and the default budget.
CRAFTAX_ENV_STEPS = 100_000
MINATAR_ENV_STEPS = 1_452_610  # The old runs' budget per seed.
EVALUATIONS = 8  # Evaluations over a run, besides the first.
CHECKPOINT_ITERATIONS = 40
STEPS_PER_CHUNK = 4
OLD_RESULTS = (
    pathlib.Path(__file__).resolve().parent
    / 'results'
    / 'disco103_vs_baselines'
    / 'curves.csv'
)
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


def protocol_for(env: str) -> str:
  return 'crafter' if env.startswith('craftax:') else 'atari'


def agent_for(env: str) -> str:
  return 'craftax_frames' if env.startswith('craftax:') else 'minatar'


def our_config(env: str, rule: str, seed: int, args: argparse.Namespace):
  """The protocol's preset for one seed of `rule` on `env`."""
  from disco import train  # pylint: disable=g-import-not-at-top

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
      eval_envs=old.EVAL_ENVS,
      eval_max_steps=old.EVAL_MAX_STEPS.get(env, 1000),
      eval_every=max(1, num_steps // args.evaluations),
      steps_per_chunk=args.steps_per_chunk,
      checkpoint_every=args.checkpoint_every,
      truncation='terminate',
      **changes,
  )
  # A buffer the run never fills samples as the preset's larger one.
  made = (num_steps + 1) * config.num_envs
  if made < config.buffer_capacity:
    config = config.replace(buffer_capacity=made)
  return config


def run_name(
    env: str,
    algo: str,
    seeds: tuple[int, ...],
    agent=None,
    num_envs=None,
    preset=None,
) -> str:
  name = old.run_name(env, algo, seeds)
  if preset is not None and preset != protocol_for(env):
    name = name.replace(f'__{algo}', f'__{algo}__{preset}')
  if agent is not None and agent != agent_for(env):
    name = name.replace(f'__{algo}', f'__{algo}__{agent}')
  if num_envs is not None:
    name = name.replace(f'__{algo}', f'__{algo}__envs{num_envs}')
  return name


def run_env(args: argparse.Namespace) -> None:
  env = args.env
  groups = [args.seeds] if args.seeds_together else [[s] for s in args.seeds]
  env_steps = None
  for algo in args.algos:
    if algo == old.PPO:
      continue
    for seeds in groups:
      config = our_config(env, algo, seeds[0], args)
      env_steps = config.num_steps * config.env_steps_per_step
      record = pieces.run(
          args.out,
          run_name(
              env,
              algo,
              tuple(seeds),
              args.agent,
              args.num_envs,
              getattr(args, 'preset', None),
          ),
          config,
          num_seeds=len(seeds),
          show_progress=not args.no_progress,
          checkpoints=not args.no_checkpoints,
      )
      print(
          f'{record["name"]}: done, {record["wall_seconds"]:.0f} s in'
          f' {len(record["pieces"])} piece(s)',
          flush=True,
      )
  if old.PPO in args.algos:
    if env_steps is None:
      config = our_config(env, old.DISCO, args.seeds[0], args)
      env_steps = config.num_steps * config.env_steps_per_step
    old.run_ppo(args, env, env_steps)


# ----------------------------------------------------------------------------
# The report.


def old_points(env: str, env_steps: int) -> list[dict[str, Any]]:
  """The old runs' IQM at their evaluations just before and after."""
  if not OLD_RESULTS.is_file():
    return []
  with open(OLD_RESULTS) as f:
    rows = [
        r for r in csv.DictReader(f) if r['env'] == env and r['kind'] == 'eval'
    ]
  out = []
  for algo in ALGOS:
    mine = [r for r in rows if r['algo'] == algo]
    steps = sorted({int(r['env_steps']) for r in mine})
    below = [s for s in steps if s <= env_steps]
    above = [s for s in steps if s > env_steps]
    for at in ([below[-1]] if below else []) + ([above[0]] if above else []):
      values = np.array(
          [float(r['value']) for r in mine if int(r['env_steps']) == at]
      )
      low, high = metrics.bootstrap_interval(values)
      out.append(
          dict(
              env=env,
              settings='old (paper preset batches; PPO: rejax run to 1M)',
              algo=algo,
              env_steps=at,
              seeds=len(values),
              iqm=metrics.interquartile_mean(values),
              ci_low=low,
              ci_high=high,
              per_seed=' '.join(f'{v:.2f}' for v in values),
          )
      )
  return out


def comparison(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
  rows = []
  for row in summary:
    rows.append(
        dict(
            env=row['env'],
            settings=f'{protocol_for(row["env"])} protocol',
            algo=row['algo'],
            env_steps=row['env_steps'],
            seeds=row['seeds'],
            iqm=row['iqm'],
            ci_low=row['ci_low'],
            ci_high=row['ci_high'],
            per_seed=row['per_seed'],
        )
    )
  for env in dict.fromkeys(r['env'] for r in summary):
    steps = max(r['env_steps'] for r in summary if r['env'] == env)
    rows += old_points(env, steps)
    if env.startswith('craftax:'):
      for algo, value in PAPER_CRAFTER_1M.items():
        rows.append(
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
        )
  return rows


def report(out: pathlib.Path, include_partial: bool) -> None:
  rows = old.per_seed_rows(old.load_records(out, include_partial))
  if not rows:
    print(f'no runs in {out}')
    return
  plain = [
      {k: v for k, v in r.items() if not k.endswith('_curve')} for r in rows
  ]
  old.write_csv(out / 'results.csv', plain)
  summary = old.summary_rows(rows)
  old.write_csv(out / 'summary.csv', summary)
  old.write_csv(out / 'comparison.csv', comparison(summary))
  old.write_csv(out / 'curves.csv', old.curve_rows(rows))
  old.plot(rows, out / 'curves.png')
  print(old.markdown(summary))
  print(f'wrote results, summary, comparison and curves (CSV, PNG) in {out}')


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  # Craftax-Classic's pixels and grid too, for the convolutional agents.
  old.add_run_flags(
      parser,
      old.ENVS
      + (
          'craftax:Craftax-Classic-Pixels-v1',
          'craftax:Craftax-Classic-Symbolic-Grid-v1',
      ),
  )
  parser.add_argument(
      '--env-steps',
      type=int,
      default=None,
      help=(
          f'environment steps per seed (default: Craftax {CRAFTAX_ENV_STEPS:,};'
          f" MinAtar {MINATAR_ENV_STEPS:,}, the old runs')"
      ),
  )
  parser.add_argument(
      '--agent',
      choices=sorted(AGENTS),
      default=None,
      help='agent (default: craftax_frames on Craftax, minatar on MinAtar)',
  )
  parser.add_argument(
      '--preset',
      choices=sorted(PROTOCOL_PRESETS),
      default=None,
      help=(
          'the protocol preset (default: crafter on Craftax, atari on'
          ' MinAtar); the _rollout_per_update ones read the replay ratio'
          ' per batch slot'
      ),
  )
  parser.add_argument(
      '--num-envs',
      type=int,
      default=None,
      help=(
          "environments per rollout (default: the protocol's, 6 or 24; the"
          ' replay ratio kept); give such runs an --out of their own, as the'
          ' report groups runs by rule'
      ),
  )
  parser.add_argument(
      '--unroll-inner-scans',
      action='store_true',
      help=(
          'unroll the scans inside an environment step and a learner step'
          ' (the same values, fewer kernels in a row on a GPU)'
      ),
  )
  parser.add_argument(
      '--frame-stack',
      type=int,
      default=None,
      help="frames stacked (default: the protocol's, 32 or 4)",
  )
  parser.add_argument(
      '--evaluations',
      type=int,
      default=EVALUATIONS,
      help=f'evaluations over a run besides the first (default {EVALUATIONS})',
  )
  parser.add_argument(
      '--checkpoint-every',
      type=int,
      default=CHECKPOINT_ITERATIONS,
      help=f'iterations (default {CHECKPOINT_ITERATIONS})',
  )
  parser.add_argument(
      '--no-checkpoints',
      action='store_true',
      help=(
          'write none: a run in one piece (one device call); stopped, it'
          ' keeps its log rows as a partial record'
      ),
  )
  parser.add_argument(
      '--steps-per-chunk',
      type=int,
      default=STEPS_PER_CHUNK,
      help=f'iterations per jitted call (default {STEPS_PER_CHUNK})',
  )
  return old.run_command(parser, argv, run_env, report)


if __name__ == '__main__':
  sys.exit(main())
