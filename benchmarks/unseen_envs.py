"""Disco103 against actor-critic on gymnax environments it was not trained on.

For every environment and update rule, trains agents with
`disco.eval.run_eval_seeds` on the fast path (all seeds `vmap`ped in one
program), each run with its own progress bar, and writes into `--out`:

  results.csv  one row per environment, rule and seed: the final average
               return, the episodes behind it, environment steps, the run's
               wall time and the settings.
  curves.csv   one row per environment, rule, seed and iteration: env steps,
               average return, total return and episodes of the iteration
               (unsmoothed; empty average where no episode ended).
  curves.png   one panel per environment: for each rule the mean over seeds
               of the smoothed curves, shaded between the seeds' min and max,
               against environment steps.

and prints a markdown table of the final average returns (mean, standard
deviation, min and max over seeds). `--readme-table` prints that table again
from an existing `results.csv` without training.

Final average return of a run: the summed returns of all episodes that ended
during the last 10% of its iterations, divided by their number (iterations
without a finished episode add nothing to either sum). The curves in the PNG
use the same episode-weighted ratio over a moving window of iterations. Both
are computed by `disco.metrics`.

Defaults and the pilots behind them (2-core CPU shared with other jobs, load
average 2.5-5.4, so the timings are pessimistic; 3 seeds vmapped; batch 64,
rollouts of 29 steps):

* `--replay-ratio 2`: 32 environments act, 928 env steps per iteration (the
  library's default of 32 leaves 2 environments and 58 steps per iteration,
  far too few for MinAtar). Each trajectory is sampled about twice.
* Seconds per iteration, for all 3 seeds together, in steady state:

    | environment           | disco     | actor_critic |
    |-----------------------|-----------|--------------|
    | Breakout-MinAtar      | 0.84-0.92 | 0.21         |
    | SpaceInvaders-MinAtar | 1.02      | 0.21         |
    | DeepSea-bsuite        | 0.66      | 0.20         |

  Start-up of a run (environment, weights, initialisation, compilation of
  the acting and learning programs): 32-39 s for disco and 18-24 s for
  actor-critic, after ~5 s of imports.
* `--steps 1300` (1.2M env steps per seed). On a quiet machine a disco
  run of 3 seeds took 0.51 s per iteration on Breakout-MinAtar and an
  actor-critic run 0.12 s; with SpaceInvaders ~15% slower and DeepSea ~25%
  faster (pilot ratios) and ~30 s of start-up per run, the six runs take
  about 45 min together, inside the one-hour budget (measured: 38.5 min).
  Disco103 needs many learner steps before it moves (below), so the budget
  goes to iterations.
* `--learning-rate disco=1e-2 actor_critic=1e-3`: each rule at the step
  size it is known to learn with in this harness. 1e-2 is the reference
  eval colab's value, at which Disco103 learns Catch; it sits at maximal
  policy entropy for ~350 learner steps and then learns within ~150 (also
  on bsuite Catch through the gymnax adapter: random-level returns until
  iteration ~400, 1.0 from ~550). At 1e-3 that first phase is longer still
  (Breakout, 400 iterations: no change at 1e-2 or 1e-3). Actor-critic
  collapses at 1e-2 (Breakout, 150 iterations, 139k env steps, final return
  per seed 0.0 / 0.0 / 2.64) and learns at 1e-3 (1.52 / 0.62 / 1.58).
* `--seeds 3`.

Usage:

  python benchmarks/unseen_envs.py                  # the full run, ~40 min
  python benchmarks/unseen_envs.py --readme-table   # table from results.csv
  python benchmarks/unseen_envs.py --envs gymnax:Asterix-MinAtar --seeds 2

Disco103 is loaded by `disco.weights.load_disco103` (e.g. from
`$DISCO_WEIGHTS`). Needs gymnax (`pip install -e ".[envs]"`) and matplotlib.
"""

import argparse
from collections.abc import Mapping, Sequence
import csv
import dataclasses
import math
import pathlib
import sys
import time
from typing import Any

import numpy as np

from disco import eval as eval_lib
from disco import metrics
from disco import plotting
from disco import types
from disco import weights
from disco.environments import registry

_PROG = 'unseen_envs.py'

