"""Craftax as batched, jittable `disco` environments.

Details and rationale: `docs/modules.md`. Besides Craftax's own ids, the
adapter knows 'Craftax-Classic-Symbolic-Grid-v1', an id of ours: the
symbolic observation as a grid [7, 9, 43], the map's 21 channels (17
blocks, 4 mobs) with the 22 other features (inventory, intrinsics,
direction, light, sleep) repeated at every cell, for convolutional agents
without rendering. Pixels ('Craftax-Classic-Pixels-v1', [63, 63, 3]) are
uint8, 255 times Craftax's [0, 1] values rounded. Craftax-Classic's
environments also count the episodes that unlocked each of its 22
achievements (`achievement_counts`), for Crafter's score.
"""

from collections.abc import Mapping
import importlib
from typing import Any

import chex
import dm_env
import jax
import jax.numpy as jnp
import numpy as np

from disco import types
from disco.environments import arguments
from disco.environments import gymnax_api

_INSTALL_HINT = 'pip install "disco-jax[craftax]"'
_LAST = np.int32(dm_env.StepType.LAST)

CLASSIC_SYMBOLIC = 'Craftax-Classic-Symbolic-v1'
SYMBOLIC = 'Craftax-Symbolic-v1'
CLASSIC_PIXELS = 'Craftax-Classic-Pixels-v1'
CLASSIC_GRID = 'Craftax-Classic-Symbolic-Grid-v1'
# The Craftax ids this adapter accepts.
ENV_NAMES = (CLASSIC_SYMBOLIC, SYMBOLIC, CLASSIC_PIXELS, CLASSIC_GRID)
_CLASSIC = (CLASSIC_SYMBOLIC, CLASSIC_PIXELS, CLASSIC_GRID)
# Craftax-Classic's symbolic observation: a [7, 9] view of 21 channels,
# flattened, then 22 features.
_VIEW = (7, 9)
_VIEW_CHANNELS = 21
# Craftax-Classic's achievements, in the order of its `Achievement` enum.
CLASSIC_ACHIEVEMENTS = (
    'collect_wood',
    'place_table',
    'eat_cow',
    'collect_sapling',
    'collect_drink',
    'make_wood_pickaxe',
    'make_wood_sword',
    'place_plant',
    'defeat_zombie',
    'collect_stone',
    'place_stone',
    'eat_plant',
    'defeat_skeleton',
    'make_stone_pickaxe',
    'make_stone_sword',
    'wake_up',
    'place_furnace',
    'collect_coal',
    'collect_iron',
    'collect_diamond',
    'make_iron_pickaxe',
    'make_iron_sword',
)


@chex.dataclass(frozen=True)
class CraftaxState:
  """The batched environments' state and their achievement counts.

  Attributes:
    env_state: the environments' states and keys (`gymnax_api.EnvState`).
    unlocked: [B, 22] int32, for each environment the episodes ended so
      far in it that unlocked each achievement.
  """

  env_state: gymnax_api.EnvState
  unlocked: chex.Array


def grid_observation(flat: chex.Array) -> chex.Array:
  """Craftax-Classic's symbolic observation [1345] as a grid [7, 9, 43]."""
  size = _VIEW[0] * _VIEW[1] * _VIEW_CHANNELS
  view = flat[:size].reshape(_VIEW + (_VIEW_CHANNELS,))
  extra = jnp.broadcast_to(flat[size:], _VIEW + flat[size:].shape)
  return jnp.concatenate([view, extra.astype(view.dtype)], axis=-1)


def pixels_as_uint8(pixels: chex.Array) -> chex.Array:
  """Craftax's pixels in [0, 1] as uint8 (255 times, rounded)."""
  return jnp.round(jnp.clip(pixels, 0.0, 1.0) * 255.0).astype(jnp.uint8)


def _import_craftax() -> Any:
  """Imports `craftax.craftax_env`, or says how to install craftax.

  Returns:
    The `craftax.craftax_env` module.

  Raises:
    ImportError: craftax (or one of its dependencies) is missing.
  """
  try:
    return importlib.import_module('craftax.craftax_env')
  except ImportError as error:
    raise ImportError(
        'Craftax environments need the optional `craftax` extra of disco,'
        f' which is not installed ({error}). Install it with:'
        f' {_INSTALL_HINT} (it installs craftax).'
    ) from error


