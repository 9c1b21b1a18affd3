"""The settings of the recorded Disco103-against-baselines runs.

benchmarks/disco103_vs_baselines.py ran them, and the studies that change
one thing of them (benchmarks/reward_scale.py) build theirs here, so that
an unchanged setting is the recorded one: the `paper` preset's batches, the
environment family's agent, a step size chosen per rule on
Breakout-MinAtar, 32 evaluation episodes every 250 iterations, time limits
as terminations; 5,000 learner updates on MinAtar, 1M steps on Craftax.
The held-out runs of benchmarks/discovery_heldout.py (Catch and CartPole
from bsuite and gymnax) have theirs in `heldout_config`.
"""

from typing import Any

from disco.studies import runs as runs_lib

DISCO = 'disco'
# Step sizes chosen on Breakout-MinAtar by benchmarks/breakout_diagnosis.py.
DISCO_LR = 5e-4
AC_LR = 3e-3
UPDATES = 5000
CRAFTAX_ENV_STEPS = 1_000_000
EVAL_ENVS = 32
EVAL_EVERY = 250
STEPS_PER_CHUNK = 25
CHECKPOINT_EVERY = 250
# benchmarks/discovery_heldout.py's budget: 1,500 iterations of 16 x 16
# steps (384,000 environment steps).
HELDOUT_ITERATIONS = 1500


def agent_for(env: str) -> str:
  """The agent of `env`'s family (`disco.train.AGENTS`)."""
  return 'craftax' if env.startswith('craftax:') else 'minatar'


def paper_batches_config(
    env: str,
    rule: str,
    seed: int,
    *,
    agent: str | None = None,
    disco_lr: float = DISCO_LR,
    ac_lr: float = AC_LR,
    updates: int = UPDATES,
    env_steps: int | None = None,
) -> Any:
  """The `paper` preset for one seed of `rule` on `env`, as recorded.

  Args:
    env: the environment.
    rule: 'disco' (at `disco_lr`) or a baseline (at `ac_lr`).
    seed: the seed.
    agent: the agent's sizes (None: the family's, `agent_for`).
    disco_lr: Disco103's step size.
    ac_lr: the baselines' step size.
    updates: learner updates after the act-only warm-up (MinAtar).
    env_steps: environment steps instead (None: Craftax's 1M, else
      `updates`).

  Returns:
    The run's `disco.train.TrainConfig`.
  """
  from disco import train  # pylint: disable=g-import-not-at-top

  config = train.preset(
      'paper',
      agent=agent or agent_for(env),
      env=env,
      rule=rule,
      agent_learning_rate=disco_lr if rule == DISCO else ac_lr,
      seed=seed,
      eval_envs=EVAL_ENVS,
      eval_max_steps=runs_lib.eval_max_steps(env),
      eval_every=EVAL_EVERY,
      steps_per_chunk=STEPS_PER_CHUNK,
      checkpoint_every=CHECKPOINT_EVERY,
      # Every recorded run treated time limits as terminations (the
      # reference's behaviour, and the trainer's before `truncation`).
      truncation='terminate',
  )
  if env.startswith('craftax:') or env_steps is not None:
    steps = env_steps or CRAFTAX_ENV_STEPS
    return config.replace(num_steps=config.num_steps_for(steps))
  return config.replace(num_steps=config.warmup_steps + updates)


def heldout_config(
    rule: str, env: str, num_steps: int = HELDOUT_ITERATIONS
) -> Any:
  """A held-out run: the `local` discovery preset's agent, small batches.

  16 environments of 16-step rollouts, learner batches of 16 fresh and 16
  replayed trajectories, 16 evaluation episodes every `num_steps / 10`
  iterations, no checkpoints. `rule`: 'actor_critic', else Disco's
  (Disco103 or a discovered rule, given to `run_train`).
  """
  # pylint: disable=g-import-not-at-top
  from disco import train
  from disco.discovery import config as discovery_config
  # pylint: enable=g-import-not-at-top

  agents = discovery_config.DiscoveryConfig()
  return train.TrainConfig(
      rule='disco' if rule != 'actor_critic' else 'actor_critic',
      env=env,
      num_steps=num_steps,
      num_envs=16,
      rollout_len=16,
      learner_batch_size=32,
      replay_fraction=0.5,
      buffer_capacity=256,
      learning_starts=32,
      agent_dense=agents.agent_dense,
      agent_lstm_size=agents.agent_lstm_size,
      agent_head_mlp_hiddens=agents.agent_head_mlp_hiddens,
      agent_learning_rate=agents.agent_learning_rate,
      eval_every=max(1, num_steps // 10),
      eval_envs=16,
      eval_max_steps=500,
      steps_per_chunk=max(1, num_steps // 10),
      checkpoint_every=0,
  )
