"""The meta-training loop: devices, compilation, checkpoints and resume.

`run_meta_train` runs `meta_train.meta_update` `pmap`ped over all devices
(the reference's loop) and keeps everything around the maths: the state's
placement (`devices.PmapLayout`), compiling the meta-update in the
background while the state is initialised, checkpoints that resume exactly
(and the checks that a checkpoint belongs to the run), Ctrl-C handling on
request (`interrupts.deferred_interrupts`) and progress reporting through
`progress_fn`. Users reach these names as `disco.meta_train.X`.
"""

from collections.abc import Callable, Mapping, Sequence
import dataclasses
import functools
import hashlib
import logging
import math
import pathlib
import threading
from typing import Any
import warnings

import jax
import numpy as np
import optax

from disco import checkpoint as checkpoint_lib
from disco import configs
from disco import devices
from disco import files
from disco import interrupts
from disco import progress
from disco import types
from disco import weights
from disco.meta_train import config as meta_train_config
from disco.meta_train import maths as meta_train

MetaTrainConfig = meta_train_config.MetaTrainConfig
HostParams = weights.HostParams

# What the checkpoints written by `run_meta_train` hold.
_CHECKPOINT_KIND = 'disco.meta_train'


@dataclasses.dataclass(frozen=True)
class MetaTrainResult:
  """What `run_meta_train` returns.

  Attributes:
    update_rule_params: the final rule parameters (float32 numpy Haiku tree;
      save with `disco.weights.save_update_rule_params`).
    logs: per meta-step scalars, each [num_steps]: the meta-loss terms,
      meta_grad_norm, meta_up_norm, rewards, pos_rewards, neg_rewards,
      pos_reward_fraction (pos / (pos + neg): the share of episodes that
      ended with a catch; NaN if none ended) and the learner logs averaged
      over inner steps (prefixed 'agent/'). All are averaged over the
      agents and the devices; the reference's notebook logs the meta-loss
      terms and learner logs of its last agent instead (the rewards are
      per-agent means in both).
    num_steps: meta-steps done in total (including before a resume).
    checkpoint_path: the last checkpoint written, or None.
  """

  update_rule_params: HostParams
  logs: dict[str, np.ndarray]
  num_steps: int
  checkpoint_path: pathlib.Path | None


@dataclasses.dataclass(frozen=True)
class _LoopState:
  """The loop's state: device arrays [D_local, ...] and a host key."""

  update_rule_params: types.MetaParams
  meta_opt_state: optax.OptState
  agents_states: meta_train.MetaTrainState
  rng: np.ndarray
  step: int


def params_digest(params: weights.Params) -> str:
  """SHA-256 of the parameters' names, shapes and float32 values."""
  digest = hashlib.sha256()
  for key, leaf in sorted(weights.flatten_params(params).items()):
    array = np.ascontiguousarray(np.asarray(leaf, np.float32))
    digest.update(key.encode())
    digest.update(str(array.shape).encode())
    digest.update(array.tobytes())
  return digest.hexdigest()


def _scalar_logs(
    train_logs: Mapping[str, np.ndarray], meta_log: Mapping[str, np.ndarray]
) -> dict[str, float]:
  """One meta-step's logs as floats, learner logs [N] averaged over N."""
  logs = {k: float(v) for k, v in meta_log.items()}
  pos, neg = logs['pos_rewards'], logs['neg_rewards']
  logs['pos_reward_fraction'] = pos / (pos + neg) if pos + neg else math.nan
  for key, value in train_logs.items():
    logs[f'agent/{key}'] = float(np.mean(value))
  return logs


def stacked_logs(logs: Sequence[Mapping[str, float]]) -> dict[str, np.ndarray]:
  """Per-step logs as one [num_steps] array per key."""
  keys = sorted(logs[0]) if logs else []
  return {k: np.asarray([log[k] for log in logs]) for k in keys}


