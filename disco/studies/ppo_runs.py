"""A run of rejax's PPO as a study's record, beside the trainer's runs.

`run` trains PPO on one environment for some seeds together and returns a
record in the form `disco.studies.finals` gives a trainer run: per seed
the final return (the mean return of the last evaluation's episodes) and
the evaluation curve. On MinAtar and the other gymnax environments it is
one program of a few minutes (`disco.studies.ppo.run_ppo`), with
`eval_points` evaluations; on Craftax, two programs called in turn and
checkpointed (`disco.studies.ppo_segmented`), with 2 evaluations of 16
episodes. `run_in_pieces` keeps the record as a study's run
(`disco.studies.records`): skipped once done, resumed on Craftax.
"""

from collections.abc import Callable, Mapping, Sequence
import math
import pathlib
from typing import Any

from disco import progress
from disco.studies import pieces
from disco.studies import ppo
from disco.studies import ppo_segmented
from disco.studies import records

PPO = 'ppo'
# Evaluation points and episodes per point (rejax's default: 128 episodes).
EVAL_POINTS = 5
EVAL_EPISODES = 128
CRAFTAX_EVAL_POINTS = 2
CRAFTAX_EVAL_EPISODES = 16


def is_craftax(env: str) -> bool:
  """Whether PPO runs segmented on `env` (a Craftax environment)."""
  return env.startswith('craftax:')


def eval_points(
    iteration_steps: int, env_steps: int, preferred: int = EVAL_POINTS
) -> int:
  """Evaluation points for rejax's PPO closest to a budget of env steps.

  rejax trains the same whole number of PPO iterations between
  evaluations (`disco.studies.ppo.plan`), so the budget it reaches depends
  on the number of points. Among ceil(`preferred` / 2) .. 2 * `preferred`
  points (enough for a curve; at most one per iteration of the budget),
  this is the one whose total is nearest `env_steps`; ties go to the number
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


def settings(
    env: str,
    env_steps: int,
    seeds: Sequence[int],
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
  """What a finished PPO run must match to be skipped (no rejax needed)."""
  craftax = is_craftax(env)
  return dict(
      env_steps=int(env_steps),
      seeds=[int(s) for s in seeds],
      method='segmented' if craftax else 'run_ppo',
      num_eval_episodes=CRAFTAX_EVAL_EPISODES if craftax else EVAL_EPISODES,
      overrides=dict(overrides or {}),
  )


def run(
    env: str,
    env_steps: int,
    seeds: Sequence[int],
    overrides: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    show_progress: bool = True,
    checkpoint_dir: pathlib.Path | None = None,
    handle_interrupts: bool = False,
) -> dict[str, Any]:
  """Trains rejax's PPO on `env`; returns the run's record.

  Args:
    env: the environment.
    env_steps: environment steps per seed (whole PPO iterations nearest).
    seeds: trained together.
    overrides: PPO settings over `disco.studies.ppo.config_for(env)`.
    label: the progress bar's title (default: the environment and 'ppo').
    show_progress: a progress bar.
    checkpoint_dir: where a segmented run (Craftax) checkpoints.
    handle_interrupts: a segmented run stops cleanly on Ctrl-C or SIGTERM.

  Returns:
    env, algo ('ppo'), learning_rate (None), status, settings, the wall,
    compile and training seconds, PPO's config and its source, the
    evaluations' episode lengths, `seeds` (per seed: final_return,
    final_eval_episodes, env_steps, ...) and `curves` (per seed and
    evaluation: env_steps, value, episodes).
  """
  asked = settings(env, env_steps, seeds, overrides)
  label = label or f'{env.split(":", 1)[-1]} {PPO}'
  if asked['method'] == 'segmented':
    with progress.ProgressBar(
        ppo_segmented.num_iterations(env, env_steps, overrides),
        f'{label} (PPO iterations)',
        unit='iteration',
        enabled=show_progress,
    ) as bar:
      result = ppo_segmented.run_ppo_segmented(
          env,
          env_steps,
          seeds,
          CRAFTAX_EVAL_POINTS,
          asked['num_eval_episodes'],
          overrides,
          checkpoint_dir=checkpoint_dir,
          handle_interrupts=handle_interrupts,
          progress_fn=lambda i: bar(i, {}),
      )
  else:
    with progress.ProgressBar(
        1, f'{label} (one program)', unit='run', enabled=show_progress
    ) as bar:
      points = eval_points(ppo.iteration_steps(env, overrides), env_steps)
      result = ppo.run_ppo(
          env,
          env_steps,
          seeds,
          points,
          num_eval_episodes=asked['num_eval_episodes'],
          overrides=overrides,
      )
      bar(1, {})
  return _record(env, asked, result)


def _record(
    env: str, asked: Mapping[str, Any], result: Mapping[str, Any]
) -> dict[str, Any]:
  """The record of a PPO run from what `run_ppo` returned."""
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
      env=env,
      algo=PPO,
      learning_rate=None,
      status=records.DONE,
      settings=dict(asked),
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


def run_in_pieces(
    out: pathlib.Path,
    name: str,
    env: str,
    env_steps: int,
    seeds: Sequence[int],
    *,
    show_progress: bool = True,
    log: Callable[[str], None] = lambda text: print(text, flush=True),
) -> dict[str, Any]:
  """PPO on `env` as run `name` of the study in `out`: skipped once done.

  Checkpointed in `<out>/checkpoints/<name>/` where it runs segmented
  (Craftax), stopped cleanly by Ctrl-C or SIGTERM and resumed by the next
  call; its record goes to `<out>/runs/<name>.json`.

  Raises:
    disco.studies.records.RecordError: a finished record of other settings.
  """
  asked = settings(env, env_steps, seeds)
  record = records.load_record(out, name, asked)
  if record is not None:
    log(f'{name}: done before')
    return record
  record = run(
      env,
      env_steps,
      seeds,
      show_progress=show_progress,
      checkpoint_dir=out / pieces.CHECKPOINTS_DIR / name,
      handle_interrupts=True,
  )
  record |= dict(name=name, settings=records.jsonable(asked))
  records.write_json(records.record_path(out, name), record)
  log(f'{name}: done, {record["wall_seconds"]:.0f} s')
  return record
