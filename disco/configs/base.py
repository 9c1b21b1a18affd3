"""`ConfigBase`: the run configs' `replace`, JSON codec and field order.

`ConfigBase` gives every config `replace`, `to_dict` and `from_dict` (JSON
round trip, deprecated spellings accepted with a warning); a config's
fields are ordered, and described, by its docstring's Attributes
(`documented_fields`), which the flags and flag tables read too.
"""

from collections.abc import Mapping, Sequence
import dataclasses
import typing
from typing import Any, ClassVar, Self
import warnings

from disco.configs import validation


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
  from the mixins of `disco.configs.fields` (`AgentFields`, ...), which a
  subclass may give other defaults by declaring the field again.
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
        raise validation.ConfigError(
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
