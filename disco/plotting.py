"""Plots of runs: a smoothed curve over its faint raw values, as PNG.

matplotlib is optional (the `colab` and `test` extras) and imported only when
a plot is drawn.
"""

from collections.abc import Mapping, Sequence
import pathlib
from typing import Any

import numpy as np

from disco import files
from disco import metrics

# Works for a wheel and for a clone installed with `pip install -e .` alike.
_INSTALL_PLOTTING = 'pip install "disco-jax[colab]"'
# Points per smoothing window: a curve of N points is averaged over the
# trailing max(1, N // _SMOOTHING_POINTS) points.
_SMOOTHING_POINTS = 50


def require_matplotlib() -> None:
  """Without matplotlib, raises an ImportError naming the extra to install."""
  try:
    # pylint: disable-next=g-import-not-at-top,unused-import
    import matplotlib  # noqa: F401
  except ImportError as e:
    raise ImportError(
        'Plotting needs matplotlib, an optional dependency: install it with'
        f' `{_INSTALL_PLOTTING}`.'
    ) from e


def smooth(values: Any, window: int | None = None) -> np.ndarray:
  """Trailing mean over `window` points, ignoring NaNs ([N] -> [N]).

  Args:
    values: [N] numbers (NaN where there is no value, e.g. no episode ended).
    window: points averaged; None picks max(1, N // 50).

  Returns:
    [N] means of the finite values among each point and the `window - 1`
    before it (NaN where there are none).
  """
  values = np.asarray(values, np.float64)
  if window is None:
    window = max(1, len(values) // _SMOOTHING_POINTS)
  finite = np.isfinite(values)
  # Each finite value weighs one: the windows' means of the finite values.
  return metrics.smoothed_returns(
      np.where(finite, values, 0.0), finite.astype(np.float64), window
  )


def plot_series(
    x: Any,
    series: Mapping[str, Any],
    path: files.PathLike | None = None,
    *,
    title: str | None = None,
    xlabel: str = 'step',
    ylabel: str | None = None,
) -> Any:
  """Plots each of `series` against `x`: raw values faint, smoothed bold.

  Args:
    x: [N] positions (or a mapping label -> [N] for series of other
      lengths).
    series: label -> [N] values.
    path: if given, the PNG file to write.
    title: the plot's title.
    xlabel: the x axis's label.
    ylabel: the y axis's label.

  Returns:
    The `matplotlib.figure.Figure`.
  """
  require_matplotlib()
  # pylint: disable-next=g-import-not-at-top
  from matplotlib import figure as mpl_figure

  fig = mpl_figure.Figure(figsize=(7, 4.5))
  axes = fig.add_subplot()
  for index, (label, values) in enumerate(series.items()):
    xs = np.asarray(x[label] if isinstance(x, Mapping) else x)
    values = np.asarray(values, np.float64)
    colour = f'C{index}'
    axes.plot(xs, values, color=colour, lw=0.8, alpha=0.25)
    axes.plot(xs, smooth(values), color=colour, lw=1.8, label=label)
  axes.set_xlabel(xlabel)
  if ylabel:
    axes.set_ylabel(ylabel)
  axes.grid(alpha=0.3)
  if series:
    axes.legend(loc='best')
  if title:
    axes.set_title(title)
  fig.tight_layout()
  if path is not None:
    fig.savefig(pathlib.Path(path), dpi=120)
  return fig


def mean_over_seeds(curves: Sequence[Any]) -> np.ndarray:
  """The NaN-ignoring mean of [N] curves, cut to the shortest ([N])."""
  length = min(len(c) for c in curves)
  mean, _, _ = metrics.seed_band([np.asarray(c)[:length] for c in curves])
  return mean


def plot_curves(
    histories: Sequence[Any],
    path: files.PathLike | None = None,
    title: str | None = None,
) -> Any:
  """Average return against environment steps, one curve per rule.

  Each rule's curve is the mean over its seeds (`EvalHistory`s with that
  rule), drawn faint as it is and bold smoothed.

  Args:
    histories: `disco.eval.EvalHistory` runs.
    path: if given, the PNG file to write.
    title: the plot's title.

  Returns:
    The `matplotlib.figure.Figure`.
  """
  by_rule: dict[str, list[Any]] = {}
  for history in histories:
    by_rule.setdefault(history.rule, []).append(history)
  xs, series = {}, {}
  for rule, runs in by_rule.items():
    label = (
        f'{rule} (seed {runs[0].seed})'
        if len(runs) == 1
        else f'{rule} (mean of {len(runs)} seeds)'
    )
    curve = mean_over_seeds([run.avg_returns for run in runs])
    xs[label] = np.asarray(runs[0].steps)[: len(curve)]
    series[label] = curve
  return plot_series(
      xs,
      series,
      path,
      title=title,
      xlabel='environment steps',
      ylabel='average return',
  )
