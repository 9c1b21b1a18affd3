"""`disco-meta-train`: meta-train an update rule from the command line.

  disco-meta-train --out runs/catch                  # from a random init
  disco-meta-train --out runs/ft --init disco103     # fine-tune Disco103
  disco-meta-train --out runs/catch --resume         # continue after Ctrl-C
  disco-meta-train --out runs/catch --resume --num_steps 1600  # extend

Every `MetaTrainConfig` field is an option (`--num_steps 100`,
`--agent_dense 64,64`, `--vmap_agents true`, ...); the defaults are the
reference notebook's. The output directory receives

* `config.json`: the run's config (read back by `--resume`);
* `checkpoints/step_<n>/`: resumable checkpoints (their
  `update_rule_params.npz` loads like `disco_103.npz`);
* `update_rule_params.npz`: the final update rule;
* `log.csv`: one row of scalars per meta-step;
* `rewards.png`, `meta_loss.png`, `meta_grad_norm.png`: the notebook's plots
  (if matplotlib is installed).
"""

import argparse
import contextlib
import csv
import dataclasses
import json
import pathlib
import sys
import typing
from typing import Any

from disco import checkpoint as checkpoint_lib
from disco import meta_train
from disco import weights

_CHECKPOINTS = 'checkpoints'
_CONFIG = 'config.json'
_PARAMS = 'update_rule_params.npz'
_CSV = 'log.csv'
# Plot file -> (title, log keys).
_PLOTS = {
    'rewards.png': (
        'Rewards per agent in the train rollouts',
        ('pos_rewards', 'neg_rewards'),
    ),
    'meta_loss.png': ('Meta-loss', ('meta_loss',)),
    'meta_grad_norm.png': ('Meta-gradient norm', ('meta_grad_norm',)),
}
_TRUE = frozenset({'1', 'true', 'yes', 'on'})
_FALSE = frozenset({'0', 'false', 'no', 'off'})


def _parse_bool(text: str) -> bool:
  if text.lower() in _TRUE:
    return True
  if text.lower() in _FALSE:
    return False
  raise argparse.ArgumentTypeError(f'expected true or false, got {text!r}')


def _parse_ints(text: str) -> tuple[int, ...]:
  try:
    return tuple(int(part) for part in text.split(',') if part.strip())
  except ValueError:
    raise argparse.ArgumentTypeError(
        f'expected comma-separated ints, got {text!r}'
    ) from None


def _field_parser(field: dataclasses.Field) -> Any:
  hint = typing.get_type_hints(meta_train.MetaTrainConfig)[field.name]
  if hint is bool:
    return _parse_bool
  if hint in (int, float):
    return hint
  if typing.get_origin(hint) is tuple:
    return _parse_ints
  raise TypeError(f'No parser for {field.name}: {hint}')  # pragma: no cover


def _metavar(default: Any) -> str:
  if isinstance(default, tuple):
    return 'N,N'
  return type(default).__name__.upper()


def _arg_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog='disco-meta-train',
      description='Meta-train (discover or fine-tune) an update rule.',
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog=__doc__.split('\n\n', 1)[1],
  )
  parser.add_argument(
      '--out',
      type=pathlib.Path,
      default=pathlib.Path('runs/meta_train'),
      help='output directory (default: %(default)s)',
  )
  parser.add_argument(
      '--init',
      default=None,
      help=(
          "update rule to start from: 'random' (default for a new run),"
          " 'disco103', or the path of a flat .npz"
      ),
  )
  parser.add_argument(
      '--resume',
      action='store_true',
      help='continue the run in --out from its newest checkpoint',
  )
  parser.add_argument(
      '--no_progress',
      '--no-progress',
      action='store_true',
      help='no progress bar',
  )
  group = parser.add_argument_group(
      'config', 'MetaTrainConfig fields (defaults: the reference notebook)'
  )
  defaults = meta_train.MetaTrainConfig()
  for field in dataclasses.fields(meta_train.MetaTrainConfig):
    default = getattr(defaults, field.name)
    if isinstance(default, tuple):
      default = ','.join(map(str, default))
    names = [f'--{field.name}']
    if '_' in field.name:
      names.append(f'--{field.name.replace("_", "-")}')
    group.add_argument(
        *names,
        dest=field.name,
        type=_field_parser(field),
        default=None,
        metavar=_metavar(getattr(defaults, field.name)),
        help=f'default: {default}',
    )
  return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
  return {
      f.name: getattr(args, f.name)
      for f in dataclasses.fields(meta_train.MetaTrainConfig)
      if getattr(args, f.name) is not None
  }


def _init_params(init: str | None) -> weights.Params | None:
  if init is None or init == 'random':
    return None
  if init == 'disco103':
    return weights.load_disco103()
  return weights.load_update_rule_params(init)


