"""Writing learning curves to CSV files and plotting them.

matplotlib is an optional dependency (the `[colab]` and `[test]` extras) and
is imported only when a plot is drawn, so `import disco` never needs it.
"""

from collections.abc import Sequence
import csv
import math
import os
import pathlib

import numpy as np

from disco import eval as eval_lib

_INSTALL_PLOTTING = 'pip install -e ".[colab]"'


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


def _format(value) -> str:
  if isinstance(value, (float, np.floating)):
    return '' if math.isnan(value) else repr(float(value))
  return str(value)


def write_csv(
    histories: Sequence[eval_lib.EvalHistory], path: str | os.PathLike[str]
) -> pathlib.Path:
  """Writes the curves, one row per run and iteration, to a CSV file.

  Columns: rule, seed, then `EvalHistory.columns()` (iteration, steps,
  avg_returns, ..., then the learner logs in sorted order; a log that one
  run does not have is left empty, as are NaNs).

  Args:
    histories: the runs.
    path: the file to write (its directory must exist).

  Returns:
    The path written.
  """
  path = pathlib.Path(path)
  columns = [h.columns() for h in histories]
  names = []
  for cols in columns:
    names.extend(k for k in cols if k not in names)
  with path.open('w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['rule', 'seed'] + names)
    for history, cols in zip(histories, columns, strict=True):
      for i in range(len(history)):
        row = [history.rule, history.seed]
        row += [_format(cols[k][i]) if k in cols else '' for k in names]
        writer.writerow(row)
  return path


def read_csv(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
  """Reads a file written by `write_csv` into columns (strings for 'rule')."""
  with pathlib.Path(path).open(newline='') as f:
    rows = list(csv.DictReader(f))
  if not rows:
    return {}
  columns = {}
  for name in rows[0]:
    values = [row[name] for row in rows]
    if name == 'rule':
      columns[name] = np.asarray(values)
    else:
      columns[name] = np.asarray(
          [float(v) if v else np.nan for v in values], np.float64
      )
  return columns


def plot_curves(
    histories: Sequence[eval_lib.EvalHistory],
    path: str | os.PathLike[str] | None = None,
    title: str | None = None,
):
  """Plots average return against environment steps, one colour per rule.

  With several seeds of a rule, the mean over seeds is drawn thick and each
  seed thinly. The figure is made without pyplot, so nothing is shown or
  kept open unless the caller displays it (a notebook shows a returned
  figure as the cell's value).

  Args:
    histories: the runs.
    path: if given, the image file to write (e.g. `curve.png`).
    title: the plot's title.

  Returns:
    The `matplotlib.figure.Figure`.
  """
  require_matplotlib()
  # pylint: disable-next=g-import-not-at-top
  from matplotlib import figure as mpl_figure

  by_rule: dict[str, list[eval_lib.EvalHistory]] = {}
  for history in histories:
    by_rule.setdefault(history.rule, []).append(history)
  fig = mpl_figure.Figure(figsize=(7, 4.5))
  axes = fig.add_subplot()
  for index, (rule, runs) in enumerate(by_rule.items()):
    colour = f'C{index}'
    if len(runs) == 1:
      axes.plot(
          runs[0].steps,
          runs[0].avg_returns,
          color=colour,
          lw=1.2,
          label=f'{rule} (seed {runs[0].seed})',
      )
      continue
    for run in runs:
      axes.plot(run.steps, run.avg_returns, color=colour, lw=0.6, alpha=0.35)
    length = min(len(run) for run in runs)
    stacked = np.stack([run.avg_returns[:length] for run in runs])
    finite = np.isfinite(stacked)
    with np.errstate(invalid='ignore'):  # NaN where no seed has a value.
      mean = np.where(finite, stacked, 0).sum(0) / finite.sum(0)
    axes.plot(
        runs[0].steps[:length],
        mean,
        color=colour,
        lw=1.8,
        label=f'{rule} (mean of {len(runs)} seeds)',
    )
  axes.set_xlabel('environment steps')
  axes.set_ylabel('average return')
  axes.grid(alpha=0.3)
  axes.legend(loc='lower right')
  if title:
    axes.set_title(title)
  fig.tight_layout()
  if path is not None:
    fig.savefig(pathlib.Path(path), dpi=120)
  return fig
