"""Disco103 against actor-critic and rejax's PPO, long enough to pass warm-up.

One command per environment trains, at equal environment steps per seed:

* disco: Disco103 with the trainer's `paper` preset batches (96
  trajectories of 29 steps, 90% replayed, 10 environments: one learner
  update per 290 environment steps), the environment family's agent
  (`disco.train.AGENTS`) and the step size `breakout_diagnosis.py` chose on
  Breakout-MinAtar (`DISCO_LR`), fixed for every game;
* actor_critic: the same agent and batches, its own step size chosen the
  same way (`AC_LR`);
* ppo: rejax's PPO with rejax's settings (`ppo_rejax.py`) at the same
  environment steps (the nearest whole number of PPO iterations).

Budgets: MinAtar games `--updates` (5,000) learner updates after the
act-only warm-up of 9 iterations (1,452,610 environment steps per seed);
Craftax-Classic `--env-steps` (1M, the paper's Crafter budget: 3,440
updates).

Each seed of ours is one run in pieces (`pieces.py`): a stopped command,
run again, resumes at its last checkpoint and skips finished runs. PPO
trains its seeds together: on MinAtar in one program of a few minutes; on
Craftax one PPO iteration per call (`unseen_envs.run_ppo_segmented`),
checkpointed and resumed the same way. The wall time of every piece is in
the run's record.

Final return: the mean return of the last evaluation's episodes (ours: 32
episodes on fresh environments after the last iteration, actions sampled;
PPO: rejax's evaluation of 128 episodes, 16 on Craftax). `--report`
writes, from every finished run in `--out`:

  results.csv  per environment, algorithm and seed: final return, env
               steps, learner updates (ours), wall seconds per seed (a
               run of seeds trained together: its time over its seeds)
  summary.csv  per environment and algorithm: interquartile mean over seeds
               with a 95% percentile-bootstrap interval, mean, the seeds'
               values
  curves.csv   every evaluation point (and our policy entropy per chunk)
  curves.png   per environment: evaluation return against env steps (all
               three; a colour per algorithm, a line style per seed), and
               against learner updates with the policy's entropy (ours;
               Disco103's warm-up is where its entropy stays near log A)

  python benchmarks/disco103_vs_baselines.py --out DIR --env gymnax:Breakout-MinAtar
  python benchmarks/disco103_vs_baselines.py --out DIR --env craftax:Craftax-Classic-Symbolic-v1
  python benchmarks/disco103_vs_baselines.py --out DIR --report

Needs gymnax and matplotlib; rejax for ppo; craftax for Craftax.
"""

import argparse
import csv
import json
import pathlib
import signal
import sys
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# pylint: disable=g-import-not-at-top,wrong-import-position
import pieces

from disco import metrics

# pylint: enable=g-import-not-at-top,wrong-import-position

DISCO = 'disco'
ACTOR_CRITIC = 'actor_critic'
PPO = 'ppo'
ALGOS = (DISCO, ACTOR_CRITIC, PPO)
# Seeds of one algorithm share its colour and differ in line style.
SEED_LINESTYLES = ('-', '--', ':', '-.')
MINATAR = (
    'gymnax:Breakout-MinAtar',
    'gymnax:SpaceInvaders-MinAtar',
    'gymnax:Asterix-MinAtar',
    'gymnax:Freeway-MinAtar',
)
CRAFTAX = 'craftax:Craftax-Classic-Symbolic-v1'
ENVS = MINATAR + (CRAFTAX,)
# Step sizes chosen on Breakout-MinAtar by benchmarks/breakout_diagnosis.py.
DISCO_LR = 5e-4
AC_LR = 3e-3
UPDATES = 5000
CRAFTAX_ENV_STEPS = 1_000_000
SEEDS = (0, 1, 2)
EVAL_ENVS = 32
EVAL_EVERY = 250
# Longer than an episode can last (MinAtar's Freeway: 2,500 steps; others
# end sooner), so that every evaluation episode ends.
EVAL_MAX_STEPS = {'gymnax:Freeway-MinAtar': 2500, CRAFTAX: 10_000}
STEPS_PER_CHUNK = 25
CHECKPOINT_EVERY = 250
PPO_EVAL_EPISODES = 128
CRAFTAX_PPO_EVAL_EPISODES = 16


def short(env: str) -> str:
  return env.split(':', 1)[-1]


def agent_for(env: str) -> str:
  """The agent of `env`'s family (`disco.train.AGENTS`)."""
  return 'craftax' if env.startswith('craftax:') else 'minatar'


