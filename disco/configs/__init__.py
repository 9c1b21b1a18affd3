"""What the run configs share: one vocabulary, one codec, one set of checks.

- `base`: `ConfigBase`, which gives every config `replace`, `to_dict` and
  `from_dict` (JSON round trip, deprecated spellings accepted with a
  warning) and orders its fields by its docstring.
- `fields`: the field mixins the configs share (`AgentFields`, ...) and the
  settings they build.
- `validation`: `ConfigError`, the field groups (`NETWORK_SIZES`,
  `LEARNING_RATES`, ...) and the `check_*` functions that declare the
  ranges of the fields the configs have in common.
"""

# pylint: disable=g-importing-member,useless-import-alias
from disco.configs.base import ConfigBase as ConfigBase
from disco.configs.base import describe_fields as describe_fields
from disco.configs.base import documented_fields as documented_fields
from disco.configs.base import field_doc as field_doc
from disco.configs.fields import POLICY_ENTROPY_COST as POLICY_ENTROPY_COST
from disco.configs.fields import (
    PREDICTION_ENTROPY_COST as PREDICTION_ENTROPY_COST,
)
from disco.configs.fields import TARGET_KL_COST as TARGET_KL_COST
from disco.configs.fields import TARGET_MEAN_COST as TARGET_MEAN_COST
from disco.configs.fields import AgentFields as AgentFields
from disco.configs.fields import MetaLossFields as MetaLossFields
from disco.configs.fields import ReplayBatches as ReplayBatches
from disco.configs.fields import ValueFnFields as ValueFnFields
from disco.configs.fields import agent_settings as agent_settings
from disco.configs.fields import value_fn_config as value_fn_config
from disco.configs.validation import DISCO103 as DISCO103
from disco.configs.validation import LEARNING_RATES as LEARNING_RATES
from disco.configs.validation import META_FRACTIONS as META_FRACTIONS
from disco.configs.validation import META_NON_NEGATIVE as META_NON_NEGATIVE
from disco.configs.validation import META_POSITIVE as META_POSITIVE
from disco.configs.validation import NETWORK_SIZES as NETWORK_SIZES
from disco.configs.validation import RANDOM as RANDOM
from disco.configs.validation import ConfigError as ConfigError
from disco.configs.validation import check as check
from disco.configs.validation import check_bools as check_bools
from disco.configs.validation import check_fixed_rule as check_fixed_rule
from disco.configs.validation import check_fractions as check_fractions
from disco.configs.validation import check_ints as check_ints
from disco.configs.validation import check_non_negative as check_non_negative
from disco.configs.validation import check_positive as check_positive
from disco.configs.validation import check_rule_source as check_rule_source
from disco.configs.validation import positive_ints as positive_ints
from disco.configs.validation import set_network_sizes as set_network_sizes
from disco.configs.validation import set_sorted_settings as set_sorted_settings
from disco.configs.validation import sorted_settings as sorted_settings
