"""Trainer runs that can be done in pieces, for the long benchmarks.

A run is one `TrainConfig` trained for some seeds together. `run` trains
it with checkpoints in `<out>/checkpoints/<name>/` and resumes from the
newest one, so a run stopped by Ctrl-C, SIGTERM or a killed process goes on
where its last checkpoint was; when it finishes, its record (settings,
wall time of every piece, and every log row of every seed) goes to
`<out>/runs/<name>.json`, and a later call skips it. A record or
checkpoint of other settings under the same name is an error, never
overwritten. `child_result` times a setting in a fresh process.
"""

from collections.abc import Mapping
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any

import numpy as np

from disco import checkpoint
from disco import files
from disco import progress

DONE = 'done'
PARTIAL = 'partial'
RUNS_DIR = 'runs'
CHECKPOINTS_DIR = 'checkpoints'
PIECES_FILE = 'pieces.json'


class PiecesError(Exception):
  """A run's files do not belong to the settings asked for."""


def jsonable(value: Any) -> Any:
  """`value` as it reads back from JSON (tuples as lists)."""
  return json.loads(json.dumps(value))


def write_json(path: pathlib.Path, value: Any) -> None:
  """Writes `value` atomically: a crash leaves the old file."""
  path.parent.mkdir(parents=True, exist_ok=True)
  files.write_json_atomic(path, value)


def read_pieces(
    path: pathlib.Path, settings: Mapping[str, Any]
) -> list[dict[str, Any]] | None:
  """The pieces recorded in `path`: [] if none, None if of other settings."""
  if not path.is_file():
    return []
  saved = json.loads(path.read_text())
  if normal_settings(saved.get('settings') or {}) != normal_settings(settings):
    return None
  return saved['pieces']


def write_pieces(
    path: pathlib.Path,
    settings: Mapping[str, Any],
    pieces: list[dict[str, Any]],
) -> None:
  """Records a run's `pieces` (one dict per call) under its `settings`."""
  write_json(path, dict(settings=jsonable(settings), pieces=pieces))


def child_result(
    script: str,
    flag: str,
    spec: Mapping[str, Any],
    library: str | None = None,
) -> Any:
  """Runs `script flag <spec as JSON>` in a fresh Python process.

  `library`: a source tree whose `disco` the process imports instead of
  this one's (e.g. a worktree of an older commit).

  Returns the JSON of its last output line, or None (its error printed) if
  it failed: a timing that must not inherit this process's caches.
  """
  env = None
  if library is not None:
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [library] + [p for p in [env.get('PYTHONPATH')] if p]
    )
  done = subprocess.run(
      [sys.executable, script, flag, json.dumps(spec)],
      capture_output=True,
      text=True,
      check=False,
      env=env,
  )
  if done.returncode:
    print(done.stderr[-2000:], file=sys.stderr)
    return None
  return json.loads(done.stdout.strip().splitlines()[-1])


def normal_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
  """`settings` with its config read back (fields added since: defaults)."""
  from disco import train  # pylint: disable=g-import-not-at-top

  settings = jsonable(settings)
  if isinstance(settings.get('config'), dict):
    settings['config'] = jsonable(
        train.TrainConfig.from_dict(settings['config']).to_dict()
    )
  return settings


def record_path(out: pathlib.Path, name: str) -> pathlib.Path:
  return out / RUNS_DIR / f'{name}.json'


def load_record(
    out: pathlib.Path, name: str, settings: Mapping[str, Any]
) -> dict[str, Any] | None:
  """The finished record of run `name` if it has `settings`, else None.

  Raises:
    PiecesError: the record holds a finished run with other settings.
  """
  path = record_path(out, name)
  if not path.is_file():
    return None
  try:
    record = json.loads(path.read_text())
  except (OSError, ValueError):
    return None
  if record.get('status') != DONE:
    return None
  if normal_settings(record.get('settings') or {}) != normal_settings(settings):
    old, new = record.get('settings') or {}, jsonable(settings)
    differ = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    raise PiecesError(
        f'{path} holds a finished run with other settings (differing:'
        f' {", ".join(differ)}); use another --out or delete it'
    )
  return record


@contextlib.contextmanager
def sigterm_as_ctrl_c():
  """SIGTERM (cluster or session stop) handled like Ctrl-C while inside."""

  def _handler(signum, frame):
    del signum, frame
    os.kill(os.getpid(), signal.SIGINT)

  previous = signal.signal(signal.SIGTERM, _handler)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)


