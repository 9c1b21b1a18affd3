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

from disco import cli
from disco import logs
from disco.discovery import config as discovery_config
from disco.discovery import loop as discovery

PROG = 'disco-discover'
PARAMS_FILENAME = 'update_rule_params.npz'


def _population(text: str) -> tuple[tuple[str, int], ...]:
  try:
    return discovery_config.parse_population(text)
  except ValueError as e:
    raise argparse.ArgumentTypeError(str(e)) from None


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


def _add_flags(parser: argparse.ArgumentParser) -> None:
  parser.add_argument(
      '--preset',
      choices=sorted(discovery_config.PRESETS),
      default=None,
      help=(
          'the defaults the config flags change (default: local; with'
          ' --resume, the saved config)'
      ),
  )


def _run(run: cli.Run) -> discovery.DiscoveryResult:
  return cli.run_meta_steps(
      run, discovery.run_discovery, discovery.progress_bar
  )


COMMAND = cli.meta_step_command(
    prog=PROG,
    doc=__doc__,
    config_cls=discovery_config.DiscoveryConfig,
    config_title='config (DiscoveryConfig; defaults: the local preset)',
    default_out_dir='runs/discovery',
    add_flags=_add_flags,
    flag_types=dict(
        population=(
            _population,
            'SPEC*N,...',
            lambda default: ','.join(f'{s}*{n}' for s, n in default),
        )
    ),
    check_args=lambda args: cli.refuse_with_resume(args, 'preset'),
    base_config=lambda args, saved: cli.preset_config(
        args, saved, discovery_config.PRESETS, discovery_config.LOCAL
    ),
    run=_run,
    plot=lambda rows, run: write_plot(rows, run.run_dir.path),
    params_filename=PARAMS_FILENAME,
)


build_parser, main = cli.entry_points(COMMAND)


if __name__ == '__main__':
  sys.exit(main())
