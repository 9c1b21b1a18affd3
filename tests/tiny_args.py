"""Command-line flags of tiny runs, shared by the command-line tests."""

# disco-eval: two environments, learning from iteration 4 on.
EVAL = (
    '--learner-batch-size=8',
    '--replay-ratio=4',
    '--rollout-len=5',
    '--buffer-capacity=32',
    '--agent-dense=16',
    '--agent-lstm-size=8',
    '--agent-head-mlp-hiddens=8',
    '--value-fn-dense=8',
)

# disco-meta-train: one inner step, rollouts of 4 steps in 4 environments, a
# tiny agent (the settings of the meta-training notebook's test, so that
# they share compiled programs).
META_TRAIN = (
    '--num-inner-steps=1',
    '--rollout-len=4',
    '--envs-per-device=4',
    '--agent-dense=16',
    '--agent-head-mlp-hiddens=8',
    '--agent-lstm-size=8',
    '--value-fn-dense=16',
)

# disco-train: two environments, batches of 2 fresh and 2 replayed
# trajectories, learning from iteration 2 on, an evaluation every iteration.
TRAIN = (
    '--num-envs=2',
    '--rollout-len=5',
    '--learner-batch-size=4',
    '--replay-fraction=0.5',
    '--buffer-capacity=8',
    '--learning-starts=4',
    '--agent-dense=16',
    '--agent-lstm-size=8',
    '--agent-head-mlp-hiddens=8',
    '--eval-every=1',
    '--eval-envs=2',
    '--eval-max-steps=20',
    '--steps-per-chunk=1',
)