class CraftaxEnvironment(gymnax_api.GymnaxApiEnvironment):
  """A batch of one Craftax environment; see the module docstring."""

  def __init__(
      self,
      env_name: str,
      batch_size: int,
      env_params: Mapping[str, Any] | None = None,
  ):
    """Makes the Craftax environment once and builds the batched functions.

    Args:
      env_name: one of `ENV_NAMES`: 'Craftax-Classic-Symbolic-v1',
        'Craftax-Symbolic-v1', 'Craftax-Classic-Pixels-v1' or
        'Craftax-Classic-Symbolic-Grid-v1'.
      batch_size: the number of environments.
      env_params: fields of the environment's default `EnvParams` to
        replace, e.g. `{'max_timesteps': 1000}`.

    Raises:
      ImportError: craftax is not installed.
      ValueError: unknown environment name, unknown `env_params` field or
        non-positive batch size.
    """
    arguments.check_batch_size(batch_size)
    arguments.check_env_name(
        env_name, ENV_NAMES, 'Craftax', '(symbolic, grid or classic pixels)'
    )
    craftax_env = _import_craftax()
    self._layout = env_name
    if env_name == CLASSIC_PIXELS:
      self.observation_dtype = np.uint8
    made = CLASSIC_SYMBOLIC if env_name == CLASSIC_GRID else env_name
    # The `...NoAutoReset` class: the adapter restarts finished episodes.
    env = craftax_env.make_craftax_env_from_name(made, auto_reset=False)
    params = env.default_params
    if env_params:
      params = arguments.replace_params(params, env_params, env_name)
    super().__init__(env, params, batch_size, name=env_name, auto_resets=False)

  def _observation(self, obs: chex.Array) -> chex.Array:
    if self._layout == CLASSIC_GRID:
      return grid_observation(obs)
    if self._layout == CLASSIC_PIXELS:
      return pixels_as_uint8(obs)
    return obs

  def _env_reset(self, rng_key: chex.PRNGKey) -> tuple[chex.Array, Any]:
    obs, state = super()._env_reset(rng_key)
    return self._observation(obs), state

  def _env_step(self, rng_key: chex.PRNGKey, state: Any, action: chex.Array):
    obs, state, reward, is_last, _, final_obs = super()._env_step(
        rng_key, state, action
    )
    # Craftax's game ends at `max_timesteps` as it ends on death: the step
    # is a truncation where the game would go on without the time limit.
    no_limit = self._params.replace(max_timesteps=jnp.iinfo(jnp.int32).max)
    truncated = jnp.logical_and(
        is_last, jnp.logical_not(self._env.is_terminal(state, no_limit))
    )
    return (
        self._observation(obs),
        state,
        reward,
        is_last,
        truncated,
        self._observation(final_obs),
    )

  @property
  def achievement_names(self) -> tuple[str, ...]:
    """Craftax-Classic's 22 achievements (none for Craftax's full game)."""
    return CLASSIC_ACHIEVEMENTS if self._layout in _CLASSIC else ()

  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[CraftaxState, types.EnvironmentTimestep]:
    env_state, timestep = super().reset(rng_key)
    unlocked = jnp.zeros(
        (self.batch_size, len(CLASSIC_ACHIEVEMENTS)), jnp.int32
    )
    return CraftaxState(env_state=env_state, unlocked=unlocked), timestep

  def _step(
      self, state: CraftaxState, actions: chex.Array
  ) -> tuple[CraftaxState, types.EnvironmentTimestep, gymnax_api.Truncation]:
    env_state, timestep, reset_rngs, truncation = jax.vmap(
        self._single_env_step
    )(state.env_state, actions)
    unlocked = state.unlocked
    if self.achievement_names:
      # The ended episodes' achievements, read before they restart.
      ended = (timestep.step_type == _LAST)[:, None]
      achieved = env_state.state.achievements & ended  # [B, 22]
      unlocked = unlocked + achieved.astype(jnp.int32)
    env_state, timestep = self._restart_finished(
        env_state, timestep, reset_rngs
    )
    return (
        CraftaxState(env_state=env_state, unlocked=unlocked),
        timestep,
        (truncation),
    )

  def achievement_counts(self, state: CraftaxState) -> chex.Array:
    """[B, 22] episodes ended so far that unlocked each achievement."""
    return state.unlocked

  @property
  def craftax_env(self) -> Any:
    """The wrapped Craftax environment object (a `...NoAutoReset` class)."""
    return self._env
