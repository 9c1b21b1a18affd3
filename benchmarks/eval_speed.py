"""How much faster than the faithful loop is the eval loop's fast path?

Every measurement runs `disco.eval.run_eval` with the default config
(Disco103 on 8x8 jittable Catch) in a fresh Python process and prints one
line per figure:

  <mode> learner_steps_per_s   steady-state learner steps per second
  <mode> env_steps_per_s       steady-state environment steps per second
  <mode> startup_s             process start to the end of the first
                               learner step (imports, weights, init and
                               compilation included; for the fast path,
                               which reports a chunk of iterations at once,
                               the end of that chunk less the steady-state
                               time of its later iterations)
  <mode> total_s               process start to the end of the run
  <mode> peak_rss_gib          the process's peak resident memory
  <mode> rss_gib               resident memory a tenth of the way through
                               the run and at its end (flat memory: equal)
  <mode> cpu_s                 user and system CPU seconds, page faults

followed by the other modes' speed-ups over the faithful loop and over the
reference's loop (`faithful_full_buffer`), where those ran. Modes:
`faithful`, `faithful_full_buffer` (the faithful loop storing every
behaviour output in the buffer, as the reference's notebook does; not run
by default), `fast` and `fast_vmapN` (N seeds `vmap`ped in one program; its
rates count the learner and environment steps of all seeds, and
`s_per_step_per_seed` is the per-seed cost of an iteration), `train` and
`train_vmapN` (`disco.train` with its `colab` preset: the same settings).

Usage:

  python benchmarks/eval_speed.py                  # 1000 iterations each
  python benchmarks/eval_speed.py --steps 200 --modes faithful fast
  python benchmarks/eval_speed.py --compilation-cache /tmp/jax_cache
  python benchmarks/eval_speed.py --steps 150 --repeats 3 --modes faithful fast

Steady state starts `--warmup` learner steps after the first one (fast path:
at the first chunk boundary after that point). Timings on a shared machine
are noisy; run on an otherwise idle one.
"""

import argparse
import json
import re
import resource
import subprocess
import sys
import time

import numpy as np

_CHILD_FLAG = '--child'


def _child(mode: str, steps: int, cache: str | None) -> None:
  """Runs one measurement and prints its raw figures as JSON."""
  # pylint: disable=g-import-not-at-top
  if cache:
    import jax

    jax.config.update('jax_compilation_cache_dir', cache)
  from disco import eval as eval_lib

  match = re.fullmatch(r'(?:fast|train)_vmap(\d+)', mode)
  num_seeds = int(match.group(1)) if match else 1
  if mode.startswith('train'):
    _child_train(steps, num_seeds)
    return
  config = eval_lib.EvalConfig(
      num_steps=steps,
      fast=mode.startswith('fast'),
      store_behaviour_outs=mode == 'faithful_full_buffer',
  )
  times, rss = [], []

  def progress(step, metrics):
    del step, metrics
    times.append(time.time())
    rss.append(_rss_gib())

  histories = eval_lib.run_eval_seeds(
      config, list(range(num_seeds)), progress_fn=progress
  )
  history = histories[0]
  learned = ~np.isnan(history.logs['total_loss'])
  print(
      json.dumps(
          dict(
              times=times,
              rss_gib=rss,
              learned=learned.tolist(),
              steps=history.steps.tolist(),
              num_seeds=num_seeds,
              end=time.time(),
              final_avg_return=float(np.nanmean(history.avg_returns[-20:])),
          )
          | _usage()
      )
  )


def _rss_gib() -> float:
  """This process's resident memory now (Linux; NaN elsewhere)."""
  try:
    with open('/proc/self/statm') as f:
      pages = int(f.read().split()[1])
  except OSError:
    return float('nan')
  return pages * resource.getpagesize() / 2**30


def _usage() -> dict[str, float]:
  """This process's peak memory, CPU times and page faults so far."""
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return dict(
      peak_rss_kib=usage.ru_maxrss,
      user_s=usage.ru_utime,
      system_s=usage.ru_stime,
      page_faults=usage.ru_minflt + usage.ru_majflt,
  )


def _child_train(steps: int, num_seeds: int) -> None:
  """The trainer (`disco.train`) with the colab preset: the same settings."""
  from disco import train  # pylint: disable=g-import-not-at-top

  config = train.preset('colab', num_steps=steps)
  warmup = config.warmup_steps
  times, rss, done = [], [], [0]

  def progress(step, row):
    del row
    times.extend([time.time()] * (step - done[0]))
    rss.extend([_rss_gib()] * (step - done[0]))
    done[0] = step

  result = train.run_train(config, num_seeds=num_seeds, progress_fn=progress)
  _, returns = result.curve(result.seeds[0], 'train_return')
  print(
      json.dumps(
          dict(
              times=times,
              rss_gib=rss,
              learned=[i >= warmup for i in range(len(times))],
              steps=[
                  (i + 1) * config.env_steps_per_step for i in range(len(times))
              ],
              num_seeds=num_seeds,
              end=time.time(),
              final_avg_return=float(np.nanmean(returns[-2:])),
          )
          | _usage()
      )
  )


