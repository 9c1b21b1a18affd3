"""gymnax environments as batched, jittable `disco` environments.

`GymnaxEnvironment` wraps one environment made by `gymnax.make(env_name)`
(gymnax >= 1.0, the optional `envs` extra) and drives `batch_size` copies of
it with `vmap`. It follows the conventions of
`disco.environments.jittable_envs.CatchJittableEnvironment`:

* `reset` reports MID steps with reward 0.
* `step` reports MID on ordinary steps and LAST on the step that ends an
  episode, with that step's reward; the returned state and observation then
  already belong to the next episode (gymnax's own automatic reset).
* Observations are float32 arrays [B, ...]; the observation spec names them
  `{'observation': spec}` like the jittable Catch, while timesteps carry the
  bare array (the agent's MLP flattens every leaf, so both read the same).
* Rewards are float32 [B]; step types are strongly typed int32 [B] from both
  `reset` and `step`, so a jitted consumer compiles once.
* Actions are scalar int32 indices in [0, n - 1]; only discrete gymnax
  action spaces are supported.

Time limits. gymnax ends an episode when it terminates *or* when it reaches
`max_steps_in_episode` (truncation), and restarts it in both cases. Both are
reported as LAST here, so the agent's discount is 0 there and bootstrapping
stops at a time limit. `EnvironmentTimestep` has no separate discount, and
after a truncation the next observation already belongs to a new episode
(the pre-reset observation is not kept), so reporting a truncation as MID
would make the agent bootstrap from an unrelated state; treating it as a
termination is the consistent choice. Use `env_params` to move or lift the
time limit (e.g. `{'max_steps_in_episode': 10_000}`).

Randomness. The state carries one key per environment (as in
`disco.environments.wrappers.batched_jittable_env`): `reset(rng)` splits
`rng` into `batch_size` keys, and each environment splits its own key on
every `reset` and `step`, keeping one half for later and giving the other to
gymnax. Everything is pure JAX and works under `jit`, `vmap` and `lax.scan`.

gymnax is imported only when an environment is built, so importing this
module (or `disco`) does not need gymnax.
"""

from collections.abc import Mapping
import difflib
import importlib
import importlib.metadata
from typing import Any

import chex
import dm_env
from dm_env import specs as dm_specs
import jax
import jax.numpy as jnp
import numpy as np

from disco import types
from disco.environments import base
from disco.environments.wrappers import batched_jittable_env

_MID = np.int32(dm_env.StepType.MID)
_LAST = np.int32(dm_env.StepType.LAST)

_INSTALL_HINT = 'pip install -e ".[envs]"'

# `EnvState(state, rng)`: the gymnax states [B, ...] and the per-environment
# keys [B] (typed keys) or [B, 2] (raw uint32 keys), shared with the batched
# jittable wrapper.
EnvState = batched_jittable_env.EnvState


def _import_gymnax() -> tuple[Any, Any]:
  """Imports gymnax and its spaces, or says how to install them.

  Returns:
    The `gymnax` and `gymnax.environments.spaces` modules.

  Raises:
    ImportError: gymnax (or its undeclared dependency six) is missing, or
      it is older than 1.0 (whose `step` returns five values, not six).
  """
  try:
    gymnax = importlib.import_module('gymnax')
    spaces = importlib.import_module('gymnax.environments.spaces')
  except ImportError as error:
    raise ImportError(
        'gymnax environments need the optional `envs` extra of disco, which'
        f' is not installed ({error}). Install it with: {_INSTALL_HINT}'
        ' (from the repository root; it installs gymnax>=1.0.1 and six).'
    ) from error
  try:
    version = importlib.metadata.version('gymnax')
  except importlib.metadata.PackageNotFoundError:
    version = None  # Not installed as a distribution; trust the import.
  if version is not None and int(version.split('.')[0]) < 1:
    raise ImportError(
        f'disco needs gymnax>=1.0.1 (six-value `step`), found {version}.'
        f' Upgrade it with: {_INSTALL_HINT}'
    )
  return gymnax, spaces


def _strongly_typed(tree: chex.ArrayTree) -> chex.ArrayTree:
  """Drops weak types, so that reset and step states have equal types."""

  def _strong(x: chex.Array) -> chex.Array:
    if jnp.issubdtype(jnp.result_type(x), jax.dtypes.prng_key):
      return x
    return jax.lax.convert_element_type(x, jnp.result_type(x))

  return jax.tree.map(_strong, tree)


def _timestep(
    observation: chex.Array, reward: chex.Array, is_last: chex.Array
) -> types.EnvironmentTimestep:
  return types.EnvironmentTimestep(
      observation=jnp.asarray(observation, jnp.float32),
      step_type=jnp.where(is_last, _LAST, _MID),
      reward=jnp.asarray(reward, jnp.float32),
  )