def our_config(env: str, rule: str, seed: int, args: argparse.Namespace):
  """The `paper` preset for one seed of `rule` on `env`."""
  from disco import train  # pylint: disable=g-import-not-at-top

  config = train.preset(
      'paper',
      agent=args.agent or agent_for(env),
      env=env,
      rule=rule,
      agent_learning_rate=args.disco_lr if rule == DISCO else args.ac_lr,
      seed=seed,
      eval_envs=EVAL_ENVS,
      eval_max_steps=EVAL_MAX_STEPS.get(env, 1000),
      eval_every=EVAL_EVERY,
      steps_per_chunk=STEPS_PER_CHUNK,
      checkpoint_every=CHECKPOINT_EVERY,
      # Every recorded run treated time limits as terminations (the
      # reference's behaviour, and the trainer's before `truncation`).
      truncation='terminate',
  )
  if env.startswith('craftax:') or args.env_steps is not None:
    env_steps = args.env_steps or CRAFTAX_ENV_STEPS
    return config.replace(num_steps=config.num_steps_for(env_steps))
  warmup = -(-config.learning_starts // config.num_envs) - 1
  return config.replace(num_steps=warmup + args.updates)


def run_name(
    env: str, algo: str, seeds: int | tuple[int, ...] | None = None, agent=None
) -> str:
  """`<env>__<algo>[__<agent>][__s<seed>[-<last seed>]]`."""
  name = f'{short(env)}__{algo}'
  if agent is not None and agent != agent_for(env):
    name += f'__{agent}'
  if seeds is None:
    return name
  seeds = (seeds,) if isinstance(seeds, int) else tuple(seeds)
  together = f'-{seeds[-1]}' if len(seeds) > 1 else ''
  return f'{name}__s{seeds[0]}{together}'


def run_env(args: argparse.Namespace) -> None:
  """Every run of `args.env` not done yet, ours seed by seed, then PPO.

  With `--seeds-together`, our seeds train as one run (`vmap`ped: one
  program for all seeds, as an accelerator prefers).
  """
  env = args.env
  env_steps = None
  groups = [args.seeds] if args.seeds_together else [[s] for s in args.seeds]
  for algo in args.algos:
    if algo == PPO:
      continue
    for seeds in groups:
      config = our_config(env, algo, seeds[0], args)
      env_steps = config.num_steps * config.env_steps_per_step
      record = pieces.run(
          args.out,
          run_name(env, algo, tuple(seeds), args.agent),
          config,
          num_seeds=len(seeds),
          show_progress=not args.no_progress,
      )
      print(
          f'{record["name"]}: done, {record["wall_seconds"]:.0f} s in'
          f' {len(record["pieces"])} piece(s)',
          flush=True,
      )
  if PPO in args.algos:
    if env_steps is None:
      config = our_config(env, DISCO, args.seeds[0], args)
      env_steps = config.num_steps * config.env_steps_per_step
    run_ppo(args, env, env_steps)


def run_ppo(args: argparse.Namespace, env: str, env_steps: int) -> None:
  """rejax's PPO on `env` for all seeds at once (skipped once done)."""
  import unseen_envs  # pylint: disable=g-import-not-at-top

  name = run_name(env, PPO)
  settings = unseen_envs.ppo_settings(env, env_steps, args.seeds, None)
  if pieces.load_record(args.out, name, settings) is not None:
    print(f'{name}: done before', flush=True)
    return
  key = unseen_envs.RunKey(env, PPO)
  record = unseen_envs.run_ppo(
      key,
      env_steps,
      args.seeds,
      None,
      not args.no_progress,
      checkpoint_dir=args.out / pieces.CHECKPOINTS_DIR / name,
      handle_interrupts=True,
  )
  record |= dict(name=name, settings=pieces.jsonable(settings))
  pieces.write_json(pieces.record_path(args.out, name), record)
  print(f'{name}: done, {record["wall_seconds"]:.0f} s', flush=True)


# ----------------------------------------------------------------------------
# The report.


def load_records(
    out: pathlib.Path, include_partial: bool = False
) -> list[dict[str, Any]]:
  """Finished runs' records (and stopped runs' so far, if asked)."""
  wanted = (pieces.DONE, pieces.PARTIAL) if include_partial else (pieces.DONE,)
  records = {}
  for path in sorted((out / pieces.RUNS_DIR).glob('*.json')):
    record = json.loads(path.read_text())
    name = path.name.removesuffix('.json').removesuffix('.partial')
    if record.get('status') in wanted:
      if records.get(name, {}).get('status') != pieces.DONE:
        records[name] = record
  return list(records.values())


def per_seed_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """One row per environment, algorithm and seed, with its curves."""
  rows = []
  for record in records:
    if 'logs' in record:  # Ours.
      config = record['settings']['config']
      for seed in record['seeds']:
        col = pieces.seed_columns(record, seed)
        ev = np.isfinite(col['eval_return'])
        if not ev.any():  # A stopped run before its first evaluation.
          continue
        rows.append(
            dict(
                env=config['env'],
                algo=config['rule'],
                status=record['status'],
                seed=seed,
                learning_rate=config['agent_learning_rate'],
                # At the last evaluation (a stopped run's last row may be
                # later).
                final_return=float(col['eval_return'][ev][-1]),
                env_steps=int(col['env_steps'][ev][-1]),
                learner_updates=int(col['learner_steps'][ev][-1]),
                wall_seconds_per_seed=round(
                    record['wall_seconds'] / len(record['seeds']), 1
                ),
                pieces=len(record['pieces']),
                eval_curve=(
                    col['env_steps'][ev],
                    col['learner_steps'][ev],
                    col['eval_return'][ev],
                ),
                entropy_curve=(
                    col['learner_steps'],
                    col.get('logs/entropy', np.full(ev.shape, np.nan)),
                ),
            )
        )
    else:  # rejax's PPO.
      for s in record['seeds']:
        points = [c for c in record['curves'] if c['seed'] == s['seed']]
        rows.append(
            dict(
                env=record['env'],
                algo=PPO,
                status=record['status'],
                seed=s['seed'],
                learning_rate=None,
                final_return=s['final_return'],
                env_steps=s['env_steps'],
                learner_updates=None,
                wall_seconds_per_seed=round(
                    record['wall_seconds'] / len(record['seeds']), 1
                ),
                pieces=1,
                eval_curve=(
                    np.array([c['env_steps'] for c in points], float),
                    None,
                    np.array([c['value'] for c in points], float),
                ),
                entropy_curve=None,
            )
        )
  return rows


def at_common_budget(
    group: list[dict[str, Any]],
) -> tuple[int, np.ndarray, int | None]:
  """Each seed's return at the last evaluation every seed reached.

  A stopped run's seeds (a partial record) end before finished ones; an IQM
  pools returns at one budget. Seeds that went further give their last
  evaluation at or before it.

  Args:
    group: `per_seed_rows` rows of one environment and algorithm.

  Returns:
    The budget (env steps), the returns [seeds] there, and the learner
    updates there (None for rejax's PPO).
  """
  budget = min(r['env_steps'] for r in group)
  values, updates = [], []
  for r in group:
    if r['env_steps'] == budget:
      values.append(r['final_return'])
      updates.append(r['learner_updates'])
      continue
    steps, learner, returns = r['eval_curve']
    i = np.flatnonzero(np.asarray(steps) <= budget)[-1]
    values.append(float(returns[i]))
    updates.append(None if learner is None else int(learner[i]))
  return budget, np.array(values), updates[0]


def summary_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Per environment and algorithm: IQM over seeds and its 95% interval.

  At the budget every seed reached (`at_common_budget`).
  """
  out = []
  for env in dict.fromkeys(r['env'] for r in rows):
    for algo in ALGOS:
      group = [r for r in rows if r['env'] == env and r['algo'] == algo]
      if not group:
        continue
      budget, values, updates = at_common_budget(group)
      low, high = metrics.bootstrap_interval(values)
      out.append(
          dict(
              env=env,
              algo=algo,
              seeds=len(group),
              iqm=metrics.interquartile_mean(values),
              ci_low=low,
              ci_high=high,
              mean=float(np.nanmean(values)),
              per_seed=' '.join(f'{v:.2f}' for v in values),
              env_steps=budget,
              learner_updates=updates,
              wall_seconds_per_seed=round(
                  float(np.mean([r['wall_seconds_per_seed'] for r in group])),
                  1,
              ),
          )
      )
  return out


def markdown(summary: list[dict[str, Any]]) -> str:
  lines = [
      (
          '| environment | algorithm | env steps / seed | updates | IQM [95%'
          ' CI] | per seed |'
      ),
      '|---|---|---|---|---|---|',
  ]
  for row in summary:
    updates = row['learner_updates'] if row['learner_updates'] else ''
    lines.append(
        f"| {short(row['env'])} | {row['algo']} | {row['env_steps']:,} |"
        f" {updates} | {row['iqm']:.2f} [{row['ci_low']:.2f},"
        f" {row['ci_high']:.2f}] | {row['per_seed']} |"
    )
  return '\n'.join(lines)


def write_csv(path: pathlib.Path, rows: list[dict[str, Any]]) -> None:
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
      writer.writerow({
          k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()
      })


def plot(rows: list[dict[str, Any]], path: pathlib.Path) -> Any:
  """Writes every seed's curves to `path`; returns the figure, closed.

  One colour per algorithm, one line style per seed number. Closed, so a
  process that reports many times does not keep every figure open.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  envs = list(dict.fromkeys(r['env'] for r in rows))
  fig, axes = plt.subplots(
      3, len(envs), figsize=(4.2 * len(envs), 10), squeeze=False
  )
  for j, env in enumerate(envs):
    top, mid, bottom = axes[:, j]
    for r in rows:
      if r['env'] != env:
        continue
      style = dict(
          color=f'C{ALGOS.index(r["algo"])}',
          ls=SEED_LINESTYLES[r['seed'] % len(SEED_LINESTYLES)],
          alpha=0.8,
          lw=1,
          label=f'{r["algo"]} s{r["seed"]}',
      )
      steps, updates, returns = r['eval_curve']
      top.plot(steps, returns, **style)
      if updates is not None:
        mid.plot(updates, returns, **style)
        x, entropy = r['entropy_curve']
        bottom.plot(x, entropy, **style)
    top.set(title=short(env), xlabel='environment steps per seed')
    mid.set(xlabel='learner updates')
    bottom.set(xlabel='learner updates')
    for ax in (top, mid, bottom):
      ax.grid(alpha=0.3)
    top.legend(fontsize=6)
  axes[0, 0].set_ylabel('evaluation return')
  axes[1, 0].set_ylabel('evaluation return (ours)')
  axes[2, 0].set_ylabel('policy entropy, nats (ours)')
  fig.suptitle('Disco103, actor-critic and rejax PPO: every seed', fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return fig


def curve_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """curves.csv's rows: every evaluation point, and our entropy per chunk."""
  curves = []
  for r in rows:
    steps, updates, returns = r['eval_curve']
    for i, (x, y) in enumerate(zip(steps, returns)):
      curves.append(
          dict(
              env=r['env'], algo=r['algo'], seed=r['seed'], kind='eval',
              env_steps=int(x),
              learner_updates='' if updates is None else int(updates[i]),
              value=float(y),
          )
      )  # fmt: skip
    if r['entropy_curve'] is not None:
      for x, y in zip(*r['entropy_curve']):
        if np.isfinite(y):
          curves.append(
              dict(
                  env=r['env'], algo=r['algo'], seed=r['seed'],
                  kind='entropy', env_steps='', learner_updates=int(x),
                  value=float(y),
              )
          )  # fmt: skip
  return curves


def report(out: pathlib.Path, include_partial: bool = False) -> None:
  rows = per_seed_rows(load_records(out, include_partial))
  if not rows:
    print(f'no finished runs in {out}')
    return
  plain = [
      {k: v for k, v in r.items() if not k.endswith('_curve')} for r in rows
  ]
  write_csv(out / 'results.csv', plain)
  summary = summary_rows(rows)
  write_csv(out / 'summary.csv', summary)
  curves = curve_rows(rows)
  write_csv(out / 'curves.csv', curves)
  plot(rows, out / 'curves.png')
  print(markdown(summary))
  print(f'wrote results.csv, summary.csv, curves.csv and curves.png in {out}')


def add_run_flags(
    parser: argparse.ArgumentParser, envs: tuple[str, ...] = ENVS
) -> None:
  """The flags every per-environment benchmark command shares."""
  parser.add_argument('--out', type=pathlib.Path, required=True)
  parser.add_argument('--env', choices=envs, default=None)
  parser.add_argument('--algos', nargs='+', choices=ALGOS, default=ALGOS)
  parser.add_argument('--seeds', nargs='+', type=int, default=SEEDS)
  parser.add_argument(
      '--seeds-together',
      action='store_true',
      help='train the seeds as one vmapped run (for accelerators)',
  )
  parser.add_argument('--report', action='store_true')
  parser.add_argument(
      '--include-partial',
      action='store_true',
      help=(
          'report stopped runs too, up to their last checkpoint (their'
          ' last log row, run without checkpoints); the summary takes each'
          " seed at the last evaluation all of an algorithm's seeds reached"
      ),
  )
  parser.add_argument('--no-progress', action='store_true')


def run_command(parser, argv, run_env_fn, report_fn) -> int:
  """Parses, runs `--env`'s runs (`run_env_fn`), then `--report`."""
  args = parser.parse_args(argv)
  if args.env is None and not args.report:
    parser.error('give --env (one environment per command) or --report')
  try:
    if args.env is not None:
      run_env_fn(args)
  except pieces.PiecesError as e:
    parser.exit(1, f'{parser.prog}: error: {e}\n')
  except KeyboardInterrupt as e:
    # Ctrl-C or SIGTERM: the trainer checkpointed (or kept its rows) first.
    signum = getattr(e, 'signum', signal.SIGINT)
    print(
        f'{parser.prog}: stopped by {signal.Signals(signum).name}; what ran'
        f' is kept in {args.out} (checkpoint and partial record): the same'
        ' command goes on from there',
        file=sys.stderr,
    )
    return 128 + signum
  if args.report:
    report_fn(args.out, args.include_partial)
  return 0


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  add_run_flags(parser)
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
  return run_command(parser, argv, run_env, report)


if __name__ == '__main__':
  sys.exit(main())
