"""Does Disco103 beat actor-critic and rejax's PPO on environments it never saw?

One command runs, at equal environment steps per seed:

1. the step size chosen as the paper does: on `--selection-env`
   (Breakout-MinAtar) disco and actor_critic train `--seeds` seeds at each
   of `--learning-rates` and keep the best mean final return
   (`disco.studies.selection`); those runs are also that environment's rows,
   so those are *selected on* (†);
2. disco and actor_critic at their chosen rates on every `--envs`, the
   seeds vmapped in one `disco.train.run_train` call of the `paper` preset
   (290 env steps and one learner step per iteration);
3. rejax's PPO (`disco.studies.ppo_runs`) on every `--envs`.

Budgets: `--env-steps` (72,500) per seed, `--craftax-env-steps` (29,000) on
Craftax; PPO the nearest whole PPO iterations. Final return, alike for all:
the mean return of the last evaluation's episodes, actions sampled (ours:
one episode in each of 16 evaluation environments, evaluated 5 times over
the run; PPO: rejax's evaluation). Ours also give the training return of
the last 10% of iterations.

`--out` gets each run's record as soon as it ends: the same command skips
the runs done (`disco.studies.comparison`); then results.csv, curves.csv,
selection.csv, curves.png and the tables (`--readme-table`: them again).

  python benchmarks/unseen_envs.py --out runs/unseen_envs
  python benchmarks/unseen_envs.py --out runs/unseen_envs --readme-table
  python benchmarks/unseen_envs.py --out DIR --envs gymnax:DeepSea-bsuite \\
      --algos disco ppo --seeds 2

Needs gymnax, matplotlib, Disco103's weights (e.g. `$DISCO_WEIGHTS`); rejax
for ppo; craftax for Craftax.
"""

import argparse
from collections.abc import Sequence
import pathlib
import sys
import time
from typing import Any

from disco import plotting
from disco import train
from disco import weights
from disco.environments import registry
from disco.studies import comparison
from disco.studies import final_tables
from disco.studies import plots
from disco.studies import ppo
from disco.studies import ppo_runs
from disco.studies import records
from disco.studies import runs
from disco.studies import selection as selection_lib
from disco.studies import tables

PROG = 'unseen_envs.py'
RESULTS_CSV, SELECTION_CSV = 'results.csv', 'selection.csv'
DISCO, ACTOR_CRITIC, PPO = 'disco', 'actor_critic', 'ppo'
RULES, ALGOS = (DISCO, ACTOR_CRITIC), (DISCO, ACTOR_CRITIC, PPO)
SELECTION_ENV = 'gymnax:Breakout-MinAtar'
DEFAULT_ENVS = (
    SELECTION_ENV,
    'gymnax:SpaceInvaders-MinAtar',
    'gymnax:Asterix-MinAtar',
    'gymnax:DeepSea-bsuite',
    'craftax:Craftax-Classic-Symbolic-v1',
)
# Our evaluation: at iteration 0, after every 1/NUM_EVALS of the iterations
# and at the end, one episode per evaluation environment, cut at MinAtar's
# time limit; one log row (a training-curve point) per chunk.
NUM_EVALS, EVAL_ENVS, EVAL_MAX_STEPS, STEPS_PER_CHUNK = 5, 16, 1000, 5
NOTE = (
    "Final return: mean return of the last evaluation's episodes, actions"
    " sampled from the policy (disco, actor_critic: the trainer's evaluation,"
    f' one episode per evaluation environment, by default {EVAL_ENVS}; ppo:'
    f" rejax's evaluation, by default {ppo_runs.EVAL_EPISODES} episodes,"
    f' {ppo_runs.CRAFTAX_EVAL_EPISODES} on Craftax; results.csv counts'
    ' them). Training return: the training episodes that ended in the last'
    ' 10% of iterations. ± std over seeds (ddof=1).'
)
RunKey = comparison.RunKey


