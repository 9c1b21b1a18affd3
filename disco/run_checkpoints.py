"""Checkpoints of evaluation and training runs: what they hold, when they fit.

One run (a seed of the faithful loop, or vmapped seeds) keeps its
checkpoints in one directory through `disco.checkpoint`, with the metadata
of `disco.runtime.run_metadata`; a resume that changes anything but the
execution fields is refused with a `CheckpointMismatchError`.
"""

from collections.abc import Callable, Mapping, Sequence, Set
import logging
import pathlib
from typing import Any

import jax
import numpy as np

from disco import checkpoint as checkpoint_lib
from disco import configs
from disco import rules
from disco import runtime
from disco import types
from disco import weights

# The one digest of the update rule's parameters (`disco.runtime`).
params_digest = runtime.params_digest


class RunCheckpoints:
  """The checkpoints of one run, or none at all (`root` None).

  Attributes:
    root: the run's checkpoint directory, or None not to checkpoint.
    last_saved: the step of the newest checkpoint written or resumed from.
  """

  def __init__(
      self,
      root: pathlib.Path | None,
      config: configs.ConfigBase,
      seeds: Sequence[int],
      update_rule_params: types.MetaParams,
      num_devices: int,
      *,
      kind: str,
      execution_fields: Set[str],
  ):
    """The checkpoints of a run of `config` (an `EvalConfig` by default).

    Args:
      root: the run's checkpoint directory, or None not to checkpoint.
      config: the run's config (any config with `rule`, `num_steps`,
        `checkpoint_every` and `keep_checkpoints`).
      seeds: the run's seeds.
      update_rule_params: the rule's parameters.
      num_devices: the devices the run uses.
      kind: names the loop that writes them (a resume checks it).
      execution_fields: the config fields that may change on resume.
    """
    self.root = root
    self._kind = kind
    self._execution_fields = frozenset(execution_fields)
    self.last_saved: int | None = None
    self._config = config
    self._seeds = [int(s) for s in seeds]
    self._params = update_rule_params
    self._digest = params_digest(update_rule_params)
    self._num_devices = num_devices

  def metadata(self) -> dict[str, Any]:
    return runtime.run_metadata(
        self._kind,
        self._config,
        self._digest,
        self._num_devices,
        seeds=self._seeds,
    )

  def check_metadata(self, meta: Mapping[str, Any], where: str) -> None:
    """Raises `CheckpointMismatchError` unless `meta` is this run's."""
    runtime.check_metadata(
        meta,
        where,
        kind=self._kind,
        config=self._config,
        num_local_devices=self._num_devices,
        execution_fields=self._execution_fields,
        seeds=self._seeds,
        rule_params=self._params,
    )

  def peek(self, resume: bool) -> int | None:
    """Checks, before anything runs, that the run may start or resume here.

    Reads only the newest checkpoint's metadata (`load` verifies the rest).

    Returns:
      The newest checkpoint's step, or None.

    Raises:
      CheckpointExistsError: checkpoints exist and `resume` is False.
      CheckpointMismatchError: they belong to another run, or are past
        `num_steps`.
    """
    if self.root is None:
      return None
    step = checkpoint_lib.latest_step(self.root)
    if step is None:
      return None
    if not resume:
      raise checkpoint_lib.CheckpointExistsError(
          f'{self.root} already holds checkpoints (latest step {step}); pass'
          ' resume=True to continue that run, or use another directory.'
      )
    path = checkpoint_lib.step_path(self.root, step)
    meta = checkpoint_lib.read_metadata(self.root, step)
    self.check_metadata(meta, f'The checkpoint at {path}')
    if step > self._config.num_steps:
      raise checkpoint_lib.CheckpointMismatchError(
          f'The checkpoint at {path} is at iteration {step}, past num_steps='
          f'{self._config.num_steps}; resume with num_steps >= {step}.'
      )
    return step

  def latest(self, resume: bool) -> checkpoint_lib.Checkpoint | None:
    """The verified newest checkpoint to resume from (None: start afresh)."""
    step = self.peek(resume)
    if step is None:
      if resume and self.root is not None:
        logging.info('No checkpoint under %s: starting afresh.', self.root)
      return None
    # `peek` has checked this checkpoint's metadata; `load` verifies the rest.
    ckpt = checkpoint_lib.load(self.root, step)
    self.last_saved = ckpt.step
    return ckpt

  def _storable_params(self) -> weights.HostParams:
    if self._config.rule == rules.DISCO:
      return jax.device_get(self._params)
    # The baselines' placeholder, in the two-level layout weights expects.
    return {'placeholder': checkpoint_lib.flatten_tree(self._params)}

  def save(
      self,
      step: int,
      arrays_fn: Callable[[], Mapping[str, np.ndarray]],
      *,
      due_since: int | None = None,
  ) -> None:
    """Checkpoints `step` unless already saved (or not checkpointing).

    Args:
      step: iterations done.
      arrays_fn: makes the state's flat arrays (called only when saving).
      due_since: save only if a multiple of `checkpoint_every` lies in
        (`due_since`, `step`]; None saves unconditionally.
    """
    if self.root is None or self.last_saved == step:
      return
    if due_since is not None and not runtime.is_due(
        step, self._config.checkpoint_every, due_since
    ):
      return
    path = checkpoint_lib.save(
        self.root,
        step,
        update_rule_params=self._storable_params(),
        arrays=arrays_fn(),
        metadata=self.metadata(),
        keep=self._config.keep_checkpoints,
    )
    self.last_saved = step
    logging.info('Wrote checkpoint %s.', path)