class GymnaxEnvironment(base.Environment[EnvState]):
  """A batch of one gymnax environment; see the module docstring."""

  def __init__(
      self,
      env_name: str,
      batch_size: int,
      env_kwargs: Mapping[str, Any] | None = None,
      env_params: Mapping[str, Any] | None = None,
  ):
    """Makes the gymnax environment once and builds the batched functions.

    Args:
      env_name: a gymnax id, e.g. 'Breakout-MinAtar' or 'CartPole-v1' (the
        names in `gymnax.registered_envs`).
      batch_size: the number of environments.
      env_kwargs: keyword arguments of `gymnax.make`, i.e. of the
        environment's constructor (e.g. `{'size': 10}` for DeepSea).
      env_params: fields of the environment's default `EnvParams` to
        replace, e.g. `{'max_steps_in_episode': 100}`.

    Raises:
      ImportError: gymnax is not installed.
      ValueError: unknown environment name, unknown `env_params` field,
        non-positive batch size, or an environment whose action space is
        not discrete (e.g. 'Pendulum-v1').
      TypeError: an observation that is not a single array.
    """
    if isinstance(batch_size, bool) or not isinstance(
        batch_size, (int, np.integer)
    ):
      raise ValueError(f'batch_size must be an int, got {batch_size!r}.')
    if batch_size < 1:
      raise ValueError(f'batch_size must be positive, got {batch_size}.')
    gymnax, spaces = _import_gymnax()
    known_names = list(gymnax.registered_envs)
    if env_name not in known_names:
      close = difflib.get_close_matches(str(env_name), known_names, n=3)
      suggestion = f' Did you mean {close}?' if close else ''
      raise ValueError(
          f'Unknown gymnax environment {env_name!r}.{suggestion} Valid names'
          ' are listed by `gymnax.registered_envs`:'
          f' {sorted(known_names)}.'
      )

    self.batch_size = int(batch_size)
    self.env_name = env_name
    # gymnax's `reset` and `step` are jitted with the environment object as
    # a static argument hashed by identity: make it exactly once.
    self._env, params = gymnax.make(env_name, **(env_kwargs or {}))
    if env_params:
      fields = sorted(getattr(params, '__dataclass_fields__', {}))
      unknown = sorted(set(env_params) - set(fields))
      if unknown:
        raise ValueError(
            f'Unknown env_params {unknown} for {env_name!r}; its'
            f' {type(params).__name__} has the fields {fields}.'
        )
      params = params.replace(**env_params)
    self._params = params

    action_space = self._env.action_space(params)
    if not isinstance(action_space, spaces.Discrete) or action_space.shape:
      raise ValueError(
          f'gymnax environment {env_name!r} has the action space'
          f' {action_space!r}; only discrete action spaces'
          ' (gymnax.environments.spaces.Discrete) are supported, because the'
          ' agent samples scalar int32 actions. Continuous-control'
          ' environments such as Pendulum-v1 cannot be used.'
      )
    self._single_action_spec = dm_specs.BoundedArray(
        (), np.int32, 0, int(action_space.n) - 1
    )

    example_obs = jax.eval_shape(
        lambda key: self._env.reset(key, params)[0], jax.random.key(0)
    )
    if not isinstance(example_obs, jax.ShapeDtypeStruct):
      raise TypeError(
          f'gymnax environment {env_name!r} returns observations of structure'
          f' {jax.tree.structure(example_obs)}; only single-array'
          ' observations are supported.'
      )
    self._single_observation_spec = {
        'observation': dm_specs.Array(example_obs.shape, np.float32)
    }

    self._batched_reset = jax.jit(jax.vmap(self._single_env_reset))
    self._batched_step = jax.jit(jax.vmap(self._single_env_step))

  @property
  def gymnax_env(self) -> Any:
    """The wrapped gymnax environment object (made once)."""
    return self._env

  @property
  def env_params(self) -> Any:
    """The gymnax `EnvParams` used for every reset and step."""
    return self._params

  def _single_env_reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    next_rng, reset_rng = jax.random.split(rng_key)
    obs, state = self._env.reset(reset_rng, self._params)
    timestep = _timestep(obs, jnp.zeros((), jnp.float32), False)
    return EnvState(state=_strongly_typed(state), rng=next_rng), timestep

  def _single_env_step(
      self, env_state: EnvState, action: chex.Array
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    next_rng, step_rng = jax.random.split(env_state.rng)
    # On a terminated or truncated step gymnax has already swapped in the
    # next episode's first observation and state.
    obs, state, reward, terminated, truncated, _ = self._env.step(
        step_rng, env_state.state, action, self._params
    )
    timestep = _timestep(obs, reward, jnp.logical_or(terminated, truncated))
    return EnvState(state=_strongly_typed(state), rng=next_rng), timestep

  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    """Starts new episodes in all environments.

    Args:
      rng_key: one key (typed or raw); it is split into `batch_size` keys.

    Returns:
      The state (gymnax states and per-environment keys) and a MID timestep
      with reward 0: observation [B, ...] float32, step_type and reward [B].
    """
    return self._batched_reset(jax.random.split(rng_key, self.batch_size))

  def step(
      self, state: EnvState, actions: chex.Array
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    """Steps every environment, restarting those whose episode ended.

    Args:
      state: the state returned by `reset` or `step`.
      actions: [B] integer actions in [0, n - 1].

    Returns:
      The next state and the timestep: LAST where the episode terminated or
      was truncated (with that step's reward; the observation is already the
      next episode's first one), MID elsewhere.
    """
    chex.assert_shape(actions, (self.batch_size,))
    return self._batched_step(state, actions)

  def single_action_spec(self) -> types.ActionSpec:
    return self._single_action_spec

  def single_observation_spec(self) -> types.Specs:
    return self._single_observation_spec
