"""How fast does the trainer run a Gymnasium environment on the host?

Three measurements on one CartPole-v1 task, in one invocation, at the
held-out runs' settings (`disco.studies.baseline_runs.heldout_config`: 16
environments of 16-step rollouts, one learner step per iteration):

* env alone: Gymnasium's vector env (SAME_STEP autoreset, as
  `gymnasium:CartPole-v1` builds it) stepped with random actions;
* host: the trainer with `gymnasium:CartPole-v1` (`disco.train.host`):
  environment steps per second past compilation, and the share of an
  iteration spent acting (the agent's jitted step and the host's env step,
  per step) and absorbing (returns, replay and the learner step);
* fused: the trainer with gymnax's CartPole-v1 (the same MDP in JAX), its
  acting and learning fused in one program.

Each rule (`--rules`) is timed over `--iterations` iterations after
`--warmup` (compilation, the buffer's fill). Writes host_speed.csv in
`--out` and prints a table.

  python benchmarks/host_speed.py --out benchmarks/results/host_speed
"""

import argparse
import pathlib
import sys
import time

import jax
import numpy as np

from disco import train
from disco.studies import baseline_runs
from disco.studies import tables
from disco.train import run as train_run

GYMNASIUM, GYMNAX = 'gymnasium:CartPole-v1', 'gymnax:CartPole-v1'


def env_alone(num_envs: int, steps: int) -> float:
  """Environment steps per second of Gymnasium's vector env alone."""
  # pylint: disable-next=g-import-not-at-top
  from disco.environments import gymnasium_env

  env = gymnasium_env.make('CartPole-v1', num_envs)
  env.reset(jax.random.PRNGKey(0))
  rng = np.random.default_rng(0)
  start = time.perf_counter()
  for _ in range(steps):
    env.step(None, rng.integers(0, 2, num_envs))
  return steps * num_envs / (time.perf_counter() - start)


def _timed(fn, into: list[float], block: bool = False):
  def wrapped(*args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    if block:
      jax.block_until_ready(out)
    into.append(time.perf_counter() - start)
    return out

  return wrapped


def trainer_speed(
    env: str, rule: str, warmup: int, iterations: int
) -> dict[str, float]:
  """Environment steps per second past `warmup` iterations; the host's split."""
  config = baseline_runs.heldout_config(rule, env, warmup + iterations)
  config = config.replace(eval_every=0, steps_per_chunk=1)
  trainer = train_run.get_trainer(config, [config.seed])
  acting, absorbing = [], []
  if env == GYMNASIUM:
    trainer._act = _timed(trainer._act, acting)  # pylint: disable=protected-access
    absorb = trainer._absorb  # pylint: disable=protected-access
    absorb[True] = _timed(absorb[True], absorbing, block=True)
  stamps = []
  train.run_train(config, progress_fn=lambda step, row: stamps.append(
      (step, time.perf_counter())
  ))  # fmt: skip
  (s0, t0), (s1, t1) = stamps[warmup], stamps[-1]
  seconds = t1 - t0
  out = dict(
      env=env,
      rule=rule,
      iterations=s1 - s0,
      env_steps_per_second=(s1 - s0) * config.env_steps_per_step / seconds,
      ms_per_iteration=1e3 * seconds / (s1 - s0),
  )
  if acting:
    timed = acting[-(s1 - s0) :], absorbing[-(s1 - s0) :]
    total = sum(map(sum, timed))
    out['acting_share'] = sum(timed[0]) / total
    out['absorbing_share'] = sum(timed[1]) / total
  return out


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--out', type=pathlib.Path, required=True)
  parser.add_argument('--rules', nargs='+', default=('disco', 'actor_critic'))
  parser.add_argument('--warmup', type=int, default=20)
  parser.add_argument('--iterations', type=int, default=100)
  args = parser.parse_args(argv)
  args.out.mkdir(parents=True, exist_ok=True)
  num_envs = baseline_runs.heldout_config('disco', GYMNASIUM).num_envs
  alone = env_alone(num_envs, 2000)
  rows = [dict(env=GYMNASIUM, rule='random actions, env alone',
               env_steps_per_second=alone)]  # fmt: skip
  for rule in args.rules:
    for env in (GYMNASIUM, GYMNAX):
      rows.append(trainer_speed(env, rule, args.warmup, args.iterations))
      print(rows[-1], flush=True)
  columns = ('env', 'rule', 'iterations', 'env_steps_per_second',
             'ms_per_iteration', 'acting_share', 'absorbing_share')  # fmt: skip
  tables.write_csv(args.out / 'host_speed.csv', rows, columns, digits=3)
  print(tables.markdown(columns, (
      [r.get(c, '') if not isinstance(r.get(c), float) else f'{r[c]:.3g}'
       for c in columns] for r in rows
  )))  # fmt: skip
  return 0


if __name__ == '__main__':
  sys.exit(main())