DEFAULT_ENVS = (
    'gymnax:Breakout-MinAtar',
    'gymnax:SpaceInvaders-MinAtar',
    'gymnax:DeepSea-bsuite',
)
DEFAULT_RULES = (eval_lib.DISCO, eval_lib.ACTOR_CRITIC)
DEFAULT_SEEDS = 3
DEFAULT_STEPS = 1300
DEFAULT_BATCH_SIZE = 64
DEFAULT_REPLAY_RATIO = 2
# Each rule at the step size it learns with here (see the module docstring).
DEFAULT_LEARNING_RATES = {eval_lib.DISCO: 1e-2, eval_lib.ACTOR_CRITIC: 1e-3}
DEFAULT_SMOOTHING = 25

RESULTS_CSV = 'results.csv'
CURVES_CSV = 'curves.csv'
CURVES_PNG = 'curves.png'

_RESULT_COLUMNS = (
    'env',
    'rule',
    'seed',
    'final_avg_return',
    'final_episodes',
    'env_steps',
    'iterations',
    'run_wall_seconds',
    'batch_size',
    'replay_ratio',
    'learning_rate',
)
_CURVE_COLUMNS = (
    'env',
    'rule',
    'seed',
    'iteration',
    'env_steps',
    'avg_return',
    'total_return',
    'num_episodes',
)


@dataclasses.dataclass(frozen=True)
class Run:
  """All seeds of one environment and rule, trained together.

  Attributes:
    env: the environment's name, e.g. 'gymnax:Breakout-MinAtar'.
    config: the run's settings (its `seed` field is unused).
    histories: one learning curve per seed.
    wall_seconds: wall time of the whole run (all seeds), start-up and
      compilation included.
  """

  env: str
  config: eval_lib.EvalConfig
  histories: tuple[eval_lib.EvalHistory, ...]
  wall_seconds: float


def run_benchmark(
    envs: Sequence[str],
    rules: Sequence[str],
    seeds: Sequence[int],
    base_config: eval_lib.EvalConfig,
    disco_params: types.MetaParams | None = None,
    show_progress: bool = True,
    learning_rates: Mapping[str, float] | None = None,
) -> list[Run]:
  """Trains every rule on every environment, all seeds of a pair together.

  Args:
    envs: environment names.
    rules: update rules.
    seeds: the seeds of every (environment, rule) pair.
    base_config: the settings shared by all runs (`env` and `rule` are
      replaced; it should have `fast=True`).
    disco_params: update-rule parameters for the 'disco' rule (None: as
      `disco.eval.run_eval_seeds` loads them, i.e. Disco103).
    show_progress: draw a tqdm bar per run.
    learning_rates: the agent's step size per rule (rules not listed keep
      `base_config.agent_learning_rate`).

  Returns:
    One `Run` per environment and rule, environments outermost.
  """
  runs = []
  for env in envs:
    for rule in rules:
      config = dataclasses.replace(
          base_config,
          env=env,
          rule=rule,
          agent_learning_rate=(learning_rates or {}).get(
              rule, base_config.agent_learning_rate
          ),
      )
      label = f'{_short(env)} {rule} ({len(seeds)} seeds)'
      start = time.perf_counter()
      with eval_lib.ProgressBar(
          config.num_steps, label, enabled=show_progress
      ) as progress:
        histories = eval_lib.run_eval_seeds(
            config,
            seeds,
            update_rule_params=disco_params if rule == eval_lib.DISCO else None,
            progress_fn=progress,
        )
      runs.append(
          Run(
              env=env,
              config=config,
              histories=tuple(histories),
              wall_seconds=time.perf_counter() - start,
          )
      )
  return runs


def result_rows(runs: Sequence[Run]) -> list[dict[str, Any]]:
  """One row of `results.csv` per run and seed."""
  rows = []
  for run in runs:
    for history in run.histories:
      final, episodes = metrics.final_average_return(
          history.total_returns, history.num_episodes
      )
      rows.append(
          dict(
              env=run.env,
              rule=run.config.rule,
              seed=history.seed,
              final_avg_return=final,
              final_episodes=int(episodes),
              env_steps=int(history.steps[-1]),
              iterations=len(history),
              run_wall_seconds=round(run.wall_seconds, 1),
              batch_size=run.config.learner_batch_size,
              replay_ratio=run.config.replay_ratio,
              learning_rate=run.config.agent_learning_rate,
          )
      )
  return rows