class _CsvLog:
  """Appends one row per meta-step; `rewrite` replaces the whole file."""

  def __init__(self, path: pathlib.Path):
    self._path = path
    self._columns = None

  def append(self, step: int, logs: dict[str, float]) -> None:
    if self._columns is None:
      self._columns = ['step'] + sorted(logs)
      with open(self._path, 'w', newline='') as f:
        csv.writer(f).writerow(self._columns)
    with open(self._path, 'a', newline='') as f:
      row = dict(logs, step=step)
      csv.writer(f).writerow([row.get(c, '') for c in self._columns])

  def rewrite(self, logs: dict[str, Any]) -> None:
    columns = ['step'] + sorted(logs)
    num_steps = len(next(iter(logs.values()))) if logs else 0
    tmp = self._path.with_suffix('.csv.tmp')
    with open(tmp, 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(columns)
      for i in range(num_steps):
        writer.writerow([i + 1] + [float(logs[c][i]) for c in columns[1:]])
    tmp.replace(self._path)
    self._columns = columns


def _read_csv(path: pathlib.Path) -> dict[str, list[float]]:
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  if not rows:
    return {}
  return {key: [float(row[key]) for row in rows] for key in rows[0]}


def write_plots(
    logs: dict[str, Any], out_dir: pathlib.Path
) -> list[pathlib.Path]:
  """The notebook's plots as PNGs in `out_dir` (needs matplotlib).

  Args:
    logs: per-step scalars keyed by name (e.g. `MetaTrainResult.logs`).
    out_dir: where to write.

  Returns:
    The files written.
  """
  # pylint: disable=g-import-not-at-top
  from matplotlib import figure as mpl_figure
  from matplotlib.backends import backend_agg
  # pylint: enable=g-import-not-at-top

  written = []
  for filename, (title, keys) in _PLOTS.items():
    present = [k for k in keys if k in logs]
    if not present:
      continue
    fig = mpl_figure.Figure(figsize=(7, 4))
    backend_agg.FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for key in present:
      values = list(logs[key])
      ax.plot(range(1, len(values) + 1), values, label=key)
    ax.set_xlabel('meta-step')
    ax.set_title(title)
    if len(present) > 1:
      ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out_dir / filename
    fig.savefig(path, dpi=100)
    written.append(path)
  return written


def _write_config(out: pathlib.Path, config: meta_train.MetaTrainConfig):
  (out / _CONFIG).write_text(json.dumps(config.to_dict(), indent=1) + '\n')


class _UsageError(Exception):
  """A problem with the command line, reported without a traceback."""


def _load_saved_config(out: pathlib.Path) -> dict[str, Any]:
  path = out / _CONFIG
  try:
    return json.loads(path.read_text())
  except FileNotFoundError:
    raise _UsageError(
        f'--resume: {path} does not exist; is {out} the output directory of'
        ' an earlier run?'
    ) from None
  except ValueError as e:
    raise _UsageError(f'cannot read {path}: {e}') from None


def main(argv: list[str] | None = None) -> int:
  """Runs the command; returns the exit status."""
  args = _arg_parser().parse_args(argv)
  out = args.out.expanduser()
  overrides = _overrides(args)
  try:
    values = _load_saved_config(out) if args.resume else {}
  except _UsageError as e:
    print(f'disco-meta-train: {e}', file=sys.stderr)
    return 1
  try:
    config = meta_train.MetaTrainConfig.from_dict(values | overrides)
  except (TypeError, ValueError) as e:
    print(f'disco-meta-train: invalid config: {e}', file=sys.stderr)
    return 2

  ckpt_dir = out / _CHECKPOINTS
  if not args.resume and checkpoint_lib.list_steps(ckpt_dir):
    print(
        f'disco-meta-train: {ckpt_dir} already holds checkpoints; pass'
        ' --resume to continue that run, or choose another --out.',
        file=sys.stderr,
    )
    return 1
  try:
    init_params = _init_params(args.init)
  except (OSError, weights.WeightsError) as e:
    print(f'disco-meta-train: --init {args.init}: {e}', file=sys.stderr)
    return 1

  out.mkdir(parents=True, exist_ok=True)
  if not args.resume:
    _write_config(out, config)
  csv_log = _CsvLog(out / _CSV)
  start = 0
  if args.resume:
    start = checkpoint_lib.latest_step(ckpt_dir) or 0
    if start and (out / _CSV).exists():
      # Keep the rows up to the checkpoint; later ones are recomputed.
      previous = _read_csv(out / _CSV)
      rows = {k: v[:start] for k, v in previous.items() if k != 'step'}
      if rows and len(next(iter(rows.values()))) == start:
        csv_log.rewrite(rows)

  try:
    with contextlib.ExitStack() as stack:
      show = None
      if not args.no_progress:
        show = stack.enter_context(
            meta_train.progress_bar(config.num_steps, initial=start)
        )

      def _progress(step: int, logs: dict[str, float]) -> None:
        csv_log.append(step, logs)
        if show is not None:
          show(step, logs)

      result = meta_train.run_meta_train(
          config,
          init_params=init_params,
          progress_fn=_progress,
          checkpoint_dir=ckpt_dir,
          resume=args.resume,
      )
  except KeyboardInterrupt:
    _write_config(out, config)
    latest = checkpoint_lib.latest_step(ckpt_dir)
    print(
        '\ndisco-meta-train: interrupted.'
        + (
            f' Checkpoint: {checkpoint_lib.step_path(ckpt_dir, latest)};'
            f' continue with: disco-meta-train --out {out} --resume'
            if latest is not None
            else ''
        ),
        file=sys.stderr,
    )
    return 130
  except (checkpoint_lib.CheckpointError, weights.WeightsError) as e:
    print(f'disco-meta-train: {e}', file=sys.stderr)
    return 1

  _write_config(out, config)
  params_path = weights.save_update_rule_params(
      result.update_rule_params, out / _PARAMS
  )
  csv_log.rewrite(result.logs)
  written = [params_path, out / _CSV, out / _CONFIG]
  try:
    written += write_plots(result.logs, out)
  except ImportError:
    print(
        'disco-meta-train: matplotlib is not installed; no plots (pip install'
        " 'disco-jax[colab]').",
        file=sys.stderr,
    )
  if result.checkpoint_path is not None:
    written.append(result.checkpoint_path)
  fraction = result.logs.get('pos_reward_fraction')
  if fraction is not None and len(fraction):
    print(
        f'disco-meta-train: {result.num_steps} meta-steps; share of positive'
        f' rewards {fraction[0]:.3f} at step 1, {fraction[-1]:.3f} at step'
        f' {result.num_steps}.'
    )
  print('disco-meta-train: wrote')
  for path in written:
    print(f'  {path}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
