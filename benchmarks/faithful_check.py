"""Does the trainer learn as the reference colab's faithful loop does?

At the colab's settings (2 environments, batches of 64 replayed
trajectories, one update per rollout) the faithful loop (`disco.eval`) and
the trainer (`disco.train`, its `colab` preset) train Disco103 with the
small agent of `breakout_diagnosis.py` on Breakout-MinAtar for `--steps`
iterations each. `faithful_check.csv` in `--out` gives both curves
(training return and policy entropy per 250 updates), under a line with the
seed, the step size and both wall times. They cannot agree bit for bit (the
trainer takes its gradients through the taken actions only and draws its
own random numbers), only in distribution.

  python benchmarks/faithful_check.py --out DIR --steps 1500

Needs gymnax.
"""

import argparse
import pathlib
import sys
import time
from typing import Any

import numpy as np

from disco.studies import tables

ENV = 'gymnax:Breakout-MinAtar'
# The small agent of breakout_diagnosis.py's base.
SMALL = dict(
    agent_dense=(256, 256), agent_lstm_size=64, agent_head_mlp_hiddens=(64,)
)
WINDOW = 250


def faithful_rows(num_steps: int, fields: dict[str, Any]) -> list[dict]:
  """The faithful loop's training return and entropy per `WINDOW` steps."""
  from disco import eval as eval_lib  # pylint: disable=g-import-not-at-top

  history = eval_lib.run_eval(
      eval_lib.EvalConfig(num_steps=num_steps, **fields)
  )
  entropy = history.logs['entropy']
  rows = []
  for end in range(WINDOW, num_steps + 1, WINDOW):
    part = slice(end - WINDOW, end)
    episodes = history.num_episodes[part].sum()
    rows.append(
        dict(
            loop='faithful',
            iterations=end,
            env_steps=int(history.steps[end - 1]),
            train_return=float(history.total_returns[part].sum() / episodes),
            episodes=int(episodes),
            entropy=float(np.nanmean(entropy[part])),
        )
    )
  return rows


def trainer_rows(num_steps: int, fields: dict[str, Any]) -> list[dict]:
  """The trainer's (`colab` preset) rows, as `faithful_rows`'."""
  from disco import train  # pylint: disable=g-import-not-at-top

  config = train.preset(
      'colab', num_steps=num_steps, steps_per_chunk=25, **fields
  )
  logs = train.run_train(config).logs
  rows = []
  for end in range(WINDOW, num_steps + 1, WINDOW):
    part = (logs['step'] > end - WINDOW) & (logs['step'] <= end)
    episodes = logs['train_episodes'][part].sum()
    total = np.nansum(logs['train_return'][part] * logs['train_episodes'][part])
    rows.append(
        dict(
            loop='trainer',
            iterations=end,
            env_steps=int(logs['env_steps'][part][-1]),
            train_return=float(total / episodes),
            episodes=int(episodes),
            entropy=float(np.nanmean(logs['logs/entropy'][part])),
        )
    )
  return rows


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--out', type=pathlib.Path, required=True)
  parser.add_argument('--steps', type=int, default=1500)
  parser.add_argument('--rate', type=float, default=5e-4, help='step size')
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args(argv)
  fields = dict(SMALL, env=ENV, agent_learning_rate=args.rate, seed=args.seed)
  start = time.perf_counter()
  rows = faithful_rows(args.steps, fields)
  faithful_s = time.perf_counter() - start
  start = time.perf_counter()
  rows += trainer_rows(args.steps, fields)
  trainer_s = time.perf_counter() - start
  args.out.mkdir(parents=True, exist_ok=True)
  tables.write_csv(
      args.out / 'faithful_check.csv',
      rows,
      comment=(
          f'{ENV}, seed {args.seed}, step size {args.rate:g}; wall: faithful'
          f' {faithful_s:.0f} s, trainer {trainer_s:.0f} s'
      ),
  )
  for row in rows:
    print(
        f"{row['loop']:>8} {row['iterations']:5d}: return"
        f" {row['train_return']:.2f} ({row['episodes']} episodes), entropy"
        f" {row['entropy']:.3f}"
    )
  return 0


if __name__ == '__main__':
  sys.exit(main())
