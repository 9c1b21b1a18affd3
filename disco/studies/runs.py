"""A study as a list of runs, and the command that runs it.

A study script builds its runs as data (`TrainRun`, `PpoRun`) and hands
them to `run_all`, which runs each in turn, in pieces, skipping the ones
already done (`disco.studies.pieces`, `disco.studies.ppo_runs`). `command`
wraps a study's steps the way every study command behaves: a record of
other settings is an error (exit status 1), and Ctrl-C or SIGTERM stops
after a checkpoint, with a message and exit status 128 + the signal, so
that the same command goes on later.
"""

import argparse
from collections.abc import Callable, Sequence
import dataclasses
import json
import pathlib
import signal
import sys
from typing import Any

from disco.studies import pieces
from disco.studies import ppo_runs
from disco.studies import records
from disco.studies import tables

# The environments the long studies run: MinAtar's games and Craftax-Classic.
MINATAR = (
    'gymnax:Breakout-MinAtar',
    'gymnax:SpaceInvaders-MinAtar',
    'gymnax:Asterix-MinAtar',
    'gymnax:Freeway-MinAtar',
)
CRAFTAX = 'craftax:Craftax-Classic-Symbolic-v1'
# Evaluation episodes are cut after this many steps: longer than an episode
# can last (Freeway's: 2,500 steps; the other MinAtar games end sooner;
# Craftax-Classic's, in each of its observations: 10,000), so that every
# evaluation episode ends.
EVAL_MAX_STEPS = {'gymnax:Freeway-MinAtar': 2500}
CRAFTAX_EVAL_MAX_STEPS = 10_000
DEFAULT_EVAL_MAX_STEPS = 1000


@dataclasses.dataclass(frozen=True)
class TrainRun:
  """One trainer run of a study.

  Attributes:
    name: the run's record name (`<out>/runs/<name>.json`).
    config: its `disco.train.TrainConfig`.
    num_seeds: seeds `config.seed`... trained together (vmapped).
    checkpoints: False for a run in one piece that writes no checkpoint.
  """

  name: str
  config: Any
  num_seeds: int = 1
  checkpoints: bool = True


@dataclasses.dataclass(frozen=True)
class PpoRun:
  """One run of rejax's PPO, all its seeds together.

  Attributes:
    name: the run's record name.
    env: the environment (e.g. 'gymnax:Breakout-MinAtar').
    env_steps: environment steps per seed (whole PPO iterations nearest).
    seeds: the seeds.
  """

  name: str
  env: str
  env_steps: int
  seeds: tuple[int, ...]


def eval_max_steps(env: str) -> int:
  """Steps after which an evaluation episode on `env` is cut."""
  if env.startswith('craftax:'):  # Symbolic, its grid and its pixels alike.
    return CRAFTAX_EVAL_MAX_STEPS
  return EVAL_MAX_STEPS.get(env, DEFAULT_EVAL_MAX_STEPS)


def run_name(
    env: str,
    algo: str,
    seeds: int | Sequence[int] | None = None,
    tags: Sequence[str] = (),
) -> str:
  """'<env>__<algo>[__<tag>...][__s<seed>[-<last seed>]]'.

  Args:
    env: the environment (its family left out of the name).
    algo: the rule or algorithm.
    seeds: the seed, or the seeds trained together (None: all, unnamed).
    tags: what else tells the run apart (e.g. its agent), in order.
  """
  name = '__'.join([tables.env_label(env), algo, *tags])
  if seeds is None:
    return name
  seeds = (seeds,) if isinstance(seeds, int) else tuple(seeds)
  together = f'-{seeds[-1]}' if len(seeds) > 1 else ''
  return f'{name}__s{seeds[0]}{together}'


def seed_runs(
    env: str,
    algos: Sequence[str],
    seeds: Sequence[int],
    *,
    name_fn: Callable[[str, tuple[int, ...]], str],
    config_fn: Callable[[str, int], Any],
    together: bool = False,
    checkpoints: bool = True,
) -> list[TrainRun | PpoRun]:
  """An environment's runs: each rule seed by seed, then rejax's PPO.

  Args:
    env: the environment.
    algos: trainer rules (e.g. 'disco') and 'ppo', in order.
    seeds: the seeds.
    name_fn: (algo, seeds) -> the run's name.
    config_fn: (rule, seed) -> the run's `disco.train.TrainConfig`.
    together: each rule's seeds as one run (vmapped: one program for all,
      as an accelerator prefers).
    checkpoints: whether the trainer's runs write checkpoints.

  Returns:
    The trainer's runs, then PPO's (all seeds together, at the env steps of
    a run of the first rule, or of 'disco').
  """
  seeds = tuple(seeds)
  groups = [seeds] if together else [(s,) for s in seeds]
  rules = [a for a in algos if a != ppo_runs.PPO]
  todo: list[TrainRun | PpoRun] = [
      TrainRun(
          name_fn(rule, group),
          config_fn(rule, group[0]),
          num_seeds=len(group),
          checkpoints=checkpoints,
      )
      for rule in rules
      for group in groups
  ]
  if ppo_runs.PPO in algos:
    config = config_fn(rules[0] if rules else 'disco', seeds[0])
    env_steps = config.num_steps * config.env_steps_per_step
    todo.append(PpoRun(name_fn(ppo_runs.PPO, seeds), env, env_steps, seeds))
  return todo


