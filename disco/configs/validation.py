"""Range checks of config fields, and the names of the fields they cover.

Every run config validates itself in `__post_init__` with these: each
raises `ConfigError` with a message that names the field. The field groups
(`NETWORK_SIZES`, `LEARNING_RATES`, `META_*`) are the fields the configs
have in common, by the range their values must lie in.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from disco import weights

# Where the update rule's parameters come from (`update_rule_params`).
DISCO103 = weights.DISCO103
RANDOM = 'random'


class ConfigError(ValueError):
  """A config field has an invalid value (the message names the field)."""


def positive_ints(name: str, values: Any) -> tuple[int, ...]:
  """`values` as a non-empty tuple of positive ints, or a `ConfigError`."""
  try:
    values = tuple(values)
  except TypeError:
    raise ConfigError(
        f'{name} must be a sequence of positive ints, got {values!r}.'
    ) from None
  if not values or not all(
      isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values
  ):
    raise ConfigError(
        f'{name} must be a non-empty tuple of positive ints, got {values!r}.'
    )
  return values


def sorted_settings(settings: Any) -> tuple[tuple[str, Any], ...]:
  """Environment settings as sorted `(name, value)` pairs (hashable)."""
  if isinstance(settings, Mapping):
    settings = settings.items()
  return tuple(sorted((str(k), v) for k, v in settings))


def check(condition: bool, message: str) -> None:
  """Raises `ConfigError(message)` unless `condition`."""
  if not condition:
    raise ConfigError(message)


def check_ints(config: Any, names: Sequence[str], minimum: int) -> None:
  """Raises `ConfigError` unless each field in `names` is an int >= minimum."""
  for name in names:
    value = getattr(config, name)
    check(
        isinstance(value, (int, np.integer))
        and not isinstance(value, bool)
        and value >= minimum,
        f'{name} must be an int >= {minimum}, got {value!r}.',
    )


# Fields the configs share, by the range their values must lie in.
NETWORK_SIZES = ('agent_dense', 'agent_head_mlp_hiddens', 'value_fn_dense')
LEARNING_RATES = ('agent_learning_rate', 'value_fn_learning_rate')
# The meta-learning configs' (`MetaTrainConfig`, `DiscoveryConfig`).
META_POSITIVE = (
    'meta_learning_rate',
    *LEARNING_RATES,
    'value_fn_max_abs_update',
)
META_NON_NEGATIVE = (
    'agent_head_w_init_std',
    'value_fn_head_w_init_std',
    'value_fn_outer_value_cost',
    'value_fn_ema_eps',
    'policy_entropy_cost',
    'prediction_entropy_cost',
    'target_mean_cost',
    'target_kl_cost',
)
META_FRACTIONS = (
    'value_fn_discount_factor',
    'value_fn_td_lambda',
    'value_fn_ema_decay',
)


def set_network_sizes(config: Any, names: Sequence[str] = NETWORK_SIZES):
  """Stores each field in `names` as a non-empty tuple of positive ints."""
  for name in names:
    object.__setattr__(config, name, positive_ints(name, getattr(config, name)))


def set_sorted_settings(config: Any, name: str = 'env_settings') -> None:
  """Stores field `name` as sorted `(name, value)` pairs."""
  object.__setattr__(config, name, sorted_settings(getattr(config, name)))


def check_positive(config: Any, names: Sequence[str]) -> None:
  for name in names:
    value = getattr(config, name)
    check(value > 0, f'{name} must be > 0, got {value!r}.')


def check_non_negative(config: Any, names: Sequence[str]) -> None:
  for name in names:
    value = getattr(config, name)
    check(value >= 0, f'{name} must be >= 0, got {value!r}.')


def check_fractions(config: Any, names: Sequence[str]) -> None:
  for name in names:
    value = getattr(config, name)
    check(0 <= value <= 1, f'{name} must be in [0, 1], got {value!r}.')


def check_bools(config: Any, names: Sequence[str]) -> None:
  for name in names:
    check(isinstance(getattr(config, name), bool), f'{name} must be a bool.')


def check_rule_source(config: Any) -> None:
  """`update_rule_params` is None or names a rule (a non-empty string)."""
  value = config.update_rule_params
  check(
      value is None or (isinstance(value, str) and value),
      "update_rule_params must be None, 'random', 'disco103' or the"
      f' path of an .npz file, got {value!r}.',
  )


def check_fixed_rule(config: Any, rules: Sequence[str], purpose: str) -> None:
  """`config.rule` is known, and only the meta-learned one loads parameters.

  Args:
    config: a config with `rule` and `update_rule_params` (the learned
      rule's name is `rules[0]`).
    rules: the rules the run kind knows.
    purpose: what the run does, for the messages ('training').
  """
  check(
      config.rule in rules,
      f'Unknown rule {config.rule!r}; choose one of {", ".join(rules)}.',
  )
  check(
      config.update_rule_params is None or config.rule == rules[0],
      f'update_rule_params is for the {rules[0]} rule; the {config.rule} rule'
      ' has no parameters to load.',
  )
  check(
      config.update_rule_params != RANDOM,
      f"update_rule_params: {purpose} needs a trained rule, not 'random'.",
  )
