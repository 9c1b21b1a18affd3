"""Ctrl-C between steps: finish the step, checkpoint, then stop.

The loops never install a signal handler themselves. A caller that wants a
Ctrl-C to end a run cleanly (the command lines do; a notebook may) passes
`handle_interrupts=True`, and the loop runs inside `deferred_interrupts`:
the first SIGINT only sets a flag, which the loop checks after each step
(or chunk); it then writes a checkpoint and raises `KeyboardInterrupt`. A
second SIGINT interrupts at once.
"""

from collections.abc import Callable, Iterator
import contextlib
import logging
import signal
import threading
import types


@contextlib.contextmanager
def deferred_interrupts(
    what: str = 'step', enabled: bool = True
) -> Iterator[Callable[[], bool]]:
  """Turns the first Ctrl-C into a flag that the caller checks.

  Args:
    what: what the loop finishes before it stops (for the message).
    enabled: False yields a flag that is never set and leaves SIGINT alone.

  Yields:
    A function that says whether Ctrl-C was pressed. Outside the main
    thread (where handlers cannot be installed) it is always False.
  """
  if not enabled or threading.current_thread() is not threading.main_thread():
    yield lambda: False
    return
  received = []
  previous = signal.getsignal(signal.SIGINT)

  def _handler(signum: int, frame: types.FrameType | None) -> None:
    del frame
    if received:
      signal.signal(signal.SIGINT, previous)
      raise KeyboardInterrupt
    received.append(signum)
    logging.warning(
        'Interrupted: stopping after this %s (and checkpointing if a'
        ' checkpoint directory is set). Press Ctrl-C again to abort now.',
        what,
    )

  signal.signal(signal.SIGINT, _handler)
  try:
    yield lambda: bool(received)
  finally:
    signal.signal(signal.SIGINT, previous)
