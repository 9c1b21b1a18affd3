r"""Does a discovered rule beat Disco103 and actor-critic on held-out envs?

Trains agents with `disco.train.run_train` on environments the rule never
saw during discovery, with three rules: the discovered one (`--rule`, an
`update_rule_params.npz` from `disco-discover`), Disco103 and actor-critic;
`--seeds` seeds each (vmapped in one call), at equal environment steps. The
agents are the ones the `local` discovery preset trains (its MLP torso,
action-model LSTM, heads and step size, read from `DiscoveryConfig()`);
each learner batch holds 16 fresh trajectories of 16 steps and 16
replayed ones. The evaluation runs 16 episodes on separate environment
instances every `--num-steps / 10` iterations. Disco rules (Disco103
included) need several hundred updates of an agent's lifetime before
their targets move its policy, hence the default of 1500 iterations.

Outputs in `--out`: `heldout.csv` (one row per rule, environment, seed and
chunk), `heldout.png` (mean evaluation return over seeds against
environment steps, one panel per environment; the band spans the seeds)
and, printed, a Markdown table of the final evaluation return (mean,
standard deviation over seeds and each seed's value).

  python benchmarks/discovery_heldout.py --rule runs/discovery/update_rule_params.npz \
      --out benchmarks/results/discovery_heldout
"""

import argparse
import pathlib
import time

import numpy as np

from disco import train
from disco import weights
from disco.studies import baseline_runs
from disco.studies import plots
from disco.studies import tables

_ENVS = ('gymnax:Catch-bsuite', 'gymnax:CartPole-v1')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--rule', type=pathlib.Path, required=True)
  parser.add_argument('--envs', default=','.join(_ENVS))
  parser.add_argument('--seeds', type=int, default=3)
  parser.add_argument(
      '--num-steps', type=int, default=baseline_runs.HELDOUT_ITERATIONS
  )
  parser.add_argument('--out', type=pathlib.Path, required=True)
  args = parser.parse_args()
  args.out.mkdir(parents=True, exist_ok=True)
  rules = {
      'discovered': weights.load_update_rule_params(args.rule),
      'disco103': weights.load_disco103(),
      'actor_critic': None,
  }
  envs = args.envs.split(',')
  rows, finals = [], {}
  started = time.time()
  for env in envs:
    for rule, params in rules.items():
      t0 = time.time()
      result = train.run_train(
          baseline_runs.heldout_config(rule, env, args.num_steps),
          num_seeds=args.seeds,
          update_rule_params=params,
      )
      finals[env, rule] = []
      for seed in result.seeds:
        x, y = result.curve(seed, 'eval_return')
        finals[env, rule].append(y[-1])
        keep = result.logs['seed'] == seed
        for i in np.flatnonzero(keep):
          rows.append(dict(
              rule=rule, env=env, seed=seed,
              env_steps=int(result.logs['env_steps'][i]),
              train_return=float(result.logs['train_return'][i]),
              eval_return=float(result.logs['eval_return'][i]),
          ))  # fmt: skip
      print(
          f'{env} {rule}: final eval returns'
          f' {np.round(finals[env, rule], 3).tolist()} ({time.time() - t0:.0f}'
          ' s)',
          flush=True,
      )
  tables.write_csv(args.out / 'heldout.csv', rows)

  print(f'\nwall time {time.time() - started:.0f} s;'
        f' {args.num_steps * 256} env steps per seed\n')  # fmt: skip
  print(
      tables.markdown(
          (
              'environment',
              'rule',
              'final eval return (mean +- std)',
              'per seed',
          ),
          (
              (
                  env,
                  rule,
                  f'{np.mean(values):.3f} +- {np.std(values):.3f}',
                  ' / '.join(f'{v:.2f}' for v in values),
              )
              for (env, rule), values in finals.items()
          ),
      )
  )

  fig, axes = plots.figure(1, len(envs), (5 * len(envs), 3.6))
  for ax, env in zip(axes[0], envs):
    for rule in rules:
      by_seed = {}
      for row in rows:
        if row['env'] == env and row['rule'] == rule:
          if not np.isnan(row['eval_return']):
            by_seed.setdefault(row['seed'], []).append(
                (row['env_steps'], row['eval_return'])
            )
      curves = np.asarray([sorted(v) for v in by_seed.values()])
      x, y = curves[0, :, 0], curves[:, :, 1]
      ax.plot(x, y.mean(0), label=rule)
      ax.fill_between(x, y.min(0), y.max(0), alpha=0.2)
    ax.set_title(env)
    ax.set_xlabel('environment steps')
    ax.set_ylabel('evaluation return')
  axes[0, 0].legend()
  fig.tight_layout()
  plots.save(fig, args.out / 'heldout.png', dpi=100)


if __name__ == '__main__':
  main()
