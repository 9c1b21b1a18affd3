"""The skeleton every command shares: flags, config, run directory, hooks."""

# pylint: disable=g-importing-member
import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
import dataclasses
import functools
import pathlib
import time
from typing import Any

from disco import checkpoint
from disco import configs
from disco import loggers
from disco import logs
from disco.cli.errors import UsageError
from disco.cli.errors import main
from disco.cli.flags import FlagType
from disco.cli.flags import add_common_flags
from disco.cli.flags import add_config_flags
from disco.cli.flags import add_deprecated_flag
from disco.cli.flags import flag
from disco.cli.run_dir import RunDir
from disco.environments import registry


def overrides(
    args: argparse.Namespace, config_cls: type[configs.ConfigBase]
) -> dict[str, Any]:
  """The config fields given on the command line."""
  return {
      name: getattr(args, name)
      for name in config_cls.field_names()
      if getattr(args, name, None) is not None
  }


def make_config(
    config_cls: type[configs.ConfigBase], values: Mapping[str, Any]
) -> Any:
  """`config_cls.from_dict(values)`; an invalid value is a `UsageError`."""
  try:
    return config_cls.from_dict(values)
  except (configs.ConfigError, TypeError) as e:
    raise UsageError(f'invalid config: {e}') from None


def check_environment(
    name: str, settings: Mapping[str, Any] | Iterable[tuple[str, Any]]
) -> None:
  """Builds the environment once, so that bad settings are usage errors."""
  try:
    registry.make_environment(name, batch_size=1, settings=dict(settings))
  except ValueError as e:
    raise UsageError(f'--env {name}: {e}') from None


def use_compilation_cache(path: pathlib.Path | None) -> None:
  if path is not None:
    import jax  # pylint: disable=g-import-not-at-top

    jax.config.update('jax_compilation_cache_dir', str(path.expanduser()))


def prepare_run(args: argparse.Namespace, run_dir: RunDir, config: Any) -> None:
  """Checks what can be checked before a run starts, then makes `--out-dir`.

  The environment and its settings (each of a population's), matplotlib
  (unless `--no-plot`), and that a new run does not overwrite another's
  checkpoints.
  """
  if hasattr(config, 'members'):  # A population (`DiscoveryConfig`).
    for member in config.members:
      check_environment(member.env, member.settings)
  else:
    check_environment(config.env, config.env_settings)
  if args.plot:
    # pylint: disable-next=g-import-not-at-top
    from disco import plotting

    plotting.require_matplotlib()
  if (
      not args.resume
      and run_dir.checkpoints.is_dir()
      and any(run_dir.checkpoints.iterdir())
  ):
    raise UsageError(
        f'{run_dir.checkpoints} already holds checkpoints; pass --resume to'
        ' continue that run, or choose another --out-dir.'
    )
  use_compilation_cache(args.compilation_cache)
  run_dir.create()


def logger_names(
    args: argparse.Namespace, saved: Mapping[str, Any]
) -> list[str]:
  """`--logger`'s sinks; without it, the resumed run's (or else csv)."""
  return list(args.logger or saved.get('logger') or [loggers.CSV])


# config.json's record of what a run chose for itself (`resolve_config`).
CHOSEN_KEY = 'chosen'


@dataclasses.dataclass
class Run:
  """A command's run, as its hooks see it.

  Attributes:
    args: the parsed flags.
    run_dir: the output directory.
    config: the run's config.
    extras: what `config.json` keeps besides the config (e.g. seeds).
    log: `log.csv`, streamed.
    start_time: `time.perf_counter()` when the command started.
    logger: the sinks `--logger` names besides `log.csv` (the run
      functions' `logger`).
  """

  args: argparse.Namespace
  run_dir: RunDir
  config: Any
  extras: dict[str, Any]
  log: logs.CsvLog
  start_time: float
  logger: loggers.Logger = dataclasses.field(
      default_factory=lambda: loggers.Loggers([])
  )

  def log_step(self, step: int, step_logs: Mapping[str, float]) -> None:
    """Appends a row {'step': step, **step_logs} to `log.csv`."""
    self.log.append(dict(step=step) | dict(step_logs))


