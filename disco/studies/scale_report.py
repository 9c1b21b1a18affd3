"""The report of benchmarks/reward_scale.py: returns and diagnostics by scale.

Per run and seed (runs.csv): the last evaluation's return; over the last
10% of the log rows, the training return, the entropies of the policy, y
and z, of the rule's targets, and the scale of what the meta-network read
(`disco.rule_diagnostics`); and the learner updates the policy spent near
uniform (`near_uniform_updates`). Per environment, rule and scale
(summary.csv): the final return's IQM [95% bootstrap interval] over seeds
and the seeds' means of the rest. Scale 1 comes from the recorded study
whose settings the scaled runs share (its results.csv and curves.csv: the
final return and the policy's entropy; the rest was not logged then).
"""

from collections.abc import Mapping, Sequence
import math
import pathlib
from typing import Any

import numpy as np

from disco import metrics
from disco import utils
from disco.studies import plots
from disco.studies import records
from disco.studies import report as report_lib
from disco.studies import tables

# A policy is near uniform while its entropy is at least this share of
# log(actions) (Asterix: 0.9 x 1.609 = 1.45 nats).
NEAR_UNIFORM = 0.9
# Means over the last 10% of the log rows (`metrics.FINAL_FRACTION`).
FINAL_LOGS = (
    'entropy',
    'y_entropy',
    'z_entropy',
    'pi_hat_entropy',
    'y_hat_entropy',
    'z_hat_entropy',
    'pi_loss',
    'meta_input/reward',
    'meta_input/adv',
    'meta_input/qv_adv',
    'meta_input/q',
)
RUN_COLUMNS = (
    'env',
    'algo',
    'reward_scale',
    'seed',
    'status',
    'final_return',
    'train_return',
    'learner_updates',
    'num_actions',
    'near_uniform_updates',
    *FINAL_LOGS,
)
SUMMARY_COLUMNS = (
    'env',
    'algo',
    'reward_scale',
    'seeds',
    'iqm',
    'ci_low',
    'ci_high',
    'per_seed',
    'train_return',
    'near_uniform_updates',
    *FINAL_LOGS,
)


def near_uniform_updates(
    updates: np.ndarray, entropy: np.ndarray, num_actions: int
) -> float:
  """The learner updates the policy spent near uniform (NaN without a row).

  Each log row stands for the updates since the row before it; they count
  where the policy's entropy was at least `NEAR_UNIFORM` x log(actions).
  """
  finite = np.isfinite(entropy)
  updates, entropy = updates[finite], entropy[finite]
  if not updates.size:
    return math.nan
  spans = np.diff(updates, prepend=0.0)
  near = entropy >= NEAR_UNIFORM * math.log(num_actions)
  return float(np.sum(spans[near]))


def final_diagnostics(
    env_steps: np.ndarray, logs: Mapping[str, np.ndarray]
) -> dict[str, float]:
  """'<name>_last10': each of `FINAL_LOGS` over the last 10% of `env_steps`.

  `logs` holds a run's columns by their log.csv names ('logs/entropy', ...),
  each [rows] like `env_steps`; one not logged is NaN.
  """
  out = {}
  for name in FINAL_LOGS:
    values = logs.get(f'logs/{name}')
    mean = math.nan if values is None else metrics.final_mean(env_steps, values)
    out[f'{name}_last10'] = round(mean, 3)
  return out


def _final_mean(values: np.ndarray) -> float:
  finite = values[np.isfinite(values)]
  if not finite.size:
    return math.nan
  return float(np.mean(finite[-metrics.final_window(finite.size) :]))


