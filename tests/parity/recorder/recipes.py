"""The recipe of each kind of case, and one case recorded with it.

A case's recipe is found by its kind (`kinds.kind_of`: what its JSON says
it is), never by its file name, so a set may name its cases for other
sizes and values.
"""

from collections.abc import Callable
import pathlib
from typing import Any

import numpy as np

from tests.parity import builtin
from tests.parity.recorder import cases_agents
from tests.parity.recorder import cases_loops
from tests.parity.recorder import cases_units
from tests.parity.recorder import cases_values
from tests.parity.recorder import kinds
from tests.parity.recorder import spec as spec_lib

Recipe = Callable[[Any, spec_lib.Spec], dict[str, np.ndarray]]
RECIPES: dict[str, Recipe] = {
    'env_catch_jittable': cases_units.record_jittable_catch,
    'env_catch_cpu': cases_units.record_cpu_catch,
    'utils': cases_units.record_utils,
    'optimizer_adam_sg': cases_units.record_optimizer,
    'input_transforms': cases_units.record_input_transforms,
    'value_utils_categorical_and_losses': cases_values.record_value_losses,
    'value_utils_estimators': cases_values.record_estimators,
    'value_utils_get_value_outs': cases_values.record_get_value_outs,
    'policy_gradient_rule': cases_values.record_policy_gradient,
    'value_function': cases_values.record_value_function,
    'meta_net_init': cases_agents.record_meta_net_init,
    'disco103_meta_params': cases_agents.record_disco103,
    'disco_unroll_meta_net': cases_agents.record_unroll_meta_net,
    'agent_small': cases_agents.record_small_agent,
    'agent_full_eval_config': cases_agents.record_full_agent,
    'eval_curve_catch': cases_loops.record_eval_curve,
    'meta_gradient': cases_loops.record_meta_gradient,
}


def record_case(
    ref, spec_dir: pathlib.Path | None, name: str
) -> dict[str, np.ndarray]:
  """The case recorded here: the spec's inputs, this machine's outputs.

  Args:
    ref: the reference (`reference.load_reference`).
    spec_dir: the spec set; None: the builtin spec, whose inputs are drawn
      (and produced by the reference) here.
    name: the case.

  Returns:
    Every key of the case.

  Raises:
    KeyError: no recipe for the case's kind (`kinds.UnknownKindError`), or
      outputs that the spec has but the recipe did not recompute (for the
      builtin spec: not as many as it lists).
  """
  spec = spec_lib.Spec(spec_dir, name, ref)
  kind = spec.kind
  computed = RECIPES[kind.name](ref, spec)
  computed = {k: np.asarray(v) for k, v in computed.items()}
  if spec.builtin:
    outputs = {k: v for k, v in computed.items() if kinds.is_output(kind, k)}
    want = builtin.load()[name]['outputs']
    if len(outputs) != want or set(outputs) & set(spec.arrays):
      raise KeyError(
          f'{name}: {len(outputs)} outputs recorded, the builtin spec lists'
          f' {want}.'
      )
    return {**spec.arrays, **outputs}
  wanted = [k for k in spec.arrays if kinds.is_output(kind, k)]
  missing = sorted(set(wanted) - set(computed))
  if missing:
    raise KeyError(f'{name}: not recomputed: {missing[:10]}')
  out = {}
  for key, value in spec.arrays.items():
    out[key] = computed[key] if kinds.is_output(kind, key) else value
  return out