def _measure(mode: str, steps: int, warmup: int, cache: str | None) -> dict:
  command = [sys.executable, __file__, _CHILD_FLAG, mode, '--steps', str(steps)]
  if cache:
    command += ['--compilation-cache', cache]
  start = time.time()
  done = subprocess.run(command, capture_output=True, text=True, check=False)
  if done.returncode:
    raise RuntimeError(f'{mode} failed:\n{done.stderr[-3000:]}')
  raw = json.loads(done.stdout.strip().splitlines()[-1])
  times, learned = raw['times'], raw['learned']
  first = learned.index(True)
  # Steady state: the iterations reported after iteration `first + warmup`
  # was (the fast path reports a whole chunk at one time).
  begin = times[min(first + warmup, len(times) - 1)]
  iterations = sum(t > begin for t in times)
  if not iterations:
    raise RuntimeError(
        f'{mode}: no iterations after the warm-up; run more --steps.'
    )
  rate = iterations / (times[-1] - begin)  # Iterations per second.
  seeds = raw['num_seeds']
  per_iteration = raw['steps'][1] - raw['steps'][0]
  # The fast path reports the first learner step with the rest of its chunk:
  # take off the steady-state time of the chunk's later iterations.
  later_in_report = sum(t == times[first] for t in times[first + 1 :])
  startup = times[first] - start - later_in_report / rate
  return {
      # Learner steps of all seeds together (one per seed and iteration).
      'learner_steps_per_s': rate * seeds,
      'env_steps_per_s': rate * per_iteration * seeds,
      's_per_step_per_seed': 1 / (rate * seeds),
      'startup_s': startup,
      'total_s': raw['end'] - start,
      'peak_rss_gib': raw['peak_rss_kib'] / 2**20,
      # Resident memory a tenth of the way through and at the end: flat
      # memory means these agree.
      'rss_tenth_gib': raw['rss_gib'][len(raw['rss_gib']) // 10],
      'rss_end_gib': raw['rss_gib'][-1],
      'user_s': raw['user_s'],
      'system_s': raw['system_s'],
      'page_faults': raw['page_faults'],
      'final_avg_return': raw['final_avg_return'],
      'num_seeds': seeds,
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--steps', type=int, default=1000)
  parser.add_argument(
      '--modes', nargs='+', default=['faithful', 'fast', 'fast_vmap4']
  )
  parser.add_argument(
      '--vmap-steps',
      type=int,
      default=150,
      help='iterations for the fast_vmapN modes (their rate is what counts)',
  )
  parser.add_argument('--warmup', type=int, default=5)
  parser.add_argument(
      '--repeats',
      type=int,
      default=1,
      help=(
          'measure the modes in turn this many times and report medians'
          ' (steadier figures on a shared machine)'
      ),
  )
  parser.add_argument('--compilation-cache', default=None)
  args = parser.parse_args()

  runs = {mode: [] for mode in args.modes}
  for _ in range(args.repeats):
    for mode in args.modes:
      steps = args.vmap_steps if '_vmap' in mode else args.steps
      runs[mode].append(
          _measure(mode, steps, args.warmup, args.compilation_cache)
      )
  results = {}
  for mode in args.modes:
    steps = args.vmap_steps if '_vmap' in mode else args.steps
    result = {
        k: float(np.median([run[k] for run in runs[mode]]))
        for k in runs[mode][0]
    }
    result['num_seeds'] = runs[mode][0]['num_seeds']
    results[mode] = result
    print(f'{mode} learner_steps_per_s {result["learner_steps_per_s"]:.3f}')
    print(f'{mode} env_steps_per_s {result["env_steps_per_s"]:.1f}')
    if result['num_seeds'] > 1:
      print(f'{mode} s_per_step_per_seed {result["s_per_step_per_seed"]:.3f}')
    print(f'{mode} startup_s {result["startup_s"]:.1f}')
    print(f'{mode} total_s {result["total_s"]:.1f} ({steps} iterations)')
    print(f'{mode} peak_rss_gib {result["peak_rss_gib"]:.2f}')
    print(
        f'{mode} rss_gib at_a_tenth {result["rss_tenth_gib"]:.3f}'
        f' at_the_end {result["rss_end_gib"]:.3f}'
    )
    print(
        f'{mode} cpu_s user {result["user_s"]:.1f} system'
        f' {result["system_s"]:.1f} page_faults {result["page_faults"]:.0f}'
    )
    print(
        f'{mode} final_avg_return {result["final_avg_return"]:.2f}', flush=True
    )
  for base_mode in ('faithful', 'faithful_full_buffer'):
    if base_mode not in results:
      continue
    base = results[base_mode]
    for mode, result in results.items():
      if mode.startswith('faithful'):
        continue
      speedup = result['learner_steps_per_s'] / base['learner_steps_per_s']
      print(f'{mode}/{base_mode} steady_state_speedup {speedup:.2f}')
      if result['num_seeds'] == 1:
        print(
            f'{mode}/{base_mode} end_to_end_speedup '
            f'{base["total_s"] / result["total_s"]:.2f}'
        )


if __name__ == '__main__':
  if len(sys.argv) > 1 and sys.argv[1] == _CHILD_FLAG:
    child_parser = argparse.ArgumentParser()
    child_parser.add_argument('mode')
    child_parser.add_argument('--steps', type=int, required=True)
    child_parser.add_argument('--compilation-cache', default=None)
    child_args = child_parser.parse_args(sys.argv[2:])
    _child(child_args.mode, child_args.steps, child_args.compilation_cache)
  else:
    main()
