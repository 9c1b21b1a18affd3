"""The run configs' shared fields, field order and documentation."""

import dataclasses

import pytest

from disco import configs
from disco.discovery.config import DiscoveryConfig
from disco.eval.config import EvalConfig
from disco.meta_train.config import MetaTrainConfig
from disco.train.config import TrainConfig

_CONFIGS = (EvalConfig, TrainConfig, MetaTrainConfig, DiscoveryConfig)


@pytest.mark.parametrize('cls', _CONFIGS, ids=lambda c: c.__name__)
def test_every_field_is_documented_once(cls):
  # The docstring's Attributes order the flags, so each field needs an
  # entry, and an entry must name a field.
  documented = list(configs.documented_fields(cls))
  assert sorted(documented) == sorted(f.name for f in dataclasses.fields(cls))
  assert all(configs.field_doc(cls, name) for name in documented)


@pytest.mark.parametrize('cls', _CONFIGS, ids=lambda c: c.__name__)
def test_fields_repr_and_json_follow_the_documented_order(cls):
  config = cls()
  order = list(configs.documented_fields(cls))
  assert list(cls.field_names()) == order
  assert list(config.to_dict()) == order
  shown = ', ' + repr(config).removeprefix(f'{cls.__name__}(')
  positions = [shown.index(f', {name}=') for name in order]
  assert positions == sorted(positions)
  assert cls.from_dict(config.to_dict()) == config


def test_documented_fields_reads_only_the_attributes_section():
  class Example:
    """Summary line.

    seed: not an attribute entry.

    Attributes:
      seed: the run's seed, over
        two lines.
      env: the environment.

    Returns nothing.
    """

  assert configs.documented_fields(Example) == {
      'seed': "the run's seed, over two lines.",
      'env': 'the environment.',
  }


def test_shared_fields_keep_each_config_default():
  # Mixin fields declared again in a config take that config's default.
  assert EvalConfig().agent_lstm_size == TrainConfig().agent_lstm_size == 128
  assert MetaTrainConfig().agent_lstm_size == 256
  assert DiscoveryConfig().agent_dense == (128, 128)
  assert MetaTrainConfig().value_fn_td_lambda == 0.96
  assert DiscoveryConfig().value_fn_discount_factor == 0.997
  assert MetaTrainConfig().value_fn_discount_factor == 0.99


@pytest.mark.parametrize('cls', _CONFIGS, ids=lambda c: c.__name__)
def test_fields_are_keyword_only(cls):
  with pytest.raises(TypeError, match='positional'):
    cls(0)
