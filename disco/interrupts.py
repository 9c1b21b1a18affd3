"""Ctrl-C or SIGTERM between steps: finish the step, checkpoint, then stop.

The loops never install a signal handler themselves. A caller that wants a
Ctrl-C (SIGINT) or a SIGTERM (what SLURM, Kubernetes and `docker stop` send
before they kill a job) to end a run cleanly (the command lines do; a
notebook may) passes `handle_interrupts=True`, and the loop runs inside
`deferred_interrupts`: the first signal only sets a flag, which the loop
checks after each step (or chunk); it then writes a checkpoint and raises
`Interrupted` (a `KeyboardInterrupt`). A second signal interrupts at once.
The previous handlers are restored when the loop ends.
"""

from collections.abc import Callable, Iterator
import contextlib
import logging
import signal
import threading
import types

# The signals a run stops on, after finishing its step.
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
  """A run stopped after a checkpoint because of signal `signum`."""

  def __init__(self, signum: int):
    super().__init__(signal.Signals(signum).name)
    self.signum = int(signum)


def signal_name(signum: int) -> str:
  """'SIGINT', 'SIGTERM', ... (the number if it has no name)."""
  try:
    return signal.Signals(signum).name
  except ValueError:
    return str(signum)


@contextlib.contextmanager
def deferred_interrupts(
    what: str = 'step', enabled: bool = True
) -> Iterator[Callable[[], int]]:
  """Turns the first SIGINT or SIGTERM into a flag that the caller checks.

  Args:
    what: what the loop finishes before it stops (for the message).
    enabled: False yields a flag that is never set and leaves the signals
      alone.

  Yields:
    A function that returns the signal received (0 if none yet). Outside
    the main thread (where handlers cannot be installed) it is always 0.
  """
  if not enabled or threading.current_thread() is not threading.main_thread():
    yield lambda: 0
    return
  received = []
  previous = {signum: signal.getsignal(signum) for signum in SIGNALS}

  def _restore() -> None:
    for signum, handler in previous.items():
      signal.signal(signum, handler)

  def _handler(signum: int, frame: types.FrameType | None) -> None:
    del frame
    if received:
      _restore()
      raise KeyboardInterrupt
    received.append(signum)
    logging.warning(
        '%s: stopping after this %s (and checkpointing if a checkpoint'
        ' directory is set). Send it again (Ctrl-C) to abort now.',
        signal_name(signum),
        what,
    )

  for signum in SIGNALS:
    signal.signal(signum, _handler)
  try:
    yield lambda: received[0] if received else 0
  finally:
    _restore()
