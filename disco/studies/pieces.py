"""Trainer runs done in pieces: stopped, run again, they go on.

A run is one `disco.train.TrainConfig` trained for some seeds together.
`run` trains it with checkpoints in `<out>/checkpoints/<name>/` and resumes
from the newest one, so a run stopped by Ctrl-C, SIGTERM or a killed
process goes on where its last checkpoint was. Every call is a piece, listed
with its wall time in `<out>/checkpoints/<name>/pieces.json` (while it runs
too, so a killed process's time is kept). A finished
run's record (`disco.studies.records`: its settings, pieces and every log
row of every seed) goes to `<out>/runs/<name>.json`, and a later call
returns it without training; a stopped one leaves a partial record of its
rows so far. Files of other settings under the same name are an error,
never overwritten.
"""

from collections.abc import Callable, Iterator, Mapping
import contextlib
import json
import os
import pathlib
import signal
import time
from typing import Any

import numpy as np

from disco import checkpoint
from disco import progress
from disco.studies import records

CHECKPOINTS_DIR = 'checkpoints'
PIECES_FILE = 'pieces.json'
# A piece in progress is listed as RUNNING at most this often, so a killed
# process (out of memory, SIGKILL) leaves its time; the next call marks it
# KILLED.
RUNNING_EVERY_S = 60.0
RUNNING, KILLED = 'running', 'killed'


def read_pieces(
    path: pathlib.Path, settings: Mapping[str, Any]
) -> list[dict[str, Any]] | None:
  """The pieces listed in `path`: [] if none, None if of other settings."""
  if not path.is_file():
    return []
  saved = json.loads(path.read_text())
  if not records.same_settings(saved.get('settings') or {}, settings):
    return None
  return saved['pieces']


def write_pieces(
    path: pathlib.Path,
    settings: Mapping[str, Any],
    pieces: list[dict[str, Any]],
) -> None:
  """Lists a run's `pieces` (one dict per call) under its `settings`."""
  records.write_json(
      path, dict(settings=records.jsonable(settings), pieces=pieces)
  )


class PieceLog:
  """One call of a resumable run: listed while it runs, ended with a status.

  The earlier calls' pieces come first; one still `running` there was
  killed outright, and reads `killed`. `advance` lists this piece as
  `running` at most every `RUNNING_EVERY_S` seconds; `end` lists it with
  its status. A piece spans `started_at_<unit>` to `ended_at_<unit>`.
  """

  def __init__(
      self,
      path: pathlib.Path | None,
      settings: Mapping[str, Any],
      earlier: list[dict[str, Any]],
      first: int,
      unit: str = 'step',
      fields: Callable[[], Mapping[str, Any]] = dict,
      started: float | None = None,
  ):
    """Starts this call's piece after the `earlier` ones.

    Args:
      path: where the pieces are listed (None: nowhere).
      settings: the run's settings, listed with them.
      earlier: the earlier calls' pieces (`read_pieces`).
      first: where this call starts, in `unit`s.
      unit: what the run counts (`step`, `iteration`).
      fields: more entries of the piece, read when it is listed.
      started: `time.perf_counter()` at the call's start (None: now).
    """
    self._path, self._settings, self._unit = path, settings, unit
    self._first, self._fields = first, fields
    self.earlier = [dict(p) for p in earlier]
    if self.earlier and self.earlier[-1]['status'] == RUNNING:
      self.earlier[-1]['status'] = KILLED  # Its process ended without a word.
    self.done = first
    self._start = time.perf_counter() if started is None else started
    self._listed = time.perf_counter()

  def piece(self, status: str) -> dict[str, Any]:
    """This call's piece so far."""
    return {
        f'started_at_{self._unit}': self._first,
        f'ended_at_{self._unit}': self.done,
        'wall_seconds': time.perf_counter() - self._start,
        **self._fields(),
        'status': status,
        'finished': time.strftime('%Y-%m-%d %H:%M:%S'),
    }

  def advance(self, done: int) -> None:
    """The run reached `done`; lists the piece if a listing is due."""
    self.done = done
    if (
        self._path is not None
        and time.perf_counter() - self._listed >= RUNNING_EVERY_S
    ):
      self._listed = time.perf_counter()
      write_pieces(
          self._path, self._settings, self.earlier + [self.piece(RUNNING)]
      )

  def end(self, status: str) -> list[dict[str, Any]]:
    """Every piece, this one ended with `status`; listed at `path`."""
    pieces = self.earlier + [self.piece(status)]
    if self._path is not None:
      write_pieces(self._path, self._settings, pieces)
    return pieces


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
  """SIGTERM (a cluster's or a session's stop) handled as Ctrl-C inside."""

  def _handler(signum, frame):
    del signum, frame
    os.kill(os.getpid(), signal.SIGINT)

  previous = signal.signal(signal.SIGTERM, _handler)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)


