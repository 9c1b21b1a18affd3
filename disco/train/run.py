"""`run_train`: a training run, its programs shared between runs."""

from collections.abc import Mapping, Sequence

from disco import files
from disco import loggers
from disco import progress
from disco import runtime
from disco import types
from disco.environments import registry
from disco.train.config import EXECUTION_FIELDS
from disco.train.config import TrainConfig
from disco.train.host import HostTrainer
from disco.train.loop import NEUTRAL_FIELDS
from disco.train.loop import LogFn
from disco.train.loop import Trainer
from disco.train.result import TrainResult

CHECKPOINT_KIND = 'disco-train'


# A `Trainer` (its compiled programs) shared by runs of one setting: e.g. a
# run and its resumption with a larger `num_steps` compile once.
_TRAINERS = runtime.ProgramCache(Trainer, neutral=NEUTRAL_FIELDS)
_HOST_TRAINERS = runtime.ProgramCache(HostTrainer, neutral=NEUTRAL_FIELDS)


def get_trainer(
    config: TrainConfig,
    seeds: Sequence[int],
    update_rule_params: types.MetaParams | None = None,
) -> Trainer:
  """The `Trainer` of `config` for `seeds` (shared while the rule's default)."""
  host = not registry.is_jittable_name(config.env)
  if update_rule_params is None:
    cache = _HOST_TRAINERS if host else _TRAINERS
    return cache(config, tuple(int(s) for s in seeds))
  return (HostTrainer if host else Trainer)(config, seeds, update_rule_params)


def run_train(
    config: TrainConfig,
    *,
    num_seeds: int = 1,
    update_rule_params: types.MetaParams | None = None,
    progress_fn: progress.ProgressFn | None = None,
    log_fn: LogFn | None = None,
    checkpoint_dir: files.PathLike | None = None,
    resume: bool = False,
    handle_interrupts: bool = False,
    logger: loggers.LoggerArg = None,
    log_dir: files.PathLike | None = None,
) -> TrainResult:
  """Trains `num_seeds` agents (seeds `config.seed`, `config.seed + 1`, ...).

  Args:
    config: the run's settings, e.g. `preset('paper', env=...)`.
    num_seeds: agents trained together, `vmap`ped in one program.
    update_rule_params: the rule's parameters; None loads them from
      `config.update_rule_params` (Disco103 by default; placeholders for
      the baselines).
    progress_fn: called after each chunk with the iterations done and the
      first seed's log row (with `config.log_every_iteration`, once per
      iteration of the chunk, with that iteration's row).
    log_fn: called as `log_fn(seed, row)` with each seed's row of each chunk
      (or iteration; see `TrainResult.logs`). Not called for rows restored
      from a checkpoint.
    checkpoint_dir: if set, checkpoints go there (see
      `config.checkpoint_every`).
    resume: continue from the newest checkpoint in `checkpoint_dir` (or
      start afresh if there is none). Only `train_config.EXECUTION_FIELDS`
      may differ from the checkpoint's config.
    handle_interrupts: the first Ctrl-C or SIGTERM finishes the current
      chunk, checkpoints and raises `interrupts.Interrupted`.
    logger: where each seed's rows also go, as series 'seed_<s>' at their
      'step': sink names ('csv', 'tensorboard', 'wandb'; written under
      `log_dir`) and/or `disco.loggers.Logger` objects (see
      `disco.loggers`). Rows restored from a checkpoint are not logged.
    log_dir: the directory the named sinks write in.

  Returns:
    The `TrainResult`, rows restored from a checkpoint included.

  Raises:
    ValueError: `resume` without `checkpoint_dir`, or update-rule
      parameters that do not fit the rule (`files.TreeMismatchError`,
      naming the leaves).
    checkpoint.CheckpointError: checkpoints present without `resume`, of
      another run, or corrupt.
  """
  if resume and checkpoint_dir is None:
    raise ValueError('resume=True needs a checkpoint_dir.')
  seeds = tuple(config.seed + i for i in range(int(num_seeds)))
  trainer = get_trainer(config, seeds, update_rule_params)
  with loggers.open_logger(
      logger, log_dir, resume=resume, config=config
  ) as sink:

    def _log(seed: int, row: Mapping[str, float]) -> None:
      if log_fn is not None:
        log_fn(seed, row)
      scalars = loggers.scalars_of(row, 'seed', 'step')
      sink.log(int(row['step']), scalars, f'seed_{seed}')

    return trainer.run(
        config,
        checkpoints=trainer.checkpoints(
            checkpoint_dir,
            config,
            kind=CHECKPOINT_KIND,
            execution_fields=EXECUTION_FIELDS,
        ),
        resume=resume,
        log_fn=_log,
        progress_fn=progress_fn,
        handle_interrupts=handle_interrupts,
    )
