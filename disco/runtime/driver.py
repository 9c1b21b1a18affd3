"""Starts or resumes a run of a program and steps it to `num_steps`."""

from collections.abc import Mapping, Sequence, Set
import logging
import pathlib
from typing import Any, Protocol

import jax
import numpy as np

from disco import checkpoint as checkpoint_lib
from disco import configs
from disco import devices
from disco import files
from disco import loggers
from disco import progress
from disco import weights
from disco.runtime import metadata as metadata_lib
from disco.runtime import steps as steps_lib


class Program(Protocol):
  """What `run` needs of a run kind's compiled program.

  `kind` names its checkpoints; a resumed run may change the config fields
  in `execution_fields` only. `compile_in_background()` (optional) starts
  compiling the step and returns a function that waits for it.
  """

  kind: str
  execution_fields: Set[str]
  layout: devices.PmapLayout

  def check_params(self, params: weights.Params, what: str = ...) -> None:
    ...

  def random_params(self) -> weights.HostParams:
    ...

  def initial_state(self, params: weights.Params) -> Any:
    ...

  def restore(
      self, ckpt: checkpoint_lib.Checkpoint
  ) -> tuple[Any, list[dict[str, float]]]:
    ...

  def step(self, state: Any) -> tuple[Any, dict[str, float]]:
    ...

  def host_params(self, state: Any) -> weights.HostParams:
    ...

  def save(
      self,
      root: pathlib.Path,
      state: Any,
      logs: Any,
      metadata: Any,
      keep: int,
  ) -> pathlib.Path:
    ...


# The fields of a meta-learning config that leave its program alone (how
# long the run is, how it checkpoints, the rule it starts from), with the
# values a `ProgramCache` key takes for them.
RULE_PROGRAM_NEUTRAL = dict(
    num_steps=1,
    checkpoint_every=0,
    keep_checkpoints=1,
    update_rule_params=None,
)


class RuleProgram:
  """The rule's half of a meta-learning `Program` (meta-training, discovery).

  Needs `kind` and `execution_fields` (see `Program`),
  `self._init_params(key)` (the rule's initialiser), `self.config`
  (`random_init_seed`), `state_arrays(state)` and a state with `step`,
  `rng` (the loop's host key) and `update_rule_params` replicated over the
  devices.
  """

  kind: str
  execution_fields: Set[str]
  config: Any
  _init_params: Any

  def random_params(self) -> weights.HostParams:
    """`init_params(PRNGKey(random_init_seed))`, on the host."""
    return jax.device_get(
        self._init_params(jax.random.PRNGKey(self.config.random_init_seed))
    )

  def check_params(
      self,
      params: weights.Params,
      what: str = 'The initial update-rule parameters',
  ) -> None:
    """Raises `weights.WeightsError` unless `params` fit the rule."""
    weights.validate_params(
        params,
        jax.eval_shape(self._init_params, jax.random.PRNGKey(0)),
        what=what,
    )

  def host_params(self, state: Any) -> weights.HostParams:
    """The rule's parameters, on the host."""
    return devices.first_copy(state.update_rule_params)

  def state_arrays(self, state: Any) -> dict[str, np.ndarray]:
    """The rest of `state` (beyond rule, key and step), flat for `save`."""
    raise NotImplementedError

  def save(
      self,
      root: pathlib.Path,
      state: Any,
      logs: Sequence[Mapping[str, float]],
      metadata: Mapping[str, Any],
      keep: int,
  ) -> pathlib.Path:
    """Writes a checkpoint of `state` and the logs so far; returns its path."""
    return steps_lib.save_with_rng_and_logs(
        root,
        state.step,
        update_rule_params=self.host_params(state),
        arrays=self.state_arrays(state),
        rng=state.rng,
        logs=logs,
        metadata=metadata,
        keep=keep,
    )


def initial_rule(
    config: configs.ConfigBase, update_rule_params: weights.Params | None
) -> tuple[weights.Params | None, str]:
  """The rule given, or read from the file `config.update_rule_params` names.

  Returns:
    (the parameters, or None for a random rule; how error messages name
    them).
  """
  name = config.update_rule_params
  if update_rule_params is None and name not in (None, configs.RANDOM):
    return (
        weights.load_update_rule_params_from(name),
        f'The update-rule parameters in {name}',
    )
  return update_rule_params, 'The initial update-rule parameters'


