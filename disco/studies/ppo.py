"""PPO from the `rejax` package, as a baseline at equal environment steps.

`run_ppo` trains rejax's own PPO (`rejax.get_algo('ppo')`) on one
environment for several seeds at once: rejax's `train` is `vmap`ped over the
seeds' keys and compiled as one program, as rejax documents. The learning
curve comes from rejax's evaluation callback: every `eval_freq` environment
steps rejax runs `rejax.evaluate.evaluate` on fresh episodes of the
training environment (the policy samples its actions, as in training); we
record the mean return and length of those episodes and the train state's
`global_step`.

Hyperparameters (`config_for`):

* Breakout-MinAtar: rejax's tuned PPO config for that environment, the `ppo`
  section of `benchmark/breakout_1m.yaml` in github.com/keraJLi/rejax (the
  only MinAtar config rejax ships; the PyPI wheel ships no configs).
* SpaceInvaders-MinAtar, Asterix-MinAtar, Freeway-MinAtar: rejax has no
  config; they use the Breakout-MinAtar one (same observation format).
* DeepSea-bsuite, Craftax-Classic-Symbolic-v1 and the rest: rejax's PPO
  defaults (the class fields of `rejax.PPO`).

Changed from those, for our budget: only `total_timesteps` and `eval_freq`
(`plan`). The number of evaluation episodes per point is rejax's (128)
unless `num_eval_episodes` says otherwise.

Environments: gymnax ids ('Breakout-MinAtar', optionally 'gymnax:...') and
Craftax, by rejax's own id 'craftax/Craftax-Classic-Symbolic-v1' (or
'craftax:Craftax-Classic-...'). rejax makes every environment itself
(`rejax.compat.create`). rejax 0.1.3 is written for gymnax < 1.0, whose
`step` returned five values; disco needs gymnax >= 1.0 (six), and craftax
>= 1.6 has its own action space class. `_RejaxEnv` adapts both, in our
code: no file of rejax is changed.

rejax is optional: ``pip install "disco-jax[ppo]"`` (and craftax for
Craftax); it is imported when a PPO is made.
"""

from collections.abc import Mapping, Sequence
import time
from types import ModuleType
from typing import Any

import numpy as np

# The `ppo` section of benchmark/breakout_1m.yaml in keraJLi/rejax (commit
# beb964073be107d10e270b6c766c44e8cc1bbe32), less `env`, `total_timesteps`
# (1_000_000) and `eval_freq` (50_000), which `plan` sets.
REJAX_BREAKOUT_MINATAR = {
    'agent_kwargs': {'activation': 'tanh'},
    'num_envs': 32,
    'num_steps': 32,
    'num_epochs': 4,
    'num_minibatches': 4,
    'learning_rate': 0.00025674088686342003,
    'max_grad_norm': 1,
    'gamma': 0.995,
    'gae_lambda': 0.95,
    'clip_eps': 0.2,
    'ent_coef': 0.01,
    'vf_coef': 0.5,
}
_SOURCE_BREAKOUT = 'rejax benchmark/breakout_1m.yaml (ppo), tuned for this env'
_SOURCE_BORROWED = (
    'rejax benchmark/breakout_1m.yaml (ppo), tuned for Breakout-MinAtar;'
    ' rejax has no config for this env'
)
_SOURCE_DEFAULTS = 'rejax.PPO defaults; rejax has no config for this env'

# Per rejax environment id: (settings over rejax.PPO's defaults, their source).
CONFIGS: Mapping[str, tuple[Mapping[str, Any], str]] = {
    'Breakout-MinAtar': (REJAX_BREAKOUT_MINATAR, _SOURCE_BREAKOUT),
    'SpaceInvaders-MinAtar': (REJAX_BREAKOUT_MINATAR, _SOURCE_BORROWED),
    'Asterix-MinAtar': (REJAX_BREAKOUT_MINATAR, _SOURCE_BORROWED),
    'Freeway-MinAtar': (REJAX_BREAKOUT_MINATAR, _SOURCE_BORROWED),
    'DeepSea-bsuite': ({}, _SOURCE_DEFAULTS),
    'craftax/Craftax-Classic-Symbolic-v1': ({}, _SOURCE_DEFAULTS),
}

# XLA options that compile faster (and run slower).
FAST_COMPILE = {
    'xla_backend_optimization_level': 0,
    'xla_llvm_disable_expensive_passes': True,
}

# rejax's default evaluation callback runs this many episodes per point.
REJAX_EVAL_EPISODES = 128
INSTALL = 'pip install "disco-jax[ppo]"'


def require_rejax() -> ModuleType:
  """The `rejax` module.

  Raises:
    ModuleNotFoundError: naming the missing package (rejax, or one it
      needs) and the extra to install.
  """
  try:
    import rejax  # pylint: disable=g-import-not-at-top
  except ModuleNotFoundError as e:
    raise ModuleNotFoundError(
        f"rejax's PPO needs the package {e.name!r}, which is not installed"
        f' ({INSTALL}, or pip install rejax)',
        name=e.name,
    ) from None
  return rejax


