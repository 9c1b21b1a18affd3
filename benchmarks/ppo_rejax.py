"""How does rejax's PPO learn on one environment at a given budget?

Trains rejax's PPO (`disco.studies.ppo`: rejax's tuned Breakout-MinAtar
config, borrowed by the other MinAtar games; rejax's defaults elsewhere)
for several seeds in one `vmap`ped program, and prints its learning curve
as JSON (rejax's evaluation every `--steps / --eval-points` env steps), then
a one-line summary on stderr.

Cost on the 2-core CPU (3 seeds in one program, 10 evaluation points of 128
episodes, quiet machine): Breakout-MinAtar at 200k env steps per seed took
29 s (14 s compiling, 15 s training: ~41k env steps/s over the seeds), final
returns 5.16 / 5.74 / 5.47; at 1M, 95 s (13 s + 82 s), 5.95 / 5.98 / 5.51.
Craftax-Classic is out of reach here: with the evaluation callback the
program did not finish compiling in 20 min (even with `--fast-compile`);
without it, it compiled in 23 s and trained at ~475 env steps/s.

  python benchmarks/ppo_rejax.py --env Breakout-MinAtar --steps 200000
  python benchmarks/ppo_rejax.py --env craftax/Craftax-Classic-Symbolic-v1 \\
      --steps 100000 --seeds 0 1 2 --eval-points 5

Needs `pip install "disco-jax[ppo]"` (and craftax for Craftax).
"""

import argparse
from collections.abc import Sequence
import json
import sys

import numpy as np

from disco.studies import ppo


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
      prog='ppo_rejax.py',
      description='Trains rejax PPO on one environment; prints JSON.',
  )
  parser.add_argument('--env', default='Breakout-MinAtar')
  parser.add_argument('--steps', type=int, default=200_000)
  parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  parser.add_argument('--eval-points', type=int, default=10)
  parser.add_argument(
      '--eval-episodes', type=int, default=ppo.REJAX_EVAL_EPISODES
  )
  parser.add_argument(
      '--fast-compile',
      action='store_true',
      help=f'compile with XLA options {ppo.FAST_COMPILE} (faster, runs slower)',
  )
  parser.add_argument('--out', help='also write the JSON to this file')
  args = parser.parse_args(argv)
  result = ppo.run_ppo(
      args.env,
      args.steps,
      args.seeds,
      args.eval_points,
      num_eval_episodes=args.eval_episodes,
      compiler_options=ppo.FAST_COMPILE if args.fast_compile else None,
  )
  text = json.dumps(result, indent=1)
  if args.out:
    with open(args.out, 'w') as f:
      f.write(text + '\n')
  print(text)
  final = [r[-1] for r in result['returns']]
  steps = result['env_steps'][0][-1]
  print(
      f'{args.env}: {steps} env steps per seed, final mean return'
      f' {np.mean(final):.3g} (seeds: {", ".join(f"{r:.3g}" for r in final)});'
      f' wall {result["wall_time_s"]:.1f} s (compile'
      f' {result["compile_time_s"]:.1f} s, train'
      f' {result["train_time_s"]:.1f} s,'
      f' {steps * len(final) / result["train_time_s"]:,.0f} env steps/s'
      ' over all seeds)',
      file=sys.stderr,
  )
  return 0


if __name__ == '__main__':
  sys.exit(main())
