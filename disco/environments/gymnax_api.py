"""The adapter for any environment with gymnax's functional API.

`GymnaxApiEnvironment` drives a batch of one already-made environment
(`reset(key, params)`, `step(key, state, action, params)`) with `vmap`, as
a jittable `disco` environment; gymnax's, Craftax's and xminigrid's
adapters are its subclasses. Details and rationale: `docs/modules.md`
(`disco.environments.gymnax_env`).
"""

from typing import Any

import chex
import dm_env
from dm_env import specs as dm_specs
import jax
import jax.numpy as jnp
import numpy as np

from disco import types
from disco.environments import arguments
from disco.environments import base
from disco.environments.wrappers import batched_jittable_env

_LAST = np.int32(dm_env.StepType.LAST)

# `EnvState(state, rng)`: the wrapped environments' states [B, ...] and the
# per-environment keys [B] (typed keys) or [B, 2] (raw uint32 keys), shared
# with the batched jittable wrapper.
EnvState = batched_jittable_env.EnvState


@chex.dataclass(frozen=True)
class Truncation:
  """Which LAST steps were time limits, and the observations they ended in.

  What `GymnaxApiEnvironment.step_with_truncation` reports beside a
  timestep, so that value targets can bootstrap where an episode was cut
  short rather than ended (see `disco.truncation`).

  Attributes:
    truncated: [B] bool, True where the step is LAST because the episode
      reached its time limit without terminating (a termination at the
      limit counts as a termination).
    final_observation: [B, ...] float32, the observation the episode
      reached on this step, before any restart (where the step is not
      LAST, the timestep's own observation).
  """

  truncated: chex.Array
  final_observation: chex.Array


def _strongly_typed(tree: chex.ArrayTree) -> chex.ArrayTree:
  """Drops weak types, so that reset and step states have equal types."""

  def _strong(x: chex.Array) -> chex.Array:
    if jnp.issubdtype(jnp.result_type(x), jax.dtypes.prng_key):
      return x
    return jax.lax.convert_element_type(x, jnp.result_type(x))

  return jax.tree.map(_strong, tree)


# (observation, reward, is_last) -> a timestep with float32 observation and
# reward and a strongly typed step type (LAST where `is_last`, else MID):
# the batched jittable wrapper's, so that both build their timesteps alike.
# pylint: disable-next=protected-access
_timestep = batched_jittable_env._to_env_timestep


