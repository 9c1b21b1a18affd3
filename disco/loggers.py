"""Where a run's per-step logs go: CSV, TensorBoard, Weights & Biases.

Every run kind reports its per-step scalars to a `Logger` as
`log(step, scalars, series)`; `open_logger` opens the sinks `NAMES` lists.
A resumed run logs no step twice. Details: `docs/logging.md`.
"""

from collections.abc import Iterable, Iterator, Mapping, Sequence
import contextlib
import importlib
import json
import math
import pathlib
import secrets
import time
import types
from typing import Any

import jax

from disco import files
from disco import logs

CSV = 'csv'
TENSORBOARD = 'tensorboard'
WANDB = 'wandb'
NAMES = (CSV, TENSORBOARD, WANDB)

# Sink -> (the module it imports, the extra that installs it).
_PACKAGES = {
    TENSORBOARD: ('tensorboardX', 'tensorboard'),
    WANDB: ('wandb', 'wandb'),
}

# The file in a sink's directory that keeps the last step of each series.
STEPS_FILENAME = 'logged_steps.json'


class MissingExtraError(ImportError):
  """A sink's optional package is not installed (the message says how)."""


def require(name: str) -> types.ModuleType:
  """The package sink `name` writes with, or a `MissingExtraError`."""
  module, extra = _PACKAGES[name]
  try:
    return importlib.import_module(module)
  except ImportError:
    raise MissingExtraError(
        f'The {name} logger needs the {module} package: pip install'
        f' "disco-jax[{extra}]"'
    ) from None


def scalars_of(row: Mapping[str, Any], *skip: str) -> dict[str, float]:
  """The numbers of `row` as floats (NaN, strings and booleans left out).

  `skip` names keys that are not scalars to log (the step, the seed).
  """
  out = {}
  for key, value in row.items():
    if key in skip or isinstance(value, (str, bool)):
      continue
    try:
      number = float(value)
    except (TypeError, ValueError):
      continue
    if not math.isnan(number):
      out[key] = number
  return out


class Logger:
  """A sink of per-step scalars that never logs a step of a series twice.

  Subclasses write in `_write` and flush in `_flush`; this class skips the
  steps up to the last one logged (`logged`: series -> step), which a
  resumed sink reads back in its constructor.
  """

  # Seconds between flushes while logging (and at `close`).
  flush_secs: float = 5.0

  def __init__(self, logged: Mapping[str, int] | None = None):
    self.logged: dict[str, int] = dict(logged or {})
    self._skip = dict(self.logged)  # Logged before this run: not again.
    self._flushed = time.monotonic()
    self._closed = False

  def log(
      self, step: int, scalars: Mapping[str, float], series: str = ''
  ) -> None:
    """Logs `scalars` at `step` of `series`, unless already logged there.

    NaN and values that are not numbers are left out (`scalars_of`).
    """
    step = int(step)
    if step <= self._skip.get(series, -math.inf):
      return
    self._write(step, scalars_of(scalars), series)
    self.logged[series] = max(step, self.logged.get(series, step))
    if time.monotonic() - self._flushed >= self.flush_secs:
      self.flush()

  def flush(self) -> None:
    """Puts what was logged on disk (and the last step of each series)."""
    self._flush()
    self._flushed = time.monotonic()

  def close(self) -> None:
    """Flushes and closes; closing again does nothing."""
    if not self._closed:
      self._closed = True
      self.flush()
      self._close()

  def _write(self, step: int, scalars: dict[str, float], series: str) -> None:
    raise NotImplementedError

  def _flush(self) -> None:
    pass

  def _close(self) -> None:
    pass

  def __enter__(self) -> 'Logger':
    return self

  def __exit__(self, *exc: Any) -> None:
    self.close()


def _read_steps(path: pathlib.Path, resume: bool) -> dict[str, int]:
  """The last step of each series saved at `path` (none unless `resume`)."""
  if not resume or not path.is_file():
    return {}
  try:
    saved = json.loads(path.read_text())
    return {str(k): int(v) for k, v in saved['logged_steps'].items()}
  except (ValueError, KeyError, TypeError, AttributeError):
    raise ValueError(f'{path} is not a record of logged steps.') from None


