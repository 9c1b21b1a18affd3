"""How big a run's buffer is and when its learning starts.

One home for both formulas: the presets, the command line, the loops and
the benchmarks call these.
"""

import math


def capacity_for(env_steps: int, rollout_len: int, num_envs: int) -> int:
  """Trajectories that hold `env_steps` steps, in whole rollouts.

  A buffer of environment steps (as the paper's tables give them), rounded
  up to a multiple of `num_envs` trajectories of `rollout_len` steps.
  """
  return math.ceil(env_steps / rollout_len / num_envs) * num_envs


def iterations_before_learning(learning_starts: int, num_envs: int) -> int:
  """Iterations that only fill the buffer, before the first learner step.

  Each iteration stores `num_envs` trajectories; the one that brings the
  buffer to `learning_starts` learns.
  """
  return -(-learning_starts // num_envs) - 1


def capacity_of_run(num_steps: int, num_envs: int) -> int:
  """The trajectories a run of `num_steps` iterations stores (and one more).

  A buffer this big never overwrites, so it samples as any larger one:
  short runs (tests, timings) use it instead of a preset's.
  """
  return (num_steps + 1) * num_envs
