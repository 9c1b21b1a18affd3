"""`disco-eval`: train agents with an update rule and plot their curves.

  disco-eval --num-steps 1000                        # Disco103 on Catch
  disco-eval --compare disco actor_critic --out-dir runs/catch
  disco-eval --fast --num-seeds 4                    # 4 seeds vmapped
  disco-eval --update-rule-params my_rule.npz        # a meta-trained rule
  disco-eval --out-dir runs/catch --resume           # after Ctrl-C

Every `EvalConfig` field is a flag (`--learner-batch-size 64`,
`--agent-dense 512,512`, `--env-settings rows=5,columns=5`, ...); the
defaults are the reference colab's. `--out-dir` receives `config.json`,
`log.csv` (one row per rule, seed and iteration, streamed),
`checkpoints/<rule>/`, the agents' final parameters `agent_params.npz`
(keys `<rule>/seed_<s>/<module>/<name>`) and `returns.png` (average return
against environment steps, mean over seeds, smoothed over the raw curve).
"""

import argparse
from collections.abc import Mapping, Sequence
import math
import pathlib
import sys
import time
import types
from typing import Any

import numpy as np

from disco import checkpoint
from disco import cli
from disco import eval as eval_lib
from disco import progress
from disco import weights
from disco.cli import reward_probe_flag
from disco.environments import registry

PROG = 'disco-eval'
PARAMS_FILENAME = 'agent_params.npz'
PLOT_FILENAME = 'returns.png'


def _add_flags(parser: argparse.ArgumentParser) -> None:
  group = parser.add_argument_group('rules and seeds')
  group.add_argument(
      '--compare',
      nargs='+',
      choices=eval_lib.RULES,
      metavar='RULE',
      help=(
          'train with each of these rules in turn and plot them together'
          f' (choices: {", ".join(eval_lib.RULES)}); instead of --rule'
      ),
  )
  group.add_argument(
      '--num-seeds',
      '--num_seeds',
      type=cli.parse_int,
      default=None,
      metavar='N',
      help=(
          'runs per rule, with seeds seed, seed+1, ...; vmapped together'
          ' with --fast (default: 1)'
      ),
  )
  reward_probe_flag.add_flag(parser)


def _rules_and_seeds(
    args: argparse.Namespace, saved: Mapping[str, Any], config: Any
) -> dict[str, list[Any]]:
  if args.compare and args.rule is not None:
    raise cli.UsageError('give either --rule or --compare, not both')
  rules = args.compare or (
      [config.rule] if args.rule is not None else saved.get('rules')
  )
  rules = list(rules or [config.rule])
  if len(set(rules)) != len(rules):
    raise cli.UsageError('--compare lists a rule twice')
  if config.update_rule_params is not None and eval_lib.DISCO not in rules:
    raise cli.UsageError('--update-rule-params applies to the disco rule only')
  if args.num_seeds is not None:
    if args.num_seeds < 1:
      raise cli.UsageError(f'--num-seeds must be >= 1, got {args.num_seeds}')
    seeds = list(range(config.seed, config.seed + args.num_seeds))
  else:
    seeds = list(saved.get('seeds', [config.seed]))
  return dict(rules=rules, seeds=seeds)


def _rule_config(config: Any, rule: str) -> Any:
  return config.replace(
      rule=rule,
      update_rule_params=(
          config.update_rule_params if rule == eval_lib.DISCO else None
      ),
  )


def _checkpointed_step(root: pathlib.Path, config: Any, seed: int) -> int:
  step = checkpoint.latest_step(
      eval_lib.seed_checkpoint_dir(root, config, seed)
  )
  return step or 0


