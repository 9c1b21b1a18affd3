"""The figures of a study, as PNG files.

matplotlib is optional (the `colab` and `test` extras) and imported when a
figure is made; without it, `figure` raises an ImportError naming the extra
(`disco.plotting.require_matplotlib`). Figures are drawn without pyplot, so
a process that reports many times keeps no figure open.
"""

from collections.abc import Sequence
import pathlib
from typing import Any

import numpy as np

from disco import metrics
from disco import plotting

# Seeds of one algorithm share its colour and differ in line style.
SEED_LINESTYLES = ('-', '--', ':', '-.')
ALGOS = ('disco', 'actor_critic', 'ppo')


def figure(
    rows: int, columns: int, size: tuple[float, float]
) -> tuple[Any, np.ndarray]:
  """A new figure of `rows` x `columns` panels and its axes [rows, columns]."""
  plotting.require_matplotlib()
  # pylint: disable=g-import-not-at-top
  from matplotlib import figure as mpl_figure
  from matplotlib.backends import backend_agg
  # pylint: enable=g-import-not-at-top

  fig = mpl_figure.Figure(figsize=size)
  backend_agg.FigureCanvasAgg(fig)
  return fig, fig.subplots(rows, columns, squeeze=False)


def colors(name: str) -> Sequence[Any]:
  """The colours of matplotlib's qualitative colour map `name` ('tab20')."""
  plotting.require_matplotlib()
  import matplotlib  # pylint: disable=g-import-not-at-top

  return matplotlib.colormaps[name].colors


def save(fig: Any, path: pathlib.Path, dpi: int = 110) -> pathlib.Path:
  """Writes `fig` to `path` as PNG; returns `path`."""
  fig.savefig(path, dpi=dpi)
  return path


def seed_curves(
    rows: Sequence[dict[str, Any]],
    path: pathlib.Path,
    algos: Sequence[str] = ALGOS,
) -> Any:
  """Every seed's curves, one column of panels per environment.

  Top: evaluation return against env steps; middle: against learner
  updates; bottom: the policy's entropy against learner updates (the last
  two for the trainer's runs only). One colour per algorithm, one line
  style per seed number.

  Args:
    rows: `disco.studies.report.per_seed_rows` rows.
    path: the PNG file.
    algos: the algorithms, in the order of their colours.

  Returns:
    The figure.
  """
  envs = list(dict.fromkeys(r['env'] for r in rows))
  ids = [env.split(':', 1)[-1] for env in envs]
  # An id two packages share (gymnax's and Gymnasium's CartPole-v1) keeps
  # its package in the title.
  titles = [env if ids.count(i) > 1 else i for env, i in zip(envs, ids)]
  fig, axes = figure(3, len(envs), (4.2 * len(envs), 10))
  for j, env in enumerate(envs):
    top, mid, bottom = axes[:, j]
    for r in rows:
      if r['env'] != env:
        continue
      style = dict(
          color=f'C{algos.index(r["algo"])}',
          ls=SEED_LINESTYLES[r['seed'] % len(SEED_LINESTYLES)],
          alpha=0.8,
          lw=1,
          label=f'{r["algo"]} s{r["seed"]}',
      )
      steps, updates, returns = r['eval_curve']
      top.plot(steps, returns, **style)
      if updates is not None:
        mid.plot(updates, returns, **style)
        bottom.plot(*r['entropy_curve'], **style)
    top.set(title=titles[j], xlabel='environment steps per seed')
    mid.set(xlabel='learner updates')
    bottom.set(xlabel='learner updates')
    for ax in (top, mid, bottom):
      ax.grid(alpha=0.3)
    top.legend(fontsize=6)
  axes[0, 0].set_ylabel('evaluation return')
  axes[1, 0].set_ylabel('evaluation return (ours)')
  axes[2, 0].set_ylabel('policy entropy, nats (ours)')
  present = [a for a in algos if any(r['algo'] == a for r in rows)]
  fig.suptitle(f'{", ".join(present)}: every seed', fontsize=9)
  fig.tight_layout()
  save(fig, path, dpi=100)
  return fig


def band_curves(
    records: Sequence[dict[str, Any]],
    path: pathlib.Path,
    algos: Sequence[str] = ALGOS,
) -> pathlib.Path:
  """One panel per environment: per algorithm the seeds' evaluation returns.

  Per algorithm, the mean over seeds of the evaluation returns at each
  evaluation point (seeds without a finished episode there left out),
  shaded between the seeds' min and max, against env steps per seed.

  Args:
    records: finished records of `disco.studies.finals.train` or
      `disco.studies.ppo_runs.run`, with `env`, `algo` and `learning_rate`.
    path: the PNG file.
    algos: the algorithms, in the order of their colours.
  """
  envs = list(dict.fromkeys(r['env'] for r in records))
  fig, axes = figure(1, max(1, len(envs)), (4.2 * max(1, len(envs)), 3.8))
  axes = axes[0]
  for ax, env in zip(axes, envs):
    for record in records:
      if record['env'] != env or record['status'] != 'done':
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
      colour = f'C{algos.index(record["algo"])}'
      label = record['algo']
      if record['learning_rate'] is not None:
        label += f' (lr {record["learning_rate"]:g})'
      ax.plot(steps, mean, color=colour, lw=1.6, marker='o', ms=3, label=label)
      if len(seeds) > 1:
        ax.fill_between(steps, low, high, color=colour, alpha=0.2, lw=0)
    ax.set_title(env.split(':', 1)[-1])
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
  return save(fig, path)
