"""The discovery loop: the program `run_discovery` steps.

`Discoverer` holds the `pmap`ped `discovery.discovery_step`: each device
holds its share of every environment's members (an environment's member
count must be a multiple of the devices) and the members' updates are
summed over devices. `disco.runtime` drives it.
"""

import dataclasses
import functools
from typing import Any

import jax
import numpy as np

from disco import checkpoint as checkpoint_lib
from disco import devices
from disco import files
from disco import loggers
from disco import progress
from disco import runtime
from disco import weights
from disco.discovery import config as discovery_config
from disco.discovery import maths as discovery

DiscoveryConfig = discovery_config.DiscoveryConfig
HostParams = weights.HostParams

_CHECKPOINT_KIND = 'disco.discovery'


# What `run_discovery` returns; its logs are per meta-step scalars, each
# [num_steps] (see `discovery.discovery_step`; 'return' is NaN where no
# episode ended).
DiscoveryResult = runtime.RunResult


@dataclasses.dataclass(frozen=True)
class _LoopState:
  """Rule [D_local, ...], members per group [D_local, n_g / D, ...], key."""

  update_rule_params: Any
  members: tuple[discovery.MemberState, ...]
  rng: np.ndarray
  step: int


class Discoverer(runtime.RuleProgram):
  """The population's groups, compiled step and device layout for a config."""

  kind = _CHECKPOINT_KIND
  execution_fields = discovery_config.EXECUTION_FIELDS

  def __init__(self, config: DiscoveryConfig) -> None:
    self.config = config
    self.layout = devices.PmapLayout()
    self.num_devices = len(self.layout.devices)
    discovery_config.check_members(config.members, self.num_devices)
    self.groups = tuple(discovery.Group(m, config) for m in config.members)
    self._step = jax.pmap(
        functools.partial(
            discovery.discovery_step,
            groups=self.groups,
            num_members=config.num_members,
        ),
        axis_name=devices.AXIS_NAME,
        devices=self.layout.devices,
    )
    self._init_params = jax.jit(
        lambda key: self.groups[0].agent.update_rule.init_params(key)[0]
    )
    self._init_members = tuple(
        jax.jit(jax.vmap(g.init_member, in_axes=(None, 0, None)))
        for g in self.groups
    )

  def _split(self, tree: Any) -> Any:
    """[n, ...] -> this process's devices' rows [D_local, n / D, ...]."""
    return jax.tree.map(
        lambda x: np.asarray(x).reshape(
            (self.num_devices, -1) + np.shape(x)[1:]
        )[self.layout.key_index],
        tree,
    )

  def _members_template(self, params: Any) -> tuple[Any, ...]:
    template = []
    for group, init in zip(self.groups, self._init_members):
      n = group.member.count
      shapes = jax.eval_shape(
          init, jax.random.PRNGKey(0), np.arange(n, dtype=np.int32), params
      )
      template.append(
          jax.tree.map(
              lambda x, n=n: jax.ShapeDtypeStruct(
                  (self.layout.num_local, n // self.num_devices) + x.shape[1:],
                  x.dtype,
              ),
              shapes,
          )
      )
    return tuple(template)

  def initial_state(self, params: weights.Params) -> _LoopState:
    params = jax.tree.map(lambda x: np.asarray(x, np.float32), params)
    rng, init_key = jax.random.split(jax.random.PRNGKey(self.config.seed))
    members, offset = [], 0
    for group, init in zip(self.groups, self._init_members):
      n = group.member.count
      indices = np.arange(offset, offset + n, dtype=np.int32)
      members.append(self._split(jax.device_get(init(init_key, indices,
                                                      params))))  # fmt: skip
      offset += n
    put = self.layout.put
    return _LoopState(
        update_rule_params=put(params, replicate=True),
        members=put(tuple(members), replicate=False),
        rng=np.asarray(rng),
        step=0,
    )

  def step(self, state: _LoopState) -> tuple[_LoopState, dict[str, float]]:
    rng, step_key = jax.random.split(state.rng)
    params, members, logs = self._step(
        state.update_rule_params,
        state.members,
        self.layout.put(np.asarray(step_key), replicate=True),
    )
    logs = {k: float(v) for k, v in devices.first_copy(logs).items()}
    new_state = _LoopState(
        update_rule_params=params,
        members=members,
        rng=np.asarray(rng),
        step=state.step + 1,
    )
    return new_state, logs

  def state_arrays(self, state: _LoopState) -> dict[str, np.ndarray]:
    """The members' states, flat."""
    return checkpoint_lib.flatten_tree(state.members, 'members')

  def restore(
      self, ckpt: checkpoint_lib.Checkpoint
  ) -> tuple[_LoopState, list[dict[str, float]]]:
    params = ckpt.update_rule_params
    self.check_params(params)
    members = checkpoint_lib.restore_tree(
        self._members_template(params), ckpt.arrays, 'members'
    )
    rng, logs = runtime.restore_rng_and_logs(ckpt)
    put = self.layout.put
    state = _LoopState(
        update_rule_params=put(params, replicate=True),
        members=put(members, replicate=False),
        rng=rng,
        step=ckpt.step,
    )
    return state, logs


# Runs that compute the same thing share a `Discoverer` and its code.
_DISCOVERERS = runtime.ProgramCache(
    Discoverer, neutral=runtime.RULE_PROGRAM_NEUTRAL, maxsize=2
)


def discoverer_for(config: DiscoveryConfig) -> Discoverer:
  """A `Discoverer` for `config`, shared by runs that compute the same."""
  return _DISCOVERERS(config)


# A bar of meta-steps for `run_discovery` (`progress.progress_bar`).
progress_bar = functools.partial(progress.progress_bar, progress.DISCOVERY)


def run_discovery(
    config: DiscoveryConfig,
    *,
    update_rule_params: weights.Params | None = None,
    progress_fn: progress.ProgressFn | None = None,
    checkpoint_dir: files.PathLike | None = None,
    resume: bool = False,
    handle_interrupts: bool = False,
    logger: loggers.LoggerArg = None,
    log_dir: files.PathLike | None = None,
) -> DiscoveryResult:
  """Discovers (or fine-tunes) an update rule with the paper's recipe.

  Args:
    config: the run's settings (`discovery_config.preset('paper')` or
      `DiscoveryConfig()` for the local suite).
    update_rule_params: the rule to start from; None: the one
      `config.update_rule_params` names (None or 'random': a random rule).
      On resume, None resumes the checkpoint as it is.
    progress_fn: called as `progress_fn(step, logs)` after each meta-step.
    checkpoint_dir: where checkpoints go (`runtime.checkpoint_root`
      layout: a subdirectory per process with several).
    resume: continue from the newest checkpoint there.
    handle_interrupts: the first Ctrl-C or SIGTERM finishes the meta-step
      (on every process), writes a checkpoint and raises
      `interrupts.Interrupted`.
    logger: where each step's logs also go: sink names ('csv',
      'tensorboard', 'wandb'; written under `log_dir`) and/or
      `disco.loggers.Logger` objects (see `disco.loggers`).
    log_dir: the directory the named sinks write in.

  Returns:
    A `DiscoveryResult`.

  Raises:
    configs.ConfigError: an environment's members do not split over the
      devices.
    weights.WeightsError: the initial parameters do not fit the rule.
    checkpoint.CheckpointError: as `meta_train.run_meta_train`.
  """
  return runtime.run(
      discoverer_for(config),
      config,
      update_rule_params=update_rule_params,
      checkpoint_dir=checkpoint_dir,
      resume=resume,
      progress_fn=progress_fn,
      handle_interrupts=handle_interrupts,
      logger=logger,
      log_dir=log_dir,
  )
