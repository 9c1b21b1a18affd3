"""Disco103 against actor-critic and rejax's PPO on environments it never saw.

One command (`--out DIR`) runs, at equal environment steps per seed:

1. Learning-rate selection, as the paper does (it tunes only the agent's
   step size, over {1e-4, 3e-4, 5e-4}): on one environment
   (`--selection-env`, Breakout-MinAtar), each of our rules (disco,
   actor_critic) trains 3 seeds at every rate (`--learning-rates`) at the
   benchmark's budget; each rule keeps the rate with the highest mean final
   return over seeds (ties: the first rate listed; seeds without a finished
   evaluation episode are left out of the mean). Those runs at the chosen
   rate are also the rule's Breakout-MinAtar row, so that row is *selected
   on*; the other environments' rows are not.
2. SpaceInvaders-MinAtar, Asterix-MinAtar, DeepSea-bsuite and
   Craftax-Classic-Symbolic-v1: disco and actor_critic at their chosen
   rates, 3 seeds each (vmapped, one `disco.train.run_train` call), the
   trainer's `paper` preset (batches of 96 trajectories of 29 steps, 90%
   replayed, 10 environments: 290 env steps and one learner step per
   iteration).
3. rejax's PPO (`benchmarks/ppo_rejax.py`: its tuned Breakout-MinAtar
   config, reused for the other MinAtar games; rejax's defaults elsewhere)
   on all five environments, 3 seeds.

Budgets: `--env-steps` (72,500 = 250 iterations) per seed on MinAtar and
DeepSea, `--craftax-env-steps` (29,000 = 100 iterations) on Craftax. PPO
trains whole PPO iterations (1,024 env steps on MinAtar, 4,096 elsewhere)
in equal segments between its evaluations, so its budget is the nearest it
can reach (`ppo_eval_points`; e.g. 71,680 on MinAtar, 73,728 on DeepSea,
28,672 on Craftax); the table shows every row's env steps.

Final return, the same for all three algorithms: the mean return of the
episodes of the run's last evaluation, on fresh environment instances, with
actions sampled from the policy (not greedy), after the last training
iteration.

* disco, actor_critic: the trainer's evaluation (`Trainer.evaluate`), one
  episode in each of 16 evaluation environments, actions sampled as in
  training; an episode not finished after `eval_max_steps` (1,000, the
  MinAtar time limit, at which gymnax truncates an episode: every episode
  ends) is not counted. It runs at iteration 0, after every 1/5 of the
  iterations and at the end.
* ppo: rejax's evaluation (`rejax.evaluate.evaluate` of `PPO.make_act`,
  which samples from the policy's categorical distribution), 128 episodes
  (16 on Craftax) of at most the environment's `max_steps_in_episode`
  steps; an episode cut there counts with its partial return.

For disco and actor_critic the table also gives the training return: the
mean return of the training episodes that ended in the chunks of the last
10% of iterations (episode-weighted). PPO has no such number here.

On Craftax, rejax's evaluation callback inside its training program did not
finish compiling in 20 minutes (8 min with XLA's fastest-compiling options
and 2 evaluation points, still not done). There PPO runs in two separately
compiled programs instead (`run_ppo_segmented`): rejax's `train` for one
PPO iteration at a time (its own `train(train_state=...)` resumption, no
callback) and rejax's `evaluate` on the train state, at 2 points (midway and
at the end). Pilot: 36 s + 35 s compiling, ~37 s per PPO iteration of 3 x
4,096 env steps, ~24 s per evaluation of 16 episodes.

Outputs in `--out`:

  runs/<env>__<algo>[__lr<rate>].json  one file per run (all its seeds),
               written as soon as the run ends; a rerun of the command
               skips the runs whose file holds the same settings (and
               stops if one holds other settings), so an interrupted
               benchmark resumes at the run it was in.
  results.csv  one row per environment, algorithm and seed: learning rate,
               final return and its episodes, training return, env steps,
               learner steps (ours), the run's wall time, whether the row
               is selected on, and the status ('done' or 'not run: ...').
  selection.csv  per rule and rate on the selection environment: mean,
               std, min and max of the final returns over seeds, and
               whether the rate was chosen.
  curves.csv   per environment, algorithm, seed and point: kind ('eval':
               evaluation episodes, for all three; 'train': training
               episodes of a chunk of iterations, ours only), env steps,
               mean return and episodes.
  curves.png   one panel per environment: per algorithm the mean over seeds
               of the evaluation returns (the final-return measure at each
               evaluation point; PPO's from rejax's evaluation, ours from
               the trainer's evaluation episodes), shaded between the
               seeds' min and max, against env steps.

It prints a progress bar per run, each run's wall time (startup and
seconds per iteration for ours), the selection table, the results table
(final return mean ± std [min, max] over seeds, env steps) and the total
wall time. `--readme-table` prints the tables again from `results.csv`
(and `selection.csv`) without training.

Cost, measured on the 2-core CPU (3 seeds vmapped; quiet machine, about
2x slower when another job runs):

  | run                        | seconds per iteration | startup     |
  |----------------------------|-----------------------|-------------|
  | disco, Breakout-MinAtar    | 1.6-1.8               | ~40 s       |
  | actor_critic, Breakout     | ~0.8                  | ~35 s       |
  | disco, Craftax-Classic     | 7.5-8                 | ~100-150 s  |
  | actor_critic, Craftax      | ~1                    | ~130 s      |

  Startup: environment, weights, compiling and the first evaluation; an
  evaluation costs about one iteration (MinAtar) to five (Craftax). rejax's
  PPO on a MinAtar game at 72k env steps: well under a minute; on Craftax
  ~6 min (70 s compiling, ~37 s per PPO iteration of 3 x 4,096 steps, 24 s
  per evaluation). At the default budgets the whole benchmark takes about
  1.5-1.7 hours on a quiet machine (12 MinAtar/DeepSea runs of ours ~70
  min, Craftax ~18 min, PPO ~8 min); `--env-steps 36250
  --craftax-env-steps 14500` (125 and 50 iterations) fits in about one.

Usage (the whole benchmark needs rejax and craftax, e.g. in the venv that
has them; `--algos disco actor_critic` runs without rejax):

  python benchmarks/unseen_envs.py --out runs/unseen_envs
  python benchmarks/unseen_envs.py --out runs/unseen_envs --readme-table
  python benchmarks/unseen_envs.py --out DIR --envs gymnax:DeepSea-bsuite \
      --algos disco ppo --seeds 2

Disco103 is loaded by `disco.weights.load_disco103` (e.g. from
`$DISCO_WEIGHTS`). Needs gymnax and matplotlib; rejax for `ppo`; craftax for
Craftax.
"""

import argparse
from collections.abc import Callable, Mapping, Sequence
import csv
import dataclasses
import importlib.util
import json
import math
import pathlib
import sys
import time
from types import ModuleType
from typing import Any

import numpy as np

from disco import checkpoint
from disco import metrics
from disco import plotting
from disco import progress
from disco import runtime
from disco import weights
from disco.environments import registry

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import pieces as pieces_lib  # pylint: disable=g-import-not-at-top,wrong-import-position

