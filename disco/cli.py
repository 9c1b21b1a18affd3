"""What `disco-eval` and `disco-meta-train` share: flags, outputs, errors.

* Flags are generated from the config dataclass (`EvalConfig`,
  `MetaTrainConfig`): every field is `--field-name VALUE` (underscores
  accepted too: `--field_name`), parsed from its type hint (ints, floats,
  `true`/`false`, comma-separated sizes `512,512`, settings
  `rows=5,columns=5`); the help text is the field's docstring entry. The
  deprecated spellings of earlier releases are accepted with a warning.
* The common flags: `--out-dir`, `--resume`, `--progress/--no-progress`,
  `--plot/--no-plot`, `--compilation-cache` and `--debug`.
* The outputs, in `--out-dir`: `config.json` (what `--resume` reads back),
  `log.csv` (one row per step, streamed as the run goes), `checkpoints/`,
  the final parameters (`*.npz`) and PNG plots (smoothed over the raw).
* One error policy: a bad flag or config value is a usage error (exit 2);
  a named error of the run (missing weights, a corrupt or mismatched
  checkpoint, a missing optional package) is one line (exit 1; `--debug`
  adds the traceback); Ctrl-C finishes the step, checkpoints, writes the
  partial curve and exits 130 with the command that resumes; any other
  exception is a bug and keeps its traceback.
"""

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
import dataclasses
import json
import pathlib
import sys
import traceback
import typing
from typing import Any
import warnings

from disco import checkpoint
from disco import configs
from disco import files
from disco import weights
from disco.environments import registry

CONFIG_FILENAME = 'config.json'
LOG_FILENAME = 'log.csv'
CHECKPOINTS_DIRNAME = 'checkpoints'

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Errors that mean "the input is wrong", not "the code is wrong": reported
# in one line. ImportError: a missing optional package (matplotlib, gymnax).
NAMED_ERRORS = (
    configs.ConfigError,
    weights.WeightsError,
    weights.WeightsNotFoundError,
    weights.DownloadError,
    checkpoint.CheckpointError,
    files.TreeMismatchError,
    registry.UnknownEnvironmentError,
    ImportError,
)

# Config fields without a flag: their output goes nowhere a command writes.
HIDDEN_FIELDS = frozenset({'record_rollouts'})
# The flags every command has.
COMMON_FLAGS = (
    '--out-dir',
    '--resume',
    '--progress',
    '--no-progress',
    '--plot',
    '--no-plot',
    '--compilation-cache',
    '--debug',
)

_TRUE = frozenset({'1', 'true', 'yes', 'on'})
_FALSE = frozenset({'0', 'false', 'no', 'off'})


class UsageError(Exception):
  """A problem with the command line (exit 2, with the usage line)."""


# ----------------------------------------------------------------------------
# Parsing values.


def parse_bool(text: str) -> bool:
  if text.lower() in _TRUE:
    return True
  if text.lower() in _FALSE:
    return False
  raise argparse.ArgumentTypeError(f'expected true or false, got {text!r}')


def _number(kind: type) -> Callable[[str], Any]:
  def _parse(text: str) -> Any:
    try:
      return kind(text)
    except ValueError:
      what = 'an integer' if kind is int else 'a number'
      raise argparse.ArgumentTypeError(f'not {what}: {text!r}') from None

  _parse.__name__ = kind.__name__
  return _parse


parse_int = _number(int)


def parse_ints(text: str) -> tuple[int, ...]:
  try:
    return tuple(int(part) for part in text.split(',') if part.strip())
  except ValueError:
    raise argparse.ArgumentTypeError(
        f'expected comma-separated ints, got {text!r}'
    ) from None


def _scalar(text: str) -> Any:
  for kind in (int, float):
    try:
      return kind(text)
    except ValueError:
      pass
  if text.lower() in _TRUE | _FALSE:
    return parse_bool(text)
  return text


def parse_settings(text: str) -> tuple[tuple[str, Any], ...]:
  """'rows=5,columns=5' -> (('rows', 5), ('columns', 5)); configs sort them."""
  pairs = []
  for part in filter(None, (p.strip() for p in text.split(','))):
    key, sep, value = part.partition('=')
    if not sep or not key:
      raise argparse.ArgumentTypeError(
          f'expected name=value pairs separated by commas, got {text!r}'
      )
    pairs.append((key.strip(), _scalar(value.strip())))
  return tuple(pairs)


