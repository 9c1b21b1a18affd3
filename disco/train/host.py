"""The trainer with environments that step on the host (Gymnasium, Crafter).

`HostTrainer` is `disco.train.loop.Trainer` with an iteration's acting
taken out of the compiled program: the agent's step runs jitted on the
device, the environment steps on the host, and the rollout goes to the
same program as the fused path's from there on (`Program.absorb`: returns,
reward scale, replay, learner steps). Keys are drawn as the fused path
draws them, so a jittable environment stepped this way trains as it does
fused (`tests/test_train_host.py`). One seed and one device per run.

A resumed run restarts the environments' episodes (a host environment's
own state cannot be saved): the episodes running at the checkpoint are
neither finished nor counted. Details: `docs/environments.md`.
"""

from collections.abc import Callable, Mapping, Sequence
import functools
from typing import Any

import chex
import dm_env
import jax
import jax.numpy as jnp
import numpy as np

from disco import checkpoint as checkpoint_lib
from disco import devices as devices_lib
from disco import precision
from disco import truncation as truncation_lib
from disco import types
from disco.train import lanes
from disco.train import loop
from disco.train import program as program_lib
from disco.train.config import TrainConfig
from disco.train.state import TrainState

_AXIS = devices_lib.AXIS_NAME
_LAST = int(dm_env.StepType.LAST)


def _pmap(fn: Callable[..., Any], devices: Sequence[Any], **kwargs: Any):
  return jax.pmap(fn, axis_name=_AXIS, devices=devices, **kwargs)


