"""What the run configs share: one vocabulary, one codec, one set of checks.

`ConfigBase` gives every config `replace`, `to_dict` and `from_dict` (JSON
round trip, deprecated spellings accepted with a warning); the field groups
below (`NETWORK_SIZES`, `LEARNING_RATES`, ...) and their `check_*`
functions declare the ranges of the fields the configs have in common.
"""

from collections.abc import Mapping, Sequence
import dataclasses
import typing
from typing import Any, ClassVar, Self
import warnings

from ml_collections import config_dict
import numpy as np

from disco import types
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


class ReplayBatches:
  """The fresh and replayed parts of a learner batch (a config mixin).

  Needs `learner_batch_size` and `replay_fraction`.
  """

  @property
  def replay_per_batch(self) -> int:
    """Replayed trajectories in each learner batch."""
    return int(round(self.replay_fraction * self.learner_batch_size))

  @property
  def fresh_per_batch(self) -> int:
    """Fresh trajectories (of the newest rollout) in each learner batch."""
    return self.learner_batch_size - self.replay_per_batch


# The reference notebook's meta-loss regulariser weights.
POLICY_ENTROPY_COST = 1e-2
PREDICTION_ENTROPY_COST = 1e-3
TARGET_MEAN_COST = 1e-3
TARGET_KL_COST = 1e-2


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class AgentFields:
  """The agent's MLP network and step size (a config mixin).

  The defaults are the evaluation colab's agent; `agent_settings` reads
  them.
  """

  agent_dense: tuple[int, ...] = (512, 512)
  agent_lstm_size: int = 128
  agent_head_mlp_hiddens: tuple[int, ...] = (128,)
  agent_head_w_init_std: float = 1e-2
  agent_learning_rate: float = 1e-2


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class ValueFnFields:
  """The MLP value function beside the agent (a config mixin).

  `value_fn_config` reads them.
  """

  value_fn_dense: tuple[int, ...] = (256, 256)
  value_fn_head_w_init_std: float = 1e-2
  value_fn_learning_rate: float = 1e-3
  value_fn_td_lambda: float = 0.95


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class MetaLossFields(ValueFnFields):
  """The meta-loss's value function and regularisers (a config mixin).

  Meta-training and discovery share them; `META_POSITIVE`,
  `META_NON_NEGATIVE` and `META_FRACTIONS` give their ranges.
  """

  value_fn_max_abs_update: float = 1.0
  value_fn_discount_factor: float = 0.99
  value_fn_outer_value_cost: float = 1.0
  value_fn_ema_decay: float = 0.99
  value_fn_ema_eps: float = 1e-6
  policy_entropy_cost: float = POLICY_ENTROPY_COST
  prediction_entropy_cost: float = PREDICTION_ENTROPY_COST
  target_mean_cost: float = TARGET_MEAN_COST
  target_kl_cost: float = TARGET_KL_COST

  def value_fn_config(self) -> types.ValueFnConfig:
    """Settings of the agents' meta-value functions."""
    return value_fn_config(
        self,
        max_abs_update=self.value_fn_max_abs_update,
        discount_factor=self.value_fn_discount_factor,
        outer_value_cost=self.value_fn_outer_value_cost,
        ema_decay=self.value_fn_ema_decay,
        ema_eps=self.value_fn_ema_eps,
    )


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class ConfigBase:
  """`replace`, `to_dict` and `from_dict` for the run configs.

  Subclasses list their deprecated field names in `RENAMED` (old -> new);
  `from_dict` (and so `config.json` files and the command lines) accepts
  them for one release with a `DeprecationWarning`. `LEGACY_DEFAULTS` gives
  fields added later the value that a saved config without them meant
  (`from_dict` fills them in), so that runs saved before resume as they ran.
  Subclasses document every field in their docstring's Attributes, in the
  order `field_names`, the flags and `repr` list them; shared fields come
  from the mixins above (`AgentFields`, ...), which a subclass may give
  other defaults by declaring the field again.
  """

  RENAMED: ClassVar[Mapping[str, str]] = {}
  LEGACY_DEFAULTS: ClassVar[Mapping[str, Any]] = {}

  def __repr__(self) -> str:
    values = (f'{name}={getattr(self, name)!r}' for name in self.field_names())
    return f'{type(self).__name__}({", ".join(values)})'

  def replace(self, **changes: Any) -> Self:
    """A copy with some fields changed (validated again)."""
    return dataclasses.replace(self, **changes)

  def to_dict(self) -> dict[str, Any]:
    """The fields as JSON-friendly values (tuples become lists)."""
    return {name: _jsonable(getattr(self, name)) for name in self.field_names()}

  @classmethod
  def field_names(cls) -> tuple[str, ...]:
    """The fields, in the order the class docstring's Attributes give them.

    Flags, flag tables and `config.json` list them in this order, which
    groups them by meaning wherever a mixin declared them.
    """
    order = {name: i for i, name in enumerate(documented_fields(cls))}
    names = [f.name for f in dataclasses.fields(cls)]
    return tuple(sorted(names, key=lambda name: order.get(name, len(order))))

  @classmethod
  def canonical_name(cls, name: str) -> str:
    """`name`, or its new spelling if it is a deprecated one (warned)."""
    if name in cls.RENAMED:
      new = cls.RENAMED[name]
      warnings.warn(
          f'{cls.__name__}: {name!r} is deprecated; use {new!r}.',
          DeprecationWarning,
          stacklevel=3,
      )
      return new
    return name

  @classmethod
  def from_dict(cls, values: Mapping[str, Any]) -> Self:
    """Inverse of `to_dict`; unknown keys are a `ConfigError`.

    A missing field takes its `LEGACY_DEFAULTS` value if it has one, else
    its default.
    """
    known = set(cls.field_names())
    renamed = {}
    for key, value in values.items():
      key = cls.canonical_name(key)
      if key not in known:
        raise ConfigError(
            f'Unknown {cls.__name__} field {key!r}; known: {sorted(known)}.'
        )
      renamed[key] = value
    renamed = dict(cls.LEGACY_DEFAULTS) | renamed
    hints = typing.get_type_hints(cls)
    for key, value in renamed.items():
      if isinstance(value, list) and _is_tuple_hint(hints[key]):
        renamed[key] = _tuplify(value)
    return cls(**renamed)


