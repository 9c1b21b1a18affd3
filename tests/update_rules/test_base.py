"""Unit tests for `disco.update_rules.base`: output specs, parameter checks."""

from dm_env import specs
import numpy as np
import pytest

from disco import agent as agent_lib
from disco import types
from disco.update_rules import actor_critic
from disco.update_rules import base
from disco.update_rules import disco as disco_rule

_ACTION_SPEC = specs.BoundedArray((), np.int32, 0, 2)


def test_agent_out_spec_adds_the_action_axis_to_model_outputs():
  out = base.get_agent_out_spec(
      _ACTION_SPEC,
      flat_out_spec={'logits': types.ArraySpec((3,), np.float32)},
      model_out_spec={'z': types.ArraySpec((5,), np.float32)},
  )
  assert {k: v.shape for k, v in out.items()} == {
      'logits': (3,),
      'z': (3, 5),
  }


def test_agent_out_spec_rejects_shared_keys():
  spec = {'q': types.ArraySpec((1,), np.float32)}
  with pytest.raises(ValueError, match=r"Output keys \['q'\]"):
    base.get_agent_out_spec(_ACTION_SPEC, spec, spec)


def test_check_meta_params_accepts_the_rules_own_tree():
  rule = actor_critic.ActorCritic()
  params, _ = rule.init_params(None)
  base.check_meta_params(rule, params)


def test_check_meta_params_lists_a_few_and_counts_the_rest():
  rule = disco_rule.DiscoUpdateRule(
      **agent_lib.get_settings_disco().update_rule
  )
  with pytest.raises(ValueError) as error:
    base.check_meta_params(rule, {})
  message = str(error.value)
  # All 42 leaves are missing: the first 5 (sorted) are named, as
  # `weights.validate_params` names them.
  assert message.startswith(
      'Update-rule parameters do not match DiscoUpdateRule: 42 missing: '
      'lstm/linear/b, lstm/linear/w, '
  )
  assert message.endswith(', ... (37 more).')


def test_check_meta_params_names_unexpected_and_mismatched_leaves():
  rule = actor_critic.ActorCritic()
  params = {'dummy': np.zeros(3), 'extra': {'w': np.zeros(2)}}
  with pytest.raises(ValueError) as error:
    base.check_meta_params(rule, params)
  assert str(error.value) == (
      'Update-rule parameters do not match ActorCritic: 1 unexpected: extra/w;'
      ' 1 mismatched: dummy (expected (), got (3,)).'
  )


def test_unknown_meta_network():
  settings = agent_lib.get_settings_disco().update_rule
  settings.net = dict(settings.net, name='not_a_meta_net')
  with pytest.raises(ValueError, match="meta-network name 'not_a_meta_net'"):
    disco_rule.DiscoUpdateRule(**settings)


def test_actor_critic_rejects_normalized_categorical_td():
  with pytest.raises(ValueError, match='normalize_td and categorical_value'):
    actor_critic.ActorCritic(categorical_value=True, normalize_td=True)