def progress_bar(
    config: Any, label: str, enabled: bool = True
) -> progress.ProgressBar:
  """A trainer run's progress bar: its iterations and latest returns."""
  return progress.ProgressBar(
      config.num_steps,
      label,
      postfix=('eval_return', 'train_return'),
      enabled=enabled,
  )


def run(
    out: pathlib.Path,
    name: str,
    config: Any,
    *,
    num_seeds: int,
    update_rule_params: Any = None,
    extra_settings: Mapping[str, Any] | None = None,
    show_progress: bool = True,
    checkpoints: bool = True,
) -> dict[str, Any]:
  """Trains (or resumes, or skips) run `name`; returns its record.

  A finished run writes its done record and removes its partial one.

  Args:
    out: the study's output directory.
    name: the run's file name (no suffix).
    config: its `disco.train.TrainConfig`.
    num_seeds: seeds `config.seed`... trained together.
    update_rule_params: the rule's parameters (None: the config's).
    extra_settings: more settings the record must match to be skipped.
    show_progress: a progress bar per piece.
    checkpoints: False for a run in one piece that writes none (e.g. one
      device call whose checkpoints could not outlive it): a stopped run's
      partial record is then its log rows so far.

  Returns:
    The run's record (`disco.studies.records`).

  Raises:
    disco.studies.records.RecordError: files of other settings under `name`.
    KeyboardInterrupt: on Ctrl-C or SIGTERM, after a checkpoint.
  """
  from disco import train  # pylint: disable=g-import-not-at-top

  settings = dict(
      config=config.to_dict(), num_seeds=num_seeds, **(extra_settings or {})
  )
  record = records.load_record(out, name, settings)
  if record is not None:
    return record
  ckpt_dir = out / CHECKPOINTS_DIR / name
  pieces_path = ckpt_dir / PIECES_FILE
  pieces = read_pieces(pieces_path, settings)
  if pieces is None:
    raise records.RecordError(
        f'{ckpt_dir} holds checkpoints of other settings; delete it or'
        ' use another --out'
    )
  start_step = checkpoint.latest_step(ckpt_dir) or 0 if ckpt_dir.is_dir() else 0
  log = PieceLog(pieces_path, settings, pieces, start_step)
  live_rows: list[dict[str, float]] = []
  status = 'interrupted'

  with progress_bar(config, name, show_progress) as bar:

    def _progress(step: int, row: Mapping[str, float]) -> None:
      bar(step, row)
      log.advance(step)

    try:
      with sigterm_as_ctrl_c():
        result = train.run_train(
            config,
            num_seeds=num_seeds,
            update_rule_params=update_rule_params,
            progress_fn=_progress,
            log_fn=lambda seed, row: live_rows.append(dict(row)),
            checkpoint_dir=ckpt_dir if checkpoints else None,
            resume=checkpoints,
            handle_interrupts=True,
        )
      status = 'finished'
    finally:
      pieces = log.end(status)
      if status != 'finished':
        if checkpoints and checkpoint.latest_step(ckpt_dir):
          write_partial(out, name, settings, pieces, ckpt_dir)
        elif not checkpoints and live_rows:
          write_partial(out, name, settings, pieces, rows=live_rows)
  record = dict(
      name=name,
      status=records.DONE,
      settings=records.jsonable(settings),
      wall_seconds=float(sum(p['wall_seconds'] for p in pieces)),
      pieces=pieces,
      seeds=[int(s) for s in result.seeds],
      logs={k: records.json_numbers(v) for k, v in result.logs.items()},
  )
  records.write_json(records.record_path(out, name), record)
  # The done record holds every row the partial one had; keep one per run.
  records.partial_path(out, name).unlink(missing_ok=True)
  return record


def write_partial(
    out: pathlib.Path,
    name: str,
    settings: Mapping[str, Any],
    pieces: list[dict[str, Any]],
    ckpt_dir: pathlib.Path | None = None,
    rows: list[Mapping[str, float]] | None = None,
) -> None:
  """A stopped run's record so far: its latest checkpoint's logs, or `rows`.

  Status `partial`; reports leave it out unless asked. With checkpoints,
  the checkpoint stays the run's state and the next call resumes from it;
  without, the rows are all that is kept.
  """
  from disco import logs as logs_lib  # pylint: disable=g-import-not-at-top

  if rows is None:
    # The logs alone: the state (e.g. a replay buffer) may not fit twice.
    ckpt = checkpoint.load(ckpt_dir, arrays=logs_lib.is_log_array)
    rows = logs_lib.from_arrays(ckpt.arrays)
  logs = logs_lib.columns(rows)
  records.write_json(
      records.partial_path(out, name),
      dict(
          name=name,
          status=records.PARTIAL,
          settings=records.jsonable(settings),
          wall_seconds=float(sum(p['wall_seconds'] for p in pieces)),
          pieces=pieces,
          seeds=sorted({int(s) for s in logs['seed'] if np.isfinite(s)}),
          logs={k: records.json_numbers(v) for k, v in logs.items()},
      ),
  )