def _jsonable(value: Any) -> Any:
  if isinstance(value, tuple):
    return [_jsonable(v) for v in value]
  return value


def _tuplify(value: Any) -> Any:
  if isinstance(value, list):
    return tuple(_tuplify(v) for v in value)
  return value


def _is_tuple_hint(hint: Any) -> bool:
  if typing.get_origin(hint) is tuple:
    return True
  return any(_is_tuple_hint(h) for h in typing.get_args(hint))


def agent_settings(
    base: config_dict.ConfigDict, config: Any
) -> config_dict.ConfigDict:
  """`base` agent settings with the config's `agent_*` MLP network and step.

  Args:
    base: e.g. `agent.get_settings_disco()`.
    config: a config with the `agent_*` fields.

  Returns:
    The settings (a modified `base`).
  """
  # pylint: disable-next=g-import-not-at-top
  from disco import agent as agent_lib

  settings = agent_lib.use_mlp_network(
      base,
      dense=config.agent_dense,
      lstm_size=config.agent_lstm_size,
      head_mlp_hiddens=config.agent_head_mlp_hiddens,
      head_w_init_std=config.agent_head_w_init_std,
  )
  settings.learning_rate = config.agent_learning_rate
  return settings


def value_fn_config(config: Any, **settings: Any) -> types.ValueFnConfig:
  """The MLP value function of a config's `value_fn_*` fields.

  Args:
    config: a config with `value_fn_dense`, `value_fn_head_w_init_std`,
      `value_fn_learning_rate` and `value_fn_td_lambda`.
    **settings: the other `types.ValueFnConfig` fields (discount, update
      clipping, ...).

  Returns:
    The value function's config.
  """
  return types.ValueFnConfig(
      net='mlp',
      net_args=dict(
          dense=config.value_fn_dense,
          head_w_init_std=config.value_fn_head_w_init_std,
          action_spec=(),
      ),
      learning_rate=config.value_fn_learning_rate,
      td_lambda=config.value_fn_td_lambda,
      **settings,
  )


def documented_fields(cls: type) -> dict[str, str]:
  """{name: description} of the entries of `cls`'s docstring's Attributes."""
  lines = (cls.__doc__ or '').splitlines()
  starts = [i for i, line in enumerate(lines) if line.strip() == 'Attributes:']
  entries = {}
  indent = None
  for line in lines[starts[0] + 1 :] if starts else ():
    if not line.strip():
      break
    depth = len(line) - len(line.lstrip())
    if indent is None:
      indent = depth
    if depth < indent:
      break
    if depth == indent:
      name, _, text = line.strip().partition(':')
      entries[name] = [text.strip()]
    else:
      entries[name].append(line.strip())
  return {name: ' '.join(text) for name, text in entries.items()}


def field_doc(cls: type, name: str) -> str:
  """The description of field `name` in `cls`'s docstring ('Attributes:')."""
  return documented_fields(cls).get(name, '')


def describe_fields(cls: type) -> Sequence[tuple[str, Any, str]]:
  """(name, default, description) of every field of a config class."""
  fields = {f.name: f for f in dataclasses.fields(cls)}
  docs = documented_fields(cls)
  return [
      (name, fields[name].default, docs.get(name, ''))
      for name in cls.field_names()
  ]
