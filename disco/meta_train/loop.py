"""The meta-training loop: the program `run_meta_train` steps.

`_MetaTrainer` holds the `pmap`ped `meta_train.meta_update` and the state's
placement; `disco.runtime` drives it (checkpoints, resume, Ctrl-C,
progress). Users reach these names as `disco.meta_train.X`.
"""

from collections.abc import Mapping
import dataclasses
import functools
import math
from typing import Any
import warnings

import jax
import numpy as np
import optax

from disco import checkpoint as checkpoint_lib
from disco import devices
from disco import files
from disco import loggers
from disco import progress
from disco import runtime
from disco import types
from disco import weights
from disco.meta_train import config as meta_train_config
from disco.meta_train import maths as meta_train

MetaTrainConfig = meta_train_config.MetaTrainConfig
HostParams = weights.HostParams

# What the checkpoints written by `run_meta_train` hold.
_CHECKPOINT_KIND = 'disco.meta_train'


# What `run_meta_train` returns. Its logs are per meta-step scalars, each
# [num_steps]: the meta-loss terms, meta_grad_norm, meta_up_norm, rewards,
# pos_rewards, neg_rewards, pos_reward_fraction (pos / (pos + neg); NaN if
# no episode ended) and the learner logs averaged over inner steps
# ('agent/...'), all averaged over the agents and the devices.
MetaTrainResult = runtime.RunResult
# The one digest and checkpoint layout of every loop.
params_digest = runtime.params_digest
checkpoint_root = runtime.checkpoint_root


@dataclasses.dataclass(frozen=True)
class _LoopState:
  """The loop's state: device arrays [D_local, ...] and a host key."""

  update_rule_params: types.MetaParams
  meta_opt_state: optax.OptState
  agents_states: meta_train.MetaTrainState
  rng: np.ndarray
  step: int


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


class _MetaTrainer(runtime.RuleProgram):
  """The compiled functions and device layout for one config.

  Only the fields that shape the computation matter here; `_trainer_for`
  shares one instance (and its compiled code) between runs.
  """

  kind = _CHECKPOINT_KIND
  execution_fields = meta_train_config.EXECUTION_FIELDS

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
    self._compiler = runtime.BackgroundCompile()

  def _split_step_keys(self, rng: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(the loop's next key, one meta-step key per device [D, 2])."""
    rng, step_rng = jax.random.split(rng)
    return rng, jax.random.split(step_rng, len(self.layout.devices))

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

  def compile_in_background(self) -> Any:
    """Starts compiling the meta-update; returns a function that waits."""
    return self._compiler.start(
        lambda: self._update.lower(*self.abstract_inputs()).compile()
    )

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

  def state_arrays(self, state: _LoopState) -> dict[str, np.ndarray]:
    """The optimiser's state (one copy) and the agents' states, flat."""
    return checkpoint_lib.flatten_tree(
        devices.first_copy(state.meta_opt_state), 'meta_opt_state'
    ) | checkpoint_lib.flatten_tree(state.agents_states, 'agents_states')

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
    rng, logs = runtime.restore_rng_and_logs(ckpt)
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


# Runs that compute the same thing share a trainer and its compiled code.
_TRAINERS = runtime.ProgramCache(
    lambda config: _MetaTrainer(config),  # pylint: disable=unnecessary-lambda
    neutral=runtime.RULE_PROGRAM_NEUTRAL,
)


def _trainer_for(config: MetaTrainConfig) -> _MetaTrainer:
  """A trainer for `config`, shared by runs that compute the same thing."""
  return _TRAINERS(config)


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


# A bar of meta-steps for `run_meta_train` (`progress.progress_bar`).
progress_bar = functools.partial(progress.progress_bar, progress.META_TRAIN)


def run_meta_train(
    config: MetaTrainConfig,
    *,
    update_rule_params: weights.Params | None = None,
    progress_fn: progress.ProgressFn | None = None,
    checkpoint_dir: files.PathLike | None = None,
    resume: bool = False,
    handle_interrupts: bool = False,
    init_params: weights.Params | None = None,
    logger: loggers.LoggerArg = None,
    log_dir: files.PathLike | None = None,
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
    handle_interrupts: make the first Ctrl-C or SIGTERM finish the current
      meta-step, write a checkpoint (with `checkpoint_dir`) and raise
      `interrupts.Interrupted` (`interrupts.deferred_interrupts`); with
      several processes, all stop after the same meta-step. Without it
      the loop leaves the signals alone.
    init_params: deprecated name of `update_rule_params`.
    logger: where each step's logs also go: sink names ('csv',
      'tensorboard', 'wandb'; written under `log_dir`) and/or
      `disco.loggers.Logger` objects (see `disco.loggers`).
    log_dir: the directory the named sinks write in.

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
  return runtime.run(
      _trainer_for(config),
      config,
      update_rule_params=params,
      checkpoint_dir=checkpoint_dir,
      resume=resume,
      progress_fn=progress_fn,
      handle_interrupts=handle_interrupts,
      logger=logger,
      log_dir=log_dir,
  )
