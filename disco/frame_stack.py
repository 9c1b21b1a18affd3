"""Frame stacking for any jittable environment, and its compact replay form.

`FrameStackEnvironment` gives the agent the newest K observations of each
episode, [B, K, ...] per leaf, zeros before the episode's first (where the
batched environments restart an episode, on a LAST step, the stack starts
again from that step's observation). `pack` keeps a rollout of stacked
observations as each frame once plus the K - 1 frames before the rollout,
and `unpack` stacks them again, bit for bit, where the learner reads them:
32 frames of Craftax-Classic would otherwise take 32 times the buffer.
"""

from typing import Any

import chex
import dm_env
from dm_env import specs as dm_specs
import jax
import jax.numpy as jnp

from disco import truncation as truncation_lib
from disco import types
from disco.environments import base

_LAST = dm_env.StepType.LAST
CONTEXT = 'context'
FRAMES = 'frames'
FINAL_FRAMES = 'final_frames'


@chex.dataclass(frozen=True)
class FrameStackState:
  """The wrapped environment's state and its stacks ([B, K, ...] leaves)."""

  env_state: Any
  stacks: chex.ArrayTree


def _start(obs: chex.Array, num_frames: int) -> chex.Array:
  """[B, ...] -> [B, K, ...]: zeros, then `obs` as the newest frame."""
  zeros = jnp.zeros((obs.shape[0], num_frames - 1) + obs.shape[1:], obs.dtype)
  return jnp.concatenate([zeros, obs[:, None]], axis=1)


def _push(stack: chex.Array, obs: chex.Array) -> chex.Array:
  """[B, K, ...], [B, ...] -> the stack without its oldest frame, plus obs."""
  return jnp.concatenate([stack[:, 1:], obs[:, None]], axis=1)


def _where(new_episode: chex.Array, a: chex.Array, b: chex.Array):
  mask = new_episode.reshape(new_episode.shape + (1,) * (a.ndim - 1))
  return jnp.where(mask, a, b)


class FrameStackEnvironment(base.Environment[FrameStackState]):
  """A jittable batched environment whose observations are frame stacks."""

  def __init__(self, env: base.Environment, num_frames: int):
    """Wraps `env` (jittable, batched) to stack `num_frames` >= 2 frames."""
    if num_frames < 2:
      raise ValueError(f'num_frames must be >= 2, got {num_frames}.')
    self.env = env
    self.num_frames = num_frames
    self.batch_size = env.batch_size
    if truncation_lib.reports_truncation(env):
      self.step_with_truncation = self._step_with_truncation
    if hasattr(env, 'achievement_counts'):
      self.achievement_counts = self._achievement_counts

  def __getattr__(self, name: str) -> Any:
    # The wrapped environment's own attributes (e.g. `craftax_env`).
    if name == 'env':
      raise AttributeError(name)
    return getattr(self.env, name)

  def _stacks(self, stacks: Any, timestep: types.EnvironmentTimestep) -> Any:
    new_episode = timestep.step_type == _LAST
    return jax.tree.map(
        lambda stack, obs: _where(
            new_episode, _start(obs, self.num_frames), _push(stack, obs)
        ),
        stacks,
        timestep.observation,
    )

  def _achievement_counts(self, state: FrameStackState) -> chex.Array:
    """The wrapped environment's `achievement_counts` [B, A]."""
    return self.env.achievement_counts(state.env_state)

  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[FrameStackState, types.EnvironmentTimestep]:
    env_state, timestep = self.env.reset(rng_key)
    stacks = jax.tree.map(
        lambda obs: _start(obs, self.num_frames), timestep.observation
    )
    return (
        FrameStackState(env_state=env_state, stacks=stacks),
        timestep.replace(observation=stacks),
    )

  def step(
      self, state: FrameStackState, actions: chex.Array
  ) -> tuple[FrameStackState, types.EnvironmentTimestep]:
    env_state, timestep = self.env.step(state.env_state, actions)
    stacks = self._stacks(state.stacks, timestep)
    return (
        FrameStackState(env_state=env_state, stacks=stacks),
        timestep.replace(observation=stacks),
    )

  def _step_with_truncation(
      self, state: FrameStackState, actions: chex.Array
  ) -> tuple[FrameStackState, types.EnvironmentTimestep, Any]:
    """`step`, and the stacks each episode ended in (see `Truncation`)."""
    env_state, timestep, truncation = self.env.step_with_truncation(
        state.env_state, actions
    )
    stacks = self._stacks(state.stacks, timestep)
    final = jax.tree.map(_push, state.stacks, truncation.final_observation)
    return (
        FrameStackState(env_state=env_state, stacks=stacks),
        timestep.replace(observation=stacks),
        truncation.replace(final_observation=final),
    )

  def single_observation_spec(self) -> types.Specs:
    return jax.tree.map(
        lambda spec: dm_specs.Array(
            (self.num_frames,) + tuple(spec.shape), spec.dtype
        ),
        self.env.single_observation_spec(),
    )

  def single_action_spec(self) -> types.ActionSpec:
    return self.env.single_action_spec()


