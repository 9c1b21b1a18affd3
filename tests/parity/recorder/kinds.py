"""What a case is, read from its JSON: the kind that picks its recipe.

A case's file name is only a name: a set may hold `env_catch_jittable_10x5`
or `optimizer_adam_sg_clip0p3`, written as the shipped cases are. What
the case is comes from what it holds: the fields of its config (its JSON's
`config`, the same in a golden set's sidecar and in a builtin spec entry)
and, where the config alone does not tell, the input keys it stores. Each
kind lists the fields and inputs that only its cases hold, and a case must
match exactly one kind.
"""

from collections.abc import Iterable, Mapping
import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Kind:
  """A kind of case: how its JSON tells it, and what a recording recomputes.

  Attributes:
    name: the kind (its recipe's key in `recipes.RECIPES`).
    fields: config fields every case of the kind holds.
    inputs: stored keys (or key prefixes) every case of the kind holds.
    outputs: key prefixes recomputed besides `expected/` (the parameter
      trees that are a case's output).
  """

  name: str
  fields: tuple[str, ...]
  inputs: tuple[str, ...] = ()
  outputs: tuple[str, ...] = ()

  def matches(self, config: Mapping[str, Any], keys: Iterable[str]) -> bool:
    """Whether a case with this config and these keys is of this kind."""
    keys = list(keys)
    return all(f in config for f in self.fields) and all(
        any(k == i or k.startswith(i + '/') for k in keys) for i in self.inputs
    )


KINDS = (
    Kind('env_catch_jittable', ('rows', 'columns', 'reset_seed')),
    Kind('env_catch_cpu', ('env_settings', 'batch_size')),
    Kind('utils', ('moving_average',)),
    Kind('optimizer_adam_sg', ('b1', 'b2', 'clip_max_delta', 'learning_rate')),
    Kind('input_transforms', ('transforms',)),
    Kind('value_utils_categorical_and_losses', ('T', 'B'), ('inputs/td',)),
    Kind(
        'value_utils_estimators',
        ('discount', 'lambda_'),
        ('inputs/target_q_values', 'inputs/rho'),
    ),
    Kind('value_utils_get_value_outs', ('ema_decay', 'ema_eps', 'drop_last')),
    Kind('policy_gradient_rule', ('normalize_adv_true', 'normalize_adv_false')),
    Kind('meta_net_init', ('update_rule',), outputs=('params/',)),
    Kind(
        'disco103_meta_params', ('flat_key_convention',), outputs=('params/',)
    ),
    Kind('disco_unroll_meta_net', ('hyper_params', 'single_observation_spec')),
    Kind('value_function', ('value_fn_config', 'rollout_agent')),
    Kind('agent_small', ('agent_settings', 'n_learner_steps')),
    Kind('agent_full_eval_config', ('agent_settings', 'num_param_leaves')),
    Kind('eval_curve_catch', ('agent_settings', 'replay_ratio', 'buffer')),
    Kind(
        'meta_gradient',
        ('agent_settings', 'value_fn_config', 'num_inner_steps'),
        outputs=('params/',),
    ),
)
BY_NAME = {k.name: k for k in KINDS}


class UnknownKindError(KeyError):
  """A case whose JSON matches no kind, or more than one."""

  def __str__(self) -> str:
    return str(self.args[0]) if self.args else ''


def kind_of(
    config: Mapping[str, Any], keys: Iterable[str], case: str = ''
) -> Kind:
  """The kind of a case, from its config and stored keys (not its name).

  Args:
    config: the case's config.
    keys: the keys the case stores (a golden set's), or lists (a builtin
      spec entry's `inputs`).
    case: the case's name, for messages only.

  Returns:
    The one kind the case matches.

  Raises:
    UnknownKindError: no kind matches, or several do.
  """
  keys = list(keys)
  found = [k for k in KINDS if k.matches(config, keys)]
  if len(found) == 1:
    return found[0]
  if not found:
    inputs = sorted({'/'.join(k.split('/')[:2]) for k in keys})
    raise UnknownKindError(
        f'No recorder for case {case!r}: no kind of case has its config'
        f' fields {sorted(config)} and inputs {inputs[:12]}.'
    )
  raise UnknownKindError(
      f'Case {case!r} matches several kinds: {[k.name for k in found]}.'
  )


def is_output(kind: Kind, key: str) -> bool:
  """Whether a recording recomputes `key` (else it is copied from the spec)."""
  return key.startswith(('expected/', *kind.outputs))