@dataclasses.dataclass(frozen=True)
class Command:
  """What a command declares; `run_command` does the rest.

  Attributes:
    prog: the command's name.
    doc: its module docstring: 'prog: description', then the epilog.
    config_cls: its config dataclass (one flag per field).
    config_title: the help section of the config flags.
    default_out_dir: `--out-dir`'s default.
    run: runs the loop (`Run` -> its result).
    finish: writes the outputs and reports them (run, result, plots).
    plot: the PNG plots of `log.csv`'s rows (rows, run) -> paths.
    resumed_rows: which rows of `log.csv` a resumed run keeps (run -> row
      predicate; rows after the checkpoints are computed again).
    description: the help's description, if not `doc`'s.
    add_flags: adds the command's own flags (before the config flags).
    flag_types: config flags with their own parsers (`add_config_flags`).
    deprecated: (old flag name, field, parse or None) of renamed flags.
    check_args: checks the flags before the run directory is read.
    base_config: the config values the flags change (args, saved
      `config.json`); default: the saved config.
    extras: what `config.json` keeps besides the config (args, saved,
      config -> dict).
    resolve_config: sets what a new run chooses for itself before it
      starts (args, config -> config and what `config.json` keeps of the
      choice, kept under `CHOSEN_KEY`), e.g.
      `disco.cli.reward_probe_flag.resolve`.
  """

  prog: str
  doc: str
  config_cls: type[configs.ConfigBase]
  config_title: str
  default_out_dir: str
  run: Callable[[Run], Any]
  finish: Callable[[Run, Any, list[pathlib.Path]], None]
  plot: Callable[[Sequence[Mapping[str, Any]], Run], list[pathlib.Path]]
  resumed_rows: Callable[[Run], Callable[[Mapping[str, Any]], bool]]
  description: str | None = None
  add_flags: Callable[[argparse.ArgumentParser], None] | None = None
  flag_types: Mapping[str, FlagType] = dataclasses.field(default_factory=dict)
  deprecated: Sequence[tuple[str, str, Callable[[str], Any] | None]] = ()
  check_args: Callable[[argparse.Namespace], None] | None = None
  base_config: (
      Callable[[argparse.Namespace, Mapping[str, Any]], dict[str, Any]] | None
  ) = None
  extras: (
      Callable[[argparse.Namespace, Mapping[str, Any], Any], dict[str, Any]]
      | None
  ) = None
  resolve_config: (
      Callable[[argparse.Namespace, Any], tuple[Any, dict[str, Any]]] | None
  ) = None


def build_parser(command: Command) -> argparse.ArgumentParser:
  """The command's parser: run flags, its own flags, then config flags."""
  summary, epilog = command.doc.split('\n\n', 1)
  parser = argparse.ArgumentParser(
      prog=command.prog,
      description=command.description or summary.split(': ', 1)[1],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog=epilog,
  )
  add_common_flags(parser, command.default_out_dir)
  if command.add_flags is not None:
    command.add_flags(parser)
  add_config_flags(
      parser, command.config_cls, command.config_title, command.flag_types
  )
  for old, field, parse in command.deprecated:
    kwargs = {} if parse is None else dict(type=parse)
    add_deprecated_flag(parser, old, field, flag(field), **kwargs)
  return parser


def preset_config(
    args: argparse.Namespace,
    saved: Mapping[str, Any],
    presets: Mapping[str, Mapping[str, Any]],
    default: str,
) -> dict[str, Any]:
  """The saved config, or else `--preset`'s (default: `default`)."""
  return dict(saved.get('config') or presets[args.preset or default])


