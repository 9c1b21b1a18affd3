"""`disco-discover`: discover an update rule with the paper's recipe.

  disco-discover --out-dir runs/suite                  # the local suite
  disco-discover --out-dir runs/suite --resume         # after Ctrl-C
  disco-discover --preset paper --population 'gymnax:Breakout-MinAtar*2,...'
  disco-discover --population 'catch/rows=5/columns=5*4' --num-inner-steps 5

Every `DiscoveryConfig` field is a flag; `--preset` picks the defaults the
flags change ('local': a small mixed suite for a 2-core CPU; 'paper': the
paper's numbers). `--population` takes SPEC*COUNT entries separated by
commas, a SPEC being a jittable environment with optional settings after
slashes. `--out-dir` receives `config.json`, `log.csv` (one row per
meta-step, streamed), `checkpoints/step_<n>/`, the final
`update_rule_params.npz` (loads like `disco_103.npz`) and `returns.png`
(every environment's mean episode return against meta-steps).
"""

import argparse
from collections.abc import Mapping, Sequence
import pathlib
import sys
from typing import Any

from disco import checkpoint
from disco import cli
from disco import logs
from disco import progress
from disco import weights
from disco.discovery import config as discovery_config
from disco.discovery import loop as discovery_runtime
from disco.meta_train import loop as meta_train_runtime

PROG = 'disco-discover'
PARAMS_FILENAME = 'update_rule_params.npz'


def _population(text: str) -> tuple[tuple[str, int], ...]:
  try:
    return discovery_config.parse_population(text)
  except ValueError as e:
    raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=PROG,
      description=__doc__.split('\n\n', 1)[0].split(': ', 1)[1],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog=__doc__.split('\n\n', 1)[1],
  )
  cli.add_common_flags(parser, 'runs/discovery')
  parser.add_argument(
      '--preset',
      choices=sorted(discovery_config.PRESETS),
      default=None,
      help=(
          'the defaults the config flags change (default: local; with'
          ' --resume, the saved config)'
      ),
  )
  cli.add_config_flags(
      parser,
      discovery_config.DiscoveryConfig,
      'config (DiscoveryConfig; defaults: the local preset)',
  )
  default = discovery_config.DiscoveryConfig().population
  for action in parser._actions:  # pylint: disable=protected-access
    if action.dest == 'population':
      action.type = _population
      action.metavar = 'SPEC*N,...'
      shown = ','.join(f'{spec}*{count}' for spec, count in default)
      action.help = action.help.rsplit(' (default: ', 1)[0] + (
          f' (default: {shown})'
      )
  return parser


def write_plot(
    rows: Sequence[Mapping[str, Any]], out_dir: pathlib.Path
) -> list[pathlib.Path]:
  """Each environment's mean return against meta-steps, as `returns.png`."""
  # pylint: disable-next=g-import-not-at-top
  from disco import plotting

  columns = logs.columns(rows)
  series = {
      k[: -len('/return')]: v
      for k, v in columns.items()
      if k.endswith('/return')
  }
  if not series:
    return []
  path = out_dir / 'returns.png'
  plotting.plot_series(
      columns['step'],
      series,
      path,
      title='Mean episode return of the members, per environment',
      xlabel='meta-step',
  )
  return [path]


def _body(args: argparse.Namespace) -> int:
  run_dir = cli.RunDir(args.out_dir.expanduser())
  if args.resume and args.preset is not None:
    raise cli.UsageError('--preset starts a new run; --resume keeps its own.')
  saved = run_dir.read_config() if args.resume else {}
  base = saved.get('config') or dict(
      discovery_config.PRESETS[args.preset or discovery_config.LOCAL]
  )
  config = cli.make_config(
      discovery_config.DiscoveryConfig,
      base | cli.overrides(args, discovery_config.DiscoveryConfig),
  )
  cli.prepare_run(args, run_dir, config)
  if not args.resume:
    run_dir.write_config(PROG, config)

  log = logs.CsvLog(run_dir.log)
  start = 0
  if args.resume:
    root = meta_train_runtime.checkpoint_root(run_dir.checkpoints)
    start = checkpoint.latest_step(root) or 0
  log.keep(lambda row: row.get('step', 0) <= start)

  def _log_row(step: int, step_logs: Mapping[str, float]) -> None:
    log.append(dict(step=step) | dict(step_logs))

  written = []
  try:
    with discovery_runtime.progress_bar(
        config.num_steps, initial=start, enabled=args.progress
    ) as bar:
      result = discovery_runtime.run_discovery(
          config,
          progress_fn=progress.chain(_log_row, bar),
          checkpoint_dir=run_dir.checkpoints,
          resume=args.resume,
          handle_interrupts=True,
      )
  except KeyboardInterrupt:
    run_dir.write_config(PROG, config)
    raise
  finally:
    if args.plot and log.rows:
      written += write_plot(log.rows, run_dir.path)
  run_dir.write_config(PROG, config)
  params = weights.save_update_rule_params(
      result.update_rule_params, run_dir.path / PARAMS_FILENAME
  )
  written = [params, run_dir.log, run_dir.config] + written
  if result.checkpoint_path is not None:
    written.append(result.checkpoint_path)
  cli.report(PROG, written)
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  """Runs the command; returns its exit status."""
  return cli.main(PROG, build_parser, _body, argv)


if __name__ == '__main__':
  sys.exit(main())
