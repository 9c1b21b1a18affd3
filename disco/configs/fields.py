"""The fields the run configs share, as mixins, and what they build.

A config declares its shared fields by inheriting a mixin (`AgentFields`,
`ValueFnFields`, `MetaLossFields`, `ReplayBatches`), so that one field has
one name, default and meaning in every run kind; `agent_settings` and
`value_fn_config` turn them into the agent's and value function's settings.
"""

import dataclasses
from typing import Any

from ml_collections import config_dict

from disco import types


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