class HostTrainer(loop.Trainer):
  """`Trainer` for a host environment: acting on the host, one seed."""

  def __init__(
      self,
      config: TrainConfig,
      seeds: Sequence[int],
      update_rule_params: types.MetaParams | None = None,
  ):
    if len(tuple(seeds)) != 1:
      raise ValueError(
          f'{config.env} steps on the host: train one seed per run (got'
          f' seeds {list(seeds)}); start one run per seed.'
      )
    super().__init__(config, seeds, update_rule_params)
    setup, devices = self.setup, self.setup.devices
    program = program_lib.Program(config, setup, self.eval_env)
    self._program = program
    dtype = config.compute_dtype
    self._host_init = _pmap(
        precision.compute_in(dtype, self._init_from), devices
    )
    self._act_step = _pmap(
        precision.compute_in(dtype, self._acting_step), devices
    )
    self._eval_step = _pmap(
        precision.compute_in(dtype, self._eval_actor_step), devices
    )
    self._rollout_keys = _pmap(self._keys_of_rollout, devices)
    self._restart = _pmap(self._restarted, devices)
    self._initial_actor = _pmap(program.agent.initial_actor_state, devices)
    self._absorb = {
        learn: _pmap(
            precision.compute_in(
                dtype, functools.partial(program.absorb, learn_now=learn)
            ),
            devices,
            donate_argnums=(0,),
        )
        for learn in (False, True)
    }
    self._truncation = (
        config.truncation == truncation_lib.BOOTSTRAP
        and truncation_lib.reports_truncation(setup.env)
    )

  @staticmethod
  def select_devices(config: TrainConfig) -> tuple[jax.Device, ...]:
    del config
    return (jax.devices()[0],)

  # The per-device functions (inside `pmap`).

  def _keys_of_rollout(self, rng: chex.PRNGKey) -> chex.Array:
    """[T] the keys of a rollout's steps, as `Program.iteration` draws."""
    _, rollout_key, _ = jax.random.split(rng, 3)
    return jax.random.split(rollout_key, self.config.rollout_len)

  def _acting_step(self, params, key, timestep, actor_state):
    """The agent's step, its outputs trimmed to what the replay keeps.

    The rest (Disco's 601-bin q values, its predictions) would cross to
    the host and back for nothing (`acting.trim_agent_outs`).
    """
    step, actor_state = self._program.actor_step(
        params, key, timestep, actor_state
    )
    logits = step.agent_outs['logits']
    return step.replace(agent_outs={'logits': logits}), actor_state

  def _example_unroll(self, params, actor_state, timestep, env_state, key):
    """(a rollout [T, B, ...] shaped as the host makes it,), for the replay."""
    del env_state, key
    step, _ = jax.eval_shape(
        self._acting_step,
        params,
        jax.random.PRNGKey(0),
        timestep,
        actor_state,
    )
    t = self.config.rollout_len
    rollout = jax.tree.map(
        lambda x: jnp.zeros((t,) + x.shape, x.dtype),
        types.ActorRollout.from_timestep(step),
    )
    if not self._truncation:
      return (rollout,)
    return (
        _truncated(
            rollout,
            jnp.zeros(rollout.discounts.shape, bool),
            rollout.observations,
        ),
    )

  def _init_from(
      self,
      seed_key: chex.PRNGKey,
      env_state: Any,
      timestep: types.EnvironmentTimestep,
  ) -> TrainState:
    """`Program.init` with the host environment's state and timestep."""
    return self._program.init_with(
        seed_key, env_state, timestep, self._example_unroll
    )

  def _restarted(
      self,
      state: TrainState,
      env_state: Any,
      timestep: types.EnvironmentTimestep,
  ) -> TrainState:
    """`state` with new episodes: `timestep`, a fresh actor, returns 0."""
    agent = self._program.agent
    return state.replace(
        env_state=env_state,
        timestep=timestep,
        actor_state=agent.initial_actor_state(state.rng),
        episode_returns=jnp.zeros_like(state.episode_returns),
    )

  def _eval_actor_step(self, params, key, t, timestep, actor_state):
    """The evaluation's step, keyed as `evaluation.play_episodes` keys."""
    num = timestep.reward.shape[0]
    keys = lanes.lane_keys(jax.random.fold_in(key, t), lanes.local_lanes(num))
    return self._program.agent.actor_step(params, keys, timestep, actor_state)

  # The host's side.

  def _reset(self, env: Any, key: chex.PRNGKey) -> tuple[Any, Any]:
    """(env state, timestep) of new episodes, with the device axis [1]."""
    env_state, timestep = env.reset(key)
    return _batched((_arrays(env_state), timestep))

  def initial_state(self) -> TrainState:
    keys = self._seed_keys()
    env_key = jax.random.split(keys[0], 3)[0]
    return self._host_init(keys, *self._reset(self.setup.env, env_key))

  def restore_state(self, arrays: Mapping[str, np.ndarray]) -> TrainState:
    """The saved state, its environments' episodes started afresh."""
    template = jax.eval_shape(
        self._host_init,
        self._seed_keys(),
        *self._reset(self.setup.env, jax.random.PRNGKey(0)),
    )
    state = checkpoint_lib.restore_tree(template, arrays, 'state')
    key = jax.random.fold_in(np.asarray(state.rng)[0], 1)
    _, placed = devices_lib.place_like_pmap(self.setup.devices, sharded=state)
    return self._restart(placed, *self._reset(self.setup.env, key))

  def _act(self, state: TrainState) -> tuple[Any, Any, Any, Any]:
    """A rollout [1, T, B, ...] on the host; actor state, timestep, env state."""
    keys = self._rollout_keys(state.rng)
    timestep = jax.device_get(state.timestep)
    env_state = jax.tree.map(lambda x: x[0], jax.device_get(state.env_state))
    actor_state = state.actor_state
    steps, truncations = [], []
    for t in range(self.config.rollout_len):
      step, actor_state = self._act_step(
          state.learner_state.params, keys[:, t], timestep, actor_state
      )
      steps.append(jax.device_get(step))
      actions = steps[-1].actions.reshape(-1)
      if self._truncation:
        env_state, timestep, truncation = self.setup.env.step_with_truncation(
            env_state, actions
        )
        truncations.append(
            jax.tree.map(lambda x: np.asarray(x)[None], truncation)
        )
      else:
        env_state, timestep = self.setup.env.step(env_state, actions)
      timestep = jax.tree.map(lambda x: np.asarray(x)[None], timestep)
    rollout = types.ActorRollout.from_timestep(
        jax.tree.map(lambda *xs: np.stack(xs, axis=1), *steps)
    )
    if self._truncation:
      # Step t's truncation is reported by the env step that led to it (t -
      # 1); the rollout's first step starts no transition of its own.
      rollout = _truncated(
          rollout,
          np.stack(
              [np.zeros_like(truncations[0].truncated)]
              + [x.truncated for x in truncations[:-1]],
              axis=1,
          ),
          np.stack(
              [steps[0].observations]
              + [x.final_observation for x in truncations[:-1]],
              axis=1,
          ),
      )
    return rollout, actor_state, timestep, _batched((_arrays(env_state),))[0]

  def _chunk(self, learn: bool, rows: int) -> Any:
    """`num` iterations acted on the host, as the fused chunk returns them."""

    def run(state: TrainState, rule_params: Any, num: Any):
      outputs = []
      for _ in range(int(num)):
        acted = self._act(state)
        state, out = self._absorb[learn](state, *acted, rule_params)
        outputs.append(out)
      if not rows:
        return state, jax.tree.map(lambda *xs: sum(xs[1:], xs[0]), *outputs)
      stacked = jax.tree.map(lambda *xs: jnp.stack(xs, axis=1), *outputs)
      return state, jax.tree.map(
          lambda x: jnp.pad(
              x, [(0, 0), (0, rows - x.shape[1])] + [(0, 0)] * (x.ndim - 2)
          ),
          stacked,
      )

    return run

  def _compile_in_background(
      self, learn: bool, rows: int
  ) -> Callable[[], None]:
    del learn, rows  # The host's programs compile at their first call.
    return lambda: None

  def evaluate(self, state: TrainState, step: int) -> dict[str, np.ndarray]:
    """One episode in each evaluation environment, stepped on the host."""
    key = self._seed_keys(offset=1 + step)[0]
    reset_key, act_key = jax.random.split(key)
    # The state as the environment keeps it (a frame stack's, say).
    env_state, timestep = self.eval_env.reset(reset_key)
    timestep = _batched(timestep)
    num = self.config.eval_envs
    actor_state = self._initial_actor(act_key[None])
    acc = np.zeros(num, np.float32)
    done = np.zeros(num, bool)
    returns = np.zeros(num, np.float32)
    params = state.learner_state.params
    act_keys = act_key[None]
    for t in range(self.config.eval_max_steps):
      if done.all():
        break
      step, actor_state = self._eval_step(
          params, act_keys, np.full((1,), t, np.int32), timestep, actor_state
      )
      actions = np.asarray(jax.device_get(step.actions)).reshape(-1)
      env_state, new = self.eval_env.step(env_state, actions)
      acc += np.where(done, 0.0, new.reward)
      ended = ~done & (np.asarray(new.step_type) == _LAST)
      returns = np.where(ended, acc, returns)
      done |= ended
      timestep = jax.tree.map(lambda x: np.asarray(x)[None], new)
    return dict(
        total_return=np.atleast_1d(np.sum(returns * done)),
        num_episodes=np.atleast_1d(np.sum(done).astype(np.float32)),
    )


def _truncated(
    rollout: types.ActorRollout, truncated: Any, final_observations: Any
) -> truncation_lib.TruncatedRollout:
  return truncation_lib.TruncatedRollout(
      **{
          name: getattr(rollout, name)
          for name in types.ActorTimestep.__dataclass_fields__
      },
      truncated=truncated,
      final_observations=final_observations,
  )


def _arrays(env_state: Any) -> Any:
  """A host environment's state with its arrays alone (None for the rest).

  Crafter's counts and a frame stack's frames travel with the trainer's
  state; an object kept for form (`UnusedEnvState`) does not.
  """

  def array_or_none(x: Any) -> Any:
    return x if isinstance(x, (np.ndarray, np.generic, jax.Array)) else None

  return jax.tree.map(array_or_none, env_state)


def _batched(tree: Any) -> Any:
  """A host (env state, timestep) with a leading device axis [1]."""
  return jax.tree.map(lambda x: np.asarray(x)[None], tree)