class CsvLogger(Logger):
  """`<log_dir>/log.csv`: columns 'series' (if any), 'step', the scalars."""

  def __init__(self, log_dir: files.PathLike, *, resume: bool = False):
    self._log = logs.CsvLog(pathlib.Path(log_dir) / 'log.csv')
    # A new run starts an empty file; a resumed one keeps the old rows.
    self._log.keep(lambda row: resume)
    logged: dict[str, int] = {}
    for row in self._log.rows:
      series = row.get('series', '')
      series = series if isinstance(series, str) else ''
      logged[series] = max(int(row['step']), logged.get(series, -1))
    super().__init__(logged)

  def _write(self, step: int, scalars: dict[str, float], series: str) -> None:
    head = dict(series=series, step=step) if series else dict(step=step)
    self._log.append(head | scalars)


class TensorBoardLogger(Logger):
  """Event files in `<log_dir>/tensorboard/<series>/`, one run per series."""

  def __init__(self, log_dir: files.PathLike, *, resume: bool = False):
    self._module = require(TENSORBOARD)
    self.root = pathlib.Path(log_dir) / TENSORBOARD
    self.root.mkdir(parents=True, exist_ok=True)
    self._writers: dict[str, Any] = {}
    super().__init__(_read_steps(self.root / STEPS_FILENAME, resume))

  def _writer(self, series: str) -> Any:
    if series not in self._writers:
      self._writers[series] = self._module.SummaryWriter(
          logdir=str(self.root / series if series else self.root),
          flush_secs=self.flush_secs,
          # The name has the second it was made in; with the nanosecond, a
          # resumed run's file is new and sorts after the earlier ones
          # (TensorBoard reads a directory's files in the order of their
          # names) even within the same second.
          filename_suffix=f'.{time.time_ns():020d}',
      )
    return self._writers[series]

  def _write(self, step: int, scalars: dict[str, float], series: str) -> None:
    writer = self._writer(series)
    for tag, value in scalars.items():
      writer.add_scalar(tag, value, global_step=step)

  def _flush(self) -> None:
    for writer in self._writers.values():
      writer.flush()
    files.write_json_atomic(
        self.root / STEPS_FILENAME, dict(logged_steps=self.logged)
    )

  def _close(self) -> None:
    for writer in self._writers.values():
      writer.close()


class WandbLogger(Logger):
  """One W&B run in `<log_dir>/wandb/`; a resumed run continues it.

  The run's id is kept in `<log_dir>/wandb/logged_steps.json`, with the
  last step of each series. Keys are '<series>/<name>', plotted against
  '<series>/step' (just '<name>' against 'step' for a run of one series).
  """

  def __init__(
      self,
      log_dir: files.PathLike,
      *,
      resume: bool = False,
      config: Mapping[str, Any] | None = None,
      name: str | None = None,
  ):
    wandb = require(WANDB)
    self.root = pathlib.Path(log_dir) / WANDB
    self.root.mkdir(parents=True, exist_ok=True)
    state_path = self.root / STEPS_FILENAME
    logged = _read_steps(state_path, resume)
    self.run_id = None
    if resume and state_path.is_file():
      self.run_id = json.loads(state_path.read_text()).get('run_id')
    self.run_id = self.run_id or secrets.token_hex(4)
    self._run = wandb.init(
        dir=str(pathlib.Path(log_dir)),
        id=self.run_id,
        name=name,
        config=dict(config or {}),
        resume='allow',
    )
    self._defined: set[str] = set()
    super().__init__(logged)
    self._flush()  # The id, before anything is logged.

  def _write(self, step: int, scalars: dict[str, float], series: str) -> None:
    prefix = f'{series}/' if series else ''
    if series not in self._defined:
      self._run.define_metric(f'{prefix}step')
      self._run.define_metric(f'{prefix}*', step_metric=f'{prefix}step')
      self._defined.add(series)
    data = {f'{prefix}{k}': v for k, v in scalars.items()}
    self._run.log(data | {f'{prefix}step': step})

  def _flush(self) -> None:
    files.write_json_atomic(
        self.root / STEPS_FILENAME,
        dict(run_id=self.run_id, logged_steps=self.logged),
    )

  def _close(self) -> None:
    self._run.finish()