def write_results_csv(
    rows: Sequence[Mapping[str, Any]], path: pathlib.Path
) -> pathlib.Path:
  """Writes `result_rows` to `path` (NaN as an empty field)."""
  with path.open('w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(_RESULT_COLUMNS)
    for row in rows:
      writer.writerow([_csv_value(row[k]) for k in _RESULT_COLUMNS])
  return path


def read_results_csv(path: pathlib.Path) -> list[dict[str, Any]]:
  """Reads a `results.csv` back into rows like `result_rows`'."""
  with path.open(newline='') as f:
    rows = list(csv.DictReader(f))
  parsed = []
  for row in rows:
    parsed.append(
        dict(
            env=row['env'],
            rule=row['rule'],
            seed=int(row['seed']),
            final_avg_return=_float(row['final_avg_return']),
            final_episodes=int(row['final_episodes']),
            env_steps=int(row['env_steps']),
            iterations=int(row['iterations']),
            run_wall_seconds=float(row['run_wall_seconds']),
            batch_size=int(row['batch_size']),
            replay_ratio=int(row['replay_ratio']),
            learning_rate=float(row['learning_rate']),
        )
    )
  return parsed


def write_curves_csv(runs: Sequence[Run], path: pathlib.Path) -> pathlib.Path:
  """Writes every iteration of every run and seed, unsmoothed."""
  with path.open('w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(_CURVE_COLUMNS)
    for run in runs:
      for history in run.histories:
        for i in range(len(history)):
          writer.writerow([
              run.env,
              run.config.rule,
              history.seed,
              i + 1,
              int(history.steps[i]),
              _csv_value(float(history.avg_returns[i])),
              _csv_value(float(history.total_returns[i])),
              int(history.num_episodes[i]),
          ])
  return path


def plot_curves(
    runs: Sequence[Run], path: pathlib.Path, window: int
) -> pathlib.Path:
  """Draws one panel per environment, one line and band per rule.

  Args:
    runs: the runs.
    path: the PNG file to write.
    window: iterations of the moving window (`metrics.smoothed_returns`).

  Returns:
    The path written.
  """
  plotting.require_matplotlib()
  # pylint: disable=g-import-not-at-top
  from matplotlib import figure as mpl_figure
  from matplotlib.backends import backend_agg
  # pylint: enable=g-import-not-at-top

  envs = list(dict.fromkeys(run.env for run in runs))
  rules = list(dict.fromkeys(run.config.rule for run in runs))
  fig = mpl_figure.Figure(figsize=(4.8 * len(envs), 4.0))
  backend_agg.FigureCanvasAgg(fig)
  axes = fig.subplots(1, len(envs), squeeze=False)[0]
  for ax, env in zip(axes, envs, strict=True):
    for run in runs:
      if run.env != env:
        continue
      colour = f'C{rules.index(run.config.rule)}'
      length = min(len(h) for h in run.histories)
      curves = np.stack([
          metrics.smoothed_returns(
              h.total_returns[:length], h.num_episodes[:length], window
          )
          for h in run.histories
      ])
      steps = run.histories[0].steps[:length]
      mean, low, high = metrics.seed_band(curves)
      num_seeds = len(run.histories)
      ax.plot(
          steps,
          mean,
          color=colour,
          lw=1.6,
          label=f'{run.config.rule} (mean of {num_seeds})',
      )
      if num_seeds > 1:
        ax.fill_between(steps, low, high, color=colour, alpha=0.2, lw=0)
    ax.set_title(_short(env))
    ax.set_xlabel('environment steps (per seed)')
    ax.grid(alpha=0.3)
    ax.legend(loc='best', fontsize='small')
  axes[0].set_ylabel(f'average return ({window}-iteration window)')
  fig.suptitle('Mean over seeds; shaded: min to max over seeds', fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  return path


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> str:
  """The final average returns as a markdown table, one line per pair.

  Args:
    rows: rows of `result_rows` (or `read_results_csv`).

  Returns:
    The table, followed by a line with the runs' total wall time.
  """
  groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
  for row in rows:
    groups.setdefault((row['env'], row['rule']), []).append(row)
  lines = [
      (
          '| environment | rule | learning rate | final average return:'
          ' mean ± std [min, max] | seeds | env steps per seed | wall time'
          ' (all seeds) |'
      ),
      '|---|---|---|---|---|---|---|',
  ]
  total_seconds = 0.0
  for (env, rule), group in groups.items():
    finals = metrics.summarize_seeds([r['final_avg_return'] for r in group])
    if finals.num_finite:
      std = f'{finals.std:.3g}' if finals.num_finite > 1 else 'n/a'
      summary = (
          f'{finals.mean:.3g} ± {std} [{finals.min:.3g}, {finals.max:.3g}]'
      )
    else:
      summary = 'no episode ended'
    if finals.num_finite < finals.num_seeds:
      missing = finals.num_seeds - finals.num_finite
      summary += f' ({missing} seed(s) without episodes)'
    steps = sorted({r['env_steps'] for r in group})
    wall = float(group[0]['run_wall_seconds'])
    total_seconds += wall
    lines.append(
        f'| {_short(env)} | {rule} | {float(group[0]["learning_rate"]):g} |'
        f' {summary} | {len(group)} |'
        f' {", ".join(f"{s:,}" for s in steps)} | {wall / 60:.1f} min |'
    )
  first = rows[0] if rows else {}
  if first:
    lines.append('')
    lines.append(
        'Final average return: episode-weighted over the last'
        f' {metrics.FINAL_FRACTION:.0%} of {first["iterations"]} iterations;'
        f' std over seeds (ddof=1). Batch {first["batch_size"]}, replay ratio'
        f' {first["replay_ratio"]}. Runs: {total_seconds / 60:.1f} min wall in'
        ' total.'
    )
  return '\n'.join(lines)


def _short(env: str) -> str:
  return env.split(':', 1)[-1]


def _csv_value(value: Any) -> str:
  if isinstance(value, float):
    return '' if math.isnan(value) else repr(value)
  return str(value)


def _float(text: str) -> float:
  return float(text) if text else math.nan


def _number(kind: type[Any], minimum: float, strict: bool = False):
  """An argparse type: `kind` values >= `minimum` (> if `strict`)."""

  def parse(text: str):
    try:
      value = kind(text)
    except ValueError:
      raise argparse.ArgumentTypeError(
          f'not a valid {kind.__name__}: {text!r}'
      ) from None
    if value < minimum or (strict and value == minimum):
      relation = '>' if strict else '>='
      raise argparse.ArgumentTypeError(
          f'must be {relation} {minimum}, got {value}'
      )
    return value

  return parse


def _learning_rate(text: str) -> tuple[str | None, float]:
  """An argparse type: `LR` (every rule) or `RULE=LR`."""
  rule, _, value = text.rpartition('=')
  if rule and rule not in eval_lib.RULES:
    raise argparse.ArgumentTypeError(
        f'unknown rule {rule!r} in {text!r}; choose from {eval_lib.RULES}'
    )
  return (rule or None), _number(float, 0.0, strict=True)(value)


def learning_rates_by_rule(
    entries: Sequence[tuple[str | None, float]], rules: Sequence[str]
) -> dict[str, float]:
  """Each rule's step size from `--learning-rate` entries.

  A bare `LR` applies to every rule; `RULE=LR` entries then override it.
  Rules left without a step size get `DEFAULT_LEARNING_RATES`' value, or
  the library's default.
  """
  rates = {
      rule: DEFAULT_LEARNING_RATES.get(
          rule, eval_lib.EvalConfig.agent_learning_rate
      )
      for rule in rules
  }
  for rule, value in entries:
    if rule is None:
      rates = dict.fromkeys(rules, value)
  for rule, value in entries:
    if rule is not None:
      rates[rule] = value
  return rates


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=_PROG,
      description=__doc__.split('\n\n', 1)[0],
  )
  parser.add_argument(
      '--envs',
      nargs='+',
      default=list(DEFAULT_ENVS),
      help='environments (default: %(default)s)',
  )
  parser.add_argument(
      '--rules',
      nargs='+',
      choices=eval_lib.RULES,
      default=list(DEFAULT_RULES),
      help='update rules (default: %(default)s)',
  )
  parser.add_argument(
      '--seeds',
      type=_number(int, 1),
      default=DEFAULT_SEEDS,
      help='seeds 0 .. N-1 per environment and rule (default: %(default)s)',
  )
  parser.add_argument(
      '--steps',
      type=_number(int, 1),
      default=DEFAULT_STEPS,
      help='loop iterations per run (default: %(default)s)',
  )
  parser.add_argument(
      '--batch-size',
      type=_number(int, 1),
      default=DEFAULT_BATCH_SIZE,
      help='trajectories per learner step (default: %(default)s)',
  )
  parser.add_argument(
      '--replay-ratio',
      type=_number(int, 1),
      default=DEFAULT_REPLAY_RATIO,
      help=(
          'batch-size // replay-ratio environments act in parallel'
          ' (default: %(default)s)'
      ),
  )
  parser.add_argument(
      '--rollout-len',
      type=_number(int, 2),
      default=eval_lib.EvalConfig.rollout_len,
      help='steps per actor rollout (default: %(default)s)',
  )
  parser.add_argument(
      '--learning-rate',
      nargs='+',
      type=_learning_rate,
      default=sorted(DEFAULT_LEARNING_RATES.items()),
      metavar='[RULE=]LR',
      help=(
          "the agent's step size: LR for every rule, or RULE=LR per rule"
          ' (default: disco=1e-2 actor_critic=1e-3)'
      ),
  )
  parser.add_argument(
      '--smoothing',
      type=_number(int, 1),
      default=DEFAULT_SMOOTHING,
      help='iterations of the moving window in the plot (default: %(default)s)',
  )
  parser.add_argument(
      '--out',
      type=pathlib.Path,
      default=pathlib.Path('runs/unseen_envs'),
      help='output directory (default: %(default)s)',
  )
  parser.add_argument(
      '--readme-table',
      action='store_true',
      help=(
          'print the markdown table of an existing <out>/results.csv and'
          ' exit, without training'
      ),
  )
  parser.add_argument(
      '--compilation-cache',
      type=pathlib.Path,
      default=None,
      help="JAX's persistent compilation cache directory",
  )
  parser.add_argument('--quiet', action='store_true', help='no progress bars')
  return parser


def main(
    argv: Sequence[str] | None = None,
    config_overrides: Mapping[str, Any] | None = None,
) -> int:
  """Runs the benchmark; returns the process exit status.

  Args:
    argv: command-line arguments (default: `sys.argv[1:]`).
    config_overrides: `EvalConfig` fields for every run, taking precedence
      over the flags (e.g. a smaller network in tests).

  Returns:
    0 on success, 1 on an error in the setup or a run.
  """
  parser = _parser()
  args = parser.parse_args(argv)

  def fail(message: str) -> int:
    print(f'{_PROG}: error: {message}', file=sys.stderr)
    return 1

  results_path = args.out / RESULTS_CSV
  if args.readme_table:
    if not results_path.is_file():
      return fail(f'no {results_path}; run the benchmark first')
    print(markdown_table(read_results_csv(results_path)))
    return 0
  if len(set(args.envs)) != len(args.envs):
    parser.error('--envs lists an environment twice')
  if len(set(args.rules)) != len(args.rules):
    parser.error('--rules lists a rule twice')
  if args.out.exists() and not args.out.is_dir():
    parser.error(f'--out exists and is not a directory: {args.out}')

  start = time.perf_counter()
  try:
    plotting.require_matplotlib()
    settings = dict(
        num_steps=args.steps,
        learner_batch_size=args.batch_size,
        replay_ratio=args.replay_ratio,
        rollout_len=args.rollout_len,
        fast=True,
    )
    base_config = eval_lib.EvalConfig(**settings | dict(config_overrides or {}))
    # Check every environment before the first long run.
    for env in args.envs:
      config = dataclasses.replace(base_config, env=env)
      registry.make_environment(env, batch_size=config.num_envs)
    if args.compilation_cache is not None:
      # pylint: disable-next=g-import-not-at-top
      import jax

      jax.config.update(
          'jax_compilation_cache_dir', str(args.compilation_cache)
      )
    # Loaded once, and before the first run: missing weights fail early.
    disco_params = None
    if eval_lib.DISCO in args.rules:
      disco_params = weights.load_disco103()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = run_benchmark(
        args.envs,
        args.rules,
        list(range(args.seeds)),
        base_config,
        disco_params=disco_params,
        show_progress=not args.quiet,
        learning_rates=learning_rates_by_rule(args.learning_rate, args.rules),
    )
  except (ValueError, ImportError, OSError) as e:
    return fail(str(e))
  except KeyboardInterrupt:
    return fail('interrupted')

  rows = result_rows(runs)
  written = [
      write_results_csv(rows, results_path),
      write_curves_csv(runs, args.out / CURVES_CSV),
      plot_curves(runs, args.out / CURVES_PNG, args.smoothing),
  ]
  print()
  print(markdown_table(rows))
  print()
  for path in written:
    print(f'Wrote {path}')
  print(f'Total wall time: {time.perf_counter() - start:.0f} s')
  return 0


if __name__ == '__main__':
  sys.exit(main())
