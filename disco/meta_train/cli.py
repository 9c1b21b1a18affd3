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

from collections.abc import Mapping, Sequence
import pathlib
import sys
from typing import Any

from disco import cli
from disco import logs
from disco import meta_train
from disco.cli import reward_probe_flag

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


def _run(run: cli.Run) -> meta_train.MetaTrainResult:
  return cli.run_meta_steps(
      run, meta_train.run_meta_train, meta_train.progress_bar
  )


def _summary(result: meta_train.MetaTrainResult) -> None:
  fraction = result.logs.get('pos_reward_fraction')
  if fraction is not None and len(fraction):
    print(
        f'{PROG}: {result.num_steps} meta-steps; share of positive rewards'
        f' {fraction[0]:.3f} at step 1, {fraction[-1]:.3f} at step'
        f' {result.num_steps}.'
    )


COMMAND = cli.meta_step_command(
    prog=PROG,
    doc=__doc__,
    config_cls=meta_train.MetaTrainConfig,
    config_title='config (MetaTrainConfig; defaults: the reference notebook)',
    default_out_dir='runs/meta_train',
    deprecated=(('init', 'update_rule_params', None),),
    add_flags=reward_probe_flag.add_flag,
    resolve_config=reward_probe_flag.resolve,
    run=_run,
    plot=lambda rows, run: write_plots(rows, run.run_dir.path),
    params_filename=PARAMS_FILENAME,
    summary=_summary,
)


build_parser, main = cli.entry_points(COMMAND)


if __name__ == '__main__':
  sys.exit(main())