_PROG = 'unseen_envs.py'

DISCO = 'disco'
ACTOR_CRITIC = 'actor_critic'
PPO = 'ppo'
RULES = (DISCO, ACTOR_CRITIC)
ALGOS = (DISCO, ACTOR_CRITIC, PPO)

SELECTION_ENV = 'gymnax:Breakout-MinAtar'
DEFAULT_ENVS = (
    SELECTION_ENV,
    'gymnax:SpaceInvaders-MinAtar',
    'gymnax:Asterix-MinAtar',
    'gymnax:DeepSea-bsuite',
    'craftax:Craftax-Classic-Symbolic-v1',
)
DEFAULT_LEARNING_RATES = (1e-4, 3e-4, 5e-4)
DEFAULT_SEEDS = 3
DEFAULT_ENV_STEPS = 72_500
DEFAULT_CRAFTAX_ENV_STEPS = 29_000
PRESET = 'paper'

# Our evaluation: at iteration 0, after every 1/NUM_EVALS of the iterations
# and at the end; one episode per evaluation environment.
NUM_EVALS = 5
EVAL_ENVS = 16
# MinAtar's time limit (gymnax truncates there); Craftax-Classic episodes
# of these agents end after ~100-200 steps.
EVAL_MAX_STEPS = 1000
# Iterations per jitted call: one log row (a training-curve point) each.
STEPS_PER_CHUNK = 5

# rejax PPO: evaluation points and episodes (rejax's default: 128).
PPO_EVAL_POINTS = NUM_EVALS
PPO_EVAL_EPISODES = 128
CRAFTAX_PPO_EVAL_POINTS = 2
CRAFTAX_PPO_EVAL_EPISODES = 16

RUNS_DIR = 'runs'
RESULTS_CSV = 'results.csv'
SELECTION_CSV = 'selection.csv'
CURVES_CSV = 'curves.csv'
CURVES_PNG = 'curves.png'
DONE = 'done'

RESULT_COLUMNS = (
    'env',
    'algo',
    'seed',
    'learning_rate',
    'final_return',
    'final_eval_episodes',
    'final_train_return',
    'final_train_episodes',
    'env_steps',
    'learner_steps',
    'run_wall_seconds',
    'selected_on',
    'status',
)
SELECTION_COLUMNS = (
    'env',
    'rule',
    'learning_rate',
    'mean_final_return',
    'std',
    'min',
    'max',
    'seeds',
    'chosen',
    'run_wall_seconds',
)
CURVE_COLUMNS = (
    'env',
    'algo',
    'seed',
    'point',
    'kind',
    'env_steps',
    'return',
    'episodes',
)


class BenchmarkError(Exception):
  """A setup problem, reported as `unseen_envs.py: error: ...`."""


# ----------------------------------------------------------------------------
# Runs and their files.


@dataclasses.dataclass(frozen=True)
class RunKey:
  """One run: an environment, an algorithm and (ours) a learning rate."""

  env: str
  algo: str
  learning_rate: float | None = None

  @property
  def name(self) -> str:
    """The run's file name, without the suffix."""
    name = f'{short(self.env)}__{self.algo}'
    if self.learning_rate is not None:
      name += f'__lr{self.learning_rate:g}'
    return name

  def label(self) -> str:
    text = f'{short(self.env)} {self.algo}'
    if self.learning_rate is not None:
      text += f' lr={self.learning_rate:g}'
    return text


def run_path(out: pathlib.Path, key: RunKey) -> pathlib.Path:
  return out / RUNS_DIR / f'{key.name}.json'


def _jsonable(value: Any) -> Any:
  """`value` as it reads back from JSON (tuples as lists)."""
  return json.loads(json.dumps(value))


def load_finished(
    out: pathlib.Path, key: RunKey, settings: Mapping[str, Any]
) -> dict[str, Any] | None:
  """The record of `key` if it finished with `settings`, else None.

  Raises:
    BenchmarkError: the run's file holds a finished run with other settings.
  """
  path = run_path(out, key)
  if not path.is_file():
    return None
  try:
    record = json.loads(path.read_text())
  except (OSError, ValueError):
    return None  # A partial write: run it again.
  if record.get('status') != DONE:
    return None  # Not run before (e.g. rejax missing): try again.
  if record.get('settings') != _jsonable(settings):
    old, new = record.get('settings') or {}, _jsonable(settings)
    differ = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    raise BenchmarkError(
        f'{path} holds a finished run with other settings (differing:'
        f' {", ".join(differ)}); use another --out or delete that file'
    )
  return record


def save_record(out: pathlib.Path, record: Mapping[str, Any]) -> pathlib.Path:
  """Writes a run's record atomically (a crash leaves the old file)."""
  key = RunKey(record['env'], record['algo'], record['learning_rate'])
  path = run_path(out, key)
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_suffix('.json.tmp')
  tmp.write_text(json.dumps(record, indent=1, allow_nan=True) + '\n')
  tmp.replace(path)
  return path


# ----------------------------------------------------------------------------
# Our runs (disco and actor_critic) with `disco.train`.


