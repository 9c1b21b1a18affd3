"""`EvalConfig(fast=True)`: an evaluation run through the trainer.

Deprecated as an entry point (`disco.train.run_train` with the `colab`
preset is the same run); kept so that such runs and their checkpoints go
on working.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

from disco import files
from disco import progress
from disco import truncation
from disco import types
from disco.devices import select_devices
from disco.eval import history as eval_history
from disco.eval.config import EXECUTION_FIELDS
from disco.eval.config import EvalConfig
from disco.eval.history import EvalHistory
from disco.eval.history import LogFn

if TYPE_CHECKING:
  # disco.train imports disco.eval: at run time, imported where used.
  from disco import train as train_lib  # pylint: disable=g-bad-import-order

# Checkpoints of `EvalConfig(fast=True)` runs: the trainer's state.
FAST_CHECKPOINT_KIND = 'disco-eval-fast'


def to_train_config(config: EvalConfig) -> 'train_lib.TrainConfig':
  """The `disco.train.TrainConfig` that `config` with `fast=True` runs.

  The `colab` preset with `config`'s settings: the per-device learner
  batch, buffer and `learning_starts` times the devices
  (`select_devices`), the buffer rounded down to whole rollouts, one log
  row per iteration, the reference's program and rounding
  (`taken_action_gradients`, `forward_once`, `share_meta_inputs` and
  `share_state_gates` off)
  and its time limits, which end episodes
  like terminations (`truncation='terminate'`). `buffer_seed` and
  `store_behaviour_outs` have no counterpart (the trainer draws replay
  positions with the run's keys, and keeps the logits alone).
  """
  # pylint: disable-next=g-import-not-at-top
  from disco import train

  devices = len(select_devices(config.num_envs, config.max_devices))
  per_device = config.num_envs // devices
  capacity = config.buffer_capacity // per_device * config.num_envs
  shared = set(EvalConfig.field_names()) & set(train.TrainConfig.field_names())
  changes = {name: getattr(config, name) for name in shared} | dict(
      num_envs=config.num_envs,
      learner_batch_size=config.learner_batch_size * devices,
      replay_fraction=1.0,
      buffer_capacity=capacity,
      learning_starts=min(config.learning_starts * devices, capacity),
      eval_every=0,
      eval_envs=config.num_envs,
      max_devices=devices,
      taken_action_gradients=False,
      forward_once=False,
      share_meta_inputs=False,
      share_state_gates=False,
      truncation=truncation.TERMINATE,
      log_every_iteration=True,
  )
  return train.preset('colab', **changes)


def run_fast(
    config: EvalConfig,
    seeds: Sequence[int],
    update_rule_params: types.MetaParams | None,
    *,
    progress_fn: progress.ProgressFn | None,
    log_fn: LogFn | None,
    checkpoint_dir: files.PathLike | None,
    resume: bool,
    handle_interrupts: bool,
) -> list[EvalHistory]:
  """The seeds through the trainer, `vmap`ped together; one history each."""
  # pylint: disable-next=g-import-not-at-top
  from disco.train import run as train_run

  train_config = to_train_config(config)
  trainer = train_run.get_trainer(train_config, seeds, update_rule_params)
  checkpoints = trainer.checkpoints(
      checkpoint_dir,
      config,
      kind=FAST_CHECKPOINT_KIND,
      execution_fields=EXECUTION_FIELDS,
  )
  checkpoints.peek(resume)
  rows = eval_history.TrainRows(config, progress_fn=progress_fn, log_fn=log_fn)
  result = trainer.run(
      train_config,
      checkpoints=checkpoints,
      resume=resume,
      log_fn=rows.log,
      progress_fn=rows.progress,
      handle_interrupts=handle_interrupts,
  )
  return rows.histories(result.logs, result.seeds, result.params)
