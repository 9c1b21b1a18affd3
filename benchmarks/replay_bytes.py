"""How many bytes does the trainer's replay buffer keep per environment step?

For Craftax-Classic's observations (symbolic, grid, uint8 pixels) under the
`crafter` protocol (32 frames, each kept once) and without stacking, with
time limits as terminations and with their bootstrap (which keeps each
step's final observation too): the buffer's bytes from the trainer's state
shapes (nothing is allocated), per stored step and for the protocol's
400,000 steps.

  python benchmarks/replay_bytes.py

Needs craftax.
"""

import sys

import jax
import numpy as np

from disco import train

ENVS = (
    'craftax:Craftax-Classic-Symbolic-v1',
    'craftax:Craftax-Classic-Symbolic-Grid-v1',
    'craftax:Craftax-Classic-Pixels-v1',
)


def replay_bytes(config: train.TrainConfig) -> int:
  trainer = train.Trainer(config, [0])
  # pylint: disable-next=protected-access
  state = jax.eval_shape(trainer._init, trainer._seed_keys())
  return sum(
      int(np.prod(x.shape)) * x.dtype.itemsize
      for x in jax.tree.leaves(state.replay.storage)
  )


def main() -> int:
  print(
      '| observations | frames | time limits | bytes per step | 400,000 steps |'
  )
  print('| --- | --- | --- | --- | --- |')
  for env in ENVS:
    for frames in (32, 1):
      for truncation in ('terminate', 'bootstrap'):
        agent = 'craftax_frames' if 'Symbolic-v1' in env else 'conv_frames'
        config = train.preset(
            'crafter',
            agent=agent,
            env=env,
            frame_stack=frames,
            agent_frame_embedding=64 if frames > 1 else 0,
            truncation=truncation,
            buffer_capacity=60,
        )
        stored = config.buffer_capacity * config.rollout_len
        per_step = replay_bytes(config) / stored
        total = per_step * 400_000 / 2**30
        print(
            f'| {env.split(":")[1]} | {frames} | {truncation} |'
            f' {per_step:,.0f} | {total:.2f} GiB |',
            flush=True,
        )
  return 0


if __name__ == '__main__':
  sys.exit(main())
