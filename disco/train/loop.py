"""The trainer's host loop: `Trainer` (programs, state, chunks).

`disco.train.run` runs it (`run_train`); the per-device program is in
`disco.train.program`, the log rows in `disco.train.rows`, the result in
`disco.train.result`.
"""

from collections.abc import Callable, Mapping, Sequence
import contextlib
import dataclasses
import functools
import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from disco import checkpoint as checkpoint_lib
from disco import configs
from disco import devices as devices_lib
from disco import files
from disco import learner
from disco import logs as logs_lib
from disco import progress
from disco import run_checkpoints
from disco import runtime
from disco import types
from disco.train import program
from disco.train import rows as rows_lib
from disco.train.config import TrainConfig
from disco.train.program import TrainState
from disco.train.result import TrainResult

_AXIS = devices_lib.AXIS_NAME

# (seed, row) -> None: one log row per seed and chunk (or iteration).
LogFn = Callable[[int, Mapping[str, float]], None]
# A chunk program: (learns, rows kept per iteration; 0 sums the iterations).
_ProgramKey = tuple[bool, int]


def select_devices(config: TrainConfig) -> tuple[jax.Device, ...]:
  """The first D devices, D the most that split every batch evenly.

  D is at most `config.max_devices` and divides the environments, both
  parts of the learner batch and the evaluation environments.
  """
  available = jax.devices()
  limit = min(len(available), config.max_devices or len(available))
  if config.spread_fresh or config.replay_per_slot:
    # A spread rollout's trajectories go to learner steps in turn, and a
    # drawn batch mixes the two parts slot by slot, which one device per
    # seed keeps simple.
    limit = 1
  sizes = (
      config.num_envs,
      config.fresh_per_batch,
      config.replay_per_batch,
      config.eval_envs,
  )
  count = max(d for d in range(1, limit + 1) if all(s % d == 0 for s in sizes))
  return tuple(available[:count])