def refuse_with_resume(args: argparse.Namespace, *names: str) -> None:
  """A `UsageError` if `--resume` comes with one of these flags."""
  for name in names:
    if args.resume and getattr(args, name) is not None:
      raise UsageError(f'--{name} starts a new run; --resume keeps its own.')


def resumed_step(run: Run, root: Callable[[pathlib.Path], pathlib.Path]) -> int:
  """The step `run` starts from: 0, or with `--resume` its last checkpoint's.

  Args:
    run: the run.
    root: where the run's loop keeps its checkpoints, given the run
      directory's `checkpoints/` (e.g. `runtime.checkpoint_root`).
  """
  if not run.args.resume:
    return 0
  return checkpoint.latest_step(root(run.run_dir.checkpoints)) or 0


def steps_up_to(
    root: Callable[[pathlib.Path], pathlib.Path],
) -> Callable[[Run], Callable[..., bool]]:
  """`resumed_rows`: rows up to the newest checkpoint in `root(run_dir)`."""

  def _resumed_rows(run: Run) -> Callable[[Mapping[str, Any]], bool]:
    start = resumed_step(run, root)
    return lambda row: row.get('step', 0) <= start

  return _resumed_rows


def _body(command: Command, args: argparse.Namespace) -> int:
  start_time = time.perf_counter()
  if command.check_args is not None:
    command.check_args(args)
  run_dir = RunDir(args.out_dir.expanduser())
  saved = run_dir.read_config(command.prog) if args.resume else {}
  base = (
      dict(saved.get('config', {}))
      if command.base_config is None
      else command.base_config(args, saved)
  )
  cls = command.config_cls
  config = make_config(cls, base | overrides(args, cls))
  # What the run chose for itself stays in config.json under 'chosen'.
  chosen = saved.get(CHOSEN_KEY, {})
  if command.resolve_config is not None and not args.resume:
    config, chosen = command.resolve_config(args, config)
  extras = {} if command.extras is None else command.extras(args, saved, config)
  if chosen:
    extras[CHOSEN_KEY] = chosen
  sinks = [n for n in logger_names(args, saved) if n != loggers.CSV]
  for name in sinks:  # A missing package fails before anything runs.
    loggers.require(name)
  if sinks:  # Kept for --resume (a csv-only run's config.json lacks it).
    extras['logger'] = logger_names(args, saved)
  prepare_run(args, run_dir, config)
  if not args.resume:
    run_dir.write_config(command.prog, config, **extras)

  log = logs.CsvLog(run_dir.log)
  run = Run(args, run_dir, config, extras, log, start_time)
  log.keep(command.resumed_rows(run))
  run.logger = loggers.make(
      sinks,
      run_dir.path,
      resume=args.resume,
      config=config,
      run_name=f'{command.prog} {run_dir.path.name}',
  )
  plots = []
  try:
    result = command.run(run)
  except KeyboardInterrupt:
    run_dir.write_config(command.prog, config, **extras)  # E.g. more steps.
    raise
  finally:
    run.logger.close()
    if args.plot and log.rows:
      plots += command.plot(log.rows, run)
  run_dir.write_config(command.prog, config, **extras)
  command.finish(run, result, plots)
  return 0


def run_command(command: Command, argv: Sequence[str] | None) -> int:
  """Runs `command` on `argv`; returns the exit status."""
  return main(
      command.prog,
      lambda: build_parser(command),
      functools.partial(_body, command),
      argv,
  )


def entry_points(
    command: Command,
) -> tuple[
    Callable[[], argparse.ArgumentParser],
    Callable[[Sequence[str] | None], int],
]:
  """The command's `build_parser()` and `main(argv)` (its console script)."""

  def build(cmd: Command = command) -> argparse.ArgumentParser:
    return build_parser(cmd)

  def run(argv: Sequence[str] | None = None) -> int:
    """Runs the command; returns its exit status."""
    return run_command(command, argv)

  build.__doc__ = f'The parser of `{command.prog}`.'
  return build, run