def rejax_env_id(env_id: str) -> str:
  """rejax's id of `env_id` ('gymnax:X' -> 'X', 'craftax:X' -> 'craftax/X')."""
  prefix, sep, name = env_id.partition(':')
  if not sep:
    return env_id
  if prefix == 'gymnax':
    return name
  return f'{prefix}/{name}'


def config_for(env_id: str) -> tuple[dict[str, Any], str]:
  """rejax PPO settings for `env_id`, without budget, and where they come from.

  Environments not in `CONFIGS` get rejax's PPO defaults.
  """
  settings, source = CONFIGS.get(rejax_env_id(env_id), ({}, _SOURCE_DEFAULTS))
  return _copy(settings), source


def plan(
    iteration_steps: int, num_env_steps: int, num_eval_points: int
) -> tuple[int, int]:
  """`(eval_freq, total_timesteps)` for a budget, in whole PPO iterations.

  rejax trains `ceil(eval_freq / iteration_steps)` iterations between two
  evaluations and evaluates `ceil(total_timesteps / eval_freq)` times, so
  both are set to multiples of an iteration (`num_envs * num_steps` env
  steps): `num_eval_points` evaluations, the last at the end of training,
  after about `num_env_steps` steps in all (the nearest multiple of
  `num_eval_points` iterations; at least one iteration per point).
  """
  if num_env_steps <= 0 or num_eval_points <= 0:
    raise ValueError(
        f'num_env_steps ({num_env_steps}) and num_eval_points'
        f' ({num_eval_points}) must be positive'
    )
  per_point = num_env_steps / (num_eval_points * iteration_steps)
  eval_freq = max(1, round(per_point)) * iteration_steps
  return eval_freq, eval_freq * num_eval_points


def iteration_steps(
    env_id: str, overrides: Mapping[str, Any] | None = None
) -> int:
  """Env steps of one PPO iteration (num_envs * num_steps) on `env_id`."""
  settings, _ = config_for(env_id)
  settings.update(overrides or {})
  fields = require_rejax().get_algo('ppo').__dataclass_fields__
  return int(
      settings.get('num_envs', fields['num_envs'].default)
      * settings.get('num_steps', fields['num_steps'].default)
  )


class _RejaxEnv:
  """An environment as rejax 0.1.3 expects it: gymnax < 1.0's interface.

  * `step` returns `(obs, state, reward, done, info)`: gymnax >= 1.0 (which
    disco needs) returns `(obs, state, reward, terminated, truncated, info)`,
    and rejax unpacks five values. `done` is `terminated or truncated`, as
    gymnax < 1.0's `done` was (rejax does not bootstrap at time limits
    either way). Five-value steps (Craftax) pass through unchanged.
  * A discrete action space that is not gymnax's `Discrete` (craftax >= 1.6
    has its own) is presented as one: rejax tells discrete from continuous
    by `isinstance(space, gymnax...Discrete)`, and otherwise builds a
    Gaussian policy.
  * `default_params` are the parameters rejax made with the environment;
    `PPO.create` takes them from here, since it `deepcopy`s the parameters
    it is given, which fails with a RecursionError for its own Craftax
    parameters. Environments are not copied at all (`__deepcopy__`).

  Everything else is the wrapped environment's. Instances hash by identity,
  as rejax needs of its (static) environment.
  """

  def __init__(self, env, params):
    self._env = env
    self._params = params

  def __getattr__(self, name):
    if name in ('_env', '_params'):  # Not set yet.
      raise AttributeError(name)
    return getattr(self._env, name)

  def __deepcopy__(self, memo):
    return self

  @property
  def default_params(self):
    return self._params

  def step(self, key, state, action, params=None):
    import jax  # pylint: disable=g-import-not-at-top

    result = self._env.step(key, state, action, params)
    if len(result) == 5:
      return result
    obs, state, reward, terminated, truncated, info = result
    return obs, state, reward, jax.numpy.logical_or(terminated, truncated), info

  def reset(self, key, params=None):
    return self._env.reset(key, params)

  def action_space(self, params=None):
    # pylint: disable-next=g-import-not-at-top
    from gymnax.environments import spaces

    space = self._env.action_space(params)
    if isinstance(space, spaces.Discrete):
      return space
    if type(space).__name__ == 'Discrete':
      return spaces.Discrete(int(space.n))
    return space


def make_env(env_id: str) -> _RejaxEnv:
  """rejax's environment and its parameters, wrapped (see `_RejaxEnv`)."""
  require_rejax()
  from rejax import compat  # pylint: disable=g-import-not-at-top

  return _RejaxEnv(*compat.create(rejax_env_id(env_id)))