def run(
    out: pathlib.Path,
    name: str,
    config,
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
    out: the benchmark's output directory.
    name: the run's file name (no suffix).
    config: its `disco.train.TrainConfig`.
    num_seeds: seeds `config.seed`... trained together.
    update_rule_params: the rule's parameters (None: the config's).
    extra_settings: more settings the record must match to be skipped.
    show_progress: a tqdm bar per piece.
    checkpoints: False for a run in one piece that writes none (e.g. one
      device call whose checkpoints could not outlive it): a stopped run's
      partial record is then its log rows so far.

  Raises:
    PiecesError: files of other settings under `name`.
    KeyboardInterrupt: on Ctrl-C or SIGTERM, after a checkpoint.
  """
  from disco import train  # pylint: disable=g-import-not-at-top

  settings = dict(
      config=config.to_dict(), num_seeds=num_seeds, **(extra_settings or {})
  )
  record = load_record(out, name, settings)
  if record is not None:
    return record
  ckpt_dir = out / CHECKPOINTS_DIR / name
  pieces_path = ckpt_dir / PIECES_FILE
  pieces = read_pieces(pieces_path, settings)
  if pieces is None:
    raise PiecesError(
        f'{ckpt_dir} holds checkpoints of other settings; delete it or'
        ' use another --out'
    )
  start_step = checkpoint.latest_step(ckpt_dir) or 0 if ckpt_dir.is_dir() else 0
  start = time.perf_counter()
  done = dict(step=start_step)

  def _progress(step: int, row: Mapping[str, float]) -> None:
    del row
    done['step'] = step

  def _save_pieces(status: str) -> None:
    pieces.append(
        dict(
            started_at_step=start_step,
            ended_at_step=done['step'],
            wall_seconds=time.perf_counter() - start,
            status=status,
            finished=time.strftime('%Y-%m-%d %H:%M:%S'),
        )
    )
    write_pieces(pieces_path, settings, pieces)

  live_rows: list[dict[str, float]] = []
  status = 'interrupted'
  with progress.ProgressBar(
      config.num_steps,
      name,
      postfix=('eval_return', 'train_return'),
      enabled=show_progress,
  ) as bar:

    def _both(step: int, row: Mapping[str, float]) -> None:
      _progress(step, row)
      bar(step, row)

    try:
      with sigterm_as_ctrl_c():
        result = train.run_train(
            config,
            num_seeds=num_seeds,
            update_rule_params=update_rule_params,
            progress_fn=_both,
            log_fn=lambda seed, row: live_rows.append(dict(row)),
            checkpoint_dir=ckpt_dir if checkpoints else None,
            resume=checkpoints,
            handle_interrupts=True,
        )
      status = 'finished'
    finally:
      _save_pieces(status)
      if status != 'finished':
        if checkpoints and checkpoint.latest_step(ckpt_dir):
          write_partial(out, name, settings, pieces, ckpt_dir)
        elif not checkpoints and live_rows:
          write_partial(out, name, settings, pieces, rows=live_rows)
  logs = {k: np.asarray(v) for k, v in result.logs.items()}
  record = dict(
      name=name,
      status=DONE,
      settings=jsonable(settings),
      wall_seconds=float(sum(p['wall_seconds'] for p in pieces)),
      pieces=pieces,
      seeds=[int(s) for s in result.seeds],
      logs={
          k: [None if not np.isfinite(x) else float(x) for x in v.tolist()]
          for k, v in logs.items()
      },
  )
  write_json(record_path(out, name), record)
  # The done record holds every row the partial one had; keep one per run.
  partial_path(out, name).unlink(missing_ok=True)
  return record


def partial_path(out: pathlib.Path, name: str) -> pathlib.Path:
  return out / RUNS_DIR / f'{name}.partial.json'


def write_partial(
    out: pathlib.Path,
    name: str,
    settings: Mapping[str, Any],
    pieces: list[dict[str, Any]],
    ckpt_dir: pathlib.Path | None = None,
    rows: list[Mapping[str, float]] | None = None,
) -> None:
  """A stopped run's record so far: its latest checkpoint's logs, or `rows`.

  Status `partial`; `--report` leaves it out unless asked. With
  checkpoints, the checkpoint stays the run's state and the next command
  resumes from it; without, the rows are all that is kept.
  """
  from disco import logs as logs_lib  # pylint: disable=g-import-not-at-top

  if rows is None:
    rows = logs_lib.from_arrays(checkpoint.load(ckpt_dir).arrays)
  logs = logs_lib.columns(rows)
  write_json(
      partial_path(out, name),
      dict(
          name=name,
          status=PARTIAL,
          settings=jsonable(settings),
          wall_seconds=float(sum(p['wall_seconds'] for p in pieces)),
          pieces=pieces,
          seeds=sorted({int(s) for s in logs['seed'] if np.isfinite(s)}),
          logs={
              k: [None if not np.isfinite(x) else float(x) for x in v]
              for k, v in logs.items()
          },
      ),
  )


def seed_columns(record: Mapping[str, Any], seed: int) -> dict[str, np.ndarray]:
  """A record's log columns for one seed (NaN where a value was missing)."""
  logs = {
      k: np.array([np.nan if x is None else x for x in v], np.float64)
      for k, v in record['logs'].items()
  }
  rows = logs['seed'] == seed
  return {k: v[rows] for k, v in logs.items()}
