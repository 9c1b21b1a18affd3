"""Command-line flags generated from a config dataclass, and their parsers."""

import argparse
from collections.abc import Callable, Mapping, Sequence
import pathlib
import sys
import typing
from typing import Any
import warnings

from disco import configs
from disco import loggers

CONFIG_FILENAME = 'config.json'

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
    '--logger',
    '--debug',
)

_TRUE = frozenset({'1', 'true', 'yes', 'on'})
_FALSE = frozenset({'0', 'false', 'no', 'off'})


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


# A config flag's own parser: (parse, metavar, how its default is shown).
FlagType = tuple[Callable[[str], Any], str, Callable[[Any], str]]


def add_config_flags(
    parser: argparse.ArgumentParser,
    config_cls: type[configs.ConfigBase],
    title: str,
    flag_types: Mapping[str, FlagType] | None = None,
) -> None:
  """One flag per field of `config_cls` (default None: 'not given').

  `flag_types` replaces the parser that a field's type hint gives.
  """
  flag_types = flag_types or {}
  group = parser.add_argument_group(title)
  hints = typing.get_type_hints(config_cls)
  for name, default, doc in configs.describe_fields(config_cls):
    if name in HIDDEN_FIELDS:
      continue
    parse, metavar = _parser_for(hints[name])
    show = _show
    if name in flag_types:
      parse, metavar, show = flag_types[name]
    names = [flag(name)] + (['--' + name] if '_' in name else [])
    kwargs: dict[str, Any] = dict(type=parse, metavar=metavar)
    if hints[name] in (bool, bool | None):
      # `--fast` alone means true; `--fast false` is accepted too.
      kwargs.update(nargs='?', const=True)
    group.add_argument(
        *names,
        dest=name,
        default=None,
        help=f'{doc} (default: {show(default)})'.replace('%', '%%'),
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
      '--logger',
      nargs='+',
      choices=loggers.NAMES,
      metavar='NAME',
      default=None,
      help=(
          'where the per-step logs go, one or more of: csv (log.csv, which'
          ' is always written: the plots and --resume read it), tensorboard'
          ' (event files in --out-dir/tensorboard/; needs'
          ' disco-jax[tensorboard]), wandb (a Weights & Biases run in'
          ' --out-dir/wandb/; needs disco-jax[wandb]; WANDB_MODE=offline'
          " works without a network) (default: csv; with --resume, the run's)"
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
