"""`disco-meta-train`: meta-train (discover or fine-tune) an update rule.

  disco-meta-train --out-dir runs/catch                       # random init
  disco-meta-train --out-dir runs/ft --update-rule-params disco103  # fine-tune
  disco-meta-train --out-dir runs/catch --resume              # after Ctrl-C
  disco-meta-train --out-dir runs/catch --resume --num-steps 1600   # extend

Every `MetaTrainConfig` field is a flag (`--num-steps 100`, `--agent-dense
64,64`, `--vmap-agents false`, ...); the defaults are the reference
notebook's. `--out-dir` receives `config.json`, `log.csv` (one row per
meta-step, streamed), `checkpoints/step_<n>/`, the final
`update_rule_params.npz` (loads like `disco_103.npz`) and the notebook's
plots `rewards.png`, `meta_loss.png`, `meta_grad_norm.png`.
"""

import argparse
from collections.abc import Mapping, Sequence
import pathlib
import sys
from typing import Any

from disco import checkpoint
from disco import cli
from disco import logs
from disco import meta_train
from disco import progress
from disco import weights

PROG = 'disco-meta-train'
PARAMS_FILENAME = 'update_rule_params.npz'
# Plot file -> (title, log columns).
PLOTS = {
    'rewards.png': (
        'Rewards per agent in the train rollouts',
        ('pos_rewards', 'neg_rewards'),
    ),
    'meta_loss.png': ('Meta-loss', ('meta_loss',)),
    'meta_grad_norm.png': ('Meta-gradient norm', ('meta_grad_norm',)),
}


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=PROG,
      description=__doc__.split('\n\n', 1)[0].split(': ', 1)[1],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog=__doc__.split('\n\n', 1)[1],
  )
  cli.add_common_flags(parser, 'runs/meta_train')
  cli.add_config_flags(
      parser,
      meta_train.MetaTrainConfig,
      'config (MetaTrainConfig; defaults: the reference notebook)',
  )
  cli.add_deprecated_flag(
      parser, 'init', 'update_rule_params', '--update-rule-params'
  )
  return parser


def write_plots(
    rows: Sequence[Mapping[str, Any]], out_dir: pathlib.Path
) -> list[pathlib.Path]:
  """The notebook's plots of `log.csv` rows as PNGs (needs matplotlib)."""
  # pylint: disable-next=g-import-not-at-top
  from disco import plotting

  columns = logs.columns(rows)
  written = []
  for filename, (title, keys) in PLOTS.items():
    present = {k: columns[k] for k in keys if k in columns}
    if not present:
      continue
    path = out_dir / filename
    plotting.plot_series(
        columns['step'], present, path, title=title, xlabel='meta-step'
    )
    written.append(path)
  return written


def _body(args: argparse.Namespace) -> int:
  run_dir, saved, config = cli.load_config(args, meta_train.MetaTrainConfig)
  cli.prepare_run(args, run_dir, config)
  if not args.resume:
    run_dir.write_config(PROG, config)

  log = logs.CsvLog(run_dir.log)
  start = 0
  if args.resume:
    # Where `run_meta_train` writes them (a subdirectory per process).
    root = meta_train.checkpoint_root(run_dir.checkpoints)
    start = checkpoint.latest_step(root) or 0
  # Rows after the checkpoint are computed again.
  log.keep(lambda row: row.get('step', 0) <= start)

  def _log_row(step: int, step_logs: Mapping[str, float]) -> None:
    log.append(dict(step=step) | dict(step_logs))

  written = []
  try:
    with meta_train.progress_bar(
        config.num_steps, initial=start, enabled=args.progress
    ) as bar:
      result = meta_train.run_meta_train(
          config,
          progress_fn=progress.chain(_log_row, bar),
          checkpoint_dir=run_dir.checkpoints,
          resume=args.resume,
          handle_interrupts=True,
      )
  except KeyboardInterrupt:
    run_dir.write_config(PROG, config)  # E.g. a longer num_steps.
    raise
  finally:
    if args.plot and log.rows:
      written += write_plots(log.rows, run_dir.path)
  run_dir.write_config(PROG, config)

  params = weights.save_update_rule_params(
      result.update_rule_params, run_dir.path / PARAMS_FILENAME
  )
  written = [params, run_dir.log, run_dir.config] + written
  if result.checkpoint_path is not None:
    written.append(result.checkpoint_path)
  fraction = result.logs.get('pos_reward_fraction')
  if fraction is not None and len(fraction):
    print(
        f'{PROG}: {result.num_steps} meta-steps; share of positive rewards'
        f' {fraction[0]:.3f} at step 1, {fraction[-1]:.3f} at step'
        f' {result.num_steps}.'
    )
  cli.report(PROG, written)
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  """Runs the command; returns its exit status."""
  return cli.main(PROG, build_parser, _body, argv)


if __name__ == '__main__':
  sys.exit(main())
