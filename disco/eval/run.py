"""Training an agent with a fixed update rule and recording its learning curve.

Details and rationale: `docs/modules.md`.
"""

from collections.abc import Mapping, Sequence
import pathlib
import time
from typing import Any
import warnings

from disco import configs
from disco import files
from disco import interrupts
from disco import learner
from disco import loggers
from disco import progress
from disco import run_checkpoints
from disco import types
from disco.devices import select_devices
from disco.environments import registry
from disco.eval import fast
from disco.eval import loop as eval_faithful
from disco.eval.config import ACTOR_CRITIC
from disco.eval.config import CHECKPOINT_KIND
from disco.eval.config import DISCO
from disco.eval.config import EXECUTION_FIELDS
from disco.eval.config import POLICY_GRADIENT
from disco.eval.config import RULES
from disco.eval.config import EvalConfig
from disco.eval.history import EvalHistory
from disco.eval.history import LogFn
from disco.eval.history import Recorder
from disco.eval.history import RolloutRecord
from disco.learner import default_update_rule_params
from disco.learner import make_agent_settings
from disco.learner import make_value_function
from disco.progress import ProgressFn

__all__ = [
    'ACTOR_CRITIC',
    'DISCO',
    'EXECUTION_FIELDS',
    'POLICY_GRADIENT',
    'RULES',
    'EvalConfig',
    'EvalHistory',
    'LogFn',
    'ProgressBar',
    'ProgressFn',
    'RolloutRecord',
    'default_update_rule_params',
    'make_agent_settings',
    'make_value_function',
    'progress_bar',
    'run_eval',
    'run_eval_seeds',
    'seed_checkpoint_dir',
    'select_devices',
    'to_train_config',
]

PathLike = files.PathLike
FAST_CHECKPOINT_KIND = fast.FAST_CHECKPOINT_KIND
to_train_config = fast.to_train_config


def progress_bar(
    total: int, description: str = '', **kwargs: Any
) -> progress.ProgressBar:
  """`progress.progress_bar(progress.EVAL, ...)`: iterations, average return.

  Use it as `run_eval`'s `progress_fn`, as a context manager:
  `with progress_bar(config.num_steps) as bar: run_eval(config,
  progress_fn=bar)`.
  """
  return progress.progress_bar(progress.EVAL, total, description, **kwargs)


# The earlier spelling of `progress_bar`.
ProgressBar = progress_bar


def seed_checkpoint_dir(
    checkpoint_dir: PathLike, config: EvalConfig, seed: int
) -> pathlib.Path:
  """Where `run_eval_seeds(config, ...)` keeps the checkpoints of `seed`.

  With `fast=True` the seeds train together and checkpoint together in
  `checkpoint_dir`; the faithful loop runs them in turn, each in
  `checkpoint_dir/seed_<seed>`. (`run_eval` always uses `checkpoint_dir`.)
  """
  root = pathlib.Path(checkpoint_dir).expanduser()
  return root if config.fast else root / f'seed_{int(seed)}'