class Loggers(Logger):
  """Several sinks as one: each call goes to every sink."""

  def __init__(self, sinks: Iterable[Logger]):
    self.sinks = tuple(sinks)
    super().__init__()

  def log(
      self, step: int, scalars: Mapping[str, float], series: str = ''
  ) -> None:
    for sink in self.sinks:
      sink.log(step, scalars, series)

  def flush(self) -> None:
    for sink in self.sinks:
      sink.flush()

  def close(self) -> None:
    for sink in self.sinks:
      sink.close()


def check_names(names: Iterable[str]) -> tuple[str, ...]:
  """`names` without repeats, each one of `NAMES` (else a `ValueError`)."""
  names = tuple(dict.fromkeys(names))
  for name in names:
    if name not in NAMES:
      raise ValueError(
          f'Unknown logger {name!r}; choose from {", ".join(NAMES)}.'
      )
  return names


def make(
    names: str | Iterable[str],
    log_dir: files.PathLike,
    *,
    resume: bool = False,
    config: Any = None,
    run_name: str | None = None,
) -> Loggers:
  """The sinks `names` (see `NAMES`) writing under `log_dir`, as one.

  Args:
    names: sink names, e.g. ('csv', 'tensorboard').
    log_dir: the directory they write in (created if missing).
    resume: continue the sinks' records of an earlier run in `log_dir`
      (steps it logged are not logged again); False starts them afresh.
    config: the run's config (a `ConfigBase` or a dict), which W&B keeps.
    run_name: the run's name in W&B.

  Returns:
    The sinks; with several processes (`jax.distributed`), on processes
    other than 0 none (every process has the same logs; one writes them).

  Raises:
    ValueError: an unknown name.
    MissingExtraError: a sink whose package is not installed.
  """
  names = check_names([names] if isinstance(names, str) else names)
  for name in names:  # Every missing package fails before anything opens.
    if name in _PACKAGES:
      require(name)
  if jax.process_index() != 0:
    return Loggers([])
  log_dir = pathlib.Path(log_dir).expanduser()
  log_dir.mkdir(parents=True, exist_ok=True)
  if config is not None and hasattr(config, 'to_dict'):
    config = config.to_dict()
  sinks: list[Logger] = []
  try:
    for name in names:
      if name == CSV:
        sinks.append(CsvLogger(log_dir, resume=resume))
      elif name == TENSORBOARD:
        sinks.append(TensorBoardLogger(log_dir, resume=resume))
      else:
        sinks.append(
            WandbLogger(log_dir, resume=resume, config=config, name=run_name)
        )
  except BaseException:
    for sink in sinks:
      sink.close()
    raise
  return Loggers(sinks)


# What the run functions' `logger` argument takes: sink names, sinks, both.
LoggerArg = str | Logger | Sequence[str | Logger] | None


@contextlib.contextmanager
def open_logger(
    logger: LoggerArg,
    log_dir: files.PathLike | None,
    *,
    resume: bool,
    config: Any = None,
) -> Iterator[Logger]:
  """A run function's `logger` argument as one `Logger`, for a `with`.

  Names are opened with `make(names, log_dir, resume=resume)` and closed
  when the block ends (a Ctrl-C or SIGTERM included); given `Logger`s are
  the caller's to close and are only flushed. None: a sink that drops
  everything.

  Raises:
    ValueError: names without a `log_dir`, or an unknown name.
    TypeError: an item that is neither a name nor a `Logger`.
    MissingExtraError: a sink whose package is not installed.
  """
  if logger is None:
    items: Sequence[Any] = ()
  elif isinstance(logger, (str, Logger)):
    items = (logger,)
  else:
    items = tuple(logger)
  names = [item for item in items if isinstance(item, str)]
  given = [item for item in items if not isinstance(item, str)]
  for item in given:
    if not isinstance(item, Logger):
      raise TypeError(
          f'logger takes sink names ({", ".join(NAMES)}) or'
          f' disco.loggers.Logger objects, got {item!r}.'
      )
  if names and log_dir is None:
    raise ValueError(f'logger={names} needs a log_dir to write in.')
  owned = make(names, log_dir, resume=resume, config=config) if names else None
  try:
    yield Loggers(given + ([owned] if owned is not None else []))
  finally:
    for sink in given:
      sink.flush()
    if owned is not None:
      owned.close()