def _plot(
    rows: Sequence[Mapping[str, Any]], run: cli.Run
) -> list[pathlib.Path]:
  """Average return against env steps: per rule, the mean over seeds."""
  # pylint: disable-next=g-import-not-at-top
  from disco import plotting

  runs: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
  for row in rows:
    runs.setdefault((row['rule'], row['seed']), []).append(row)
  # What `plot_curves` reads of an `EvalHistory`, from the log's rows.
  curves = [
      types.SimpleNamespace(
          rule=rule,
          seed=seed,
          steps=[r['env_steps'] for r in run],
          avg_returns=[r['avg_return'] for r in run],
      )
      for (rule, seed), run in runs.items()
  ]
  path = run.run_dir.path / PLOT_FILENAME
  plotting.plot_curves(curves, path, title=f'{run.config.env}: average return')
  return [path]


def _summary(history: eval_lib.EvalHistory, env: str) -> str:
  tail = history.avg_returns[-min(100, len(history)) :]
  finite = tail[np.isfinite(tail)]
  mean = float(finite.mean()) if finite.size else math.nan
  summary = (
      f'{history.rule} seed {history.seed}: mean average return over the last'
      f' {len(tail)} iterations {mean:.3f}'
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


def _resumed_rows(run: cli.Run) -> Any:
  """Rows up to each rule and seed's checkpoint."""
  done = {}
  if run.args.resume:
    for rule in run.extras['rules']:
      for seed in run.extras['seeds']:
        done[rule, seed] = _checkpointed_step(
            run.run_dir.checkpoints / rule, _rule_config(run.config, rule), seed
        )
  return lambda row: row.get('iteration', 0) <= done.get(
      (row.get('rule'), row.get('seed')), 0
  )


def _run(run: cli.Run) -> list[eval_lib.EvalHistory]:
  config, seeds, histories = run.config, run.extras['seeds'], []
  for rule in run.extras['rules']:

    def _log_row(
        seed: int,
        iteration: int,
        metrics: Mapping[str, float],
        rule: str = rule,
    ) -> None:
      run.log.append(dict(rule=rule, seed=seed, iteration=iteration) | metrics)

    # The faithful loop runs the seeds one after the other.
    total = config.num_steps * (1 if config.fast else len(seeds))
    with progress.progress_bar(
        progress.EVAL,
        total,
        f'{rule} ({len(seeds)} seed(s))',
        enabled=run.args.progress,
    ) as bar:
      histories += eval_lib.run_eval_seeds(
          _rule_config(config, rule),
          seeds,
          progress_fn=bar,
          log_fn=_log_row,
          checkpoint_dir=run.run_dir.checkpoints / rule,
          resume=run.args.resume,
          handle_interrupts=True,
          logger=run.logger,
      )
  return histories


def _finish(
    run: cli.Run,
    histories: list[eval_lib.EvalHistory],
    plots: list[pathlib.Path],
) -> None:
  params = weights.save_update_rule_params(
      {
          f'{h.rule}/seed_{h.seed}/{module}': leaves
          for h in histories
          for module, leaves in h.params.items()
      },
      run.run_dir.path / PARAMS_FILENAME,
  )
  cli.report(PROG, [params, run.run_dir.log, run.run_dir.config] + plots)
  if run.args.progress:
    for history in histories:
      print(_summary(history, run.config.env))
    print(f'Total time: {time.perf_counter() - run.start_time:.0f} s')


COMMAND = cli.Command(
    prog=PROG,
    doc=__doc__,
    description=(
        'Train agents with an update rule (Disco103 by default) and write'
        ' their learning curves (CSV, PNG).'
    ),
    config_cls=eval_lib.EvalConfig,
    config_title='config (EvalConfig; defaults: the colab)',
    default_out_dir='runs/eval',
    add_flags=_add_flags,
    deprecated=(
        ('steps', 'num_steps', cli.parse_int),
        ('weights', 'update_rule_params', None),
    ),
    extras=_rules_and_seeds,
    resolve_config=reward_probe_flag.resolve,
    resumed_rows=_resumed_rows,
    run=_run,
    plot=_plot,
    finish=_finish,
)


build_parser, main = cli.entry_points(COMMAND)


if __name__ == '__main__':
  sys.exit(main())