class GymnaxApiEnvironment(base.Environment[EnvState]):
  """A batch of one already-made gymnax-API environment.

  See the module docstring. Subclasses for environments with another API
  override `_env_reset`, `_env_step` and `_num_actions`, and
  `observation_dtype` for observations kept in another dtype than float32
  (uint8 pixels).
  """

  observation_dtype: type[np.generic] = np.float32

  def __init__(
      self,
      env: Any,
      env_params: Any,
      batch_size: int,
      *,
      name: str | None = None,
      auto_resets: bool = True,
  ):
    """Builds the batched functions around `env`.

    Args:
      env: the environment object, made once (gymnax-style environments jit
        their methods with the object as a static argument hashed by
        identity, so one object per adapter avoids recompiling).
      env_params: the parameters given to every `env.reset` and `env.step`.
      batch_size: the number of environments.
      name: the environment's name, for messages (default: `env.name`, or
        the class name).
      auto_resets: whether `env.step` restarts a finished episode itself
        (gymnax's environments and Craftax's `...AutoReset` classes); if
        False the adapter restarts it (see the module docstring).

    Raises:
      ValueError: a non-positive batch size, or an action space that is not
        discrete.
      TypeError: an observation that is not a single array.
    """
    self.batch_size = arguments.check_batch_size(batch_size)
    self._env = env
    self._params = env_params
    self._auto_resets = bool(auto_resets)
    if name is None:
      name = getattr(env, 'name', None)
      name = name if isinstance(name, str) else type(env).__name__
    self.env_name = name

    self._single_action_spec = dm_specs.BoundedArray(
        (), np.int32, 0, self._num_actions() - 1
    )
    example_obs = jax.eval_shape(
        lambda key: self._env_reset(key)[0], jax.random.key(0)
    )
    if not isinstance(example_obs, jax.ShapeDtypeStruct):
      raise TypeError(
          f'Environment {name!r} returns observations of structure'
          f' {jax.tree.structure(example_obs)}; only single-array'
          ' observations are supported.'
      )
    self._single_observation_spec = {
        'observation': dm_specs.Array(example_obs.shape, self.observation_dtype)
    }

    self._batched_reset = jax.jit(jax.vmap(self._single_env_reset))
    self._batched_step = jax.jit(lambda s, a: self._step(s, a)[:2])
    self._batched_step_with_truncation = jax.jit(self._step)

  def _timestep(
      self, obs: chex.Array, reward: chex.Array, is_last: chex.Array
  ) -> types.EnvironmentTimestep:
    timestep = _timestep(obs, reward, is_last)
    if self.observation_dtype == np.float32:
      return timestep
    return timestep.replace(
        observation=jnp.asarray(obs, self.observation_dtype)
    )

  @property
  def env_params(self) -> Any:
    """The parameters used for every reset and step."""
    return self._params

  @property
  def auto_resets(self) -> bool:
    """Whether the wrapped `step` restarts finished episodes itself."""
    return self._auto_resets

  # Hooks: one environment, no batch axis, inside `vmap`.

  def _num_actions(self) -> int:
    """The number of actions, from a discrete `env.action_space(params)`."""
    space = self._env.action_space(self._params)
    n = getattr(space, 'n', None)
    if (
        isinstance(n, bool)
        or not isinstance(n, (int, np.integer))
        or n < 1
        or tuple(getattr(space, 'shape', ())) != ()
    ):
      raise ValueError(
          f'Environment {self.env_name!r} has the action space {space!r};'
          ' only discrete action spaces (like'
          ' gymnax.environments.spaces.Discrete: an int `n`, shape ()) are'
          ' supported, because the agent samples scalar int32 actions.'
          ' Continuous-control environments such as Pendulum-v1 cannot be'
          ' used.'
      )
    return int(n)

  def _env_reset(self, rng_key: chex.PRNGKey) -> tuple[chex.Array, Any]:
    """Starts one episode: `(observation, state)`."""
    return self._env.reset(rng_key, self._params)

  def _env_step(self, rng_key: chex.PRNGKey, state: Any, action: chex.Array):
    """Steps one environment.

    Args:
      rng_key: this step's key.
      state: the environment's state.
      action: a scalar int32 action.

    Returns:
      `(observation, state, reward, is_last, truncated, final_observation)`:
      `is_last` is whether this step ended the episode (termination or
      truncation), `truncated` whether it ended it by the time limit alone,
      and `final_observation` the observation the step reached. With
      `auto_resets` the observation and state are already the next
      episode's where the episode ended.
    """
    outputs = self._env.step(rng_key, state, action, self._params)
    if len(outputs) == 6:  # gymnax >= 1.0.
      obs, state, reward, terminated, truncated, info = outputs
      is_last = jnp.logical_or(terminated, truncated)
      truncated = jnp.logical_and(truncated, jnp.logical_not(terminated))
      return obs, state, reward, is_last, truncated, info['final_observation']
    obs, state, reward, done, _ = outputs  # gymnax 0.x (and Craftax).
    # gymnax 0.x does not tell time limits apart; Craftax overrides this.
    return obs, state, reward, done, jnp.zeros_like(done, bool), obs

  def _single_env_reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    next_rng, reset_rng = jax.random.split(rng_key)
    obs, state = self._env_reset(reset_rng)
    timestep = self._timestep(obs, jnp.zeros((), jnp.float32), False)
    return EnvState(state=_strongly_typed(state), rng=next_rng), timestep

  def _single_env_step(
      self, env_state: EnvState, action: chex.Array
  ) -> tuple[
      EnvState, types.EnvironmentTimestep, chex.PRNGKey | None, Truncation
  ]:
    """One environment's step: state, timestep, restart key, truncation.

    The restart key is None with `auto_resets`.
    """
    next_rng, step_rng = jax.random.split(env_state.rng)
    if self._auto_resets:
      # On a terminated or truncated step the environment has already
      # swapped in the next episode's first observation and state.
      reset_rng = None
    else:
      # The split gymnax's automatic reset makes of its step key.
      step_rng, reset_rng = jax.random.split(step_rng)
    obs, state, reward, is_last, truncated, final_obs = self._env_step(
        step_rng, env_state.state, action
    )
    timestep = self._timestep(obs, reward, is_last)
    truncation = Truncation(
        truncated=jnp.asarray(truncated, bool),
        final_observation=jnp.asarray(final_obs, self.observation_dtype),
    )
    return (
        EnvState(state=_strongly_typed(state), rng=next_rng),
        timestep,
        reset_rng,
        truncation,
    )

  def _restart_finished(
      self,
      state: EnvState,
      timestep: types.EnvironmentTimestep,
      reset_rngs: chex.PRNGKey,
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    """Resets exactly the environments whose step was LAST, one by one."""
    is_last = timestep.step_type == _LAST
    # The finished environments' indices first (in order), then the others.
    order = jnp.argsort(jnp.logical_not(is_last), stable=True)
    num_finished = jnp.sum(is_last, dtype=jnp.int32)

    def body(carry):
      i, env_states, observations = carry
      j = order[i]
      obs, env_state = self._env_reset(reset_rngs[j])
      env_states = jax.tree.map(
          lambda xs, x: xs.at[j].set(x), env_states, _strongly_typed(env_state)
      )
      observations = observations.at[j].set(
          jnp.asarray(obs, self.observation_dtype)
      )
      return i + 1, env_states, observations

    _, env_states, observations = jax.lax.while_loop(
        lambda carry: carry[0] < num_finished,
        body,
        (jnp.zeros((), jnp.int32), state.state, timestep.observation),
    )
    return (
        EnvState(state=env_states, rng=state.rng),
        timestep.replace(observation=observations),
    )

  def _step(
      self, state: EnvState, actions: chex.Array
  ) -> tuple[EnvState, types.EnvironmentTimestep, Truncation]:
    state, timestep, reset_rngs, truncation = jax.vmap(self._single_env_step)(
        state, actions
    )
    if not self._auto_resets:
      state, timestep = self._restart_finished(state, timestep, reset_rngs)
    return state, timestep, truncation

  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    """Starts new episodes in all environments.

    Args:
      rng_key: one key (typed or raw); it is split into `batch_size` keys.

    Returns:
      The state (the environments' states and per-environment keys) and a
      MID timestep with reward 0: observation [B, ...] float32, step_type
      and reward [B].
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

  def step_with_truncation(
      self, state: EnvState, actions: chex.Array
  ) -> tuple[EnvState, types.EnvironmentTimestep, Truncation]:
    """`step`, and which LAST steps were time limits (see `Truncation`).

    Args:
      state: the state returned by `reset` or `step`.
      actions: [B] integer actions in [0, n - 1].

    Returns:
      The next state and timestep (the same as `step`'s) and their
      `Truncation`.
    """
    chex.assert_shape(actions, (self.batch_size,))
    return self._batched_step_with_truncation(state, actions)

  def single_action_spec(self) -> types.ActionSpec:
    return self._single_action_spec

  def single_observation_spec(self) -> types.Specs:
    return self._single_observation_spec
