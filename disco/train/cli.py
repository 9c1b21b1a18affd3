"""`disco-train`: train agents with an update rule on any JAX environment.

  disco-train --preset paper --env gymnax:Breakout-MinAtar --num-steps 500
  disco-train --preset paper --env gymnax:Breakout-MinAtar --num-seeds 3 \\
      --eval-every 50 --out-dir runs/breakout
  disco-train --out-dir runs/breakout --resume       # after Ctrl-C, SIGTERM
  disco-train --env catch --logger csv tensorboard   # also TensorBoard
  disco-train --rule actor_critic --env catch        # a baseline
  disco-train --preset crafter --agent craftax_frames \
      --env craftax:Craftax-Classic-Symbolic-v1      # the paper's protocol

Every `TrainConfig` field is a flag; `--preset` picks the defaults the
flags change ('colab': the reference colab's; 'paper': the paper's batch
composition with Disco103's step size; 'crafter' and 'atari': the paper's
evaluation protocols, its Extended Data Table 6). `--out-dir` receives
`config.json`, `log.csv` (one row per seed and chunk, streamed),
`checkpoints/step_<n>/`, the agents' final `agent_params_seed<s>.npz` and
`returns.png` (training and evaluation returns against environment steps);
`--logger tensorboard` adds `tensorboard/seed_<s>/` (event files) and
`--logger wandb` a Weights & Biases run in `wandb/`.
"""

import argparse
from collections.abc import Mapping, Sequence
import pathlib
import sys
from typing import Any

import numpy as np

from disco import cli
from disco import logs
from disco import progress
from disco import train
from disco import weights
from disco.cli import reward_probe_flag
from disco.environments import registry

PROG = 'disco-train'


def _add_flags(parser: argparse.ArgumentParser) -> None:
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
      help=(
          'agents trained together, seeds seed .. seed + N - 1, in one'
          ' vmapped program: cheaper per seed on a GPU (16 seeds: 3.3x the'
          ' seed-updates per second of one, H200), dearer on a 2-core CPU'
          ' (run one seed per process there) (default: 1)'
      ),
  )
  reward_probe_flag.add_flag(parser)


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


def _check_args(args: argparse.Namespace) -> None:
  if args.num_seeds < 1:
    raise cli.UsageError(f'--num-seeds must be >= 1, got {args.num_seeds}.')


def _extras(
    args: argparse.Namespace, saved: Mapping[str, Any], config: Any
) -> dict[str, Any]:
  num_seeds = int(saved.get('num_seeds', args.num_seeds))
  if num_seeds > 1 and not registry.is_jittable_name(config.env):
    raise cli.UsageError(
        f'--env {config.env} steps on the host: one seed per run (got'
        f' --num-seeds {num_seeds}); start one run per --seed.'
    )
  return dict(num_seeds=num_seeds)


def _base_config(
    args: argparse.Namespace, saved: Mapping[str, Any]
) -> dict[str, Any]:
  cli.refuse_with_resume(args, 'preset', 'agent')
  base = cli.preset_config(args, saved, train.PRESETS, 'colab')
  if args.agent is not None:
    base |= train.agent_fields(args.agent)
  # As `train.preset`: a protocol's buffer follows --num-envs, --rollout-len.
  buffer = train.protocol_buffer(
      args.preset or 'colab',
      args.num_envs or base.get('num_envs'),
      args.rollout_len or base.get('rollout_len'),
  )
  if not saved and buffer is not None and args.buffer_capacity is None:
    base['buffer_capacity'] = buffer
  return base


def _run(run: cli.Run) -> Any:
  config, args = run.config, run.args

  def _log_row(seed: int, row: Mapping[str, float]) -> None:
    run.log.append(dict(row) | dict(seed=seed))

  with progress.progress_bar(
      progress.TRAIN,
      config.num_steps,
      f'{config.rule} on {config.env}',
      initial=cli.resumed_step(run, lambda root: root),
      enabled=args.progress,
  ) as bar:
    return train.run_train(
        config,
        num_seeds=run.extras['num_seeds'],
        progress_fn=bar,
        log_fn=_log_row,
        checkpoint_dir=run.run_dir.checkpoints,
        resume=args.resume,
        handle_interrupts=True,
        logger=run.logger,
    )


def _finish(run: cli.Run, result: Any, plots: list[pathlib.Path]) -> None:
  written = list(plots)
  for seed, params in zip(result.seeds, result.params, strict=True):
    written.append(
        weights.save_update_rule_params(
            params, run.run_dir.path / f'agent_params_seed{seed}.npz'
        )
    )
  written = [run.run_dir.log, run.run_dir.config] + written
  for seed in result.seeds:
    _, evaluated = result.curve(seed, 'eval_return')
    _, trained = result.curve(seed, 'train_return')
    final = evaluated if len(evaluated) else trained
    if len(final):
      kind = 'evaluation' if len(evaluated) else 'training'
      print(f'{PROG}: seed {seed}: final {kind} return {final[-1]:.3f}')
  cli.report(PROG, written)


COMMAND = cli.Command(
    prog=PROG,
    doc=__doc__,
    config_cls=train.TrainConfig,
    config_title='config (TrainConfig; defaults: --preset)',
    default_out_dir='runs/train',
    add_flags=_add_flags,
    check_args=_check_args,
    base_config=_base_config,
    extras=_extras,
    resolve_config=reward_probe_flag.resolve,
    resumed_rows=cli.steps_up_to(lambda root: root),
    run=_run,
    plot=lambda rows, run: [
        write_plot(
            rows,
            run.run_dir.path / 'returns.png',
            f'{run.config.rule} on {run.config.env}',
        )
    ],
    finish=_finish,
)


build_parser, main = cli.entry_points(COMMAND)


if __name__ == '__main__':
  sys.exit(main())
