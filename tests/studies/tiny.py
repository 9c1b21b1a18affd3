"""A tiny trainer run on Catch for the studies' tests (seconds)."""

from disco import train


def tiny_config(num_steps: int = 6) -> train.TrainConfig:
  """Actor-critic on Catch: 2 environments of 5 steps, checkpoints each step."""
  return train.preset(
      'colab',
      rule='actor_critic',
      env='catch',
      num_envs=2,
      rollout_len=5,
      learner_batch_size=4,
      replay_fraction=0.5,
      buffer_capacity=8,
      learning_starts=4,
      agent_dense=(16,),
      agent_lstm_size=8,
      agent_head_mlp_hiddens=(8,),
      num_steps=num_steps,
      steps_per_chunk=1,
      checkpoint_every=1,
      eval_every=3,
      eval_envs=2,
      eval_max_steps=20,
  )


def trainer_record(env, rule, seed, finals, status='done'):
  """A handwritten record of a trainer run: an evaluation every 25 steps."""
  steps = list(range(0, 25 * len(finals), 25))
  return dict(
      name=f'{env}__{rule}__s{seed}',
      status=status,
      settings=dict(
          config=dict(env=env, rule=rule, agent_learning_rate=3e-3),
          num_seeds=1,
      ),
      wall_seconds=10.0,
      pieces=[{}],
      seeds=[seed],
      logs={
          'seed': [seed] * len(finals),
          'step': steps,
          'env_steps': [290 * s for s in steps],
          'learner_steps': steps,
          'eval_return': finals,
          'logs/entropy': [1.0] * len(finals),
      },
  )
