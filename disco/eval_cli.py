"""`disco-eval`: train agents with an update rule and plot their curves.

Examples:

  disco-eval --rule disco --steps 1000
  disco-eval --compare disco actor_critic --steps 1000 --out-dir runs/catch
  disco-eval --rule disco --fast --num-seeds 4

Writes `<out-dir>/<name>.csv` (one row per rule, seed and iteration) and
`<out-dir>/<name>.png` (average return against environment steps) and prints
their paths. Errors in the arguments or the setup (unknown rule, missing
weights, ...) are reported in one line, without a traceback.
"""

import argparse
from collections.abc import Sequence
import pathlib
import sys
import time

import numpy as np

from disco import eval as eval_lib
from disco.environments import registry

_PROG = 'disco-eval'


def _positive_int(text: str) -> int:
  try:
    value = int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f'not an integer: {text!r}') from None
  if value < 1:
    raise argparse.ArgumentTypeError(f'must be >= 1, got {value}')
  return value


def _non_negative_int(text: str) -> int:
  try:
    value = int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f'not an integer: {text!r}') from None
  if value < 0:
    raise argparse.ArgumentTypeError(f'must be >= 0, got {value}')
  return value


def _positive_float(text: str) -> float:
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f'not a number: {text!r}') from None
  if not value > 0:
    raise argparse.ArgumentTypeError(f'must be > 0, got {value}')
  return value


def _environment(text: str) -> str:
  if text in (registry.CATCH, registry.CATCH_CPU) or (
      text.startswith(registry.GYMNAX_PREFIX)
      and len(text) > len(registry.GYMNAX_PREFIX)
  ):
    return text
  raise argparse.ArgumentTypeError(
      f'unknown environment {text!r}; known: {", ".join(registry.NAMES)}'
  )


def _parser() -> argparse.ArgumentParser:
  defaults = eval_lib.EvalConfig()
  parser = argparse.ArgumentParser(
      prog=_PROG,
      description=(
          'Train an agent with an update rule (Disco103 by default) and'
          ' write its learning curve as a CSV file and a PNG plot.'
      ),
  )
  rules = parser.add_mutually_exclusive_group()
  rules.add_argument(
      '--rule',
      choices=eval_lib.RULES,
      default=None,
      help=f'the update rule to train with (default: {eval_lib.DISCO})',
  )
  rules.add_argument(
      '--compare',
      nargs='+',
      choices=eval_lib.RULES,
      metavar='RULE',
      help=(
          'train with each of these rules in turn and plot them together'
          f' (choices: {", ".join(eval_lib.RULES)})'
      ),
  )
  parser.add_argument(
      '--steps',
      type=_positive_int,
      default=defaults.num_steps,
      help='loop iterations per run (default: %(default)s)',
  )
  parser.add_argument(
      '--seed',
      type=_non_negative_int,
      default=defaults.seed,
      help=(
          'PRNGKey seed; with --num-seeds, the first of consecutive seeds'
          ' (default: %(default)s)'
      ),
  )
  parser.add_argument(
      '--num-seeds',
      type=_positive_int,
      default=1,
      help=(
          'runs per rule with seeds seed, seed+1, ...; vmapped together'
          ' with --fast (default: %(default)s)'
      ),
  )
  parser.add_argument(
      '--env',
      type=_environment,
      default=defaults.env,
      help=f'environment: {", ".join(registry.NAMES)} (default: %(default)s)',
  )
  parser.add_argument(
      '--learning-rate',
      type=_positive_float,
      default=defaults.learning_rate,
      help=(
          "the agent optimizer's step size, for every rule (default:"
          " %(default)s, the reference colab's)"
      ),
  )
  parser.add_argument(
      '--weights',
      type=pathlib.Path,
      default=None,
      help=(
          '.npz update-rule parameters for the disco rule (default: the'
          ' published Disco103, found by disco.weights.load_disco103)'
      ),
  )
  parser.add_argument(
      '--fast',
      action='store_true',
      help='use the fused fast path (same maths, different random stream)',
  )
  parser.add_argument(
      '--out-dir',
      '--out',
      dest='out_dir',
      type=pathlib.Path,
      default=pathlib.Path('runs/eval'),
      help='directory for the CSV and PNG files (default: %(default)s)',
  )
  parser.add_argument(
      '--name',
      default=None,
      help=(
          'base name of the output files (default: derived from the rules,'
          ' environment and seed)'
      ),
  )
  parser.add_argument(
      '--no-plot',
      action='store_true',
      help='write the CSV only (no matplotlib needed)',
  )
  parser.add_argument(
      '--compilation-cache',
      type=pathlib.Path,
      default=None,
      help=(
          "JAX's persistent compilation cache directory: later runs start"
          ' in seconds instead of compiling again'
      ),
  )
  parser.add_argument(
      '--quiet', action='store_true', help='no progress bar or summary'
  )
  return parser


