"""Gymnasium's vector environments as a batched host `disco` environment.

`GymnasiumEnvironment` steps a `gymnasium.vector.VectorEnv` on the host and
returns the library's timesteps: an episode's end is a LAST step whose
observation is already the next episode's first (the convention of every
`disco` environment), its reward the episode's last; the step after it is
MID. Gymnasium's three autoreset modes are mapped to that (`to_timestep`):

* SAME_STEP (what `make` builds): the vector env has already reset the
  finished copies; their final observations are in `info['final_obs']`.
* NEXT_STEP (Gymnasium's default) and DISABLED: the step returns the final
  observation; the adapter resets the finished copies at once
  (`reset(options={'reset_mask': ...})`), so no action is ever spent on
  Gymnasium's reset step.

`terminated` and `truncated` are told apart (`step_with_truncation`): a
truncated episode's final observation is kept, so that targets may
bootstrap there (`disco.truncation`). Details: `docs/environments.md`.
"""

from collections.abc import Callable, Mapping
from typing import Any

import chex
import dm_env
from dm_env import specs as dm_specs
import jax
import numpy as np

from disco import types
from disco.environments import base
from disco.environments import gymnax_api

PREFIX = 'gymnasium:'
EXTRA = 'pip install "disco-jax[gymnasium]"'
# `gymnasium.vector.AutoresetMode`'s values.
SAME_STEP, NEXT_STEP, DISABLED = 'SameStep', 'NextStep', 'Disabled'
MODES = (SAME_STEP, NEXT_STEP, DISABLED)
_MID = np.int32(dm_env.StepType.MID)
_LAST = np.int32(dm_env.StepType.LAST)

# (mask [B] bool) -> observations [B, ...] with the masked copies reset.
ResetFn = Callable[[np.ndarray], np.ndarray]
Truncation = gymnax_api.Truncation


class UnsupportedEnvironmentError(ValueError):
  """The environment's spaces are ones the agents cannot read or act in."""


def _require_gymnasium() -> Any:
  try:
    import gymnasium  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(
        f'Gymnasium environments need the gymnasium package: {EXTRA}'
    ) from e
  return gymnasium


def autoreset_mode(vector_env: Any) -> str:
  """The vector env's autoreset mode, one of `MODES`."""
  mode = getattr(vector_env, 'autoreset_mode', None)
  if mode is None:
    mode = vector_env.metadata.get('autoreset_mode', NEXT_STEP)
  value = str(getattr(mode, 'value', mode))
  if value not in MODES:
    raise UnsupportedEnvironmentError(
        f'Unknown Gymnasium autoreset mode {mode!r}; known: {", ".join(MODES)}.'
    )
  return value


def to_timestep(
    mode: str,
    observation: np.ndarray,
    reward: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    info: Mapping[str, Any],
    reset_fn: ResetFn,
) -> tuple[types.EnvironmentTimestep, Truncation]:
  """One vector step as the library's timestep and truncation [B, ...].

  Args:
    mode: the vector env's autoreset mode (`MODES`).
    observation: [B, ...] what the step returned.
    reward: [B] its rewards.
    terminated: [B] bool, episodes that reached a terminal state.
    truncated: [B] bool, episodes cut by a time limit (or another outside
      limit); a step both terminated and truncated counts as terminated.
    info: the step's info; with SAME_STEP, `info['final_obs'][i]` is the
      final observation of each finished copy i.
    reset_fn: resets the masked copies (NEXT_STEP and DISABLED only).

  Returns:
    (timestep: LAST where an episode ended, with the next episode's first
    observation there; truncation: which LAST steps were truncations alone,
    and the observation each step reached before any reset.)
  """
  ended = np.logical_or(terminated, truncated)
  observation = np.asarray(observation)
  final = observation.copy()
  if ended.any():
    if mode == SAME_STEP:
      finals = info['final_obs']
      for i in np.flatnonzero(ended):
        final[i] = finals[i]
    else:
      observation = np.where(
          ended.reshape((-1,) + (1,) * (observation.ndim - 1)),
          reset_fn(ended),
          observation,
      )
  timestep = types.EnvironmentTimestep(
      observation=observation,
      step_type=np.where(ended, _LAST, _MID).astype(np.int32),
      reward=np.asarray(reward, np.float32),
  )
  truncation = Truncation(
      truncated=np.logical_and(truncated, np.logical_not(terminated)),
      final_observation=final,
  )
  return timestep, truncation


def _observation_spec(space: Any, gym: Any) -> tuple[tuple[int, ...], int]:
  """(the observation's shape as the agent reads it, Discrete's n or 0)."""
  spaces = gym.spaces
  if isinstance(space, spaces.Discrete):
    return (int(space.n),), int(space.n)
  if isinstance(space, (spaces.Box, spaces.MultiBinary)):
    return tuple(space.shape), 0
  raise UnsupportedEnvironmentError(
      'The agents read array observations (Box, MultiBinary or Discrete,'
      f' one-hot); this environment observes {space}. Flatten it first,'
      ' e.g. with gymnasium.wrappers.FlattenObservation.'
  )


