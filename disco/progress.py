"""One progress bar for every loop: `tqdm.auto` as a `progress_fn`.

with progress.progress_bar(progress.EVAL, config.num_steps) as bar:
  history = eval.run_eval(config, progress_fn=bar)
"""

from collections.abc import Callable, Mapping, Sequence
import math
from typing import Any, Self

# (steps done, counting from 1; that step's scalar metrics) -> None.
ProgressFn = Callable[[int, Mapping[str, float]], None]

# The run kinds, and what their bars count and show.
EVAL = 'eval'
TRAIN = 'train'
META_TRAIN = 'meta_train'
DISCOVERY = 'discovery'
BARS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    EVAL: ('it', ('avg_return',)),
    TRAIN: ('it', ('train_return', 'eval_return')),
    META_TRAIN: ('meta-step', ('meta_loss', 'pos_reward_fraction')),
    DISCOVERY: ('meta-step', ('meta_loss', 'return')),
}


class ProgressBar:
  """A tqdm bar usable as `progress_fn`; a context manager that closes it.

  Attributes:
    total: the step the bar ends at.
  """

  def __init__(
      self,
      total: int,
      description: str = '',
      *,
      initial: int = 0,
      postfix: Sequence[str] = (),
      unit: str = 'it',
      enabled: bool = True,
  ):
    """Opens the bar.

    Args:
      total: the step the bar ends at.
      description: shown before the bar.
      initial: the step a resumed run starts from.
      postfix: names of metrics shown after the bar (when present).
      unit: what one step is called.
      enabled: False makes a bar that draws nothing.
    """
    self.total = total
    self._postfix = tuple(postfix)
    import tqdm.auto  # pylint: disable=g-import-not-at-top

    self._bar = tqdm.auto.tqdm(
        total=total,
        initial=initial,
        desc=description,
        unit=unit,
        disable=not enabled,
    )

  def __call__(self, step: int, metrics: Mapping[str, float]) -> None:
    if self._bar.disable:
      return
    self._bar.update(step - self._bar.n)
    shown = {
        k: f'{metrics[k]:.3g}'
        for k in self._postfix
        if k in metrics and not math.isnan(metrics[k])
    }
    if shown:
      self._bar.set_postfix(shown, refresh=False)

  def close(self) -> None:
    self._bar.close()

  def __enter__(self) -> Self:
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()


def progress_bar(
    kind: str, total: int, description: str = '', **kwargs: Any
) -> ProgressBar:
  """A `ProgressBar` of a run kind's steps, showing its main metrics.

  Args:
    kind: one of `BARS` (EVAL, TRAIN, META_TRAIN, DISCOVERY).
    total: the step the bar ends at.
    description: shown before the bar.
    **kwargs: the other `ProgressBar` arguments (`initial`, `enabled`, and
      `unit` or `postfix` to change the kind's).

  Returns:
    The open bar; use it as a context manager.
  """
  unit, postfix = BARS[kind]
  kwargs = dict(unit=unit, postfix=postfix) | kwargs
  return ProgressBar(total, description, **kwargs)


def chain(*fns: ProgressFn | None) -> ProgressFn:
  """One `progress_fn` that calls each of `fns` (None entries skipped)."""
  live = [fn for fn in fns if fn is not None]

  def _call(step: int, metrics: Mapping[str, float]) -> None:
    for fn in live:
      fn(step, metrics)

  return _call
