"""Disco103 learns a MinAtar game once past its warm-up (slow: ~10 min).

Breakout-MinAtar with the `paper` preset, the `minatar` agent and step size
3e-3, the shortest warm-up in `benchmarks/breakout_diagnosis.py` (a
near-uniform policy for ~700 updates, then a return of ~3-4). After 1,500
updates the mean return of 64 evaluation episodes must exceed the one of
the initial (near-uniform, i.e. random) policy, measured the same way, by a
wide margin.
"""

import numpy as np
import pytest

from disco import train

_UPDATES = 1500
_LEARNING_RATE = 3e-3


@pytest.mark.slow
def test_disco103_rises_above_random_on_breakout_minatar():
  config = train.preset(
      'paper',
      agent='minatar',
      env='gymnax:Breakout-MinAtar',
      agent_learning_rate=_LEARNING_RATE,
      eval_envs=64,
      eval_max_steps=1000,
      steps_per_chunk=25,
  )
  warmup = -(-config.learning_starts // config.num_envs) - 1
  num_steps = warmup + _UPDATES
  config = config.replace(num_steps=num_steps, eval_every=num_steps)
  result = train.run_train(config)
  returns = result.logs['eval_return']
  evaluated = np.flatnonzero(np.isfinite(returns))
  random_return = returns[evaluated[0]]  # Iteration 0: the initial policy.
  final_return = returns[evaluated[-1]]
  assert result.logs['learner_steps'][-1] == _UPDATES
  assert result.logs['eval_episodes'][evaluated[-1]] == 64
  # Breakout pays 1 per brick; the random policy breaks well under one.
  assert random_return < 1.0
  assert final_return > random_return + 1.0, (random_return, final_return)