def run_all(
    out: pathlib.Path,
    runs: Sequence[TrainRun | PpoRun],
    *,
    show_progress: bool = True,
    keep_checkpoints: int | None = None,
) -> list[dict[str, Any]]:
  """Runs (or resumes, or skips) each run in turn; returns their records.

  Args:
    out: the study's output directory.
    runs: the runs, in order.
    show_progress: a progress bar per piece.
    keep_checkpoints: how many checkpoints each trainer run keeps on disk
      (None: its config's). Not one of a record's settings, so it may change
      between pieces. A checkpoint holds the run's replay buffer: GBs on
      Craftax (docs/training.md#checkpoints).

  Raises:
    disco.studies.records.RecordError: a run's files are of other settings.
    KeyboardInterrupt: on Ctrl-C or SIGTERM, after a checkpoint.
  """
  done = []
  for run in runs:
    if isinstance(run, PpoRun):
      record = ppo_runs.run_in_pieces(
          out,
          run.name,
          run.env,
          run.env_steps,
          run.seeds,
          show_progress=show_progress,
      )
    else:
      config = run.config
      if keep_checkpoints is not None:
        config = config.replace(keep_checkpoints=keep_checkpoints)
      record = pieces.run(
          out,
          run.name,
          config,
          num_seeds=run.num_seeds,
          show_progress=show_progress,
          checkpoints=run.checkpoints,
      )
      print(
          f'{run.name}: done, {record["wall_seconds"]:.0f} s in'
          f' {len(record["pieces"])} piece(s)',
          flush=True,
      )
    done.append(record)
  return done


def command(
    prog: str,
    out: pathlib.Path,
    steps: Sequence[Callable[[], Any]],
) -> int:
  """Calls `steps` in turn as a study command; returns its exit status.

  Args:
    prog: the command's name, for its messages.
    out: the study's output directory, named when it stops.
    steps: e.g. running the study's runs, then writing its report.

  Returns:
    0 when every step returned; 1 when a run's files are of other settings
    (the message on stderr); 128 + the signal's number after Ctrl-C or
    SIGTERM (the runs' checkpoints and partial records kept).
  """
  try:
    for step in steps:
      step()
  except records.RecordError as e:
    print(f'{prog}: error: {e}', file=sys.stderr)
    return 1
  except KeyboardInterrupt as e:
    signum = getattr(e, 'signum', signal.SIGINT)
    print(
        f'{prog}: stopped by {signal.Signals(signum).name}; what ran is kept'
        f' in {out} (checkpoint and partial record): the same command goes'
        ' on from there',
        file=sys.stderr,
    )
    return 128 + signum
  return 0


def run_then_report(
    prog: str,
    args: argparse.Namespace,
    todo: Sequence[TrainRun | PpoRun] | None,
    report: Callable[[], Any] | None,
) -> int:
  """`command` over the usual steps: run `todo` (if any), then `report`.

  Args:
    prog: the command's name.
    args: its parsed `add_flags` flags (`--out`, `--no-progress`,
      `--keep-checkpoints`).
    todo: the runs asked, or None when none is.
    report: writes the report, or None when it is not asked.
  """
  steps = []
  if todo is not None:
    steps.append(
        lambda: run_all(
            args.out,
            todo,
            show_progress=not args.no_progress,
            keep_checkpoints=args.keep_checkpoints,
        )
    )
  if report is not None:
    steps.append(report)
  return command(prog, args.out, steps)


def add_flags(
    parser: argparse.ArgumentParser,
    seeds: Sequence[int],
    one_call: bool = False,
) -> None:
  """The flags of every study command that runs in pieces.

  `--out` (required), `--seeds` (default `seeds`), `--report`,
  `--include-partial`, `--no-progress` and `--keep-checkpoints`; with
  `one_call`, those of runs made for one accelerator call:
  `--seeds-together` and `--no-checkpoints` (`seed_runs`' `together` and
  `checkpoints`).
  """
  if one_call:
    parser.add_argument(
        '--seeds-together', action='store_true', help='seeds as one run'
    )
    parser.add_argument(
        '--no-checkpoints',
        action='store_true',
        help='a run in one piece (one device call): its rows kept if stopped',
    )
  parser.add_argument('--out', type=pathlib.Path, required=True)
  parser.add_argument('--seeds', nargs='+', type=int, default=tuple(seeds))
  parser.add_argument(
      '--report',
      action='store_true',
      help='write the report of the runs in --out (after running any asked)',
  )
  parser.add_argument(
      '--include-partial',
      action='store_true',
      help=(
          'report stopped runs too, up to their last checkpoint (their'
          ' last log row, run without checkpoints); a summary takes each'
          " seed at the last evaluation all of an algorithm's seeds reached"
      ),
  )
  parser.add_argument('--no-progress', action='store_true')
  parser.add_argument(
      '--keep-checkpoints',
      type=positive(int),
      default=None,
      metavar='N',
      help=(
          "checkpoints each run keeps on disk (default: its config's, 2);"
          ' each holds the replay buffer, GBs on Craftax'
      ),
  )


def positive(kind: type[Any]) -> Callable[[str], Any]:
  """An argparse type: values of `kind` (int, float) greater than 0."""

  def parse(text: str) -> Any:
    try:
      value = kind(text)
    except ValueError:
      raise argparse.ArgumentTypeError(
          f'not a valid {kind.__name__}: {text!r}'
      ) from None
    if not value > 0:
      raise argparse.ArgumentTypeError(f'must be > 0, got {text}')
    return value

  parse.__name__ = kind.__name__
  return parse


def name_value(text: str) -> tuple[str, Any]:
  """An argparse type: NAME=VALUE, the value as JSON (else a string)."""
  name, sep, value = text.partition('=')
  if not sep or not name:
    raise argparse.ArgumentTypeError(f'expected NAME=VALUE, got {text!r}')
  try:
    return name, json.loads(value)
  except ValueError:
    return name, value
