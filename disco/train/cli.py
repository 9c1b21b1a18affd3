"""`disco-train`: train agents with an update rule on any JAX environment.

  disco-train --preset paper --env gymnax:Breakout-MinAtar --num-steps 500
  disco-train --preset paper --env gymnax:Breakout-MinAtar --num-seeds 3 \\
      --eval-every 50 --out-dir runs/breakout
  disco-train --out-dir runs/breakout --resume       # after Ctrl-C
  disco-train --rule actor_critic --env catch        # a baseline

Every `TrainConfig` field is a flag; `--preset` picks the defaults the
flags change ('colab': the reference colab's; 'paper': the paper's batch
composition with Disco103's step size). `--out-dir` receives
`config.json`, `log.csv` (one row per seed and chunk, streamed),
`checkpoints/step_<n>/`, the agents' final `agent_params_seed<s>.npz` and
`returns.png` (training and evaluation returns against environment steps).
"""

import argparse
from collections.abc import Mapping, Sequence
import pathlib
import sys
from typing import Any

import numpy as np

from disco import checkpoint
from disco import cli
from disco import logs
from disco import progress
from disco import train
from disco import weights

PROG = 'disco-train'


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=PROG,
      description=__doc__.split('\n\n', 1)[0].split(': ', 1)[1],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog=__doc__.split('\n\n', 1)[1],
  )
  cli.add_common_flags(parser, 'runs/train')
  group = parser.add_argument_group('training')
  group.add_argument(
      '--preset',
      choices=sorted(train.PRESETS),
      default=None,
      help=(
          'the defaults the config flags change (default: colab; with'
          ' --resume, the saved config)'
      ),
  )
  group.add_argument(
      '--agent',
      choices=sorted(train.AGENTS),
      default=None,
      help=(
          "the agent network's sizes for an environment family (default:"
          " the preset's, colab); --agent-* flags change them"
      ),
  )
  group.add_argument(
      '--num-seeds',
      '--num_seeds',
      type=int,
      default=1,
      metavar='N',
      help='agents trained together, seeds seed .. seed + N - 1 (default: 1)',
  )
  cli.add_config_flags(
      parser, train.TrainConfig, 'config (TrainConfig; defaults: --preset)'
  )
  return parser


def write_plot(
    rows: Sequence[Mapping[str, Any]], path: pathlib.Path, title: str
) -> pathlib.Path:
  """Training and evaluation returns per seed against environment steps."""
  # pylint: disable-next=g-import-not-at-top
  from disco import plotting

  columns = logs.columns(rows)
  series = {}
  for seed in sorted(set(columns['seed'])):
    rows_of_seed = columns['seed'] == seed
    for name in ('train_return', 'eval_return'):
      values = np.where(rows_of_seed, columns[name], np.nan)
      if not np.all(np.isnan(values)):
        series[f'{name} (seed {int(seed)})'] = values
  plotting.plot_series(
      columns['env_steps'],
      series,
      path,
      title=title,
      xlabel='environment steps',
      ylabel='average return',
  )
  return path


def _body(args: argparse.Namespace) -> int:
  if args.num_seeds < 1:
    raise cli.UsageError(f'--num-seeds must be >= 1, got {args.num_seeds}.')
  run_dir = cli.RunDir(args.out_dir.expanduser())
  saved = run_dir.read_config() if args.resume else {}
  if args.resume and args.preset is not None:
    raise cli.UsageError('--preset starts a new run; --resume keeps its own.')
  if args.resume and args.agent is not None:
    raise cli.UsageError('--agent starts a new run; --resume keeps its own.')
  base = saved.get('config') or dict(train.PRESETS[args.preset or 'colab'])
  if args.agent is not None:
    base |= train.agent_fields(args.agent)
  config = cli.make_config(
      train.TrainConfig, base | cli.overrides(args, train.TrainConfig)
  )
  num_seeds = int(saved.get('num_seeds', args.num_seeds))
  cli.prepare_run(args, run_dir, config)
  if not args.resume:
    run_dir.write_config(PROG, config, num_seeds=num_seeds)

  log = logs.CsvLog(run_dir.log)
  start = 0
  if args.resume:
    start = checkpoint.latest_step(run_dir.checkpoints) or 0
  # Rows after the checkpoint are computed again.
  log.keep(lambda row: row.get('step', 0) <= start)

  def _log_row(seed: int, row: Mapping[str, float]) -> None:
    log.append(dict(row) | dict(seed=seed))

  written = []
  try:
    with progress.ProgressBar(
        config.num_steps,
        f'{config.rule} on {config.env}',
        initial=start,
        postfix=('train_return', 'eval_return'),
        enabled=args.progress,
    ) as bar:
      result = train.run_train(
          config,
          num_seeds=num_seeds,
          progress_fn=bar,
          log_fn=_log_row,
          checkpoint_dir=run_dir.checkpoints,
          resume=args.resume,
          handle_interrupts=True,
      )
  except KeyboardInterrupt:
    run_dir.write_config(PROG, config, num_seeds=num_seeds)
    raise
  finally:
    if args.plot and log.rows:
      written.append(
          write_plot(
              log.rows,
              run_dir.path / 'returns.png',
              f'{config.rule} on {config.env}',
          )
      )
  run_dir.write_config(PROG, config, num_seeds=num_seeds)

  for seed, params in zip(result.seeds, result.params, strict=True):
    written.append(
        weights.save_update_rule_params(
            params, run_dir.path / f'agent_params_seed{seed}.npz'
        )
    )
  written = [run_dir.log, run_dir.config] + written
  for seed in result.seeds:
    _, evaluated = result.curve(seed, 'eval_return')
    _, trained = result.curve(seed, 'train_return')
    final = evaluated if len(evaluated) else trained
    if len(final):
      kind = 'evaluation' if len(evaluated) else 'training'
      print(f'{PROG}: seed {seed}: final {kind} return {final[-1]:.3f}')
  cli.report(PROG, written)
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  """Runs the command; returns its exit status."""
  return cli.main(PROG, build_parser, _body, argv)


if __name__ == '__main__':
  sys.exit(main())
