"""rejax's PPO as two programs, training and evaluation, checkpointed.

On Craftax, rejax's training program with its evaluation callback did not
finish compiling in 20 minutes (8 with XLA's fastest-compiling options and 2
evaluation points). `run_ppo_segmented` compiles two programs instead:
rejax's `train` for one PPO iteration at a time (its own
`train(train_state=...)` resumption, no callback), and rejax's `evaluate`
on the train state (`disco.studies.ppo.evaluate`), called between
iterations. Pilot on a 2-core CPU: 36 s + 35 s compiling, ~37 s per PPO
iteration of 3 x 4,096 env steps, ~24 s per evaluation of 16 episodes.

Every iteration runs the same compiled program on the same state, so the
run can be done in pieces and a resumed run computes what an unbroken one
does, bit for bit.
"""

from collections.abc import Callable, Mapping, Sequence
import math
import pathlib
import time
from typing import Any

import numpy as np

from disco import checkpoint
from disco import runtime
from disco.studies import pieces as pieces_lib
from disco.studies import ppo
from disco.studies import records

# Checkpoints over a run (and one when Ctrl-C or SIGTERM stops it), the
# newest `KEEP_CHECKPOINTS` kept.
CHECKPOINTS = 20
KEEP_CHECKPOINTS = 2
CHECKPOINT_KIND = 'ppo-segmented'
# `disco.checkpoint` stores an update rule's parameters; PPO has none.
_NO_RULE_PARAMS = {'ppo': {'none': np.zeros((1,), np.float32)}}
_POINT_FIELDS = ('steps', 'lengths', 'returns')


def num_iterations(
    env: str, env_steps: int, overrides: Mapping[str, Any] | None = None
) -> int:
  """Whole PPO iterations nearest `env_steps` (at least one)."""
  return max(1, round(env_steps / ppo.iteration_steps(env, overrides)))


def _points_arrays(points: list[tuple[Any, Any, Any]], num_seeds: int):
  """The evaluations so far as `points/<field>` arrays [points, seeds]."""
  columns = list(zip(*points)) if points else [[], [], []]
  dtypes = (np.int64, np.float64, np.float64)
  return {
      f'points/{name}': np.asarray(col, dtype).reshape(len(points), num_seeds)
      for name, col, dtype in zip(_POINT_FIELDS, columns, dtypes, strict=True)
  }


def _points_from_arrays(arrays: Mapping[str, np.ndarray]):
  columns = (arrays[f'points/{name}'] for name in _POINT_FIELDS)
  return list(zip(*columns, strict=True))


