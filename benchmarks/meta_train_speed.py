r"""How fast is meta-training: steps per second, start-up, compiles, memory?

Runs `disco.meta_train.run_meta_train` with the default `MetaTrainConfig`
(the reference notebook's settings) in fresh subprocesses, one per variant,
so that start-up is cold and peak memory is each variant's own:

* default: the config's defaults (the population `vmap`ped, the inner
  `lax.scan` unrolled);
* loop: the same with a Python loop over the 2 agents (`vmap_agents=False`);
* reference: the reference's layout (loop over agents, inner steps in a
  rolled `lax.scan`: `vmap_agents=False, unroll_inner_steps=False`), for
  the speed-up ratios.

It prints one line per figure. The ratios compare variants measured in the
same invocation, so they are less sensitive to the machine's load than the
absolute figures. CPU time per meta-step (all threads) is printed next to
wall-clock time because it is hardly affected by other processes competing
for the cores.

  python benchmarks/meta_train_speed.py                 # all variants
  python benchmarks/meta_train_speed.py --steps 20 --variants default,loop
  XLA_FLAGS=--xla_force_host_platform_device_count=2 \
      python benchmarks/meta_train_speed.py              # 2 CPU devices
"""

import argparse
from collections.abc import Sequence
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

_VARIANTS = {
    'default': {},
    'loop': {'vmap_agents': False},
    'reference': {'vmap_agents': False, 'unroll_inner_steps': False},
}
_LABELS = {
    'default': 'default (population vmapped, inner steps unrolled)',
    'loop': 'loop over agents (vmap_agents=False)',
    'reference': 'reference layout (loop over agents, rolled lax.scan)',
}


def _worker(variant: str, warmup: int, steps: int) -> None:
  """Runs one variant and prints its measurements as one JSON line."""
  started = time.time()
  import resource  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top

  compiles = []

  def _on_event(name: str, duration: float, **kwargs: Any) -> None:
    if name == '/jax/core/compile/backend_compile_duration':
      compiles.append((
          time.time(),
          duration,
          kwargs.get('fun_name', ''),
          threading.current_thread() is threading.main_thread(),
      ))

  jax.monitoring.register_event_duration_secs_listener(_on_event)
  from disco import meta_train  # pylint: disable=g-import-not-at-top

  imported = time.time()
  config = meta_train.MetaTrainConfig(
      num_steps=warmup + steps, **_VARIANTS[variant]
  )
  marks = []

  def _progress(step: int, logs: dict[str, float]) -> None:
    del logs
    usage = resource.getrusage(resource.RUSAGE_SELF)
    marks.append((step, time.time(), usage.ru_utime + usage.ru_stime))

  meta_train.run_meta_train(config, progress_fn=_progress)
  first_step_done = marks[0][1]
  print(
      json.dumps(
          dict(
              variant=variant,
              started=started,
              imported=imported,
              first_step_done=first_step_done,
              marks=marks,
              compiles=compiles,
              peak_rss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
              num_devices=jax.device_count(),
              jax_version=jax.__version__,
          )
      )
  )


def _run_variant(variant: str, warmup: int, steps: int) -> dict[str, Any]:
  spawned = time.time()
  out = subprocess.run(
      [
          sys.executable,
          os.path.abspath(__file__),
          '--worker',
          variant,
          f'--warmup={warmup}',
          f'--steps={steps}',
      ],
      check=True,
      capture_output=True,
      text=True,
  )
  result = json.loads(out.stdout.strip().splitlines()[-1])
  result['spawned'] = spawned
  return result


def _summary(result: dict[str, Any], warmup: int) -> dict[str, Any]:
  marks = result['marks']  # (step, wall clock, CPU time) after each step.
  timed = range(warmup, len(marks))
  walls = [marks[i][1] - marks[i - 1][1] for i in timed]
  cpus = [marks[i][2] - marks[i - 1][2] for i in timed]
  first = result['first_step_done']
  compiles = result['compiles']  # (time, seconds, name, in main thread).
  # The meta-update is the run's only `pmap` (JAX 0.10 compiles `pmap` as
  # `jit(_fun)`); in the background thread unless it had to compile again.
  updates = [
      c for c in compiles if c[2] == 'jit(_fun)' or 'meta_update' in c[2]
  ]
  return dict(
      wall=statistics.median(walls),
      cpu=statistics.median(cpus),
      startup=first - result['spawned'],
      first_step=first - result['imported'],
      num_compiles=len(compiles),
      compile_seconds=sum(c[1] for c in compiles),
      longest_compile=max(c[1] for c in compiles),
      late_compiles=sum(c[0] > first for c in compiles),
      update_compiles=len(updates),
      update_compiles_in_background=sum(not c[3] for c in updates),
      peak_mib=result['peak_rss_kib'] / 1024,
      steps=len(walls),
  )


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--steps', type=int, default=10, help='timed steps')
  parser.add_argument(
      '--warmup', type=int, default=2, help='untimed steps first (>= 1)'
  )
  parser.add_argument(
      '--variants', default='default,loop,reference', help='comma-separated'
  )
  parser.add_argument('--worker', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.warmup < 1 or args.steps < 1:
    parser.error('--warmup and --steps must be >= 1')
  if args.worker:
    _worker(args.worker, args.warmup, args.steps)
    return
  variants = args.variants.split(',')
  unknown = sorted(set(variants) - set(_VARIANTS))
  if unknown:
    parser.error(f'unknown variants {unknown}; choose from {list(_VARIANTS)}')

  summaries = {}
  for variant in variants:
    result = _run_variant(variant, args.warmup, args.steps)
    summaries[variant] = _summary(result, args.warmup)
    if len(summaries) == 1:
      print(
          'meta_train_speed: default MetaTrainConfig (800-step run settings:'
          ' 2 agents, 32 envs/device, rollout 16, 2 inner steps),'
          f' {result["num_devices"]} device(s), jax {result["jax_version"]},'
          f' {os.cpu_count()} CPU cores; median of {args.steps} steps after'
          f' {args.warmup} warm-up step(s)',
          flush=True,
      )
    s = summaries[variant]
    label = _LABELS[variant]
    print(
        f'{label}: {1 / s["wall"]:.3f} meta-steps/s ({s["wall"]:.3f} s per'
        f' meta-step wall, {s["cpu"]:.3f} CPU-s)',
        flush=True,
    )
    print(
        f'{label}: start-up {s["startup"]:.1f} s cold (process start to the'
        f' first meta-step done; {s["first_step"]:.1f} s after imports)',
        flush=True,
    )
    print(
        f'{label}: {s["num_compiles"]} XLA compilations,'
        f' {s["compile_seconds"]:.1f} s in all (largest'
        f' {s["longest_compile"]:.1f} s), {s["late_compiles"]} after the'
        ' first meta-step',
        flush=True,
    )
    print(
        f'{label}: the meta-update compiled {s["update_compiles"]} time(s),'
        f' {s["update_compiles_in_background"]} in the background',
        flush=True,
    )
    print(f'{label}: peak memory {s["peak_mib"]:.0f} MiB (max RSS)', flush=True)
  if 'reference' in summaries:
    ref = summaries['reference']
    for variant, s in summaries.items():
      if variant == 'reference':
        continue
      print(
          f'speed-up of {variant} over the reference layout:'
          f' {ref["wall"] / s["wall"]:.2f}x wall, {ref["cpu"] / s["cpu"]:.2f}x'
          ' CPU time (same invocation)',
          flush=True,
      )


if __name__ == '__main__':
  main()