def run_rows(
    runs: Sequence[Mapping[str, Any]], num_actions: Mapping[str, int]
) -> list[dict[str, Any]]:
  """One row per scaled run and seed (`RUN_COLUMNS`, plus its curves)."""
  rows = []
  for record in runs:
    config = record['settings']['config']
    env = config['env']
    for seed in record['seeds']:
      col = records.seed_columns(record, seed)
      ev = np.isfinite(col['eval_return'])
      if not ev.any():
        continue
      logs = {name: col.get(f'logs/{name}') for name in FINAL_LOGS}
      nan = np.full(ev.shape, np.nan)
      logs = {k: nan if v is None else v for k, v in logs.items()}
      episodes = np.nan_to_num(col['train_episodes'])
      train, _ = metrics.final_average_return(
          np.nan_to_num(col['train_return']) * episodes, episodes
      )
      rows.append(
          dict(
              env=env,
              algo=config['rule'],
              reward_scale=float(config.get('reward_scale', 1.0)),
              seed=seed,
              status=record['status'],
              final_return=float(col['eval_return'][ev][-1]),
              train_return=train,
              learner_updates=int(col['learner_steps'][ev][-1]),
              num_actions=num_actions[env],
              near_uniform_updates=near_uniform_updates(
                  col['learner_steps'], logs['entropy'], num_actions[env]
              ),
              **{k: _final_mean(v) for k, v in logs.items()},
              eval_curve=(col['learner_steps'][ev], col['eval_return'][ev]),
              entropy_curve=(col['learner_steps'], logs['entropy']),
              adv_curve=(col['learner_steps'], logs['meta_input/adv']),
          )
      )
  return rows


def unscaled_rows(
    study: pathlib.Path,
    envs: Sequence[str],
    algos: Sequence[str],
    num_actions: Mapping[str, int],
) -> list[dict[str, Any]]:
  """Scale 1's rows from a recorded study's results.csv and curves.csv."""
  if not (study / 'results.csv').exists():
    return []
  curves = tables.read_csv(
      study / 'curves.csv',
      dict(
          env=str,
          algo=str,
          seed=int,
          kind=str,
          learner_updates=tables.float_or_nan,
          value=tables.float_or_nan,
      ),
  )
  results = tables.read_csv(
      study / 'results.csv',
      dict(
          env=str,
          algo=str,
          status=str,
          seed=int,
          final_return=float,
          learner_updates=tables.int_or_zero,
      ),
  )
  rows = []
  for r in results:
    env, algo, seed = r['env'], r['algo'], r['seed']
    if env not in envs or algo not in algos:
      continue
    mine = [
        c
        for c in curves
        if (c['env'], c['algo'], c['seed']) == (env, algo, seed)
    ]

    def curve(kind: str, mine=mine) -> tuple[np.ndarray, np.ndarray]:
      points = [c for c in mine if c['kind'] == kind]
      return (
          np.array([c['learner_updates'] for c in points]),
          np.array([c['value'] for c in points]),
      )

    updates, entropy = curve('entropy')
    nan = {name: math.nan for name in FINAL_LOGS}
    rows.append(
        nan
        | dict(
            env=env,
            algo=algo,
            reward_scale=1.0,
            seed=seed,
            status=r['status'],
            final_return=r['final_return'],
            train_return=math.nan,
            learner_updates=r['learner_updates'],
            num_actions=num_actions[env],
            near_uniform_updates=near_uniform_updates(
                updates, entropy, num_actions[env]
            ),
            entropy=_final_mean(entropy),
            eval_curve=curve('eval'),
            entropy_curve=(updates, entropy),
            adv_curve=(updates, np.full(updates.shape, np.nan)),
        )
    )
  return rows


def summary_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """Per environment, rule and scale: the seeds' IQM and means."""
  groups: dict[tuple[str, str, float], list[Mapping[str, Any]]] = {}
  for r in rows:
    groups.setdefault((r['env'], r['algo'], r['reward_scale']), []).append(r)
  summary = []
  for (env, algo, scale), group in sorted(groups.items()):
    finals = np.array([r['final_return'] for r in group])
    means = {}
    for name in ('train_return', 'near_uniform_updates', *FINAL_LOGS):
      values = np.array([r[name] for r in group], np.float64)
      finite = values[np.isfinite(values)]
      means[name] = float(np.mean(finite)) if finite.size else math.nan
    summary.append(
        dict(
            env=env,
            algo=algo,
            reward_scale=scale,
            seeds=len(group),
            **report_lib.iqm_interval(finals),
            per_seed=report_lib.seed_values(finals),
            **means,
        )
    )
  return summary