def run_eval(
    config: EvalConfig,
    *,
    update_rule_params: types.MetaParams | None = None,
    progress_fn: ProgressFn | None = None,
    log_fn: LogFn | None = None,
    checkpoint_dir: PathLike | None = None,
    resume: bool = False,
    handle_interrupts: bool = False,
    logger: loggers.LoggerArg = None,
    log_dir: PathLike | None = None,
) -> EvalHistory:
  """Trains an agent with `config.rule` and returns its learning curve.

  Args:
    config: the run's settings.
    update_rule_params: parameters of the update rule; None loads them as
      `default_update_rule_params(config)` does (Disco103 for 'disco').
    progress_fn: called after every iteration with the number of
      iterations done and that iteration's scalar metrics ('env_steps',
      'avg_return', 'num_episodes' and, once learning has started, the
      learner's logs). With `fast=True` it is called after each chunk, for
      each of the chunk's iterations. Not called for iterations restored
      from a checkpoint.
    log_fn: called as `log_fn(seed, iteration, row)` for every iteration
      (from 1) with its row: 'env_steps', 'avg_return', 'total_return',
      'num_episodes', 'elapsed' and, once learning has started, the
      learner's logs. Not called for iterations restored from a checkpoint.
    checkpoint_dir: if set, checkpoints (`<checkpoint_dir>/step_<n>`) are
      written every `config.checkpoint_every` iterations (`fast=True`:
      at the first chunk end at or after each multiple) and at the end.
      Not supported for host environments ('catch-cpu').
    resume: continue from the newest checkpoint in `checkpoint_dir`, or
      start afresh if there is none; a complete run returns its history at
      once. Only `eval_config.EXECUTION_FIELDS` may differ from the
      checkpoint's config. Without it, existing checkpoints are an error.
    handle_interrupts: the first Ctrl-C (SIGINT) or SIGTERM finishes the
      current iteration (`fast=True`: chunk), checkpoints (with
      `checkpoint_dir`) and raises `interrupts.Interrupted` (a
      `KeyboardInterrupt`); a second one interrupts at once. Without it no
      signal handler is installed.
    logger: where each iteration's row also goes, as series
      '<rule>/seed_<s>' at step `iteration`: sink names ('csv',
      'tensorboard', 'wandb'; written under `log_dir`) and/or
      `disco.loggers.Logger` objects (see `disco.loggers`).
    log_dir: the directory the named sinks write in.

  Returns:
    The run's `EvalHistory` (all iterations, restored ones included).

  Raises:
    ValueError: `resume` without `checkpoint_dir`, checkpoints of a host
      environment, or update-rule parameters that do not fit the rule
      (`files.TreeMismatchError`, naming the leaves).
    checkpoint.CheckpointError: checkpoints present without `resume`
      (`CheckpointExistsError`), or of another run
      (`CheckpointMismatchError`), or corrupt.
  """
  (history,) = _run(
      config,
      [config.seed],
      update_rule_params,
      progress_fn,
      log_fn,
      checkpoint_dir,
      resume,
      handle_interrupts,
      one_run=True,
      logger=logger,
      log_dir=log_dir,
  )
  return history


def run_eval_seeds(
    config: EvalConfig,
    seeds: Sequence[int],
    *,
    update_rule_params: types.MetaParams | None = None,
    progress_fn: ProgressFn | None = None,
    log_fn: LogFn | None = None,
    checkpoint_dir: PathLike | None = None,
    resume: bool = False,
    handle_interrupts: bool = False,
    logger: loggers.LoggerArg = None,
    log_dir: PathLike | None = None,
) -> list[EvalHistory]:
  """`run_eval` for several seeds (`config.seed` is replaced by each).

  With `fast=True` all seeds train at once, `vmap`ped in one program, and
  checkpoints them together in `checkpoint_dir`; the faithful loop runs
  them one after the other, each checkpointing in `seed_checkpoint_dir`.
  On resume, seeds whose runs are complete return at once and seeds never
  started start afresh.

  Args:
    config: the runs' settings.
    seeds: the seeds, one run each.
    update_rule_params: as in `run_eval`.
    progress_fn: as in `run_eval`. With `fast=True` it reports the first
      seed's metrics; the faithful loop reports every seed's in turn, counting the
      iterations of all seeds so far (up to `len(seeds) * num_steps`).
    log_fn: as in `run_eval`, for every seed.
    checkpoint_dir: as in `run_eval` (see `seed_checkpoint_dir`).
    resume: as in `run_eval`.
    handle_interrupts: as in `run_eval`.
    logger: as in `run_eval`, for every seed.
    log_dir: as in `run_eval`.

  Returns:
    One `EvalHistory` per seed, in the order of `seeds`.
  """
  seeds = [int(s) for s in seeds]
  if not seeds:
    raise ValueError('Give at least one seed.')
  if len(set(seeds)) != len(seeds):
    raise ValueError(f'Seeds must differ, got {seeds}.')
  return _run(
      config,
      seeds,
      update_rule_params,
      progress_fn,
      log_fn,
      checkpoint_dir,
      resume,
      handle_interrupts,
      one_run=False,
      logger=logger,
      log_dir=log_dir,
  )


