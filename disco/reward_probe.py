"""A reward scale chosen from a uniform random policy's returns.

`reward_scale` (`disco.reward_scale`) is a constant the user sets. This
module sets it from the environment instead: before training, a uniform
random policy steps a batch of the environment, and the scale is the one
that brings the mean magnitude of its discounted returns-to-go to
`target`. On the games of docs/results/reward_scale.md the scales that
worked put that magnitude between about 1 and 10, whatever the game's own
rewards; the calibration and its tests are there.

The probe is seeded, so a run and its resumption choose the same scale;
the scale keeps two significant digits, so XLA's low bits on another
machine do not change it.
"""

import dataclasses
import math
from typing import Any

import dm_env
import jax
import numpy as np

from disco import configs
from disco.environments import base
from disco.environments import registry

# The calibrated target: the mean absolute discounted return-to-go of a
# uniform random policy that the scaled rewards should give (docs/results/
# reward_scale.md, "A scale chosen from the environment").
DEFAULT_TARGET = 3.0
# Steps of each probe environment whose returns are measured; the probe
# runs longer, until the discount leaves less than `_TAIL_WEIGHT` of a
# return to the steps it does not see.
MEASURED_STEPS = 1000
PROBE_ENVS = 16
_TAIL_WEIGHT = 0.01


class ProbeError(ValueError):
  """The probe cannot choose a scale (e.g. it saw no reward)."""


@dataclasses.dataclass(frozen=True)
class Probe:
  """What the probe measured and the scale it chose.

  Attributes:
    random_return: mean absolute discounted return-to-go of the random
      policy, in the environment's units.
    reward_scale: `target / random_return`, two significant digits.
    target: the magnitude asked for.
    episodes: episodes that ended during the probe.
    nonzero_rewards: the fraction of steps with a nonzero reward.
  """

  random_return: float
  reward_scale: float
  target: float
  episodes: int
  nonzero_rewards: float


def probe_steps(discount: float, measured: int = MEASURED_STEPS) -> int:
  """Steps a probe runs: `measured`, then the tail their returns reach."""
  tail = math.ceil(math.log(_TAIL_WEIGHT) / math.log(discount))
  return measured + tail


def _num_actions(env: base.Environment) -> int:
  spec = env.single_action_spec()
  return int(spec.maximum) - int(spec.minimum) + 1


def random_rollout(
    env: base.Environment, steps: int, seed: int, jittable: bool
) -> tuple[np.ndarray, np.ndarray]:
  """Rewards and step types [steps, B] of a uniform random policy on `env`.

  A `jittable` environment steps in one compiled scan, any other on the
  host, one step at a time.
  """
  num_actions = _num_actions(env)
  key = jax.random.PRNGKey(seed)
  reset_key, actions_key = jax.random.split(key)
  # [steps, B] actions, drawn at once: the same for host and JAX envs.
  actions = jax.random.randint(
      actions_key, (steps, env.batch_size), 0, num_actions
  )
  state, timestep = env.reset(reset_key)
  if jittable:

    def _step(state, action):
      state, timestep = env.step(state, action)
      return state, (timestep.reward, timestep.step_type)

    _, (rewards, step_types) = jax.jit(lambda s, a: jax.lax.scan(_step, s, a))(
        state, actions
    )
    return np.asarray(rewards, np.float64), np.asarray(step_types)
  actions = np.asarray(actions)
  rewards, step_types = [], []
  for t in range(steps):
    state, timestep = env.step(state, actions[t])
    rewards.append(np.asarray(timestep.reward, np.float64))
    step_types.append(np.asarray(timestep.step_type))
  return np.stack(rewards), np.stack(step_types)


def returns_to_go(
    rewards: np.ndarray, step_types: np.ndarray, discount: float
) -> np.ndarray:
  """[T, B] discounted returns-to-go; an episode's last step has none.

  `rewards[t]` is the reward on arriving at step t, so step t's return is
  `rewards[t + 1] + discount * return[t + 1]`, cut where step t is LAST.
  The final step's return is 0 (the probe stops there).
  """
  returns = np.zeros_like(rewards)
  following = np.zeros(rewards.shape[1:], rewards.dtype)
  for t in range(rewards.shape[0] - 1, -1, -1):
    last = step_types[t] == dm_env.StepType.LAST
    returns[t] = np.where(last, 0.0, following)
    following = rewards[t] + discount * returns[t]
  return returns


def significant(value: float, digits: int = 2) -> float:
  """`value` rounded to `digits` significant digits."""
  return float(f'{value:.{digits}g}')


def probe(
    env_name: str,
    *,
    target: float = DEFAULT_TARGET,
    discount: float,
    seed: int = 0,
    settings: Any = (),
    num_envs: int = PROBE_ENVS,
    measured_steps: int = MEASURED_STEPS,
) -> Probe:
  """The reward scale that brings a random policy's returns to `target`.

  Args:
    env_name: any name `registry.make_environment` knows.
    target: the mean absolute discounted return-to-go the scaled rewards
      give.
    discount: the run's discount.
    seed: the probe's seed (its actions and first episodes).
    settings: the environment's settings (`TrainConfig.env_settings`).
    num_envs: environments stepped at once.
    measured_steps: steps per environment whose returns are averaged.

  Returns:
    The `Probe`.

  Raises:
    ProbeError: if the random policy saw no reward (no scale would change
      what the rule reads; set `reward_scale` yourself).
  """
  configs.check(
      math.isfinite(target) and target > 0,
      f'The probe target must be a finite number > 0, got {target!r}.',
  )
  env = registry.make_environment(
      env_name, batch_size=num_envs, seed=seed, settings=dict(settings)
  )
  steps = probe_steps(discount, measured_steps)
  rewards, step_types = random_rollout(
      env, steps, seed, registry.is_jittable_name(env_name)
  )
  measured = returns_to_go(rewards, step_types, discount)[:measured_steps]
  random_return = float(np.abs(measured).mean())
  if not random_return > 0:
    raise ProbeError(
        f'A uniform random policy saw no reward on {env_name} in'
        f' {steps} steps of {num_envs} environments, so no reward scale can'
        ' be chosen from it: set reward_scale yourself.'
    )
  episodes = int((step_types == dm_env.StepType.LAST).sum())
  return Probe(
      random_return=random_return,
      reward_scale=significant(target / random_return),
      target=float(target),
      episodes=episodes,
      nonzero_rewards=float((rewards != 0).mean()),
  )


def with_probed_scale(
    config: Any,
    target: float = DEFAULT_TARGET,
    *,
    discount: float | None = None,
) -> tuple[Any, Probe]:
  """`config` with the `reward_scale` its environment's probe chooses.

  `config` is a run's config (`env`, `env_settings`, `seed`; `discount`
  unless given). Returns `(config, probe)`.
  """
  result = probe(
      config.env,
      target=target,
      discount=config.discount if discount is None else discount,
      seed=config.seed,
      settings=config.env_settings,
  )
  return config.replace(reward_scale=result.reward_scale), result


def describe(result: Probe) -> str:
  """One line for the user: what the probe measured and chose."""
  return (
      f'reward scale {result.reward_scale:g}: a uniform random policy'
      f' scored mean absolute discounted return {result.random_return:.3g}'
      f" in the environment's units ({result.episodes} episodes ended), and"
      f' the scale brings it to {result.target:g}'
  )