def train_config(
    env: str, rule: str, learning_rate: float, env_steps: int, overrides=None
):
  """The `paper` preset for a run at `env_steps` per seed, `overrides` over.

  `num_steps`, `eval_every` and `steps_per_chunk` among `overrides` replace
  the ones derived from the budget.
  """
  overrides = dict(overrides or {})
  unknown = set(overrides) - set(train.TrainConfig.field_names())
  if unknown:
    raise ValueError(
        f'--config: unknown TrainConfig field(s) {sorted(unknown)}'
    )
  schedule = {
      k: overrides.pop(k)
      for k in ('num_steps', 'eval_every', 'steps_per_chunk')
      if k in overrides
  }
  fields = dict(rule=rule, env=env, agent_learning_rate=learning_rate, seed=0)
  fields |= dict(eval_envs=EVAL_ENVS, eval_max_steps=EVAL_MAX_STEPS)
  config = train.preset('paper', **(fields | overrides))
  num_steps = schedule.get('num_steps', config.num_steps_for(env_steps))
  every = schedule.get('eval_every', max(1, num_steps // NUM_EVALS))
  chunk = schedule.get('steps_per_chunk', min(STEPS_PER_CHUNK, every or 1))
  return config.replace(
      num_steps=num_steps, eval_every=every, steps_per_chunk=chunk
  )


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=PROG, description=__doc__.split('\n')[0]
  )
  number, pairs = runs.positive, dict(nargs='+', type=runs.name_value)
  for flag, settings in {
      '--out': dict(
          type=pathlib.Path, default=pathlib.Path('runs/unseen_envs')
      ),
      '--envs': dict(nargs='+', default=list(DEFAULT_ENVS), metavar='ENV'),
      '--algos': dict(nargs='+', choices=ALGOS, default=list(ALGOS)),
      '--seeds': dict(type=number(int), default=3, help='seeds 0 .. N-1'),
      '--learning-rates': dict(
          nargs='+', type=number(float), default=[1e-4, 3e-4, 5e-4]
      ),
      '--selection-env': dict(default=SELECTION_ENV),
      '--env-steps': dict(type=number(int), default=72_500, help='not Craftax'),
      '--craftax-env-steps': dict(type=number(int), default=29_000),
      '--config': pairs | dict(default=[], help='TrainConfig fields, as JSON'),
      '--ppo-config': pairs | dict(default=[], help='rejax PPO settings'),
      '--readme-table': dict(action='store_true', help='tables, no runs'),
      '--compilation-cache': dict(type=pathlib.Path),
      '--quiet': dict(action='store_true', help='no progress bars'),
  }.items():
    parser.add_argument(flag, **settings)
  return parser


def _check_args(parser: argparse.ArgumentParser, args) -> None:
  for flag in ('envs', 'algos', 'learning_rates'):
    values = getattr(args, flag)
    if len(set(values)) != len(values):
      parser.error(f'--{flag.replace("_", "-")} lists a value twice')
  for env in [args.selection_env] + list(args.envs):
    if not registry.is_jittable_name(env):
      parser.error(
          f'unknown or non-jittable environment {env!r} (e.g.'
          ' gymnax:Breakout-MinAtar, craftax:Craftax-Classic-Symbolic-v1)'
      )
  for env in args.envs if PPO in args.algos else ():
    if not env.startswith(('gymnax:', 'craftax:')):
      parser.error(f'ppo runs gymnax and craftax environments, not {env!r}')
  if args.out.exists() and not args.out.is_dir():
    parser.error(f'--out exists and is not a directory: {args.out}')


def _comparison(args) -> comparison.Comparison:
  """The command's runs, their configs and budgets."""

  def budget(env: str) -> int:
    craftax = ppo_runs.is_craftax(env)
    return args.craftax_env_steps if craftax else args.env_steps

  def config(key: RunKey):
    rate, overrides = key.learning_rate, dict(args.config)
    return train_config(key.env, key.algo, rate, budget(key.env), overrides)

  def first_learning_step(config) -> int:
    return config.warmup_steps

  return comparison.Comparison(
      out=args.out,
      seeds=list(range(args.seeds)),
      config_fn=config,
      budget_fn=budget,
      first_learning_step_fn=first_learning_step,
      ppo_overrides=dict(args.ppo_config),
      show_progress=not args.quiet,
  )


def _prepare(args, study, rules: list[str], select: bool) -> None:
  """Fails early: environments, configs, rejax, weights, old records."""
  plotting.require_matplotlib()
  envs = ([args.selection_env] if select else []) + list(args.envs)
  for env in dict.fromkeys(envs):
    registry.make_environment(env, batch_size=1)
    for rule in rules:
      study.config_fn(RunKey(env, rule, args.learning_rates[0]))
  if PPO in args.algos:
    try:
      ppo.require_rejax()
    except ModuleNotFoundError as e:
      raise ImportError(f'{e}; or leave ppo out: --algos {" ".join(RULES)}')
  if args.compilation_cache is not None:
    import jax  # pylint: disable=g-import-not-at-top

    jax.config.update('jax_compilation_cache_dir', str(args.compilation_cache))
  if DISCO in rules:
    study.rule_params[DISCO] = weights.load_disco103()
  known = [RunKey(e, PPO) for e in args.envs if PPO in args.algos]
  for rule in rules if select else ():
    known += [RunKey(args.selection_env, rule, r) for r in args.learning_rates]
  study.check(known)


def _tables(out: pathlib.Path, selection: Sequence[dict[str, Any]]) -> str:
  """The selection table (if any) over the results table, as printed."""
  rows = tables.read_csv(out / RESULTS_CSV, final_tables.RESULT_PARSERS)
  table = final_tables.markdown(rows, selection, [NOTE])
  if not selection:
    return table
  return f'{selection_lib.markdown(selection)}\n\n{table}'


def _readme_table(out: pathlib.Path) -> int:
  if not (out / RESULTS_CSV).is_file():
    return _fail(f'no {out / RESULTS_CSV}; run the benchmark first')
  try:
    selection = []
    if (out / SELECTION_CSV).is_file():
      selection = tables.read_csv(out / SELECTION_CSV, selection_lib.PARSERS)
    print(_tables(out, selection))
  except (ValueError, KeyError) as e:
    return _fail(f'cannot read the results: {e}')
  return 0


def _fail(message: str) -> int:
  print(f'{PROG}: error: {message}', file=sys.stderr)
  return 1


def main(argv: Sequence[str] | None = None) -> int:
  """Runs the benchmark; returns 0, 1 on a setup error, 130 if stopped."""
  parser = _parser()
  args = parser.parse_args(argv)
  out = args.out
  if args.readme_table:
    return _readme_table(out)
  _check_args(parser, args)
  start = time.perf_counter()
  rules = [a for a in args.algos if a in RULES]
  # Selection: to pick among several rates, and anyway when the selection
  # environment is one of the benchmark's (it is its row).
  many = len(args.learning_rates) > 1
  select = bool(rules) and (many or args.selection_env in args.envs)
  study, selection = _comparison(args), []
  chosen = {rule: args.learning_rates[0] for rule in rules}
  keys = [RunKey(e, a, chosen.get(a)) for e in args.envs for a in args.algos]
  try:
    _prepare(args, study, rules, select)
    out.mkdir(parents=True, exist_ok=True)
    if select:
      selection = study.select(args.selection_env, rules, args.learning_rates)
      tables.write_csv(out / SELECTION_CSV, selection, selection_lib.COLUMNS)
      print(f'\n{selection_lib.markdown(selection)}\n')
      chosen = selection_lib.chosen_rates(selection)
      keys = [RunKey(k.env, k.algo, chosen.get(k.algo)) for k in keys]

    def selected_on(key: RunKey) -> bool:
      on = many and select and key.env == args.selection_env
      return on and key.algo in RULES

    rows, curves = study.rows(keys, selected_on)
  except (ValueError, ImportError, OSError, records.RecordError) as e:
    return _fail(str(e))
  except KeyboardInterrupt:
    print(
        f'{PROG}: interrupted; the finished runs are in'
        f' {out / records.RUNS_DIR} and a rerun of the same command skips them',
        file=sys.stderr,
    )
    return 130
  columns = final_tables.RESULT_COLUMNS
  tables.write_csv(out / RESULTS_CSV, rows, columns, blank_nan=True)
  tables.write_csv(out / 'curves.csv', curves, final_tables.CURVE_COLUMNS)
  plotted = [study.records[key] for key in keys]
  plots.band_curves(plotted, out / 'curves.png', ALGOS)
  print(f'\n{_tables(out, selection)}\n')
  print(
      'Run wall times (startup: environment, compiling and the first'
      ' evaluation; the wall time less the iterations at the steady rate):'
  )
  for line in study.timings:
    print(f'  {line}')
  names = [RESULTS_CSV] + ([SELECTION_CSV] if selection else [])
  for name in names + ['curves.csv', 'curves.png']:
    print(f'Wrote {out / name}')
  print(f'Total wall time of this command: {time.perf_counter() - start:.0f} s')
  return 0


if __name__ == '__main__':
  sys.exit(main())