def run_ppo_segmented(
    env: str,
    env_steps: int,
    seeds: Sequence[int],
    num_eval_points: int,
    num_eval_episodes: int,
    overrides: Mapping[str, Any] | None = None,
    *,
    checkpoint_dir: pathlib.Path | None = None,
    handle_interrupts: bool = False,
    progress_fn: Callable[[int], None] | None = None,
) -> dict[str, Any]:
  """Trains rejax's PPO one iteration per call, evaluating between calls.

  The training program is called `num_iterations(env, env_steps)` times;
  the evaluation runs after the iterations nearest each of
  `num_eval_points` even fractions of the budget.

  With `checkpoint_dir` the run can be done in pieces: it checkpoints the
  train states, the evaluations so far and the evaluation key `CHECKPOINTS`
  times over the run and (with `handle_interrupts`) after the iteration in
  which Ctrl-C or SIGTERM came, then raises `disco.interrupts.Interrupted`;
  a later call with the same arguments resumes from the newest checkpoint.

  Args:
    env: the environment.
    env_steps: environment steps per seed.
    seeds: trained together (vmapped).
    num_eval_points: evaluations, evenly spaced, the last at the end.
    num_eval_episodes: episodes per evaluation.
    overrides: PPO settings over `disco.studies.ppo.config_for(env)`.
    checkpoint_dir: where its checkpoints and `pieces.json` go (None: none).
    handle_interrupts: stop cleanly on Ctrl-C or SIGTERM (see above).
    progress_fn: called with the iterations done after each iteration.

  Returns:
    What `disco.studies.ppo.run_ppo` returns, its times summed over the
    pieces, plus `pieces`: per call, the iterations it ran and its times.

  Raises:
    disco.checkpoint.CheckpointMismatchError: `checkpoint_dir` holds
      another run's checkpoints.
  """
  # pylint: disable=g-import-not-at-top
  import jax
  import jax.numpy as jnp
  # pylint: enable=g-import-not-at-top

  start = time.perf_counter()
  algo, settings = ppo.make_algo(
      env, env_steps, 1, num_eval_episodes, overrides
  )
  iteration = ppo.iteration_steps(env, overrides)
  total = num_iterations(env, env_steps, overrides)
  algo = algo.replace(
      eval_callback=lambda *_: jnp.zeros(()),
      eval_freq=iteration,
      total_timesteps=iteration,
  )
  settings.update(eval_freq=None, total_timesteps=total * iteration)
  evals = sorted({
      max(1, round(total * (j + 1) / num_eval_points))
      for j in range(num_eval_points)
  })
  keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
  state = jax.jit(jax.vmap(algo.init_state))(keys)
  identity = records.jsonable(
      dict(
          kind=CHECKPOINT_KIND,
          env=env,
          seeds=[int(s) for s in seeds],
          num_iterations=total,
          evals=evals,
          num_eval_episodes=int(num_eval_episodes),
          settings=settings,
      )
  )
  resume = (
      checkpoint_dir is not None
      and checkpoint.latest_step(checkpoint_dir) is not None
  )
  # Checked before compiling (a minute on Craftax); `load` verifies the rest.
  if resume and (meta := checkpoint.read_metadata(checkpoint_dir)) != identity:
    raise checkpoint.CheckpointMismatchError(
        f'{checkpoint_dir} holds checkpoints of another PPO run (their'
        f' settings: {meta}); delete it or use another output directory.'
    )

  compile_start = time.perf_counter()
  train_fn = jax.jit(jax.vmap(lambda ts: algo.train(train_state=ts)[0]))
  train_fn = train_fn.lower(state).compile()
  eval_fn = jax.jit(
      jax.vmap(lambda ts, key: ppo.evaluate(algo, ts, key, num_eval_episodes))
  )
  eval_fn = eval_fn.lower(state, keys).compile()
  compile_time = time.perf_counter() - compile_start

  points = []
  eval_key = jax.random.PRNGKey(0)
  done = dict(iteration=0, saved=-1)
  earlier = []
  if resume:
    ckpt = checkpoint.load(checkpoint_dir)
    state = checkpoint.restore_tree(state, ckpt.arrays, 'state')
    eval_key = jnp.asarray(ckpt.arrays['eval_key'])
    points = _points_from_arrays(ckpt.arrays)
    done.update(iteration=ckpt.step, saved=ckpt.step)
  if checkpoint_dir is not None:
    pieces_path = checkpoint_dir / pieces_lib.PIECES_FILE
    # Of other settings: a fresh start (the checkpoints were checked above).
    earlier = pieces_lib.read_pieces(pieces_path, identity) or []
  first = done['iteration']

  def save() -> pathlib.Path | None:
    if checkpoint_dir is None or done['saved'] == done['iteration']:
      return None
    arrays = checkpoint.flatten_tree(state, 'state')
    arrays['eval_key'] = np.asarray(eval_key)
    arrays.update(_points_arrays(points, len(seeds)))
    path = checkpoint.save(
        checkpoint_dir,
        done['iteration'],
        update_rule_params=_NO_RULE_PARAMS,
        arrays=arrays,
        metadata=identity,
        keep=KEEP_CHECKPOINTS,
    )
    done['saved'] = done['iteration']
    return path

  save_every = max(1, math.ceil(total / CHECKPOINTS))
  loop_start = time.perf_counter()
  log = pieces_lib.PieceLog(
      None if checkpoint_dir is None else pieces_path,
      identity,
      earlier,
      first,
      unit='iteration',
      fields=lambda: dict(
          compile_seconds=compile_time,
          train_seconds=time.perf_counter() - loop_start,
      ),
      started=start,
  )
  status = 'interrupted'
  try:
    with runtime.stop_on_interrupt('PPO iteration', handle_interrupts) as stop:
      for i in range(first + 1, total + 1):
        state = train_fn(state)
        if i in evals:
          eval_key, key = jax.random.split(eval_key)
          points.append(
              jax.device_get(eval_fn(state, jax.random.split(key, len(seeds))))
          )
        done['iteration'] = i
        log.advance(i)
        if i % save_every == 0 and i < total:
          save()
        if progress_fn is not None:
          progress_fn(i)
        if i < total:
          stop(save)
    status = 'finished'
  finally:
    pieces = log.end(status)
  steps, lengths, returns = (np.stack(x, axis=1) for x in zip(*points))
  return {
      'env_id': env,
      'seeds': [int(s) for s in seeds],
      'env_steps': np.asarray(steps, np.int64).tolist(),
      'returns': np.asarray(returns, np.float64).tolist(),
      'episode_lengths': np.asarray(lengths, np.float64).tolist(),
      'wall_time_s': sum(p['wall_seconds'] for p in pieces),
      'compile_time_s': sum(p['compile_seconds'] for p in pieces),
      'train_time_s': sum(p['train_seconds'] for p in pieces),
      'config': dict(settings, num_eval_episodes=num_eval_episodes),
      'config_source': ppo.config_for(env)[1],
      'pieces': pieces,
  }
