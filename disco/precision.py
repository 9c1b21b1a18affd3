"""Mixed precision for the trainer: bfloat16 compute, float32 everything else.

`compute_in(dtype, fn)` makes the Haiku networks that `fn` applies multiply
in `dtype`, with float32 parameters and outputs (docs: training).
"""

from collections.abc import Callable
import functools
import threading
from typing import Any, TypeVar

import haiku as hk
import jax.numpy as jnp
import jmp

FLOAT32 = 'float32'
BFLOAT16 = 'bfloat16'
COMPUTE_DTYPES = (FLOAT32, BFLOAT16)

_F = TypeVar('_F', bound=Callable[..., Any])
# Held while a wrapped function runs (is traced): see `compute_in`.
_POLICY_LOCK = threading.RLock()


def policy(dtype: str) -> jmp.Policy:
  """Float32 parameters and outputs, `dtype` compute."""
  if dtype not in COMPUTE_DTYPES:
    raise ValueError(
        f'Unknown compute dtype {dtype!r}; choose one of'
        f' {", ".join(COMPUTE_DTYPES)}.'
    )
  return jmp.Policy(
      param_dtype=jnp.float32,
      compute_dtype=jnp.dtype(dtype),
      output_dtype=jnp.float32,
  )


def compute_in(dtype: str, fn: _F) -> _F:
  """`fn`, with Haiku's linear layers computing in `dtype` while traced.

  Haiku keeps its policies in one process-wide table, so wrapped calls (of
  any dtype) take one lock: two threads tracing at once (e.g. the trainer's
  background compilation and its acting program) never see each other's
  policy, and none is left behind.
  """
  linear_policy = policy(dtype)

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    with _POLICY_LOCK:
      if dtype == FLOAT32:
        return fn(*args, **kwargs)
      with hk.mixed_precision.push_policy(hk.Linear, linear_policy):
        return fn(*args, **kwargs)

  return wrapped