def _summary(history: eval_lib.EvalHistory, env: str) -> str:
  tail = history.avg_returns[-min(100, len(history)) :]
  summary = (
      f'{history.rule} seed {history.seed}: mean average return over the last'
      f' {len(tail)} iterations {_nanmean(tail):.3f}'
  )
  if env.startswith(registry.CATCH):  # Catch's best return is 1.
    reached = history.first_iteration_reaching(1.0)
    summary += (
        f'; first reached 1.0 at iteration {reached}'
        f' ({int(history.steps[reached - 1])} env steps)'
        if reached
        else '; never reached 1.0'
    )
  return summary


def _nanmean(values: np.ndarray) -> float:
  finite = values[~np.isnan(values)]
  return float(finite.mean()) if finite.size else float('nan')


def _run(args: argparse.Namespace) -> list[eval_lib.EvalHistory]:
  rules = args.compare or [args.rule or eval_lib.DISCO]
  seeds = list(range(args.seed, args.seed + args.num_seeds))
  histories = []
  for rule in rules:
    config = eval_lib.EvalConfig(
        rule=rule,
        env=args.env,
        num_steps=args.steps,
        seed=args.seed,
        learning_rate=args.learning_rate,
        fast=args.fast,
        weights_path=(
            str(args.weights)
            if args.weights is not None and rule == eval_lib.DISCO
            else None
        ),
    )
    # The faithful loop runs the seeds one after the other.
    total = args.steps * (1 if args.fast else len(seeds))
    with eval_lib.ProgressBar(
        total, f'{rule} ({len(seeds)} seed(s))', not args.quiet
    ) as progress:
      histories.extend(
          eval_lib.run_eval_seeds(config, seeds, progress_fn=progress)
      )
  return histories


def main(argv: Sequence[str] | None = None) -> int:
  """Runs the command line; returns the process exit status."""
  parser = _parser()
  args = parser.parse_args(argv)
  rules = args.compare or [args.rule or eval_lib.DISCO]
  if len(set(rules)) != len(rules):
    parser.error('--compare lists a rule twice')
  if args.fast and args.env == registry.CATCH_CPU:
    parser.error('--fast needs a jittable environment, not catch-cpu')
  if args.weights is not None and eval_lib.DISCO not in rules:
    parser.error('--weights applies to the disco rule only')
  if args.weights is not None and not args.weights.is_file():
    parser.error(f'--weights: no such file: {args.weights}')
  if args.out_dir.exists() and not args.out_dir.is_dir():
    parser.error(f'--out-dir exists and is not a directory: {args.out_dir}')

  # pylint: disable-next=g-import-not-at-top
  from disco import plotting

  def fail(message: str) -> int:
    print(f'{_PROG}: error: {message}', file=sys.stderr)
    return 1

  if not args.no_plot:
    try:
      plotting.require_matplotlib()
    except ImportError as e:
      return fail(f'{e} Or pass --no-plot.')
  if args.compilation_cache is not None:
    # pylint: disable-next=g-import-not-at-top
    import jax

    jax.config.update('jax_compilation_cache_dir', str(args.compilation_cache))
  try:
    args.out_dir.mkdir(parents=True, exist_ok=True)
  except OSError as e:
    return fail(f'cannot create --out-dir {args.out_dir}: {e}')

  start = time.perf_counter()
  try:
    histories = _run(args)
  except (ValueError, ImportError, OSError) as e:
    # Bad settings, missing optional packages, missing or invalid weights
    # (disco.weights' errors derive from ValueError and OSError).
    return fail(str(e))
  except KeyboardInterrupt:
    return fail('interrupted')

  name = args.name or '{rules}_{env}_seed{seed}{seeds}{fast}'.format(
      rules='-'.join(rules),
      env=args.env.replace(':', '-'),
      seed=args.seed,
      seeds=f'x{args.num_seeds}' if args.num_seeds > 1 else '',
      fast='_fast' if args.fast else '',
  )
  csv_path = plotting.write_csv(histories, args.out_dir / f'{name}.csv')
  print(f'Wrote the curve to {csv_path}')
  if not args.no_plot:
    png_path = args.out_dir / f'{name}.png'
    plotting.plot_curves(
        histories,
        png_path,
        title=f'{args.env}: average return ({", ".join(rules)})',
    )
    print(f'Wrote the plot to {png_path}')
  if not args.quiet:
    for history in histories:
      print(_summary(history, args.env))
    print(f'Total time: {time.perf_counter() - start:.0f} s')
  return 0


if __name__ == '__main__':
  sys.exit(main())
