"""The step loop every run kind shares: cadence, signals, checkpoints, logs."""

from collections.abc import Callable, Iterator, Mapping, Sequence
import contextlib
import dataclasses
import logging
import pathlib
from typing import Any

import jax
import numpy as np

from disco import checkpoint as checkpoint_lib
from disco import files
from disco import interrupts
from disco import loggers
from disco import logs as logs_lib
from disco import progress
from disco import weights

# A step function: state -> (new state, the step's scalar logs).
StepFn = Callable[[Any], tuple[Any, dict[str, float]]]


@dataclasses.dataclass(frozen=True)
class RunResult:
  """What a meta-learning run (`run_meta_train`, `run_discovery`) returns.

  Attributes:
    update_rule_params: the final rule (float32 numpy Haiku tree; save with
      `disco.weights.save_update_rule_params`).
    logs: per-step scalars, each [num_steps] (see the run's docs).
    num_steps: steps done in total (including before a resume).
    checkpoint_path: the last checkpoint written, or None.
  """

  update_rule_params: weights.HostParams
  logs: dict[str, np.ndarray]
  num_steps: int
  checkpoint_path: pathlib.Path | None


def is_due(step: int, every: int, since: int | None = None) -> bool:
  """Whether something done every `every` steps is due at `step`.

  Due when a multiple of `every` lies in (`since`, `step`] (`since`
  defaults to `step - 1`: `step` itself is a multiple); never if `every`
  is 0.
  """
  if not every:
    return False
  since = step - 1 if since is None else since
  return step // every > since // every


def agreed_signal(signum: int) -> int:
  """The signal that stops every process: the largest any process received.

  On one process, `signum` itself. With several (`jax.distributed`), a
  tiny all-gather that every process makes at the same point of its loop,
  so that a signal that reached one process stops them all after the same
  step (a process that stopped alone would leave the others waiting in the
  next collective).
  """
  if jax.process_count() == 1:
    return int(signum)
  # pylint: disable-next=g-import-not-at-top
  from jax.experimental import multihost_utils

  gathered = multihost_utils.process_allgather(np.int32(signum))
  return int(np.max(gathered))


def stopper(
    interrupted: Callable[[], int], agree: bool = True
) -> Callable[[Callable[[], Any] | None], None]:
  """`stop_if_interrupted(save)`: once a signal came, saves and stops.

  Called after each step, by every process at the same point: when
  `interrupted()` (the signal received, 0 if none) is set on any process
  (`agreed_signal`; on this one alone if not `agree`, for a flag that is
  never set), it calls `save()` (if given; a path it returns is logged)
  and raises `interrupts.Interrupted` (a `KeyboardInterrupt`).
  """

  def _stop_if_interrupted(save: Callable[[], Any] | None) -> None:
    signum = agreed_signal(interrupted()) if agree else interrupted()
    if signum:
      if save is not None:
        saved = save()
        if saved is not None:
          logging.warning('Wrote checkpoint %s.', saved)
      raise interrupts.Interrupted(signum)

  return _stop_if_interrupted


@contextlib.contextmanager
def stop_on_interrupt(
    what: str, enabled: bool
) -> Iterator[Callable[[Callable[[], Any] | None], None]]:
  """`interrupts.deferred_interrupts` (Ctrl-C, SIGTERM), yielding its `stopper`."""
  with interrupts.deferred_interrupts(what, enabled=enabled) as interrupted:
    # Without handlers no process can be signalled: nothing to agree on.
    yield stopper(interrupted, agree=enabled)


def checkpoint_root(checkpoint_dir: files.PathLike) -> pathlib.Path:
  """Where this process writes its checkpoints under `checkpoint_dir`.

  `checkpoint_dir` itself on one process; with several, each process keeps
  the state of its own devices in `checkpoint_dir/process_<index>`.
  """
  root = pathlib.Path(checkpoint_dir).expanduser()
  if jax.process_count() > 1:
    root = root / f'process_{jax.process_index()}'
  return root


def stacked_logs(logs: Sequence[Mapping[str, float]]) -> dict[str, np.ndarray]:
  """Per-step logs as one [num_steps] array per key, keys sorted."""
  return dict(sorted(logs_lib.columns(logs).items()))


def save_with_rng_and_logs(
    root: pathlib.Path,
    step: int,
    *,
    update_rule_params: weights.Params,
    arrays: Mapping[str, np.ndarray],
    rng: jax.Array,
    logs: Sequence[Mapping[str, float]],
    metadata: Mapping[str, Any],
    keep: int,
) -> pathlib.Path:
  """Saves a checkpoint of `arrays` plus the loop's key and per-step logs."""
  arrays = dict(arrays, rng=np.asarray(rng), **logs_lib.to_arrays(logs))
  return checkpoint_lib.save(
      root,
      step,
      update_rule_params=update_rule_params,
      arrays=arrays,
      metadata=metadata,
      keep=keep,
  )


def restore_rng_and_logs(
    ckpt: checkpoint_lib.Checkpoint,
) -> tuple[np.ndarray, list[dict[str, float]]]:
  """The loop's random key and the per-step logs saved in `ckpt`."""
  rng = ckpt.arrays.get('rng')
  if rng is None or rng.shape != (2,) or rng.dtype != np.uint32:
    raise checkpoint_lib.CheckpointMismatchError(
        f'The checkpoint at {ckpt.path} has no valid random key.'
    )
  try:
    logs = logs_lib.from_arrays(ckpt.arrays)
  except ValueError:
    logs = []
  if len(logs) != ckpt.step:
    raise checkpoint_lib.CheckpointMismatchError(
        f'The checkpoint at {ckpt.path} has logs of the wrong length.'
    )
  return rng, logs


def run_steps(
    state: Any,
    step_fn: StepFn,
    logs: list[dict[str, float]],
    *,
    num_steps: int,
    checkpoint_every: int,
    save: Callable[[Any], pathlib.Path] | None,
    latest_saved: Callable[[], int | None],
    last_saved: pathlib.Path | None,
    progress_fn: progress.ProgressFn | None,
    handle_interrupts: bool,
    what: str = 'meta-step',
    logger: loggers.Logger | None = None,
) -> tuple[Any, pathlib.Path | None]:
  """Steps `state` (with a `.step`) to `num_steps`, checkpointing on the way.

  Appends each step's logs to `logs`, calls `progress_fn(step, logs)` and
  `logger.log(step, logs)`, saves when `is_due(step, checkpoint_every)` and at the end (unless the
  newest checkpoint, `latest_saved()`, is already this step), and, with
  `handle_interrupts`, saves and raises `interrupts.Interrupted` after the
  step during which Ctrl-C or SIGTERM came (on any process). Returns the final state and the last path saved.
  """
  with stop_on_interrupt(what, handle_interrupts) as stop_if_interrupted:
    while state.step < num_steps:
      state, step_logs = step_fn(state)
      logs.append(step_logs)
      if progress_fn is not None:
        progress_fn(state.step, step_logs)
      if logger is not None:
        logger.log(state.step, step_logs)
      stop_if_interrupted(
          None if save is None else lambda: save(state)  # pylint: disable=cell-var-from-loop
      )
      if save is not None and is_due(state.step, checkpoint_every):
        last_saved = save(state)
    if save is not None and (
        last_saved is None or latest_saved() != state.step
    ):
      last_saved = save(state)
  return state, last_saved
