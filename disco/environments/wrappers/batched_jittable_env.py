"""Turns a pure, single-stream environment into a batched jittable one.

The wrapped class provides `num_actions`, `initial_state(rng)`,
`episode_reset(rng, state)`, `step(rng, state, action)`,
`is_terminal(state)`, `reward(state)` and `render(state)`, all pure JAX.
Episodes restart automatically: the step that ends an episode is reported
as LAST with its reward, while the returned state (and observation) already
belong to the next episode.
"""

from collections.abc import Mapping
from typing import Any

import chex
import dm_env
from dm_env import specs as dm_specs
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np

from disco import types
from disco.environments import base

_MID = np.int32(dm_env.StepType.MID)
_LAST = np.int32(dm_env.StepType.LAST)


def _to_env_timestep(
    obs: chex.Array, reward: chex.Array, is_terminal: chex.Array
) -> types.EnvironmentTimestep:
  # Strongly typed int32 step types from both `reset` and `step`, so that
  # functions taking a timestep compile once (the reference's `step` returned
  # a weakly typed value, which made jitted callers compile twice).
  return types.EnvironmentTimestep(
      observation=jnp.asarray(obs, jnp.float32),
      step_type=jnp.where(is_terminal, _LAST, _MID),
      reward=jnp.asarray(reward, jnp.float32),
  )


@chex.dataclass(mappable_dataclass=False)
class EnvState:
  """Per-environment state and random key (mutable, as the reference's).

  Attributes:
    state: the wrapped environment's state, [B, ...].
    rng: [B, 2] per-environment PRNG keys.
  """

  state: chex.ArrayTree
  rng: chex.PRNGKey


class BatchedJittableEnvironment(base.Environment[EnvState]):
  """A `vmap`ped batch of a pure single-stream environment."""

  def __init__(
      self,
      env_class,
      batch_size: int,
      env_settings: config_dict.ConfigDict | Mapping[str, Any],
  ):
    """Builds the batch.

    Args:
      env_class: the single-stream class, constructed with the settings as
        keyword arguments.
      batch_size: the number of environments.
      env_settings: settings of the single-stream environment: a
        `ConfigDict` as in the reference, or any mapping (e.g. a dict).
    """
    self.batch_size = batch_size
    if hasattr(env_settings, 'to_dict'):
      env_settings = env_settings.to_dict()
    if not isinstance(env_settings, Mapping):
      raise TypeError(
          'env_settings must be a ConfigDict or a mapping of keyword'
          f' arguments for {getattr(env_class, "__name__", env_class)}; got'
          f' {type(env_settings).__name__}.'
      )
    self._env = env_class(**env_settings)
    self._single_action_spec = dm_specs.BoundedArray(
        (), np.int32, 0, self._env.num_actions - 1
    )
    # A raw uint32 key, as `reset` passes on the raw keys users give it
    # (and as the reference did here).
    example_obs = jax.eval_shape(
        lambda: self._env.render(self._env.initial_state(jax.random.PRNGKey(0)))
    )
    self._single_observation_spec = {
        'observation': dm_specs.Array(
            shape=example_obs.shape, dtype=example_obs.dtype
        )
    }
    self._batched_env_step = jax.vmap(self._single_env_step)
    self._batched_env_reset = jax.vmap(self._single_env_reset)

  def _single_env_step(
      self, env_state: EnvState, action: chex.Array
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    next_rng, step_rng = jax.random.split(env_state.rng)
    moved = self._env.step(step_rng, env_state.state, action)
    is_terminal = self._env.is_terminal(moved)
    reward = self._env.reward(moved)
    # A finished episode restarts at once, from a state drawn with the same
    # key that drove this step.
    restarted = self._env.episode_reset(step_rng, moved)
    next_state = jax.tree.map(
        lambda fresh, old: jnp.where(is_terminal, fresh, old), restarted, moved
    )
    timestep = _to_env_timestep(
        self._env.render(next_state), reward, is_terminal
    )
    return EnvState(state=next_state, rng=next_rng), timestep

  def _single_env_reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    next_rng, reset_rng = jax.random.split(rng_key)
    state = self._env.initial_state(reset_rng)
    timestep = _to_env_timestep(
        self._env.render(state),
        self._env.reward(state),
        self._env.is_terminal(state),
    )
    return EnvState(state=state, rng=next_rng), timestep

  def step(
      self, state: EnvState, actions: chex.Array
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    return self._batched_env_step(state, actions)

  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    return self._batched_env_reset(jax.random.split(rng_key, self.batch_size))

  def single_action_spec(self) -> types.ActionSpec:
    return self._single_action_spec

  def single_observation_spec(self) -> types.Specs:
    return self._single_observation_spec