def train_config(
    env: str,
    rule: str,
    learning_rate: float,
    env_steps: int,
    overrides: Mapping[str, Any] | None = None,
):
  """The `paper` preset for a run, at a budget of `env_steps` per seed.

  `overrides` are `TrainConfig` fields over the preset (e.g. a tiny agent in
  tests); `num_steps`, `eval_every` and `steps_per_chunk` among them replace
  the ones derived from the budget.
  """
  from disco import train  # pylint: disable=g-import-not-at-top

  overrides = dict(overrides or {})
  unknown = set(overrides) - set(train.TrainConfig.field_names())
  if unknown:
    raise BenchmarkError(
        f'--config: unknown TrainConfig field(s) {sorted(unknown)}'
    )
  schedule = {
      k: overrides.pop(k)
      for k in ('num_steps', 'eval_every', 'steps_per_chunk')
      if k in overrides
  }
  fields = dict(
      rule=rule,
      env=env,
      agent_learning_rate=learning_rate,
      eval_envs=EVAL_ENVS,
      eval_max_steps=EVAL_MAX_STEPS,
      seed=0,
  )
  config = train.preset(PRESET, **(fields | overrides))
  num_steps = schedule.get('num_steps', config.num_steps_for(env_steps))
  every = schedule.get('eval_every', max(1, num_steps // NUM_EVALS))
  chunk = schedule.get('steps_per_chunk', min(STEPS_PER_CHUNK, every or 1))
  return config.replace(
      num_steps=num_steps, eval_every=every, steps_per_chunk=chunk
  )


def our_settings(config, num_seeds: int) -> dict[str, Any]:
  """What a finished run of ours must match to be skipped."""
  return dict(config=config.to_dict(), num_seeds=num_seeds)


class _Clock:
  """A progress function that records when each chunk ended."""

  def __init__(self, inner: progress.ProgressFn | None):
    self._inner = inner
    self.start = time.perf_counter()
    self.points: list[tuple[int, float]] = []

  def __call__(self, step: int, row: Mapping[str, float]) -> None:
    self.points.append((step, time.perf_counter() - self.start))
    if self._inner is not None:
      self._inner(step, row)


def iteration_timing(
    points: Sequence[tuple[int, float]],
    first_learning_step: int,
    num_steps: int,
    wall_seconds: float,
) -> tuple[float, float]:
  """(seconds per iteration, startup seconds) of a run of ours.

  The rate is measured after the first chunk that learned (which includes
  compiling the learner), evaluations included; startup is the rest of the
  wall time. NaN where too few chunks ran.
  """
  after = [(s, t) for s, t in points if s > first_learning_step]
  if len(after) < 2 or after[-1][0] == after[0][0]:
    return math.nan, math.nan
  rate = (after[-1][1] - after[0][1]) / (after[-1][0] - after[0][0])
  return rate, wall_seconds - rate * num_steps


def run_ours(
    key: RunKey,
    config,
    num_seeds: int,
    disco_params: Any,
    show_progress: bool,
) -> dict[str, Any]:
  """Trains `num_seeds` seeds of a rule together; returns the run's record."""
  from disco import train  # pylint: disable=g-import-not-at-top

  start = time.perf_counter()
  with progress.ProgressBar(
      config.num_steps,
      key.label(),
      postfix=('eval_return', 'train_return'),
      enabled=show_progress,
  ) as bar:
    clock = _Clock(bar)
    result = train.run_train(
        config,
        num_seeds=num_seeds,
        update_rule_params=disco_params if key.algo == DISCO else None,
        progress_fn=clock,
    )
  wall = time.perf_counter() - start
  warmup = -(-config.learning_starts // config.num_envs) - 1
  rate, startup = iteration_timing(clock.points, warmup, config.num_steps, wall)
  logs = result.logs
  window = metrics.final_window(config.num_steps)
  seeds, curves = [], []
  for seed in result.seeds:
    rows = logs['seed'] == seed
    col = {k: v[rows] for k, v in logs.items()}
    last = -1
    tail = col['step'] > config.num_steps - window
    train_episodes = float(np.sum(col['train_episodes'][tail]))
    train_total = float(
        np.nansum(col['train_return'][tail] * col['train_episodes'][tail])
    )
    seeds.append(
        dict(
            seed=int(seed),
            final_return=float(col['eval_return'][last]),
            final_eval_episodes=int(col['eval_episodes'][last]),
            final_train_return=(
                train_total / train_episodes if train_episodes else math.nan
            ),
            final_train_episodes=int(train_episodes),
            env_steps=int(col['env_steps'][last]),
            learner_steps=int(col['learner_steps'][last]),
        )
    )
    for kind in ('eval', 'train'):
      episodes = col[f'{kind}_episodes']
      point = 0
      for i in np.flatnonzero(episodes > 0):
        curves.append(
            dict(
                seed=int(seed),
                point=point,
                kind=kind,
                env_steps=int(col['env_steps'][i]),
                value=float(col[f'{kind}_return'][i]),
                episodes=int(episodes[i]),
            )
        )
        point += 1
  return dict(
      env=key.env,
      algo=key.algo,
      learning_rate=key.learning_rate,
      status=DONE,
      settings=our_settings(config, num_seeds),
      wall_seconds=wall,
      startup_seconds=startup,
      seconds_per_iteration=rate,
      iterations=config.num_steps,
      seeds=seeds,
      curves=curves,
  )


# ----------------------------------------------------------------------------
# rejax's PPO.


def load_ppo_module() -> ModuleType:
  """`benchmarks/ppo_rejax.py`, imported on demand (it needs rejax).

  Raises:
    BenchmarkError: naming the missing package (rejax, or one it needs).
  """
  name = 'ppo_rejax'
  if name in sys.modules:
    return sys.modules[name]
  path = pathlib.Path(__file__).resolve().with_name('ppo_rejax.py')
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  try:
    spec.loader.exec_module(module)
  except ModuleNotFoundError as e:
    raise BenchmarkError(
        f'the ppo algorithm needs the package {e.name!r}, which is not'
        ' installed (pip install rejax); or leave ppo out: --algos disco'
        ' actor_critic'
    ) from None
  sys.modules[name] = module
  return module


def ppo_eval_points(
    iteration_steps: int, env_steps: int, preferred: int = PPO_EVAL_POINTS
) -> int:
  """Evaluation points for rejax's PPO closest to a budget of env steps.

  rejax trains the same whole number of PPO iterations between
  evaluations (`ppo_rejax.plan`), so the budget it reaches depends on the
  number of points. Among ceil(`preferred` / 2) .. 2 * `preferred` points
  (enough for a curve; at most one per iteration of the budget), this is
  the one whose total is nearest `env_steps`; ties go to the number
  nearest `preferred`, then to more points.
  """
  if iteration_steps < 1 or env_steps < 1 or preferred < 1:
    raise ValueError('iteration_steps, env_steps and preferred must be >= 1')

  def total(points: int) -> int:
    per_point = max(1, round(env_steps / (points * iteration_steps)))
    return per_point * points * iteration_steps

  # At most one point per iteration the budget holds.
  most = max(1, round(env_steps / iteration_steps))
  return min(
      range(min((preferred + 1) // 2, most), min(2 * preferred, most) + 1),
      key=lambda p: (abs(total(p) - env_steps), abs(p - preferred), -p),
  )


def ppo_settings(
    env: str,
    env_steps: int,
    seeds: Sequence[int],
    overrides: Mapping[str, Any] | None,
) -> dict[str, Any]:
  """What a finished PPO run must match to be skipped (no rejax needed)."""
  craftax = is_craftax(env)
  return dict(
      env_steps=int(env_steps),
      seeds=[int(s) for s in seeds],
      method='segmented' if craftax else 'run_ppo',
      num_eval_episodes=(
          CRAFTAX_PPO_EVAL_EPISODES if craftax else PPO_EVAL_EPISODES
      ),
      overrides=dict(overrides or {}),
  )


def _ppo_iteration_steps(ppo_rejax: ModuleType, env: str, overrides) -> int:
  """Env steps of one PPO iteration (num_envs * num_steps) for `env`."""
  settings, _ = ppo_rejax.config_for(env)
  settings.update(overrides or {})
  fields = ppo_rejax.rejax.get_algo('ppo').__dataclass_fields__
  return int(
      settings.get('num_envs', fields['num_envs'].default)
      * settings.get('num_steps', fields['num_steps'].default)
  )


# Checkpoints of the segmented PPO run: this many over its iterations (and
# one when Ctrl-C or SIGTERM stops it), the newest two kept.
PPO_CHECKPOINTS = 20
PPO_KEEP_CHECKPOINTS = 2
PPO_CHECKPOINT_KIND = 'ppo-segmented'
# `disco.checkpoint` stores an update rule's parameters; PPO has none.
_NO_RULE_PARAMS = {'ppo': {'none': np.zeros((1,), np.float32)}}


def _points_arrays(points: list[tuple[Any, Any, Any]], num_seeds: int):
  """The evaluations so far as `points/<name>` arrays of shape [P, seeds]."""
  columns = list(zip(*points)) if points else [[], [], []]
  dtypes = (np.int64, np.float64, np.float64)
  return {
      f'points/{name}': np.asarray(col, dtype).reshape(len(points), num_seeds)
      for name, col, dtype in zip(
          ('steps', 'lengths', 'returns'), columns, dtypes, strict=True
      )
  }


def _points_from_arrays(arrays: Mapping[str, np.ndarray]):
  steps, lengths, returns = (
      arrays[f'points/{name}'] for name in ('steps', 'lengths', 'returns')
  )
  return list(zip(steps, lengths, returns, strict=True))


def _ppo_num_iterations(
    ppo_rejax: ModuleType, env: str, env_steps: int, overrides
) -> int:
  """Whole PPO iterations nearest `env_steps` (at least one)."""
  iteration = _ppo_iteration_steps(ppo_rejax, env, overrides)
  return max(1, round(env_steps / iteration))


def run_ppo_segmented(
    ppo_rejax: ModuleType,
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
  """rejax's PPO as two programs: training, and evaluation between calls.

  For environments where rejax's training program with its evaluation
  callback does not compile in reasonable time (Craftax). The training
  program is rejax's `train(train_state=...)` for one PPO iteration (no
  callback); it is called round(env_steps / iteration) times, and
  `rejax.evaluate.evaluate` (a program of its own) runs after the
  iterations nearest each of `num_eval_points` even fractions of the
  budget.

  With `checkpoint_dir` the run can be done in pieces: it checkpoints the
  train states, the evaluations so far and the evaluation key
  `PPO_CHECKPOINTS` times over the run, and (with `handle_interrupts`) after
  the iteration in which Ctrl-C or SIGTERM came, then raises
  `disco.interrupts.Interrupted`; a later call with the same arguments
  resumes from the newest checkpoint. Every iteration runs the same
  compiled program on the same state, so a resumed run computes what an
  unbroken one does, bit for bit.

  Args:
    ppo_rejax: `benchmarks/ppo_rejax.py`, loaded.
    env: the environment.
    env_steps: environment steps per seed.
    seeds: trained together (vmapped).
    num_eval_points: evaluations, evenly spaced, the last at the end.
    num_eval_episodes: episodes per evaluation.
    overrides: PPO settings over `ppo_rejax.config_for(env)`.
    checkpoint_dir: where its checkpoints and `pieces.json` go (None: none).
    handle_interrupts: stop cleanly on Ctrl-C or SIGTERM (see above).
    progress_fn: called with the iterations done after each iteration.

  Returns:
    What `ppo_rejax.run_ppo` returns, its times summed over the pieces,
    plus `pieces`: per call, the iterations it ran and its wall time.

  Raises:
    disco.checkpoint.CheckpointMismatchError: `checkpoint_dir` holds
      another run's checkpoints.
  """
  # pylint: disable=g-import-not-at-top
  import jax
  import jax.numpy as jnp
  from rejax import evaluate as rejax_evaluate
  # pylint: enable=g-import-not-at-top

  start = time.perf_counter()
  algo, settings = ppo_rejax.make_algo(
      env, env_steps, 1, num_eval_episodes, overrides
  )
  iteration = _ppo_iteration_steps(ppo_rejax, env, overrides)
  num_iterations = _ppo_num_iterations(ppo_rejax, env, env_steps, overrides)
  algo = algo.replace(
      eval_callback=lambda *_: jnp.zeros(()),
      eval_freq=iteration,
      total_timesteps=iteration,
  )
  settings.update(eval_freq=None, total_timesteps=num_iterations * iteration)
  evals = sorted({
      max(1, round(num_iterations * (j + 1) / num_eval_points))
      for j in range(num_eval_points)
  })
  keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
  state = jax.jit(jax.vmap(algo.init_state))(keys)
  max_steps = algo.env_params.max_steps_in_episode

  def evaluate(ts, key):
    lengths, returns = rejax_evaluate.evaluate(
        algo.make_act(ts),
        key,
        algo.env,
        algo.env_params,
        num_eval_episodes,
        max_steps,
    )
    return ts.global_step, lengths.mean(), returns.mean()

  identity = pieces_lib.jsonable(
      dict(
          kind=PPO_CHECKPOINT_KIND,
          env=env,
          seeds=[int(s) for s in seeds],
          num_iterations=num_iterations,
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
  eval_fn = jax.jit(jax.vmap(evaluate)).lower(state, keys).compile()
  compile_time = time.perf_counter() - compile_start

  points = []
  eval_key = jax.random.PRNGKey(0)
  done = dict(iteration=0, saved=-1)
  pieces = []
  if resume:
    ckpt = checkpoint.load(checkpoint_dir)
    state = checkpoint.restore_tree(state, ckpt.arrays, 'state')
    eval_key = jnp.asarray(ckpt.arrays['eval_key'])
    points = _points_from_arrays(ckpt.arrays)
    done.update(iteration=ckpt.step, saved=ckpt.step)
  if checkpoint_dir is not None:
    pieces_path = checkpoint_dir / pieces_lib.PIECES_FILE
    # Of other settings: a fresh start (the checkpoints were checked above).
    pieces = pieces_lib.read_pieces(pieces_path, identity) or []
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
        keep=PPO_KEEP_CHECKPOINTS,
    )
    done['saved'] = done['iteration']
    return path

  save_every = max(1, math.ceil(num_iterations / PPO_CHECKPOINTS))
  loop_start = time.perf_counter()
  status = 'interrupted'
  try:
    with runtime.stop_on_interrupt('PPO iteration', handle_interrupts) as stop:
      for i in range(first + 1, num_iterations + 1):
        state = train_fn(state)
        if i in evals:
          eval_key, key = jax.random.split(eval_key)
          points.append(
              jax.device_get(eval_fn(state, jax.random.split(key, len(seeds))))
          )
        done['iteration'] = i
        if i % save_every == 0 and i < num_iterations:
          save()
        if progress_fn is not None:
          progress_fn(i)
        if i < num_iterations:
          stop(save)
    status = 'finished'
  finally:
    end = time.perf_counter()
    pieces.append(
        dict(
            started_at_iteration=first,
            ended_at_iteration=done['iteration'],
            wall_seconds=end - start,
            compile_seconds=compile_time,
            train_seconds=end - loop_start,
            status=status,
            finished=time.strftime('%Y-%m-%d %H:%M:%S'),
        )
    )
    if checkpoint_dir is not None:
      pieces_lib.write_pieces(pieces_path, identity, pieces)
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
      'config_source': ppo_rejax.config_for(env)[1],
      'pieces': pieces,
  }


def run_ppo(
    key: RunKey,
    env_steps: int,
    seeds: Sequence[int],
    overrides: Mapping[str, Any] | None,
    show_progress: bool,
    checkpoint_dir: pathlib.Path | None = None,
    handle_interrupts: bool = False,
) -> dict[str, Any]:
  """Trains rejax's PPO on one environment; returns the run's record.

  `checkpoint_dir` and `handle_interrupts` apply where PPO runs segmented
  (Craftax; see `run_ppo_segmented`); elsewhere it is one program of a few
  minutes, run whole.
  """
  ppo_rejax = load_ppo_module()
  settings = ppo_settings(key.env, env_steps, seeds, overrides)
  if settings['method'] == 'segmented':
    with progress.ProgressBar(
        _ppo_num_iterations(ppo_rejax, key.env, env_steps, overrides),
        f'{key.label()} (PPO iterations)',
        unit='iteration',
        enabled=show_progress,
    ) as bar:
      result = run_ppo_segmented(
          ppo_rejax,
          key.env,
          env_steps,
          seeds,
          CRAFTAX_PPO_EVAL_POINTS,
          settings['num_eval_episodes'],
          overrides,
          checkpoint_dir=checkpoint_dir,
          handle_interrupts=handle_interrupts,
          progress_fn=lambda i: bar(i, {}),
      )
  else:
    with progress.ProgressBar(
        1, f'{key.label()} (one program)', unit='run', enabled=show_progress
    ) as bar:
      points = ppo_eval_points(
          _ppo_iteration_steps(ppo_rejax, key.env, overrides), env_steps
      )
      result = ppo_rejax.run_ppo(
          key.env,
          env_steps,
          seeds,
          points,
          num_eval_episodes=settings['num_eval_episodes'],
          overrides=overrides,
      )
      bar(1, {})
  per_seed, curves = [], []
  episodes = result['config']['num_eval_episodes']
  for s, seed in enumerate(result['seeds']):
    steps, returns = result['env_steps'][s], result['returns'][s]
    per_seed.append(
        dict(
            seed=seed,
            final_return=float(returns[-1]),
            final_eval_episodes=episodes,
            final_train_return=math.nan,
            final_train_episodes=0,
            env_steps=int(steps[-1]),
            learner_steps=None,
        )
    )
    for point, (x, y) in enumerate(zip(steps, returns, strict=True)):
      curves.append(
          dict(
              seed=seed,
              point=point,
              kind='eval',
              env_steps=int(x),
              value=float(y),
              episodes=episodes,
          )
      )
  record = dict(
      env=key.env,
      algo=PPO,
      learning_rate=None,
      status=DONE,
      settings=settings,
      wall_seconds=result['wall_time_s'],
      compile_seconds=result['compile_time_s'],
      train_seconds=result['train_time_s'],
      ppo_config=result['config'],
      ppo_config_source=result['config_source'],
      episode_lengths=result['episode_lengths'],
      seeds=per_seed,
      curves=curves,
  )
  if 'pieces' in result:  # Run segmented, in pieces.
    record['pieces'] = result['pieces']
  return record


# ----------------------------------------------------------------------------
# Learning-rate selection.


def select_learning_rates(
    finals: Mapping[str, Mapping[float, Sequence[float]]],
) -> list[dict[str, Any]]:
  """Per rule, the rate with the highest mean final return over seeds.

  Args:
    finals: rule -> learning rate -> the seeds' final returns (NaN: a seed
      without a finished evaluation episode, left out of its mean). Rates
      in the order they were listed.

  Returns:
    One row per rule and rate (`SELECTION_COLUMNS` less env and wall time):
    mean, std (ddof=1), min and max over seeds, the seeds, and `chosen`
    (True for exactly one rate per rule: the highest mean; ties go to the
    rate listed first; a rate without any finite return loses to any with
    one, and if none has one, the first is chosen).
  """
  rows = []
  for rule, by_rate in finals.items():
    if not by_rate:
      raise ValueError(f'no learning rates for rule {rule!r}')
    group = []
    for rate, values in by_rate.items():
      summary = metrics.summarize_seeds(np.asarray(values, np.float64))
      group.append(
          dict(
              rule=rule,
              learning_rate=float(rate),
              mean_final_return=summary.mean,
              std=summary.std,
              min=summary.min,
              max=summary.max,
              seeds=summary.num_seeds,
              chosen=False,
          )
      )
    best = max(
        range(len(group)),
        key=lambda i: (
            -math.inf
            if math.isnan(group[i]['mean_final_return'])
            else group[i]['mean_final_return'],
            -i,
        ),
    )
    group[best]['chosen'] = True
    rows.extend(group)
  return rows


def chosen_rates(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
  """rule -> its chosen learning rate, from `select_learning_rates` rows."""
  return {r['rule']: float(r['learning_rate']) for r in rows if r['chosen']}


# ----------------------------------------------------------------------------
# Tables, CSV files and the plot.


def result_rows(
    record: Mapping[str, Any], selected_on: bool
) -> list[dict[str, Any]]:
  """One `results.csv` row per seed of a run's record."""
  rows = []
  for seed in record['seeds']:
    rows.append(
        dict(
            env=record['env'],
            algo=record['algo'],
            seed=seed['seed'],
            learning_rate=record['learning_rate'],
            final_return=seed['final_return'],
            final_eval_episodes=seed['final_eval_episodes'],
            final_train_return=seed['final_train_return'],
            final_train_episodes=seed['final_train_episodes'],
            env_steps=seed['env_steps'],
            learner_steps=seed['learner_steps'],
            run_wall_seconds=round(float(record['wall_seconds']), 1),
            selected_on=selected_on,
            status=record['status'],
        )
    )
  return rows


def not_run_rows(
    key: RunKey, seeds: Sequence[int], reason: str
) -> list[dict[str, Any]]:
  """`results.csv` rows of a run that could not be run."""
  return [
      dict(
          env=key.env,
          algo=key.algo,
          seed=seed,
          learning_rate=key.learning_rate,
          final_return=math.nan,
          final_eval_episodes=0,
          final_train_return=math.nan,
          final_train_episodes=0,
          env_steps=None,
          learner_steps=None,
          run_wall_seconds=0.0,
          selected_on=False,
          status=f'not run: {reason}',
      )
      for seed in seeds
  ]


def write_csv(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    path: pathlib.Path,
) -> pathlib.Path:
  """Writes `rows` (NaN and None as empty fields)."""
  with path.open('w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(columns)
    for row in rows:
      writer.writerow([_csv_value(row[k]) for k in columns])
  return path


def read_results_csv(path: pathlib.Path) -> list[dict[str, Any]]:
  """A `results.csv` as rows like `result_rows`'."""
  with path.open(newline='') as f:
    rows = list(csv.DictReader(f))
  missing = set(RESULT_COLUMNS) - set(rows[0] if rows else RESULT_COLUMNS)
  if missing:
    raise BenchmarkError(f'{path} lacks the columns {sorted(missing)}')
  return [
      dict(
          env=r['env'],
          algo=r['algo'],
          seed=int(r['seed']),
          learning_rate=_float(r['learning_rate']),
          final_return=_float(r['final_return']),
          final_eval_episodes=int(r['final_eval_episodes'] or 0),
          final_train_return=_float(r['final_train_return']),
          final_train_episodes=int(r['final_train_episodes'] or 0),
          env_steps=_int(r['env_steps']),
          learner_steps=_int(r['learner_steps']),
          run_wall_seconds=float(r['run_wall_seconds'] or 0.0),
          selected_on=r['selected_on'] == 'True',
          status=r['status'],
      )
      for r in rows
  ]


def read_selection_csv(path: pathlib.Path) -> list[dict[str, Any]]:
  """A `selection.csv` as rows like `select_learning_rates`' (with env)."""
  with path.open(newline='') as f:
    rows = list(csv.DictReader(f))
  return [
      dict(
          env=r['env'],
          rule=r['rule'],
          learning_rate=float(r['learning_rate']),
          mean_final_return=_float(r['mean_final_return']),
          std=_float(r['std']),
          min=_float(r['min']),
          max=_float(r['max']),
          seeds=int(r['seeds']),
          chosen=r['chosen'] == 'True',
          run_wall_seconds=float(r['run_wall_seconds'] or 0.0),
      )
      for r in rows
  ]


def curve_rows(record: Mapping[str, Any]) -> list[dict[str, Any]]:
  """`curves.csv` rows of a run's record."""
  return [
      dict(
          env=record['env'],
          algo=record['algo'],
          seed=c['seed'],
          point=c['point'],
          kind=c['kind'],
          env_steps=c['env_steps'],
          episodes=c['episodes'],
          **{'return': c['value']},
      )
      for c in record['curves']
  ]


def _summary(values: Sequence[float]) -> str:
  """'mean ± std [min, max]' over the finite values."""
  s = metrics.summarize_seeds(np.asarray(values, np.float64))
  if not s.num_finite:
    return 'no episode ended'
  std = f'{s.std:.3g}' if s.num_finite > 1 else 'n/a'
  text = f'{s.mean:.3g} ± {std} [{s.min:.3g}, {s.max:.3g}]'
  if s.num_finite < s.num_seeds:
    text += f' ({s.num_seeds - s.num_finite} seed(s) without episodes)'
  return text


def markdown_table(
    rows: Sequence[Mapping[str, Any]],
    selection: Sequence[Mapping[str, Any]] = (),
) -> str:
  """The results as a markdown table, one line per environment and algorithm.

  Args:
    rows: `results.csv` rows.
    selection: `selection.csv` rows (for the wall time of the selection
      runs that are not in the table).

  Returns:
    The table, its footnotes and the total wall time of the runs.
  """
  groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
  for row in rows:
    groups.setdefault((row['env'], row['algo']), []).append(row)
  lines = [
      (
          '| environment | algorithm | learning rate | final return: mean ±'
          ' std [min, max] | training return, last 10% | seeds | env steps'
          ' per seed | wall time (all seeds) |'
      ),
      '|---|---|---|---|---|---|---|---|',
  ]
  table_seconds = 0.0
  any_selected = False
  for (env, algo), group in groups.items():
    first = group[0]
    selected = bool(first['selected_on'])
    any_selected |= selected
    env_cell = short(env) + (' †' if selected else '')
    rate = first['learning_rate']
    rate_cell = '-' if rate is None or math.isnan(rate) else f'{rate:g}'
    if first['status'] != DONE:
      lines.append(
          f'| {env_cell} | {algo} | {rate_cell} | {first["status"]} | - |'
          f' {len(group)} | - | - |'
      )
      continue
    final = _summary([r['final_return'] for r in group])
    if algo == PPO:
      train_cell = '-'
    else:
      train_cell = _summary([r['final_train_return'] for r in group])
    steps = sorted({r['env_steps'] for r in group if r['env_steps']})
    wall = float(first['run_wall_seconds'])
    table_seconds += wall
    lines.append(
        f'| {env_cell} | {algo} | {rate_cell} | {final} | {train_cell} |'
        f' {len(group)} | {", ".join(f"{s:,}" for s in steps)} |'
        f' {wall / 60:.1f} min |'
    )
  lines.append('')
  if any_selected:
    lines.append(
        '† The learning-rate selection environment: its disco and'
        ' actor_critic rows are the best of the rates tried, chosen on these'
        ' very runs (selected on); the other rows are not.'
    )
  lines.append(
      "Final return: mean return of the last evaluation's episodes, actions"
      " sampled from the policy (disco, actor_critic: the trainer's"
      ' evaluation, one episode per evaluation environment, by default'
      f" {EVAL_ENVS}; ppo: rejax's evaluation, by default"
      f' {PPO_EVAL_EPISODES} episodes, {CRAFTAX_PPO_EVAL_EPISODES} on'
      ' Craftax; results.csv counts them). Training return: the training'
      ' episodes that ended in the last 10% of iterations. ± std over seeds'
      ' (ddof=1).'
  )
  other = sum(
      float(r['run_wall_seconds']) for r in selection if not r['chosen']
  )
  total = table_seconds + other
  text = f'Runs: {total / 60:.1f} min wall in total'
  if other:
    text += (
        f' ({table_seconds / 60:.1f} min in the table, {other / 60:.1f} min'
        ' for the selection runs at the rates not chosen)'
    )
  lines.append(text + '.')
  return '\n'.join(lines)


def selection_table(rows: Sequence[Mapping[str, Any]]) -> str:
  """The learning-rate selection as a markdown table."""
  lines = [
      (
          '| environment | rule | learning rate | final return: mean ± std'
          ' [min, max] | chosen |'
      ),
      '|---|---|---|---|---|',
  ]
  for r in rows:
    if math.isnan(r['mean_final_return']):
      cell = 'no episode ended'
    else:
      std = 'n/a' if math.isnan(r['std']) else f'{r["std"]:.3g}'
      cell = (
          f'{r["mean_final_return"]:.3g} ± {std} [{r["min"]:.3g},'
          f' {r["max"]:.3g}]'
      )
    lines.append(
        f'| {short(r["env"])} | {r["rule"]} | {r["learning_rate"]:g} |'
        f' {cell} | {"yes" if r["chosen"] else ""} |'
    )
  return '\n'.join(lines)


def plot_curves(
    records: Sequence[Mapping[str, Any]], path: pathlib.Path
) -> pathlib.Path:
  """One panel per environment: per algorithm the seeds' evaluation returns.

  Per algorithm, the mean over seeds of the evaluation returns at each
  evaluation point (seeds without a finished episode there left out),
  shaded between the seeds' min and max, against env steps per seed.
  """
  plotting.require_matplotlib()
  # pylint: disable=g-import-not-at-top
  from matplotlib import figure as mpl_figure
  from matplotlib.backends import backend_agg
  # pylint: enable=g-import-not-at-top

  envs = list(dict.fromkeys(r['env'] for r in records))
  fig = mpl_figure.Figure(figsize=(4.2 * max(1, len(envs)), 3.8))
  backend_agg.FigureCanvasAgg(fig)
  axes = fig.subplots(1, max(1, len(envs)), squeeze=False)[0]
  for ax, env in zip(axes, envs):
    for record in records:
      if record['env'] != env or record['status'] != DONE:
        continue
      points = [c for c in record['curves'] if c['kind'] == 'eval']
      seeds = sorted({c['seed'] for c in points})
      steps = sorted({c['env_steps'] for c in points})
      if not steps:
        continue
      grid = np.full((len(seeds), len(steps)), np.nan)
      for c in points:
        grid[seeds.index(c['seed']), steps.index(c['env_steps'])] = c['value']
      mean, low, high = metrics.seed_band(grid)
      colour = f'C{ALGOS.index(record["algo"])}'
      label = record['algo']
      if record['learning_rate'] is not None:
        label += f' (lr {record["learning_rate"]:g})'
      ax.plot(steps, mean, color=colour, lw=1.6, marker='o', ms=3, label=label)
      if len(seeds) > 1:
        ax.fill_between(steps, low, high, color=colour, alpha=0.2, lw=0)
    ax.set_title(short(env))
    ax.set_xlabel('environment steps (per seed)')
    ax.grid(alpha=0.3)
    ax.legend(loc='best', fontsize='small')
  axes[0].set_ylabel('evaluation return')
  fig.suptitle(
      "Mean over seeds of the evaluation episodes' return (actions sampled;"
      ' ours: trainer evaluation, ppo: rejax evaluation); shaded: min to max'
      ' over seeds',
      fontsize=8,
  )
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  return path


# ----------------------------------------------------------------------------
# Helpers.


def short(env: str) -> str:
  return env.split(':', 1)[-1]


def is_craftax(env: str) -> bool:
  return env.startswith('craftax:')


def _csv_value(value: Any) -> str:
  if value is None:
    return ''
  if isinstance(value, float):
    return '' if math.isnan(value) else repr(value)
  return str(value)


def _float(text: str) -> float:
  return float(text) if text else math.nan


def _int(text: str) -> int | None:
  return int(text) if text else None


def _positive(kind: type[Any]) -> Callable[[str], Any]:
  """An argparse type: positive `kind` values."""

  def parse(text: str) -> Any:
    try:
      value = kind(text)
    except ValueError:
      raise argparse.ArgumentTypeError(
          f'not a valid {kind.__name__}: {text!r}'
      ) from None
    if not value > 0:
      raise argparse.ArgumentTypeError(f'must be > 0, got {text}')
    return value

  parse.__name__ = kind.__name__
  return parse


def _setting(text: str) -> tuple[str, Any]:
  """An argparse type: NAME=VALUE, the value as JSON (else a string)."""
  name, sep, value = text.partition('=')
  if not sep or not name:
    raise argparse.ArgumentTypeError(f'expected NAME=VALUE, got {text!r}')
  try:
    return name, json.loads(value)
  except ValueError:
    return name, value


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=_PROG,
      description=__doc__.split('\n\n', 1)[0],
  )
  parser.add_argument(
      '--out',
      type=pathlib.Path,
      default=pathlib.Path('runs/unseen_envs'),
      help='output directory (default: %(default)s)',
  )
  parser.add_argument(
      '--envs',
      nargs='+',
      default=list(DEFAULT_ENVS),
      metavar='ENV',
      help='environments (default: %(default)s)',
  )
  parser.add_argument(
      '--algos',
      nargs='+',
      choices=ALGOS,
      default=list(ALGOS),
      help='algorithms (default: %(default)s)',
  )
  parser.add_argument(
      '--seeds',
      type=_positive(int),
      default=DEFAULT_SEEDS,
      help='seeds 0 .. N-1 per run (default: %(default)s)',
  )
  parser.add_argument(
      '--learning-rates',
      nargs='+',
      type=_positive(float),
      default=list(DEFAULT_LEARNING_RATES),
      metavar='LR',
      help=(
          'the agent step sizes tried for disco and actor_critic on the'
          ' selection environment (default: %(default)s)'
      ),
  )
  parser.add_argument(
      '--selection-env',
      default=SELECTION_ENV,
      help='the environment the learning rate is chosen on (%(default)s)',
  )
  parser.add_argument(
      '--env-steps',
      type=_positive(int),
      default=DEFAULT_ENV_STEPS,
      help='env steps per seed, all but Craftax (default: %(default)s)',
  )
  parser.add_argument(
      '--craftax-env-steps',
      type=_positive(int),
      default=DEFAULT_CRAFTAX_ENV_STEPS,
      help='env steps per seed on Craftax (default: %(default)s)',
  )
  parser.add_argument(
      '--config',
      nargs='+',
      type=_setting,
      default=[],
      metavar='NAME=VALUE',
      help=(
          'TrainConfig fields over the paper preset for disco and'
          ' actor_critic, values as JSON (e.g. agent_dense=[64])'
      ),
  )
  parser.add_argument(
      '--ppo-config',
      nargs='+',
      type=_setting,
      default=[],
      metavar='NAME=VALUE',
      help="rejax PPO settings over ppo_rejax's config (e.g. num_envs=8)",
  )
  parser.add_argument(
      '--readme-table',
      action='store_true',
      help=(
          'print the tables of an existing <out>/results.csv and exit,'
          ' without training'
      ),
  )
  parser.add_argument(
      '--compilation-cache',
      type=pathlib.Path,
      default=None,
      help="JAX's persistent compilation cache directory",
  )
  parser.add_argument('--quiet', action='store_true', help='no progress bars')
  return parser


def _check_args(parser: argparse.ArgumentParser, args) -> None:
  for flag in ('envs', 'algos', 'learning_rates'):
    values = getattr(args, flag)
    if len(set(values)) != len(values):
      parser.error(f'--{flag.replace("_", "-")} lists a value twice')
  names = [args.selection_env] + list(args.envs)
  for env in names:
    if not registry.is_jittable_name(env):
      parser.error(
          f'unknown or non-jittable environment {env!r} (e.g.'
          ' gymnax:Breakout-MinAtar, craftax:Craftax-Classic-Symbolic-v1)'
      )
  if PPO in args.algos:
    for env in args.envs:
      if not env.startswith(('gymnax:', 'craftax:')):
        parser.error(f'ppo runs gymnax and craftax environments, not {env!r}')
  if args.out.exists() and not args.out.is_dir():
    parser.error(f'--out exists and is not a directory: {args.out}')


# ----------------------------------------------------------------------------
# The benchmark.


@dataclasses.dataclass
class _Benchmark:
  """The state of one invocation: what to run and what has been run."""

  args: argparse.Namespace
  overrides: dict[str, Any]
  ppo_overrides: dict[str, Any]
  disco_params: Any = None
  records: dict[RunKey, dict[str, Any]] = dataclasses.field(
      default_factory=dict
  )
  timings: list[str] = dataclasses.field(default_factory=list)

  @property
  def seeds(self) -> list[int]:
    return list(range(self.args.seeds))

  def budget(self, env: str) -> int:
    if is_craftax(env):
      return self.args.craftax_env_steps
    return self.args.env_steps

  def config(self, key: RunKey):
    return train_config(
        key.env,
        key.algo,
        key.learning_rate,
        self.budget(key.env),
        self.overrides,
    )

  def settings(self, key: RunKey) -> dict[str, Any]:
    if key.algo == PPO:
      return ppo_settings(
          key.env, self.budget(key.env), self.seeds, self.ppo_overrides
      )
    return our_settings(self.config(key), len(self.seeds))

  def run(self, key: RunKey) -> dict[str, Any]:
    """The run's record: from its file if it finished, else by running it."""
    if key in self.records:  # E.g. a selection run that is also a row.
      return self.records[key]
    out = self.args.out
    record = load_finished(out, key, self.settings(key))
    if record is not None:
      print(f'{key.label()}: done before ({run_path(out, key)}), skipped')
    else:
      show = not self.args.quiet
      if key.algo == PPO:
        try:
          record = run_ppo(
              key, self.budget(key.env), self.seeds, self.ppo_overrides, show
          )
        except Exception as e:  # pylint: disable=broad-exception-caught
          # Kept as a 'not run' row (and tried again by the next call).
          reason = f'{type(e).__name__}: {e}'.splitlines()[0][:200]
          print(f'{key.label()}: not run: {reason}', file=sys.stderr)
          self.timings.append(f'{key.label()}: not run: {reason}')
          record = dict(
              env=key.env,
              algo=key.algo,
              learning_rate=None,
              status=f'not run: {reason}',
              wall_seconds=0.0,
              seeds=[],
              curves=[],
          )
          self.records[key] = record
          return record
      else:
        record = run_ours(
            key, self.config(key), len(self.seeds), self.disco_params, show
        )
      save_record(out, record)
    line = f'{key.label()}: {record["wall_seconds"]:.0f} s'
    if key.algo == PPO:
      line += f' (compiling {record["compile_seconds"]:.0f} s)'
    else:
      line += (
          f' (startup ~{record["startup_seconds"]:.0f} s,'
          f' {record["seconds_per_iteration"]:.2f} s per iteration,'
          f' {record["iterations"]} iterations)'
      )
    finals = [s['final_return'] for s in record['seeds']]
    line += f'; final return {_summary(finals)}'
    print(line)
    self.timings.append(line)
    self.records[key] = record
    return record


def main(argv: Sequence[str] | None = None) -> int:
  """Runs the benchmark; returns the process exit status.

  Returns:
    0 on success, 1 on a setup error, 130 when interrupted (the runs that
    finished are kept).
  """
  parser = _parser()
  args = parser.parse_args(argv)

  def fail(message: str) -> int:
    print(f'{_PROG}: error: {message}', file=sys.stderr)
    return 1

  results_path = args.out / RESULTS_CSV
  selection_path = args.out / SELECTION_CSV
  if args.readme_table:
    if not results_path.is_file():
      return fail(f'no {results_path}; run the benchmark first')
    try:
      rows = read_results_csv(results_path)
      selection = []
      if selection_path.is_file():
        selection = read_selection_csv(selection_path)
    except (BenchmarkError, ValueError, KeyError) as e:
      return fail(f'cannot read the results: {e}')
    if selection:
      print(selection_table(selection))
      print()
    print(markdown_table(rows, selection))
    return 0
  _check_args(parser, args)

  start = time.perf_counter()
  bench = _Benchmark(
      args=args,
      overrides=dict(args.config),
      ppo_overrides=dict(args.ppo_config),
  )
  rules = [a for a in args.algos if a in RULES]
  # Selection: needed to pick among several rates, and run anyway when the
  # selection environment is one of the benchmark's (it is its row).
  select = bool(rules) and (
      len(args.learning_rates) > 1 or args.selection_env in args.envs
  )
  try:
    plotting.require_matplotlib()
    # Fail before the first long run: environments, configs, rejax, weights.
    for env in dict.fromkeys(
        ([args.selection_env] if select else []) + list(args.envs)
    ):
      registry.make_environment(env, batch_size=1)
      for rule in rules:
        bench.config(RunKey(env, rule, args.learning_rates[0]))
    if PPO in args.algos:
      load_ppo_module()
    if args.compilation_cache is not None:
      import jax  # pylint: disable=g-import-not-at-top

      jax.config.update(
          'jax_compilation_cache_dir', str(args.compilation_cache)
      )
    if DISCO in rules:
      bench.disco_params = weights.load_disco103()
    # Runs already known: stop now if one of their files has other settings.
    known = [RunKey(e, PPO) for e in args.envs if PPO in args.algos]
    if select:
      known += [
          RunKey(args.selection_env, r, lr)
          for r in rules
          for lr in args.learning_rates
      ]
    for key in known:
      load_finished(args.out, key, bench.settings(key))
    args.out.mkdir(parents=True, exist_ok=True)

    selection: list[dict[str, Any]] = []
    chosen = {rule: args.learning_rates[0] for rule in rules}
    if select:
      finals = {}
      for rule in rules:
        finals[rule] = {}
        for lr in args.learning_rates:
          record = bench.run(RunKey(args.selection_env, rule, lr))
          finals[rule][lr] = [s['final_return'] for s in record['seeds']]
      selection = select_learning_rates(finals)
      for row in selection:
        key = RunKey(args.selection_env, row['rule'], row['learning_rate'])
        row['env'] = args.selection_env
        row['run_wall_seconds'] = round(bench.records[key]['wall_seconds'], 1)
      chosen = chosen_rates(selection)
      write_csv(selection, SELECTION_COLUMNS, selection_path)
      print()
      print(selection_table(selection))
      print()

    rows, curves, plotted = [], [], []
    for env in args.envs:
      for algo in args.algos:
        key = RunKey(env, algo, chosen.get(algo))
        record = bench.run(key)
        selected_on = (
            select and env == args.selection_env and algo in RULES
        ) and len(args.learning_rates) > 1
        if record['status'] == DONE:
          rows += result_rows(record, selected_on)
        else:
          rows += not_run_rows(key, bench.seeds, record['status'][9:])
        curves += curve_rows(record)
        plotted.append(record)
  except (ValueError, ImportError, OSError, BenchmarkError) as e:
    return fail(str(e))
  except KeyboardInterrupt:
    print(
        f'{_PROG}: interrupted; the finished runs are in {args.out / RUNS_DIR}'
        ' and a rerun of the same command skips them',
        file=sys.stderr,
    )
    return 130

  written = [
      write_csv(rows, RESULT_COLUMNS, results_path),
      write_csv(curves, CURVE_COLUMNS, args.out / CURVES_CSV),
      plot_curves(plotted, args.out / CURVES_PNG),
  ]
  if selection:
    written.insert(1, selection_path)
  print()
  if selection:
    print(selection_table(selection))
    print()
  print(markdown_table(rows, selection))
  print()
  print(
      'Run wall times (startup: environment, compiling and the first'
      ' evaluation; the wall time less the iterations at the steady rate):'
  )
  for line in bench.timings:
    print(f'  {line}')
  for path in written:
    print(f'Wrote {path}')
  print(f'Total wall time of this command: {time.perf_counter() - start:.0f} s')
  return 0


if __name__ == '__main__':
  sys.exit(main())