def make_algo(
    env_id: str,
    num_env_steps: int,
    num_eval_points: int,
    num_eval_episodes: int = REJAX_EVAL_EPISODES,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[Any, dict[str, Any]]:
  """rejax's PPO for `env_id` at our budget, and its settings.

  Args:
    env_id: the environment (see the module docstring).
    num_env_steps: environment steps per seed (rounded as `plan` says).
    num_eval_points: evaluations, evenly spaced, the last at the end.
    num_eval_episodes: episodes per evaluation.
    overrides: settings over `config_for(env_id)` (e.g. for tests).

  Returns:
    The `rejax.PPO` instance and its settings as passed to `PPO.create`
    (with `env` as rejax's id).
  """
  settings, _ = config_for(env_id)
  settings.update(_copy(overrides or {}))
  ppo_cls = require_rejax().get_algo('ppo')
  fields = ppo_cls.__dataclass_fields__
  steps = settings.get('num_envs', fields['num_envs'].default)
  steps *= settings.get('num_steps', fields['num_steps'].default)
  eval_freq, total_timesteps = plan(steps, num_env_steps, num_eval_points)
  settings.update(
      eval_freq=eval_freq,
      total_timesteps=total_timesteps,
      skip_initial_evaluation=True,
  )
  algo = ppo_cls.create(env=make_env(env_id), **_copy(settings))
  algo = algo.replace(eval_callback=_curve_callback(num_eval_episodes))
  return algo, dict(settings, env=rejax_env_id(env_id))


def evaluate(
    algo: Any, train_state: Any, key: Any, num_episodes: int
) -> tuple[Any, Any, Any]:
  """rejax's evaluation of `train_state`'s policy on fresh episodes.

  `rejax.evaluate.evaluate` of `algo.make_act(train_state)` on
  `num_episodes` episodes of at most `max_steps_in_episode` steps (actions
  sampled, as in training).

  Returns:
    `(global_step, mean episode length, mean return)`.
  """
  # pylint: disable-next=g-import-not-at-top
  from rejax import evaluate as rejax_evaluate

  lengths, returns = rejax_evaluate.evaluate(
      algo.make_act(train_state),
      key,
      algo.env,
      algo.env_params,
      num_episodes,
      algo.env_params.max_steps_in_episode,
  )
  return train_state.global_step, lengths.mean(), returns.mean()


def _curve_callback(num_episodes: int):
  """rejax's default evaluation callback, reduced to one curve point."""

  def callback(algo, ts, rng):
    return evaluate(algo, ts, rng, num_episodes)

  return callback


def run_ppo(
    env_id: str,
    num_env_steps: int,
    seeds: Sequence[int],
    num_eval_points: int,
    num_eval_episodes: int = REJAX_EVAL_EPISODES,
    overrides: Mapping[str, Any] | None = None,
    compiler_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
  """Trains rejax's PPO on `env_id`, all `seeds` in one `vmap`ped program.

  Args:
    env_id: the environment (see the module docstring).
    num_env_steps: environment steps per seed (rounded to whole iterations,
      see `plan`; `env_steps` in the result has the real counts).
    seeds: one run per seed, trained together (`jax.random.PRNGKey(seed)`).
    num_eval_points: evaluations, evenly spaced, the last after training.
    num_eval_episodes: episodes per evaluation (rejax's default: 128).
    overrides: PPO settings over `config_for(env_id)`.
    compiler_options: XLA options for compiling the training program (e.g.
      `FAST_COMPILE`).

  Returns:
    A dict of `env_id` (as given), `seeds` (as a list), `env_steps` (per
    seed, the train state's `global_step` at each evaluation), `returns`
    and `episode_lengths` (per seed, the evaluation episodes' mean return
    and length at each evaluation), `wall_time_s` (the whole run:
    environment, compilation and training), `compile_time_s` (tracing and
    compiling the training program), `train_time_s` (running it), `config`
    (the settings passed to `rejax.PPO.create`, JSON-friendly) and
    `config_source` (where the settings other than the budget come from).
  """
  import jax  # pylint: disable=g-import-not-at-top

  if not seeds:
    raise ValueError('seeds is empty')
  start = time.perf_counter()
  algo, settings = make_algo(
      env_id, num_env_steps, num_eval_points, num_eval_episodes, overrides
  )
  keys = jax.numpy.stack([jax.random.PRNGKey(s) for s in seeds])
  train = jax.jit(jax.vmap(algo.train))
  compile_start = time.perf_counter()
  compiled = train.lower(keys).compile(compiler_options=compiler_options)
  train_start = time.perf_counter()
  _, (steps, lengths, returns) = compiled(keys)
  steps, lengths, returns = jax.device_get((steps, lengths, returns))
  end = time.perf_counter()
  return {
      'env_id': env_id,
      'seeds': [int(s) for s in seeds],
      'env_steps': np.asarray(steps, dtype=np.int64).tolist(),
      'returns': np.asarray(returns, dtype=np.float64).tolist(),
      'episode_lengths': np.asarray(lengths, dtype=np.float64).tolist(),
      'wall_time_s': end - start,
      'compile_time_s': train_start - compile_start,
      'train_time_s': end - train_start,
      'config': dict(settings, num_eval_episodes=num_eval_episodes),
      'config_source': config_for(env_id)[1],
  }


def _copy(settings: Mapping[str, Any]) -> dict[str, Any]:
  """A copy of `settings` whose nested dicts are copies too."""
  return {
      k: _copy(v) if isinstance(v, Mapping) else v for k, v in settings.items()
  }