def _optional(parse: Callable[[str], Any]) -> Callable[[str], Any]:
  def _parse(text: str) -> Any:
    return None if text.lower() == 'none' else parse(text)

  _parse.__name__ = getattr(parse, '__name__', 'value')
  return _parse


def _parser_for(hint: Any) -> tuple[Callable[[str], Any], str]:
  """(parse function, metavar) for a config field's type hint."""
  args = typing.get_args(hint)
  if type(None) in args:
    (inner,) = [a for a in args if a is not type(None)]
    parse, metavar = _parser_for(inner)
    return _optional(parse), metavar
  if hint is bool:
    return parse_bool, 'BOOL'
  if hint in (int, float):
    return _number(hint), hint.__name__.upper()
  if hint is str:
    return str, 'STR'
  if typing.get_origin(hint) is tuple:
    if args and typing.get_origin(args[0]) is tuple:
      return parse_settings, 'NAME=VALUE,...'
    return parse_ints, 'N,N'
  raise TypeError(f'No command-line parser for {hint}.')  # pragma: no cover


def _show(value: Any) -> str:
  if isinstance(value, tuple):
    if not value:
      return 'none'
    if isinstance(value[0], tuple):
      return ','.join(f'{k}={v}' for k, v in value) or '(none)'
    return ','.join(map(str, value))
  return str(value)


# ----------------------------------------------------------------------------
# Building the parser.


class _Deprecated(argparse.Action):
  """Stores under the new name and warns that the flag is deprecated."""

  def __init__(
      self,
      option_strings: Sequence[str],
      dest: str,
      new_flag: str = '',
      **kwargs: Any,
  ):
    self._new_flag = new_flag
    super().__init__(option_strings, dest, **kwargs)

  def __call__(
      self,
      parser: argparse.ArgumentParser,
      namespace: argparse.Namespace,
      values: Any,
      option_string: str | None = None,
  ) -> None:
    warnings.warn(
        f'{option_string} is deprecated; use {self._new_flag}.',
        DeprecationWarning,
        stacklevel=2,
    )
    print(
        f'{parser.prog}: warning: {option_string} is deprecated; use'
        f' {self._new_flag}.',
        file=sys.stderr,
    )
    if self.nargs == 0:
      values = self.const
    setattr(namespace, self.dest, values)


def flag(name: str) -> str:
  return '--' + name.replace('_', '-')


def add_deprecated_flag(
    parser: argparse.ArgumentParser,
    old: str,
    new_dest: str,
    new_flag: str,
    **kwargs: Any,
) -> None:
  """A hidden `--old` (and `--old_with_underscores`) storing into `new_dest`."""
  taken = parser._option_string_actions  # pylint: disable=protected-access
  names = sorted({'--' + old, flag(old)} - set(taken))
  parser.add_argument(
      *names,
      dest=new_dest,
      action=_Deprecated,
      new_flag=new_flag,
      help=argparse.SUPPRESS,
      **kwargs,
  )


def add_config_flags(
    parser: argparse.ArgumentParser,
    config_cls: type[configs.ConfigBase],
    title: str,
) -> None:
  """One flag per field of `config_cls` (default None: 'not given')."""
  group = parser.add_argument_group(title)
  hints = typing.get_type_hints(config_cls)
  for name, default, doc in configs.describe_fields(config_cls):
    if name in HIDDEN_FIELDS:
      continue
    parse, metavar = _parser_for(hints[name])
    names = [flag(name)] + (['--' + name] if '_' in name else [])
    kwargs: dict[str, Any] = dict(type=parse, metavar=metavar)
    if hints[name] is bool:
      # `--fast` alone means true; `--fast false` is accepted too.
      kwargs.update(nargs='?', const=True)
    group.add_argument(
        *names,
        dest=name,
        default=None,
        help=f'{doc} (default: {_show(default)})'.replace('%', '%%'),
        **kwargs,
    )
  for old, new in config_cls.RENAMED.items():
    parse, metavar = _parser_for(hints[new])
    add_deprecated_flag(
        parser, old, new, flag(new), type=parse, metavar=metavar
    )


