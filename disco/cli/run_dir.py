"""A run's output directory: its config, log and checkpoints."""

# pylint: disable=g-importing-member
import dataclasses
import json
import pathlib
from typing import Any

from disco import files
from disco.cli import flags as flags_lib
from disco.cli.errors import UsageError

CONFIG_FILENAME = flags_lib.CONFIG_FILENAME
LOG_FILENAME = 'log.csv'
CHECKPOINTS_DIRNAME = 'checkpoints'


@dataclasses.dataclass(frozen=True)
class RunDir:
  """The files of a run in its output directory."""

  path: pathlib.Path

  @property
  def config(self) -> pathlib.Path:
    return self.path / CONFIG_FILENAME

  @property
  def log(self) -> pathlib.Path:
    return self.path / LOG_FILENAME

  @property
  def checkpoints(self) -> pathlib.Path:
    return self.path / CHECKPOINTS_DIRNAME

  def create(self) -> None:
    if self.path.exists() and not self.path.is_dir():
      raise UsageError(f'--out-dir exists and is not a directory: {self.path}')
    try:
      self.path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
      raise UsageError(f'cannot create --out-dir {self.path}: {e}') from None

  def write_config(self, prog: str, config: Any, **extra: Any) -> None:
    """`config.json`: {'command', 'config', **extra}, atomically."""
    files.write_json_atomic(
        self.config, dict(command=prog, config=config.to_dict(), **extra)
    )

  def read_config(self, prog: str | None = None) -> dict[str, Any]:
    """The saved `config.json` (for `--resume` by the command `prog`).

    A run written by another command is a `UsageError` naming that command
    and how to continue it.
    """
    try:
      saved = json.loads(self.config.read_text())
    except FileNotFoundError:
      raise UsageError(
          f'--resume: {self.config} does not exist; is {self.path} the'
          ' output directory of an earlier run?'
      ) from None
    except ValueError as e:
      raise UsageError(f'--resume: cannot read {self.config}: {e}') from None
    if 'config' not in saved:  # Written by version 0.1: the config alone.
      saved = dict(config=saved)
    kind = saved.get('command')
    if prog is not None and kind is not None and kind != prog:
      raise UsageError(
          f'--resume: {self.path} holds a {kind} run, not a {prog} one;'
          f' continue it with: {kind} --out-dir {self.path} --resume'
      )
    return saved
