"""Compiled programs: built once per setting, compiled in the background."""

from collections.abc import Callable, Hashable, Mapping
import functools
import threading
from typing import Any, Generic, TypeVar

import jax

_P = TypeVar('_P')


class BackgroundCompile:
  """Compiles programs in threads while the caller does something else.

  XLA releases the GIL while it compiles, so a run initialises or restores
  its state meanwhile and its first step finds the program compiled (same
  shapes, dtypes and shardings). Each key compiles once; a failed
  compilation is raised by the wait function and may be tried again.
  """

  def __init__(self) -> None:
    self._lock = threading.Lock()
    self._started: dict[Hashable, tuple[threading.Thread, list]] = {}

  def start(
      self, compile_fn: Callable[[], Any], key: Hashable = None
  ) -> Callable[[], None]:
    """Starts `compile_fn()` in a thread (once per key); returns a waiter.

    Skipped with several processes (where `pmap` converts process-local
    inputs itself). The waiter blocks until the compilation is done and
    re-raises its error, if any.
    """
    if jax.process_count() > 1:
      return lambda: None
    with self._lock:
      if key not in self._started:
        errors = []

        def _compile() -> None:
          try:
            compile_fn()
          except BaseException as e:  # pylint: disable=broad-exception-caught
            errors.append(e)

        thread = threading.Thread(target=_compile, daemon=True)
        thread.start()
        self._started[key] = (thread, errors)
      thread, errors = self._started[key]

    def _wait() -> None:
      thread.join()
      if errors:
        with self._lock:
          self._started.pop(key, None)  # Let a later run try again.
        raise errors[0]

    return _wait


class ProgramCache(Generic[_P]):
  """Programs (objects holding compiled functions) shared between runs.

  Runs whose configs differ only in fields that do not shape the
  computation (`neutral`: field -> the value the key uses) share one
  program, on the same devices.
  """

  def __init__(
      self,
      build: Callable[..., _P],
      neutral: Mapping[str, Any],
      maxsize: int = 4,
  ):
    self._neutral = dict(neutral)
    self._build = functools.lru_cache(maxsize=maxsize)(self._build_for)
    self._make = build

  def _build_for(
      self, config: Any, all_devices: tuple[Any, ...], extra: tuple[Any, ...]
  ) -> _P:
    del all_devices  # Part of the cache key only.
    return self._make(config, *extra)

  def __call__(self, config: Any, *extra: Hashable) -> _P:
    """The program for `config` (and `extra` arguments of `build`)."""
    key = config.replace(**self._neutral)
    return self._build(key, tuple(jax.devices()), extra)

  def clear(self) -> None:
    self._build.cache_clear()