def _num_actions(space: Any, gym: Any) -> int:
  if not isinstance(space, gym.spaces.Discrete):
    raise UnsupportedEnvironmentError(
        'The agents act in a Discrete action space; this environment'
        f' acts in {space} (continuous, multi-discrete and dictionary'
        ' action spaces are not supported).'
    )
  return int(space.n)


class GymnasiumEnvironment(base.Environment):
  """A Gymnasium vector env of `batch_size` copies, stepped on the host.

  Observations are float32 (a Discrete observation one-hot); actions are
  `Discrete(n)`'s 0 .. n - 1 (its `start` added before they are sent).
  """

  def __init__(self, vector_env: Any, name: str = 'gymnasium'):
    gym = _require_gymnasium()
    self.name = name
    self._env = vector_env
    self.batch_size = int(vector_env.num_envs)
    self._mode = autoreset_mode(vector_env)
    self._shape, self._one_hot = _observation_spec(
        vector_env.single_observation_space, gym
    )
    action_space = vector_env.single_action_space
    self._num_actions = _num_actions(action_space, gym)
    self._action_start = int(getattr(action_space, 'start', 0))

  @property
  def autoreset_mode(self) -> str:
    return self._mode

  def _observe(self, observation: Any) -> np.ndarray:
    observation = np.asarray(observation)
    if self._one_hot:
      return np.eye(self._one_hot, dtype=np.float32)[observation.reshape(-1)]
    return observation.astype(np.float32).reshape((-1,) + self._shape)

  def _reset_masked(self, mask: np.ndarray) -> np.ndarray:
    observation, _ = self._env.reset(options={'reset_mask': mask})
    return self._observe(observation)

  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[None, types.EnvironmentTimestep]:
    """New episodes in every copy, seeded from `rng_key`."""
    seed = int(jax.random.randint(rng_key, (), 0, np.iinfo(np.int32).max))
    observation, _ = self._env.reset(seed=seed)
    return None, types.EnvironmentTimestep(
        observation=self._observe(observation),
        step_type=np.full((self.batch_size,), _MID, np.int32),
        reward=np.zeros((self.batch_size,), np.float32),
    )

  def step_with_truncation(
      self, state: None, actions: chex.Array
  ) -> tuple[None, types.EnvironmentTimestep, Truncation]:
    """One step of every copy, and which ended by truncation alone."""
    actions = np.asarray(actions).astype(np.int64).reshape(self.batch_size)
    observation, reward, terminated, truncated, info = self._env.step(
        actions + self._action_start
    )
    terminated = np.asarray(terminated, bool)
    truncated = np.asarray(truncated, bool)
    ended = np.flatnonzero(terminated | truncated)
    if self._mode == SAME_STEP and ended.size:
      # The finished copies' final observations, read as the agents do.
      finals = info['final_obs']
      info = dict(info) | dict(
          final_obs={int(i): self._observe(finals[i])[0] for i in ended}
      )
    timestep, truncation = to_timestep(
        self._mode,
        self._observe(observation),
        reward,
        terminated,
        truncated,
        info,
        self._reset_masked,
    )
    return state, timestep, truncation

  def step(
      self, state: None, actions: chex.Array
  ) -> tuple[None, types.EnvironmentTimestep]:
    state, timestep, _ = self.step_with_truncation(state, actions)
    return state, timestep

  def single_observation_spec(self) -> types.Specs:
    return dm_specs.Array(self._shape, np.float32)

  def single_action_spec(self) -> types.ActionSpec:
    return dm_specs.BoundedArray(
        (), np.int32, minimum=0, maximum=self._num_actions - 1
    )

  def close(self) -> None:
    self._env.close()


def make(
    env_id: str, batch_size: int, settings: Mapping[str, Any] | None = None
) -> GymnasiumEnvironment:
  """`batch_size` copies of Gymnasium's `env_id` (SAME_STEP autoreset).

  Raises:
    ImportError: gymnasium is not installed (the message names the extra).
    ValueError: `env_id` is not registered, or its spaces are unsupported.
  """
  gym = _require_gymnasium()
  try:
    vector_env = gym.make_vec(
        env_id,
        num_envs=batch_size,
        vectorization_mode='sync',
        vector_kwargs=dict(autoreset_mode=gym.vector.AutoresetMode.SAME_STEP),
        **dict(settings or {}),
    )
  except gym.error.Error as e:
    raise ValueError(
        f'Gymnasium cannot make {env_id!r}: {e} (an id registered with'
        ' gymnasium, e.g. CartPole-v1; a package that registers more must be'
        ' imported first).'
    ) from e
  return GymnasiumEnvironment(vector_env, name=PREFIX + env_id)
