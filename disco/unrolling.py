"""Unrolling the `lax.scan` loops inside a function, for latency.

A GPU runs each iteration of a rolled loop as its own kernels, one after
another; unrolled, XLA fuses across iterations. Craftax's step holds some
30 short scans (over mobs, blocks, plants) and a Disco103 update two of 28
steps (Retrace, the meta-network's recurrence). `unroll_scans` rewrites
them, and only them, with `unroll` set to their length: the same
operations, so the same values (bit for bit on the CPU, checked in
`tests/test_unrolling.py`), compiled into a larger program. Measurements:
`docs/results/gpu.md`.
"""

from collections.abc import Callable
import functools
from typing import Any, TypeVar

import jax
from jax.extend import core as jax_core

_F = TypeVar('_F', bound=Callable[..., Any])


def _rewrite(obj: Any, max_length: int | None) -> Any:
  """`obj` with its scans (and its sub-jaxprs' scans) set to unroll."""
  # JAX 0.11 merged `ClosedJaxpr` into `Jaxpr` (its `.jaxpr` is itself):
  # there, a closed jaxpr's equations are rewritten in place.
  if isinstance(obj, jax_core.ClosedJaxpr) and obj.jaxpr is not obj:
    return obj.replace(jaxpr=_rewrite(obj.jaxpr, max_length))
  if isinstance(obj, jax_core.Jaxpr):
    eqns = []
    for eqn in obj.eqns:
      params = {k: _rewrite(v, max_length) for k, v in eqn.params.items()}
      if eqn.primitive.name == 'scan' and (
          max_length is None or params['length'] <= max_length
      ):
        params['unroll'] = max(int(params['length']), 1)
      eqns.append(eqn.replace(params=params))
    return obj.replace(eqns=eqns)
  if isinstance(obj, (tuple, list)) and any(
      isinstance(o, (jax_core.ClosedJaxpr, jax_core.Jaxpr)) for o in obj
  ):
    return type(obj)(_rewrite(o, max_length) for o in obj)
  return obj


def unroll_scans(fn: _F, *, max_length: int | None = None) -> _F:
  """`fn` with every `lax.scan` it runs unrolled, nested ones included.

  The wrapped function traces `fn` to a jaxpr, sets each scan's `unroll`
  to its length and evaluates the result in the caller's trace, so it
  composes with `jit`, `vmap`, `grad` and the loops around it; scans
  outside `fn` (e.g. the loop that calls it) stay as they are. Loops
  written as `while_loop` (and `fori_loop` with traced bounds) are left
  rolled: their trip count is not known when tracing.

  Args:
    fn: a function of positional array pytrees, returning a pytree.
    max_length: unroll only the scans of at most this many iterations
      (None: all).

  Returns:
    A function with `fn`'s signature and results.
  """
  if max_length is not None and max_length < 1:
    raise ValueError(f'max_length must be >= 1 or None, got {max_length}.')

  @functools.wraps(fn)
  def unrolled(*args: Any) -> Any:
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    outs = jax_core.jaxpr_as_fun(_rewrite(closed, max_length))(
        *jax.tree.leaves(args)
    )
    return jax.tree.unflatten(jax.tree.structure(out_shape), outs)

  return unrolled  # pytype: disable=bad-return-type


def scan_iterations(fn: Callable[..., Any], *args: Any) -> tuple[int, int]:
  """(rolled, unrolled) scan iterations one call of `fn(*args)` runs.

  Nested scans count once per iteration of the scans around them; a scan
  with `unroll` equal to its length counts as unrolled, as do the scans in
  its body. Branches of a `cond` count as if each ran; the bodies of
  `while` loops are not counted (their trip counts are not known).
  """
  rolled = unrolled = 0

  def walk(jaxpr: jax_core.Jaxpr, times: int, inside_unrolled: bool) -> None:
    nonlocal rolled, unrolled
    for eqn in jaxpr.eqns:
      name = eqn.primitive.name
      if name == 'while':
        continue
      inner_times, inner_unrolled = times, inside_unrolled
      if name == 'scan':
        length = int(eqn.params['length'])
        is_unrolled = inside_unrolled or eqn.params['unroll'] >= length
        if is_unrolled:
          unrolled += times * length
        else:
          rolled += times * length
        inner_times, inner_unrolled = times * length, is_unrolled
      for sub in jax_core.jaxprs_in_params(eqn.params):
        walk(sub, inner_times, inner_unrolled)

  walk(jax.make_jaxpr(fn)(*args).jaxpr, 1, False)
  return rolled, unrolled
