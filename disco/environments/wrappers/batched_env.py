"""Runs several host-side (numpy) environments as one batch.

The environments step one after the other in Python; this is the slow path
used for environments that cannot be expressed in JAX.
"""

import copy

import chex
import jax
from ml_collections import config_dict
import numpy as np

from disco import types
from disco import utils
from disco.environments import base


class UnusedEnvState:
  """Placeholder state: host environments keep their state internally."""


class BatchedSingleStreamEnvironment(base.Environment):
  """A batch of single-stream environments stepped sequentially.

  Attributes:
    batch_size: the number of environments.
  """

  def __init__(
      self,
      env_class,
      batch_size: int,
      env_settings: config_dict.ConfigDict,
  ) -> None:
    """Builds `batch_size` environments.

    If the settings have a `random_seed`, each environment gets its own seed,
    drawn from that seed with JAX's RNG (as the reference does).

    Args:
      env_class: a callable `env_class(env_settings=...)` returning a
        single-stream `disco` environment.
      batch_size: the number of environments.
      env_settings: their settings.
    """
    self.batch_size = batch_size
    self._num_envs = batch_size
    self._shape_prefix = (batch_size,)
    if 'random_seed' in env_settings:
      seeds = jax.random.randint(
          jax.random.PRNGKey(env_settings.random_seed),
          (batch_size,),
          0,
          np.iinfo(np.int32).max,
      )
      envs = []
      for seed in np.asarray(seeds):
        settings = copy.deepcopy(env_settings)
        settings.random_seed = int(seed)
        envs.append(env_class(env_settings=settings))
    else:
      envs = [env_class(env_settings=env_settings) for _ in range(batch_size)]
    self._envs = tuple(envs)
    self._single_action_spec = self._envs[0].single_action_spec()
    self._single_observation_spec = self._envs[0].single_observation_spec()
    # Reference behaviour, kept for identical random streams: every env is
    # reset once here, and `reset()` resets it again (one more RNG draw).
    self._timesteps = [env.reset(None)[1] for env in self._envs]

  def _stacked_timesteps(self) -> types.EnvironmentTimestep:
    stacked = jax.tree.map(
        lambda *xs: np.stack(xs).reshape(self._shape_prefix + xs[0].shape),
        *self._timesteps,
    )
    return utils.cast_to_single_precision(stacked, host_data=True)

  def step(
      self, state: UnusedEnvState | None, actions: chex.ArrayTree
  ) -> tuple[UnusedEnvState, types.EnvironmentTimestep]:
    del state
    chex.assert_tree_shape_prefix(actions, self._shape_prefix)
    actions = jax.tree.map(
        lambda a: np.asarray(a).reshape((self._num_envs,) + a.shape[1:]),
        actions,
    )
    self._timesteps = [
        env.step(None, jax.tree.map(lambda a, i=i: a[i], actions))[1]
        for i, env in enumerate(self._envs)
    ]
    return UnusedEnvState(), self._stacked_timesteps()

  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[UnusedEnvState, types.EnvironmentTimestep]:
    del rng_key
    self._timesteps = [env.reset(None)[1] for env in self._envs]
    return UnusedEnvState(), self._stacked_timesteps()

  def single_action_spec(self) -> types.ActionSpec:
    return self._single_action_spec

  def single_observation_spec(self) -> types.Specs:
    return self._single_observation_spec