def plot(rows: Sequence[Mapping[str, Any]], path: pathlib.Path) -> None:
  """Per environment, by scale: evaluation return, entropy / log(actions),
  and the advantages the meta-network read (`meta_input/adv`).
  """
  envs = list(dict.fromkeys(r['env'] for r in rows))
  scales = sorted({r['reward_scale'] for r in rows})
  fig, axes = plots.figure(3, len(envs), (4.2 * len(envs), 10))
  for j, env in enumerate(envs):
    top, middle, bottom = axes[:, j]
    for r in rows:
      if r['env'] != env:
        continue
      style = dict(
          color=f'C{scales.index(r["reward_scale"])}',
          ls='-' if r['algo'] == 'disco' else ':',
          lw=1,
          alpha=0.8,
          label=f'{r["algo"]} x{r["reward_scale"]:g} s{r["seed"]}',
      )
      top.plot(*r['eval_curve'], **style)
      updates, entropy = r['entropy_curve']
      middle.plot(updates, entropy / math.log(r['num_actions']), **style)
      bottom.plot(*r['adv_curve'], **style)
    top.set(title=tables.env_label(env), xlabel='learner updates')
    middle.set(xlabel='learner updates', ylim=(0, 1.05))
    middle.axhline(NEAR_UNIFORM, color='grey', lw=0.5)
    bottom.set(xlabel='learner updates', yscale='log')
    for ax in (top, middle, bottom):
      ax.grid(alpha=0.3)
    top.legend(fontsize=6)
  axes[0, 0].set_ylabel('evaluation return')
  axes[1, 0].set_ylabel('policy entropy / log(actions)')
  axes[2, 0].set_ylabel('meta_input/adv (not logged at x1 before)')
  fig.suptitle('Disco103 by reward scale (solid; actor-critic dotted)')
  fig.tight_layout()
  plots.save(fig, path)


def markdown(summary: Sequence[Mapping[str, Any]]) -> str:
  """The summary as the results page shows it."""

  def number(value: float, digits: int = 2) -> str:
    return '' if math.isnan(value) else f'{value:.{digits}f}'

  header = (
      'game', 'rule', 'scale', 'seeds', 'final return', 'training return',
      'entropy', 'y', 'z', 'updates near uniform', 'meta_input/reward',
      'meta_input/adv',
  )  # fmt: skip
  return tables.markdown(
      header,
      (
          (
              tables.env_label(s['env']),
              s['algo'],
              f'{s["reward_scale"]:g}',
              s['seeds'],
              f'{s["iqm"]:.2f} [{s["ci_low"]:.2f}, {s["ci_high"]:.2f}]',
              number(s['train_return']),
              number(s['entropy']),
              number(s['y_entropy']),
              number(s['z_entropy']),
              number(s['near_uniform_updates'], 0),
              number(s['meta_input/reward'], 3),
              number(s['meta_input/adv'], 3),
          )
          for s in summary
      ),
  )


def action_counts(envs: Sequence[str]) -> dict[str, int]:
  """Each environment's number of actions, from its spec."""
  # pylint: disable-next=g-import-not-at-top
  from disco.environments import registry

  return {
      env: utils.get_num_actions_from_spec(
          registry.make_environment(env, batch_size=1).single_action_spec()
      )
      for env in envs
  }


def report(
    out: pathlib.Path, unscaled: pathlib.Path, include_partial: bool = False
) -> None:
  """runs.csv, summary.csv and curves.png in `out`, from its records."""
  scaled = records.load_records(out, include_partial)
  if not scaled:
    print(f'no finished runs in {out}')
    return
  envs = sorted({r['settings']['config']['env'] for r in scaled})
  algos = sorted({r['settings']['config']['rule'] for r in scaled})
  num_actions = action_counts(envs)
  rows = run_rows(scaled, num_actions)
  # A seed run again at scale 1 here (with the diagnostics) wins over its
  # recorded run.
  ran = {(r['env'], r['algo'], r['reward_scale'], r['seed']) for r in rows}
  rows = [
      r
      for r in unscaled_rows(unscaled, envs, algos, num_actions)
      if (r['env'], r['algo'], 1.0, r['seed']) not in ran
  ] + rows
  tables.write_csv(out / 'runs.csv', rows, RUN_COLUMNS, digits=4)
  summary = summary_rows(rows)
  tables.write_csv(out / 'summary.csv', summary, SUMMARY_COLUMNS, digits=4)
  plot(rows, out / 'curves.png')
  print(markdown(summary))
  print(f'wrote runs.csv, summary.csv and curves.png in {out}')
