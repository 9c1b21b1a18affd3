"""Can acting overlap learning? Does a short program wait behind a long one?

The host path (`disco.train.host`) acts with one jitted call of the agent's
step per environment step. Overlapping the next rollout with the learner's
update needs those calls to run while the update runs. This times a short
program (the stand-in for an acting step) dispatched right behind a long
one (the stand-in for an update), on the same device and on a second one,
each against the two alone, in one invocation. The second device is a
second CPU device made with XLA's `--xla_force_host_platform_device_count`
where the machine has one. Writes device_order.csv in `--out`.

  python benchmarks/device_order.py --out benchmarks/results/host_speed
"""

import argparse
import os
import pathlib
import sys
import time

# A second CPU device, if the machine has one device only: set before JAX
# starts (a flag already given is kept).
os.environ.setdefault('XLA_FLAGS', '--xla_force_host_platform_device_count=2')

# pylint: disable=g-import-not-at-top,wrong-import-position
import jax
import jax.numpy as jnp

from disco.studies import tables

# pylint: enable=g-import-not-at-top,wrong-import-position


def _seconds(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def measure(size: int, loops: int, repeats: int) -> list[dict[str, object]]:
  """Rows: the short program's wait behind the long one, per device."""
  long_program = jax.jit(
      lambda x: jax.lax.fori_loop(0, loops, lambda i, y: jnp.tanh(y @ y), x)
  )
  short_program = jax.jit(lambda x: x + 1)
  devices = jax.devices()
  first, other = devices[0], devices[-1]
  x = jax.device_put(jnp.full((size, size), 1e-3), first)
  rows = []
  for name, device in (('same device', first), ('second device', other)):
    if name == 'second device' and other == first:
      continue
    small = jax.device_put(jnp.ones(3), device)
    long_program(x).block_until_ready()
    short_program(small).block_until_ready()
    for _ in range(repeats):
      long_alone = _seconds(lambda: long_program(x).block_until_ready())
      short_alone = _seconds(lambda: short_program(small).block_until_ready())
      start = time.perf_counter()
      pending = long_program(x)
      short_program(small).block_until_ready()
      short_behind = time.perf_counter() - start
      pending.block_until_ready()
      both = time.perf_counter() - start
      rows.append(
          dict(
              placement=name,
              device=str(device),
              long_alone_s=long_alone,
              short_alone_s=short_alone,
              short_done_behind_long_s=short_behind,
              both_done_s=both,
          )
      )
  return rows


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--out', type=pathlib.Path, required=True)
  parser.add_argument('--size', type=int, default=1000)
  parser.add_argument('--loops', type=int, default=60)
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args(argv)
  rows = measure(args.size, args.loops, args.repeats)
  args.out.mkdir(parents=True, exist_ok=True)
  tables.write_csv(args.out / 'device_order.csv', rows, digits=6)
  for row in rows:
    print(
        f"{row['placement']:>13}: long alone {row['long_alone_s']:.3f} s,"
        f" short alone {row['short_alone_s'] * 1e3:.2f} ms, short done"
        f" {row['short_done_behind_long_s']:.4f} s after the long one's"
        ' dispatch'
    )
  return 0


if __name__ == '__main__':
  sys.exit(main())