class Trainer:
  """The jitted programs of one run's settings, for some seeds.

  Attributes:
    config: the run's settings.
    setup: its environment, agent, value function, devices and rule
      parameters (`learner.Setup`).
    seeds: the seeds trained together (`vmap`ped when there are several).
  """

  def __init__(
      self,
      config: TrainConfig,
      seeds: Sequence[int],
      update_rule_params: types.MetaParams | None = None,
  ):
    self.config = config
    self.seeds = tuple(int(s) for s in seeds)
    if not self.seeds:
      raise ValueError('Give at least one seed.')
    if len(set(self.seeds)) != len(self.seeds):
      raise ValueError(f'Seeds must differ, got {list(self.seeds)}.')
    setup = learner.build(
        config,
        update_rule_params,
        taken_action_gradients=config.taken_action_gradients,
        forward_once=config.forward_once,
        share_meta_inputs=config.share_meta_inputs,
        share_state_gates=config.share_state_gates,
    )
    self.setup = dataclasses.replace(setup, devices=self.select_devices(config))
    self.eval_env = learner.make_env(config, config.eval_envs)
    self.achievement_names = program.achievement_names(self.setup.env)
    self._batched = len(self.seeds) > 1
    init, self._chunk_fn, evaluate = program.per_device_fns(
        config, self.setup, self.eval_env
    )
    devices = self.setup.devices
    self._init = jax.pmap(
        self._over_seeds(init), axis_name=_AXIS, devices=devices
    )
    self._evaluate = jax.pmap(
        self._over_seeds(evaluate, in_axes=(0, 0)),
        axis_name=_AXIS,
        devices=devices,
    )
    # Chunk programs, built when first needed.
    self._chunks: dict[_ProgramKey, Any] = {}
    self._compiler = runtime.BackgroundCompile()

  # The devices a run of `config` uses (a subclass may choose others).
  select_devices = staticmethod(select_devices)

  @property
  def num_devices(self) -> int:
    return len(self.setup.devices)

  def _over_seeds(self, fn: Callable[..., Any], **kwargs: Any) -> Any:
    return jax.vmap(fn, **kwargs) if self._batched else fn

  def _chunk(self, learn: bool, rows: int) -> Any:
    """The chunk program that learns (or only acts), keeping `rows` rows."""
    key = (learn, rows)
    if key not in self._chunks:
      fn = functools.partial(self._chunk_fn, learn=learn, rows=rows)
      self._chunks[key] = jax.pmap(
          self._over_seeds(fn, in_axes=(0, None, None)),
          axis_name=_AXIS,
          devices=self.setup.devices,
          in_axes=(0, 0, None),
          donate_argnums=(0,),
      )
    return self._chunks[key]

  # Keys, state and checkpoints.

  def _seed_keys(self, offset: int = 0) -> np.ndarray:
    """Per device (and seed): `fold_in(PRNGKey(seed), offset)` (0: none)."""

    def key(seed: int) -> np.ndarray:
      k = jax.random.PRNGKey(seed)
      return np.asarray(jax.random.fold_in(k, offset) if offset else k)

    keys = np.stack([key(s) for s in self.seeds])
    if not self._batched:
      keys = keys[0]
    return np.broadcast_to(keys, (self.num_devices,) + keys.shape)

  def initial_state(self) -> TrainState:
    return self._init(self._seed_keys())

  def restore_state(self, arrays: Mapping[str, np.ndarray]) -> TrainState:
    """The `TrainState` saved under 'state', placed as `initial_state` is."""
    template = jax.eval_shape(self._init, self._seed_keys())
    restored = checkpoint_lib.restore_tree(template, arrays, 'state')
    _, placed = devices_lib.place_like_pmap(
        self.setup.devices, sharded=restored
    )
    return placed

  def num_warmup_steps(self) -> int:
    """Iterations that only act (`TrainConfig.warmup_steps`)."""
    return self.config.warmup_steps

  def checkpoints(
      self,
      checkpoint_dir: files.PathLike | None,
      config: configs.ConfigBase,
      **kwargs: Any,
  ) -> run_checkpoints.RunCheckpoints:
    """The checkpoints of a run of `config` in `checkpoint_dir` (None: none).

    `kwargs` are the other `RunCheckpoints` arguments (`kind`, ...).
    """
    root = None
    if checkpoint_dir is not None:
      root = pathlib.Path(checkpoint_dir).expanduser()
    return run_checkpoints.RunCheckpoints(
        root,
        config,
        self.seeds,
        self.setup.update_rule_params,
        self.num_devices,
        **kwargs,
    )

  def evaluate(self, state: TrainState, step: int) -> dict[str, np.ndarray]:
    """[S] total return and count of one evaluation episode per instance."""
    # Keys tied to the step, so a resumed run evaluates as a straight one.
    outputs = self._evaluate(
        state.learner_state.params, self._seed_keys(offset=1 + step)
    )
    return jax.tree.map(np.atleast_1d, devices_lib.first_copy(outputs))

  def run(
      self,
      config: TrainConfig,
      *,
      checkpoints: run_checkpoints.RunCheckpoints,
      resume: bool,
      log_fn: LogFn | None,
      progress_fn: progress.ProgressFn | None,
      handle_interrupts: bool,
  ) -> TrainResult:
    """Runs (or resumes) the seeds up to `config.num_steps`.

    `config` may differ from the trainer's in the fields its programs do not
    depend on (`num_steps`, `eval_every`, checkpointing, chunking, logging).
    With `handle_interrupts`, the first Ctrl-C or SIGTERM finishes the
    chunk, checkpoints and raises `interrupts.Interrupted`.
    """
    if program_config(config) != program_config(self.config):
      raise ValueError('config needs other programs than this trainer has.')
    with runtime.stop_on_interrupt('chunk', handle_interrupts) as stop:
      ckpt = checkpoints.latest(resume)
      warmup = min(config.num_steps, self.num_warmup_steps())
      kept = config.steps_per_chunk if config.log_every_iteration else 0
      wait_for_learning = None
      if config.num_steps > max(warmup, 0 if ckpt is None else ckpt.step):
        # The learning program, the largest, compiles while the state is
        # built and the acting-only iterations run.
        wait_for_learning = self._compile_in_background(learn=True, rows=kept)
      rows: list[dict[str, float]] = []
      step = 0
      if ckpt is None:
        state = self.initial_state()
      else:
        state = self.restore_state(ckpt.arrays)
        rows = logs_lib.from_arrays(ckpt.arrays)
        step = ckpt.step
      rule_params, _ = devices_lib.place_like_pmap(
          self.setup.devices, replicated=self.setup.update_rule_params
      )
      start = time.perf_counter()
      warmup_steps = self.num_warmup_steps()

      def add_rows(
          at: int,
          outputs: Mapping[str, Any],
          eval_outputs: Mapping[str, Any] | None,
      ) -> None:
        for s, seed in enumerate(self.seeds):
          row = rows_lib.make_row(
              self.config,
              warmup_steps,
              seed,
              s,
              at,
              outputs,
              eval_outputs,
              self.achievement_names,
          )
          row['elapsed'] = time.perf_counter() - start
          rows.append(row)
          if log_fn is not None:
            log_fn(seed, row)
        if progress_fn is not None:
          progress_fn(at, rows[-len(self.seeds)])

      def arrays() -> dict[str, np.ndarray]:
        out = checkpoint_lib.flatten_tree(state, 'state')
        out.update(logs_lib.to_arrays(rows))
        return out

      if step == 0 and config.eval_every:
        add_rows(0, {}, self.evaluate(state, 0))
      while step < config.num_steps:
        learn = step >= warmup
        end = config.num_steps if learn else warmup
        num = min(config.steps_per_chunk, end - step)
        if learn and wait_for_learning is not None:
          wait_for_learning()
          wait_for_learning = None
        state, outputs = self._chunk(learn, kept)(
            state, rule_params, np.int32(num)
        )
        outputs = devices_lib.first_copy(outputs)
        previous, step = step, step + num
        eval_outputs = None
        # At the first chunk end at or after each multiple, and at the end.
        if config.eval_every and (
            runtime.is_due(step, config.eval_every, since=previous)
            or step == config.num_steps
        ):
          eval_outputs = self.evaluate(state, step)
        if kept:
          if not self._batched:
            outputs = jax.tree.map(lambda x: x[None], outputs)
          for i in range(num):
            add_rows(
                previous + i + 1,
                rows_lib.iteration_outputs(outputs, i),
                eval_outputs if i == num - 1 else None,
            )
        else:
          if not self._batched:
            outputs = jax.tree.map(lambda x: np.asarray(x)[None], outputs)
          outputs['num_iterations'] = num
          add_rows(step, outputs, eval_outputs)
        stop(lambda: checkpoints.save(step, arrays))  # pylint: disable=cell-var-from-loop
        checkpoints.save(step, arrays, due_since=previous)
      checkpoints.save(step, arrays)

      params = devices_lib.first_copy(state.learner_state.params)
      per_seed = [
          jax.tree.map(lambda x, s=s: np.asarray(x[s]), params)
          if self._batched
          else jax.device_get(params)
          for s in range(len(self.seeds))
      ]
      return TrainResult(
          config=config,
          seeds=self.seeds,
          logs=logs_lib.columns(rows),
          params=per_seed,
          num_devices=self.num_devices,
      )

  def _abstract_chunk_inputs(self) -> tuple[Any, Any]:
    """Shapes, dtypes and shardings of a chunk's (state, rule parameters).

    Both are `pmap` outputs (`initial_state`, `restore_state`,
    `place_like_pmap`): [D, ...] leaves split over a mesh of the devices
    with the `pmap` axis.
    """
    devices = self.setup.devices
    sharding = jax.sharding.NamedSharding(
        jax.sharding.Mesh(np.asarray(devices), (_AXIS,)),
        jax.sharding.PartitionSpec(_AXIS),
    )
    state = jax.eval_shape(self._init, self._seed_keys())
    rule_params = jax.eval_shape(
        lambda tree: jax.tree.map(
            lambda x: jnp.broadcast_to(x, (len(devices),) + x.shape), tree
        ),
        self.setup.update_rule_params,
    )
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(
            x.shape, x.dtype, sharding=sharding, weak_type=x.weak_type
        ),
        (state, rule_params),
    )

  def _compile_in_background(
      self, learn: bool, rows: int
  ) -> Callable[[], None]:
    """Starts compiling chunk program (`learn`, `rows`), once per trainer.

    Returns a function to call before the program's first call, which then
    finds it compiled. If the compilation failed, that call compiles it in
    the foreground instead, and raises there if the program is broken.
    """
    chunk = self._chunk(learn, rows)

    def _compile() -> None:
      state, rule_params = self._abstract_chunk_inputs()
      chunk.lower(state, rule_params, np.int32(1)).compile()

    wait = self._compiler.start(_compile, key=(learn, rows))

    def _wait() -> None:
      with contextlib.suppress(Exception):
        wait()

    return _wait


# The fields the programs do not depend on, and the value the cache uses.
NEUTRAL_FIELDS = {
    name: getattr(TrainConfig(), name)
    for name in (
        'num_steps',
        'checkpoint_every',
        'keep_checkpoints',
        'steps_per_chunk',
        'eval_every',
        'log_every_iteration',
    )
}


def program_config(config: TrainConfig) -> TrainConfig:
  """`config` with the fields the programs do not depend on reset."""
  return config.replace(**NEUTRAL_FIELDS)