def add_common_flags(
    parser: argparse.ArgumentParser, default_out_dir: str
) -> None:
  """The flags every command has (see the module docstring)."""
  group = parser.add_argument_group('run')
  group.add_argument(
      '--out-dir',
      '--out_dir',
      type=pathlib.Path,
      metavar='DIR',
      default=pathlib.Path(default_out_dir),
      help='output directory (default: %(default)s)',
  )
  group.add_argument(
      '--resume',
      action='store_true',
      help=(
          'continue the run in --out-dir from its newest checkpoint (its'
          f' {CONFIG_FILENAME} gives the config; flags given now override it)'
      ),
  )
  group.add_argument(
      '--progress',
      action=argparse.BooleanOptionalAction,
      default=True,
      help='show a progress bar (default: on)',
  )
  group.add_argument(
      '--plot',
      action=argparse.BooleanOptionalAction,
      default=True,
      help='write PNG plots (needs matplotlib; default: on)',
  )
  group.add_argument(
      '--compilation-cache',
      '--compilation_cache',
      type=pathlib.Path,
      metavar='DIR',
      default=None,
      help=(
          "JAX's persistent compilation cache directory: later runs start"
          ' in seconds instead of compiling again'
      ),
  )
  group.add_argument(
      '--debug',
      action='store_true',
      help='show the traceback of errors that are otherwise one line',
  )
  add_deprecated_flag(parser, 'out', 'out_dir', '--out-dir', type=pathlib.Path)
  for old in ('no_progress', 'quiet'):
    add_deprecated_flag(
        parser,
        old,
        'progress',
        '--no-progress',
        nargs=0,
        const=False,
    )


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


# ----------------------------------------------------------------------------
# The output directory.


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

  def read_config(self) -> dict[str, Any]:
    """The saved `config.json` (for `--resume`)."""
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
    return saved


# ----------------------------------------------------------------------------
# Running.


def load_config(
    args: argparse.Namespace, config_cls: type[configs.ConfigBase]
) -> tuple[RunDir, dict[str, Any], Any]:
  """The run's directory, its saved `config.json` (with `--resume`) and config.

  The config is the saved one (if resuming) updated by the flags given.
  """
  run_dir = RunDir(args.out_dir.expanduser())
  saved = run_dir.read_config() if args.resume else {}
  config = make_config(
      config_cls, saved.get('config', {}) | overrides(args, config_cls)
  )
  return run_dir, saved, config


def prepare_run(args: argparse.Namespace, run_dir: RunDir, config: Any) -> None:
  """Checks what can be checked before a run starts, then makes `--out-dir`.

  The environment and its settings (each of a population's), matplotlib (unless `--no-plot`), and
  that a new run does not overwrite another's checkpoints.
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


def main(
    prog: str,
    build_parser: Callable[[], argparse.ArgumentParser],
    body: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None,
) -> int:
  """Parses `argv` and runs `body(args)`; returns the exit status.

  Errors are handled by the policy of the module docstring.
  """
  parser = build_parser()
  args = parser.parse_args(argv)
  try:
    return body(args)
  except UsageError as e:
    parser.print_usage(sys.stderr)
    print(f'{prog}: error: {e}', file=sys.stderr)
    return EXIT_USAGE
  except NAMED_ERRORS as e:
    if args.debug:
      traceback.print_exc()
    print(f'{prog}: error: {e}', file=sys.stderr)
    return EXIT_ERROR
  except KeyboardInterrupt:
    print(
        f'\n{prog}: interrupted; checkpoint and partial log in'
        f' {args.out_dir}. Continue with: {prog} --out-dir {args.out_dir}'
        ' --resume',
        file=sys.stderr,
    )
    return EXIT_INTERRUPTED


def flags_table(parser: argparse.ArgumentParser) -> str:
  """The command's flags as a Markdown table (the README shows it)."""
  lines = ['| flag | meaning |', '| --- | --- |']
  for action in parser._actions:  # pylint: disable=protected-access
    if action.help in (argparse.SUPPRESS, None) or not action.option_strings:
      continue
    if isinstance(action, argparse._HelpAction):  # pylint: disable=protected-access
      continue
    names = [n for n in action.option_strings if '_' not in n]
    text = action.help
    if '%(' in text:
      text = text % dict(default=action.default)
    text = text.replace('%%', '%').replace('|', '\\|')
    metavar = action.metavar or ''
    if action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction):
      metavar = ''
    shown = ', '.join(f'`{n}{" " + metavar if metavar else ""}`' for n in names)
    lines.append(f'| {shown} | {text} |')
  return '\n'.join(lines)


def report(prog: str, written: Sequence[pathlib.Path]) -> None:
  print(f'{prog}: wrote')
  for path in written:
    print(f'  {path}')