class _MetaTrainer:
  """The compiled functions and device layout for one config.

  Only the fields that shape the computation matter here; `_trainer_for`
  shares one instance (and its compiled code) between runs.
  """

  def __init__(self, config: MetaTrainConfig) -> None:
    self.config = config
    self.agent = meta_train.MetaTrainAgent.from_config(config)
    self.meta_opt = optax.adam(learning_rate=config.meta_learning_rate)
    self.layout = devices.PmapLayout()
    self._update = jax.pmap(
        functools.partial(
            meta_train.meta_update,
            agent=self.agent,
            meta_opt=self.meta_opt,
            config=config,
        ),
        axis_name=devices.AXIS_NAME,
        devices=self.layout.devices,
    )
    init_agent = meta_train.MetaTrainAgent.from_config(config, axis_name=None)
    self._init_agent_state = jax.jit(init_agent.init_state)
    self._init_params = jax.jit(
        lambda key: self.agent.update_rule.init_params(key)[0]
    )
    self._init_meta_opt = jax.jit(self.meta_opt.init)
    self._step_keys = jax.jit(self._split_step_keys)
    self._lock = threading.Lock()
    self._compilation = None

  def _split_step_keys(self, rng: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(the loop's next key, one meta-step key per device [D, 2])."""
    rng, step_rng = jax.random.split(rng)
    return rng, jax.random.split(step_rng, len(self.layout.devices))

  def random_params(self) -> HostParams:
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

  def _agents_template(self, *leading: int) -> meta_train.MetaTrainState:
    """Shapes of the population's states, with `leading` axes in front."""
    agent = jax.eval_shape(self._init_agent_state, jax.random.PRNGKey(0))
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(
            leading + (self.config.num_agents,) + x.shape, x.dtype
        ),
        agent,
    )

  def initial_state(self, params: weights.Params) -> _LoopState:
    """The reference's initialisation, placed on the devices."""
    rng_key = jax.random.PRNGKey(self.config.seed)
    rng, rng_key = jax.random.split(rng_key)
    agents = [
        jax.device_get(self._init_agent_state(key))
        for key in jax.random.split(rng_key, self.config.num_agents)
    ]
    agents_states = jax.tree.map(lambda *xs: np.stack(xs), *agents)
    params = jax.tree.map(lambda x: np.asarray(x, np.float32), params)
    self._step_keys(rng)  # Compiled now rather than in the first step.
    put = self.layout.put
    return _LoopState(
        update_rule_params=put(params, replicate=True),
        meta_opt_state=put(self._init_meta_opt(params), replicate=True),
        agents_states=put(agents_states, replicate=True),
        rng=np.asarray(rng),
        step=0,
    )

  def abstract_inputs(self) -> tuple[Any, ...]:
    """Shapes, dtypes and shardings of the meta-update's inputs."""
    params = jax.eval_shape(self._init_params, jax.random.PRNGKey(0))
    return self.layout.abstract((
        params,
        jax.eval_shape(self._init_meta_opt, params),
        self._agents_template(),
        jax.ShapeDtypeStruct((2,), np.uint32),
    ))

  def compile_in_background(self) -> Callable[[], None]:
    """Starts compiling the meta-update; returns a function that waits.

    Compiling takes most of a run's start-up. It needs only the inputs'
    shapes, so it runs in a thread (XLA releases the GIL) while the caller
    initialises or restores the state, and the first meta-step finds the
    program compiled. Started once per trainer; skipped with several
    processes (where `pmap` converts process-local inputs itself).

    Returns:
      A function that blocks until the compilation is done and re-raises
      its error, if any.
    """
    if jax.process_count() > 1:
      return lambda: None
    with self._lock:
      if self._compilation is None:
        errors = []

        def _compile() -> None:
          try:
            self._update.lower(*self.abstract_inputs()).compile()
          except BaseException as e:  # pylint: disable=broad-exception-caught
            errors.append(e)

        thread = threading.Thread(target=_compile, daemon=True)
        thread.start()
        self._compilation = (thread, errors)
    thread, errors = self._compilation

    def _wait() -> None:
      thread.join()
      if errors:
        with self._lock:
          self._compilation = None  # Let a later run try again.
        raise errors[0]

    return _wait

  def step(self, state: _LoopState) -> tuple[_LoopState, dict[str, float]]:
    """One meta-step; returns the new state and its scalar logs."""
    rng, keys = self._step_keys(state.rng)
    keys = np.asarray(keys)[self.layout.key_index]
    params, opt_state, agents_states, train_logs, meta_log = self._update(
        state.update_rule_params,
        state.meta_opt_state,
        state.agents_states,
        self.layout.put(keys, replicate=False),
    )
    # Logs are averaged over devices: read the first local copy.
    train_logs, meta_log = devices.first_copy((train_logs, meta_log))
    new_state = _LoopState(
        update_rule_params=params,
        meta_opt_state=opt_state,
        agents_states=agents_states,
        rng=np.asarray(rng),
        step=state.step + 1,
    )
    return new_state, _scalar_logs(train_logs, meta_log)

  def host_params(self, state: _LoopState) -> HostParams:
    """The rule's parameters, on the host."""
    return devices.first_copy(state.update_rule_params)

  def save(
      self,
      root: pathlib.Path,
      state: _LoopState,
      logs: Sequence[Mapping[str, float]],
      metadata: Mapping[str, Any],
      keep: int,
  ) -> pathlib.Path:
    """Writes a checkpoint of `state` and the logs so far; returns its path."""
    arrays = {}
    arrays.update(
        checkpoint_lib.flatten_tree(
            devices.first_copy(state.meta_opt_state), 'meta_opt_state'
        )
    )
    arrays.update(
        checkpoint_lib.flatten_tree(state.agents_states, 'agents_states')
    )
    arrays['rng'] = np.asarray(state.rng)
    for key, values in stacked_logs(logs).items():
      arrays[f'logs/{key}'] = values
    return checkpoint_lib.save(
        root,
        state.step,
        update_rule_params=self.host_params(state),
        arrays=arrays,
        metadata=metadata,
        keep=keep,
    )

  def restore(
      self, ckpt: checkpoint_lib.Checkpoint
  ) -> tuple[_LoopState, list[dict[str, float]]]:
    """The state and logs saved in `ckpt`, placed on the devices."""
    params = ckpt.update_rule_params
    self.check_params(params)
    opt_state = checkpoint_lib.restore_tree(
        jax.eval_shape(self._init_meta_opt, params),
        ckpt.arrays,
        'meta_opt_state',
    )
    agents_states = checkpoint_lib.restore_tree(
        self._agents_template(self.layout.num_local),
        ckpt.arrays,
        'agents_states',
    )
    rng, logs = restore_rng_and_logs(ckpt)
    self._step_keys(rng)  # Compiled now rather than in the first step.
    put = self.layout.put
    state = _LoopState(
        update_rule_params=put(params, replicate=True),
        meta_opt_state=put(opt_state, replicate=True),
        agents_states=put(agents_states, replicate=False),
        rng=rng,
        step=ckpt.step,
    )
    return state, logs


@functools.lru_cache(maxsize=4)
def _cached_trainer(
    config: MetaTrainConfig, all_devices: tuple[jax.Device, ...]
) -> _MetaTrainer:
  del all_devices  # Part of the cache key only.
  return _MetaTrainer(config)


def _trainer_for(config: MetaTrainConfig) -> _MetaTrainer:
  """A trainer for `config`, shared by runs that compute the same thing."""
  key = config.replace(
      num_steps=1,
      checkpoint_every=0,
      keep_checkpoints=1,
      update_rule_params=None,
  )
  return _cached_trainer(key, tuple(jax.devices()))


def random_init_params(config: MetaTrainConfig) -> HostParams:
  """The random rule a run starts from (as numpy arrays).

  The reference's `update_rule.init_params(PRNGKey(1))`, with the seed
  `config.random_init_seed`; what `config.update_rule_params` None or
  'random' stands for.

  Args:
    config: the run's settings.

  Returns:
    The update rule's parameters.
  """
  return _trainer_for(config).random_params()


def run_metadata(
    config: configs.ConfigBase,
    init_digest: str,
    num_local_devices: int,
    kind: str = _CHECKPOINT_KIND,
) -> dict[str, Any]:
  """What a checkpoint records to check that a resumed run matches it."""
  return dict(
      kind=kind,
      config=config.to_dict(),
      init_params_sha256=init_digest,
      num_local_devices=num_local_devices,
      num_processes=jax.process_count(),
      jax_version=jax.__version__,
  )


def check_resumable(
    ckpt: checkpoint_lib.Checkpoint,
    config: configs.ConfigBase,
    init_digest: str | None,
    num_local_devices: int,
    *,
    kind: str = _CHECKPOINT_KIND,
    runner: str = 'run_meta_train',
    execution_fields: frozenset[str] = meta_train_config.EXECUTION_FIELDS,
) -> None:
  """Raises `CheckpointMismatchError` unless `ckpt` belongs to this run.

  It must be of `kind` (written by `runner`), with the same config but for
  `execution_fields`, the same device layout and, given `init_digest`, the
  same initial rule.
  """
  meta = ckpt.metadata
  where = f'The checkpoint at {ckpt.path}'
  if meta.get('kind') != kind:
    raise checkpoint_lib.CheckpointMismatchError(
        f'{where} was not written by {runner}.'
    )
  try:
    saved = type(config).from_dict(meta['config'])
  except (KeyError, TypeError, ValueError) as e:
    raise checkpoint_lib.CheckpointMismatchError(
        f'{where} has an unreadable config: {e}'
    ) from e
  differ = [
      f'{f.name} (checkpoint {getattr(saved, f.name)!r}, now'
      f' {getattr(config, f.name)!r})'
      for f in dataclasses.fields(config)
      if f.name not in execution_fields
      and getattr(saved, f.name) != getattr(config, f.name)
  ]
  if differ:
    raise checkpoint_lib.CheckpointMismatchError(
        f'{where} was written with a different config: ' + '; '.join(differ)
    )
  if (
      meta.get('num_local_devices') != num_local_devices
      or meta.get('num_processes') != jax.process_count()
  ):
    raise checkpoint_lib.CheckpointMismatchError(
        f'{where} was written on {meta.get("num_processes")} process(es) with'
        f' {meta.get("num_local_devices")} device(s) each; this run has'
        f' {jax.process_count()} with {num_local_devices}. Each device has'
        ' its own agents, so resume on the same layout.'
    )
  if init_digest is not None and meta.get('init_params_sha256') != init_digest:
    raise checkpoint_lib.CheckpointMismatchError(
        f'{where} started from other initial update-rule parameters than'
        ' the ones given now (pass update_rule_params=None to resume it as'
        ' it is).'
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
  log_arrays = {
      k[len('logs/') :]: v
      for k, v in ckpt.arrays.items()
      if k.startswith('logs/')
  }
  if any(v.shape != (ckpt.step,) for v in log_arrays.values()):
    raise checkpoint_lib.CheckpointMismatchError(
        f'The checkpoint at {ckpt.path} has logs of the wrong length.'
    )
  logs = [
      {k: float(v[i]) for k, v in log_arrays.items()} for i in range(ckpt.step)
  ]
  return rng, logs


def progress_bar(
    total: int,
    *,
    initial: int = 0,
    unit: str = 'meta-step',
    postfix: Sequence[str] = ('meta_loss', 'pos_reward_fraction'),
    **kwargs: Any,
) -> progress.ProgressBar:
  """A `progress.ProgressBar` of meta-steps, for `run_meta_train`.

  It shows the meta-loss and the share of positive rewards; `initial` is
  the step a resumed run starts from; `kwargs` are the other
  `progress.ProgressBar` arguments (e.g. `enabled`). Use it as a context
  manager: `with progress_bar(config.num_steps) as bar:
  run_meta_train(config, progress_fn=bar)`.
  """
  return progress.ProgressBar(
      total, initial=initial, unit=unit, postfix=postfix, **kwargs
  )


def checkpoint_root(checkpoint_dir: files.PathLike) -> pathlib.Path:
  """Where this process writes its checkpoints under `checkpoint_dir`.

  `checkpoint_dir` itself on one process; with several, each process keeps
  the agents of its own devices in `checkpoint_dir/process_<index>`.
  """
  root = pathlib.Path(checkpoint_dir).expanduser()
  if jax.process_count() > 1:
    root = root / f'process_{jax.process_index()}'
  return root


def run_steps(
    state: Any,
    step_fn: Callable[[Any], tuple[Any, dict[str, float]]],
    logs: list[dict[str, float]],
    *,
    num_steps: int,
    checkpoint_every: int,
    save: Callable[[Any], pathlib.Path] | None,
    latest_saved: Callable[[], int | None],
    last_saved: pathlib.Path | None,
    progress_fn: progress.ProgressFn | None,
    handle_interrupts: bool,
) -> tuple[Any, pathlib.Path | None]:
  """Steps `state` (with a `.step`) to `num_steps`, checkpointing on the way.

  Appends each step's logs to `logs`, calls `progress_fn(step, logs)`,
  saves every `checkpoint_every` steps and at the end (unless the newest
  checkpoint, `latest_saved()`, is already this step), and, with
  `handle_interrupts`, saves and raises `KeyboardInterrupt` after the step
  during which Ctrl-C came. Returns the final state and the last path saved.
  """
  with interrupts.deferred_interrupts(
      'meta-step', enabled=handle_interrupts
  ) as interrupted:
    while state.step < num_steps:
      state, step_logs = step_fn(state)
      logs.append(step_logs)
      if progress_fn is not None:
        progress_fn(state.step, step_logs)
      if interrupted():
        if save is not None:
          logging.warning('Wrote checkpoint %s.', save(state))
        raise KeyboardInterrupt
      if (
          save is not None
          and checkpoint_every
          and (state.step % checkpoint_every == 0)
      ):
        last_saved = save(state)
    if save is not None and (
        last_saved is None or latest_saved() != state.step
    ):
      last_saved = save(state)
  return state, last_saved


def run_loop(
    trainer: Any,
    config: configs.ConfigBase,
    *,
    update_rule_params: weights.Params | None,
    checkpoint_dir: files.PathLike | None,
    resume: bool,
    progress_fn: progress.ProgressFn | None,
    handle_interrupts: bool,
    kind: str,
    runner: str,
    execution_fields: frozenset[str],
) -> tuple[Any, list[dict[str, float]], pathlib.Path | None]:
  """Starts or resumes a run of `trainer` and steps it to `config.num_steps`.

  The loop that `run_meta_train` and `discovery_runtime.run_discovery`
  share: the initial rule (given, named by `config.update_rule_params`, or
  `trainer.random_params()`), the checks that a checkpoint to resume belongs
  to the run (`check_resumable`) or that a new run overwrites none, and
  `run_steps` with checkpoints carrying `run_metadata`.

  Args:
    trainer: has `layout` (`devices.PmapLayout`), `check_params`,
      `random_params`, `initial_state`, `restore`, `step`, `save` and
      optionally `compile_in_background` (started before the state is
      initialised or restored, waited for before the first step).
    config: the run's config (`num_steps`, `checkpoint_every`,
      `keep_checkpoints`, `update_rule_params`).
    update_rule_params: as `run_meta_train`'s.
    checkpoint_dir: as `run_meta_train`'s.
    resume: as `run_meta_train`'s.
    progress_fn: as `run_meta_train`'s.
    handle_interrupts: as `run_meta_train`'s.
    kind: the checkpoints' kind (`check_resumable`).
    runner: the public function's name, for error messages.
    execution_fields: config fields a resumed run may change.

  Returns:
    (the final state, the logs of every step, the last checkpoint written
    or None).
  """
  if resume and checkpoint_dir is None:
    raise ValueError('resume=True needs a checkpoint_dir.')
  params = update_rule_params
  what = 'The initial update-rule parameters'
  if (
      params is None
      and not resume
      and config.update_rule_params not in (None, configs.RANDOM)
  ):
    # A file to read: its errors come before any compilation starts.
    params = weights.load_update_rule_params_from(config.update_rule_params)
    what = f'The update-rule parameters in {config.update_rule_params}'
  root = checkpoint_root(checkpoint_dir) if checkpoint_dir else None
  num_local = trainer.layout.num_local
  init_digest = None
  if params is not None:
    trainer.check_params(params, what=what)
    init_digest = params_digest(params)
  if resume:
    ckpt = checkpoint_lib.load(root)
    check_resumable(
        ckpt,
        config,
        init_digest,
        num_local,
        kind=kind,
        runner=runner,
        execution_fields=execution_fields,
    )
    init_digest = ckpt.metadata['init_params_sha256']
  elif root is not None and checkpoint_lib.list_steps(root):
    raise checkpoint_lib.CheckpointExistsError(
        f'{root} already holds checkpoints (latest step'
        f' {checkpoint_lib.latest_step(root)}); pass resume=True to continue'
        ' that run, or use another directory.'
    )

  # Initialise (or restore) while the step compiles, where it can.
  compile_in_background = getattr(trainer, 'compile_in_background', None)
  wait_for_compilation = (
      compile_in_background() if compile_in_background else lambda: None
  )
  if resume:
    state, logs = trainer.restore(ckpt)
    last_saved = ckpt.path
    logging.info('Resuming %s from %s.', runner, ckpt.path)
  else:
    if params is None:
      params = trainer.random_params()
      init_digest = params_digest(params)
    state = trainer.initial_state(params)
    logs = []
    last_saved = None
  metadata = run_metadata(config, init_digest, num_local, kind=kind)
  wait_for_compilation()

  def _save(state: Any) -> pathlib.Path:
    return trainer.save(
        root, state, logs, metadata, keep=config.keep_checkpoints
    )

  state, last_saved = run_steps(
      state,
      trainer.step,
      logs,
      num_steps=config.num_steps,
      checkpoint_every=config.checkpoint_every,
      save=_save if root is not None else None,
      latest_saved=lambda: checkpoint_lib.latest_step(root),
      last_saved=last_saved,
      progress_fn=progress_fn,
      handle_interrupts=handle_interrupts,
  )
  return state, logs, last_saved


def run_meta_train(
    config: MetaTrainConfig,
    *,
    update_rule_params: weights.Params | None = None,
    progress_fn: progress.ProgressFn | None = None,
    checkpoint_dir: files.PathLike | None = None,
    resume: bool = False,
    handle_interrupts: bool = False,
    init_params: weights.Params | None = None,
) -> MetaTrainResult:
  """Meta-trains an update rule on all devices (the reference's loop).

  The meta-update is `pmap`ped over `jax.devices()` with axis name 'i';
  every device runs the whole population on its own batch of environments
  and the meta-gradients and logs are averaged across devices. As in the
  reference, all devices start from the same agents' states and differ by
  their random keys.

  Args:
    config: the run's settings.
    update_rule_params: the rule to start from (a parameter tree, e.g.
      `weights.load_disco103()` to fine-tune); None starts from the one
      `config.update_rule_params` names (None or 'random':
      `random_init_params(config)`; 'disco103' or an `.npz` path: loaded
      with `weights.load_update_rule_params_from`). On resume, given
      parameters must be the ones the run started from; None resumes the
      checkpoint as it is.
    progress_fn: called as `progress_fn(step, logs)` after every meta-step,
      `step` counting from 1 and `logs` the step's scalars.
    checkpoint_dir: if set, checkpoints are written there (in
      `checkpoint_root(checkpoint_dir)`) every `config.checkpoint_every`
      meta-steps and at the end.
    resume: continue from the newest checkpoint in `checkpoint_dir` (which
      must exist and match `config`) up to `config.num_steps`. Without it, a
      `checkpoint_dir` that already holds checkpoints is an error, so that
      nothing is overwritten.
    handle_interrupts: make the first Ctrl-C finish the current meta-step,
      write a checkpoint (with `checkpoint_dir`) and raise
      `KeyboardInterrupt` (`interrupts.deferred_interrupts`). Without it
      the loop leaves SIGINT alone.
    init_params: deprecated name of `update_rule_params`.

  Returns:
    A `MetaTrainResult` with the final rule and the logs of all meta-steps.

  Raises:
    ValueError: `resume` without `checkpoint_dir`.
    TypeError: both `update_rule_params` and `init_params`.
    weights.WeightsError: the initial parameters do not fit the rule.
    checkpoint.CheckpointError: no checkpoint to resume, checkpoints already
      present without `resume`, a corrupt checkpoint, or one that belongs to
      another config or device layout.
  """
  if init_params is not None:
    if update_rule_params is not None:
      raise TypeError('Pass update_rule_params only, not init_params too.')
    warnings.warn(
        'run_meta_train(init_params=...) is deprecated; use'
        ' update_rule_params=...',
        DeprecationWarning,
        stacklevel=2,
    )
  params = init_params if update_rule_params is None else update_rule_params
  trainer = _trainer_for(config)
  state, logs, last_saved = run_loop(
      trainer,
      config,
      update_rule_params=params,
      checkpoint_dir=checkpoint_dir,
      resume=resume,
      progress_fn=progress_fn,
      handle_interrupts=handle_interrupts,
      kind=_CHECKPOINT_KIND,
      runner='run_meta_train',
      execution_fields=meta_train_config.EXECUTION_FIELDS,
  )
  return MetaTrainResult(
      update_rule_params=trainer.host_params(state),
      logs=stacked_logs(logs),
      num_steps=state.step,
      checkpoint_path=last_saved,
  )