def _logging_to(sink: loggers.Logger, log_fn: LogFn | None, rule: str) -> LogFn:
  """`log_fn` that also logs each row to `sink`, a series per rule and seed."""

  def _log(seed: int, iteration: int, row: Mapping[str, float]) -> None:
    if log_fn is not None:
      log_fn(seed, iteration, row)
    sink.log(iteration, loggers.scalars_of(row), f'{rule}/seed_{seed}')

  return _log


def _run(
    config: EvalConfig,
    seeds: list[int],
    update_rule_params: types.MetaParams | None,
    progress_fn: ProgressFn | None,
    log_fn: LogFn | None,
    checkpoint_dir: PathLike | None,
    resume: bool,
    handle_interrupts: bool,
    *,
    one_run: bool,
    logger: loggers.LoggerArg,
    log_dir: PathLike | None,
) -> list[EvalHistory]:
  """Both entry points: opens `logger`'s sinks, runs the trainer or the loop."""
  with loggers.open_logger(
      logger, log_dir, resume=resume, config=config
  ) as sink:
    log_fn = _logging_to(sink, log_fn, config.rule)
    start_time = time.perf_counter()
    if resume and checkpoint_dir is None:
      raise ValueError('resume=True needs a checkpoint_dir.')
    if checkpoint_dir is not None and config.env == registry.CATCH_CPU:
      raise configs.ConfigError(
          'Checkpoints need a jittable environment: catch-cpu keeps numpy'
          ' random states inside its games, which a checkpoint cannot restore.'
          ' Use env="catch" or run without checkpoint_dir.'
      )
    if config.fast:
      warnings.warn(
          'EvalConfig(fast=True) is deprecated: use disco.train.run_train with'
          " disco.train.preset('colab') (disco.eval.to_train_config(config)"
          ' gives the same run).',
          DeprecationWarning,
          stacklevel=3,
      )
      return fast.run_fast(
          config,
          seeds,
          update_rule_params,
          progress_fn=progress_fn,
          log_fn=log_fn,
          checkpoint_dir=checkpoint_dir,
          resume=resume,
          handle_interrupts=handle_interrupts,
      )
    setup = learner.build(config, update_rule_params)

    def _checkpoints(run_setup: learner.Setup, run_seeds: list[int]):
      root = None
      if checkpoint_dir is not None:
        root = (
            pathlib.Path(checkpoint_dir).expanduser()
            if one_run
            else seed_checkpoint_dir(checkpoint_dir, config, run_seeds[0])
        )
      return run_checkpoints.RunCheckpoints(
          root,
          run_setup.config,
          run_seeds,
          run_setup.update_rule_params,
          run_setup.num_devices,
          kind=CHECKPOINT_KIND,
          execution_fields=EXECUTION_FIELDS,
      )

    def _recorder(
        run_setup: learner.Setup, seed: int, offset: int, report: bool
    ) -> Recorder:
      return Recorder(
          run_setup.config,
          seed,
          start_time,
          progress_fn=progress_fn if report else None,
          progress_offset=offset,
          log_fn=log_fn,
      )

    runs = [setup.for_seed(seed) for seed in seeds]
    seed_checkpoints = [_checkpoints(s, [s.config.seed]) for s in runs]
    for checkpoints in seed_checkpoints:  # Fail before anything runs.
      checkpoints.peek(resume)
    fns = eval_faithful.FaithfulFns.build(setup)
    histories = []
    with interrupts.deferred_interrupts('iteration', handle_interrupts) as stop:
      for i, (run_setup, checkpoints) in enumerate(
          zip(runs, seed_checkpoints, strict=True)
      ):
        recorder = _recorder(
            run_setup, run_setup.config.seed, i * config.num_steps, True
        )
        histories.append(
            eval_faithful.run_faithful(
                run_setup,
                fns,
                recorder,
                checkpoints,
                resume=resume,
                interrupted=stop,
            )
        )
    return histories