def stack_frames(env: base.Environment, num_frames: int) -> base.Environment:
  """`env` with `num_frames` stacked (itself for 1)."""
  return env if num_frames == 1 else FrameStackEnvironment(env, num_frames)


# ----------------------------------------------------------------------------
# The replay form: each frame once.


def pack(rollout: types.ActorRollout) -> types.ActorRollout:
  """A rollout of [T, B, K, ...] stacks with each frame kept once.

  Its `observations` become {'context': [K - 1, B, ...] (the frames before
  step 0 in its stack), 'frames': [T, B, ...] (each step's newest)}; a
  `TruncatedRollout`'s `final_observations` become their newest frames
  [T, B, ...]. `unpack` inverts it.
  """
  observations = {
      CONTEXT: jax.tree.map(
          lambda x: jnp.moveaxis(x[0, :, :-1], 1, 0), rollout.observations
      ),
      FRAMES: jax.tree.map(lambda x: x[:, :, -1], rollout.observations),
  }
  packed = rollout.replace(observations=observations)
  if isinstance(rollout, truncation_lib.TruncatedRollout):
    packed = packed.replace(
        final_observations=jax.tree.map(
            lambda x: x[:, :, -1], rollout.final_observations
        )
    )
  return packed


def _episode_starts(discounts: chex.Array) -> chex.Array:
  """[T, B] the last step <= t (from 1) that began an episode, else 0."""
  steps = jnp.arange(discounts.shape[0])[:, None]
  began = jnp.where(~discounts & (steps >= 1), steps, 0)
  return jax.lax.cummax(began, axis=0)


def _unpack_leaf(
    context: chex.Array, frames: chex.Array, starts: chex.Array
) -> chex.Array:
  """[K - 1, B, ...], [T, B, ...], [T, B] -> stacks [T, B, K, ...]."""
  num_steps, num_frames = frames.shape[0], context.shape[0] + 1
  sequence = jnp.concatenate([context, frames], axis=0)  # [K - 1 + T, B, ...]
  index = jnp.arange(num_steps)[:, None] + jnp.arange(num_frames)  # [T, K]
  stacks = jnp.moveaxis(sequence[index], 2, 1)  # [T, B, K, ...]
  # Frames of an earlier episode than step t's are zeros (an episode that
  # began at step 0 already has them zero in its context).
  first = jnp.where(starts > 0, starts + num_frames - 1, 0)  # [T, B]
  keep = index[:, None, :] >= first[:, :, None]  # [T, B, K]
  keep = keep.reshape(keep.shape + (1,) * (stacks.ndim - 3))
  return jnp.where(keep, stacks, jnp.zeros((), stacks.dtype))


def unpack(
    packed: types.ActorRollout, final_stacks: bool = True
) -> types.ActorRollout:
  """The rollout of stacks that `pack` packed (bit for bit).

  With `final_stacks` False, a `TruncatedRollout`'s `final_observations`
  stay its newest frames, for `final_observations` to stack where they are
  read (the learner reads them only when a step was truncated).
  """
  starts = _episode_starts(packed.discounts)
  observations = jax.tree.map(
      lambda context, frames: _unpack_leaf(context, frames, starts),
      packed.observations[CONTEXT],
      packed.observations[FRAMES],
  )
  rollout = packed.replace(observations=observations)
  if final_stacks and isinstance(packed, truncation_lib.TruncatedRollout):
    rollout = rollout.replace(
        final_observations=final_observations(
            rollout, packed.final_observations
        )
    )
  return rollout


def final_observations(
    rollout: types.ActorRollout, final_frames: chex.ArrayTree
) -> chex.ArrayTree:
  """The final stacks [T, B, K, ...] of a rollout of stacks.

  Where an episode ended, its final stack is the step before's plus its
  final frame [T, B, ...]; elsewhere (and at step 0) the step's own stack.
  """
  ended = ~rollout.discounts
  ended = ended.at[0].set(False)

  def final(stacks: chex.Array, frames: chex.Array) -> chex.Array:
    before = jnp.concatenate([stacks[:1], stacks[:-1]], axis=0)
    pushed = jnp.concatenate([before[:, :, 1:], frames[:, :, None]], axis=2)
    mask = ended.reshape(ended.shape + (1,) * (stacks.ndim - 2))
    return jnp.where(mask, pushed, stacks)

  return jax.tree.map(final, rollout.observations, final_frames)
