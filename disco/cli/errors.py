"""The command lines' error policy: exit codes and one-line errors."""

import argparse
from collections.abc import Callable, Sequence
import pathlib
import signal
import sys
import traceback

from disco import checkpoint
from disco import configs
from disco import files
from disco import interrupts
from disco import weights
from disco.environments import registry

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT; a SIGTERM exits with 128 + 15.

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


class UsageError(Exception):
  """A problem with the command line (exit 2, with the usage line)."""


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
  except KeyboardInterrupt as e:
    signum = getattr(e, 'signum', signal.SIGINT)
    what = (
        'interrupted'
        if signum == signal.SIGINT
        else f'stopped by {interrupts.signal_name(signum)}'
    )
    print(
        f'\n{prog}: {what}; checkpoint and partial log in'
        f' {args.out_dir}. Continue with: {prog} --out-dir {args.out_dir}'
        ' --resume',
        file=sys.stderr,
    )
    return 128 + int(signum)  # The shells' convention: 130, 143.


def report(prog: str, written: Sequence[pathlib.Path]) -> None:
  print(f'{prog}: wrote')
  for path in written:
    print(f'  {path}')