def run(
    program: Program,
    config: configs.ConfigBase,
    *,
    update_rule_params: weights.Params | None,
    checkpoint_dir: files.PathLike | None,
    resume: bool,
    progress_fn: progress.ProgressFn | None,
    handle_interrupts: bool,
    logger: loggers.LoggerArg,
    log_dir: files.PathLike | None,
) -> steps_lib.RunResult:
  """Starts or resumes a run of `program` and steps it to `config.num_steps`.

  The initial rule is the one given, the one `config.update_rule_params`
  names, or `program.random_params()`; a checkpoint to resume must belong
  to the run (`metadata.check_metadata`), and a new run overwrites none.
  `logger`'s sinks stay open for the run (`loggers.open_logger`).

  Args:
    program: the run kind's compiled program (`Program`).
    config: the run's config (`num_steps`, `checkpoint_every`,
      `keep_checkpoints`, `update_rule_params`).
    update_rule_params: the rule to start from; None: as the config says
      (on resume: the checkpoint's).
    checkpoint_dir: where checkpoints go (`steps.checkpoint_root`), or None.
    resume: continue from the newest checkpoint in `checkpoint_dir`.
    progress_fn: called as `progress_fn(step, logs)` after each step.
    handle_interrupts: Ctrl-C or SIGTERM finishes the step, checkpoints and
      raises `interrupts.Interrupted` (on every process of the run).
    logger: where each step's logs also go (`loggers.LoggerArg`).
    log_dir: the directory the named sinks write in.

  Returns:
    The final rule, the logs of every step (`steps.stacked_logs`), the steps
    done and the last checkpoint written (or None).
  """
  with loggers.open_logger(
      logger, log_dir, resume=resume, config=config
  ) as sink:
    kind = program.kind
    if resume and checkpoint_dir is None:
      raise ValueError('resume=True needs a checkpoint_dir.')
    if resume:
      params, what = update_rule_params, 'The initial update-rule parameters'
    else:  # A file to read: its errors come before any compilation starts.
      params, what = initial_rule(config, update_rule_params)
    root = steps_lib.checkpoint_root(checkpoint_dir) if checkpoint_dir else None
    num_local = program.layout.num_local
    if params is not None:
      program.check_params(params, what=what)
    digest, scheme = None, metadata_lib.DIGEST
    if resume:
      ckpt = checkpoint_lib.load(root)
      meta = metadata_lib.check_metadata(
          ckpt.metadata,
          f'The checkpoint at {ckpt.path}',
          kind=kind,
          config=config,
          num_local_devices=num_local,
          execution_fields=program.execution_fields,
          rule_params=params,
      )
      digest, scheme = meta['rule_sha256'], meta['rule_digest']
    elif root is not None and checkpoint_lib.list_steps(root):
      raise checkpoint_lib.CheckpointExistsError(
          f'{root} already holds checkpoints (latest step'
          f' {checkpoint_lib.latest_step(root)}); pass resume=True to continue'
          ' that run, or use another directory.'
      )

    # Initialise (or restore) while the step compiles, where it can.
    compile_in_background = getattr(program, 'compile_in_background', None)
    wait = compile_in_background() if compile_in_background else lambda: None
    if resume:
      state, logs = program.restore(ckpt)
      last_saved = ckpt.path
      logging.info('Resuming a %s run from %s.', kind, ckpt.path)
    else:
      if params is None:
        params = program.random_params()
      digest = metadata_lib.params_digest(params)
      state = program.initial_state(params)
      logs, last_saved = [], None
    metadata = metadata_lib.run_metadata(
        kind, config, digest, num_local, rule_digest=scheme
    )
    wait()

    def _save(state: Any) -> pathlib.Path:
      return program.save(
          root, state, logs, metadata, keep=config.keep_checkpoints
      )

    state, last_saved = steps_lib.run_steps(
        state,
        program.step,
        logs,
        num_steps=config.num_steps,
        checkpoint_every=config.checkpoint_every,
        save=_save if root is not None else None,
        latest_saved=lambda: checkpoint_lib.latest_step(root),
        last_saved=last_saved,
        progress_fn=progress_fn,
        handle_interrupts=handle_interrupts,
        logger=sink,
    )
    return steps_lib.RunResult(
        update_rule_params=program.host_params(state),
        logs=steps_lib.stacked_logs(logs),
        num_steps=state.step,
        checkpoint_path=last_saved,
    )
