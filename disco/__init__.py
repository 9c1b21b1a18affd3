"""disco: a faithful, fast JAX/Haiku reimplementation of DiscoRL.

Trains agents with the meta-learned update rule Disco103 (Oh et al., Nature
648, 2025) or with baselines (`run_train`, `run_eval`), and meta-learns new
rules (`run_meta_train`, `run_discovery`). `__all__` lists the everyday names.
"""

import warnings

# distrax (imported by rlax) loads TensorFlow Probability's JAX substrate,
# which touches `jax.core.pytype_aval_mappings`, deprecated in JAX 0.10. The
# warning is about that dependency, not about `disco`; silence exactly it,
# once, so that `import disco` is quiet under `-W error::DeprecationWarning`.
with warnings.catch_warnings():
  warnings.filterwarnings(
      'ignore',
      message=r'jax\.core\.pytype_aval_mappings is deprecated',
      category=DeprecationWarning,
  )
  import distrax  # noqa: F401  pylint: disable=unused-import

# pylint: disable=g-import-not-at-top
from disco import types
from disco import utils
from disco import weights
from disco.agent import Agent
from disco.agent import LearnerState
from disco.agent import get_settings_actor_critic
from disco.agent import get_settings_disco
from disco.agent import get_settings_policy_gradient
from disco.discovery.config import DiscoveryConfig
from disco.discovery.loop import DiscoveryResult
from disco.discovery.loop import run_discovery
from disco.environments.catch import CatchEnvironment
from disco.environments.jittable_envs import CatchJittableEnvironment
from disco.eval import EvalConfig
from disco.eval import EvalHistory
from disco.eval import run_eval
from disco.eval import run_eval_seeds
from disco.meta_train import MetaTrainConfig
from disco.meta_train.loop import MetaTrainResult
from disco.meta_train.loop import run_meta_train
from disco.train import TrainConfig
from disco.train import TrainResult
from disco.train import run_train
from disco.update_rules.actor_critic import ActorCritic
from disco.update_rules.base import UpdateRule
from disco.update_rules.disco import DiscoUpdateRule
from disco.update_rules.disco import get_input_option
from disco.update_rules.policy_gradient import PolicyGradientUpdate
from disco.value_fns.value_fn import ValueFunction
from disco.weights import load_disco103
from disco.weights import load_update_rule_params
from disco.weights import save_update_rule_params

__version__ = '0.1.0'

__all__ = (
    'ActorCritic',
    'Agent',
    'CatchEnvironment',
    'CatchJittableEnvironment',
    'DiscoUpdateRule',
    'DiscoveryConfig',
    'DiscoveryResult',
    'EvalConfig',
    'EvalHistory',
    'LearnerState',
    'MetaTrainConfig',
    'MetaTrainResult',
    'PolicyGradientUpdate',
    'TrainConfig',
    'TrainResult',
    'UpdateRule',
    'ValueFunction',
    'get_input_option',
    'get_settings_actor_critic',
    'get_settings_disco',
    'get_settings_policy_gradient',
    'load_disco103',
    'load_update_rule_params',
    'run_discovery',
    'run_eval',
    'run_eval_seeds',
    'run_meta_train',
    'run_train',
    'save_update_rule_params',
    'types',
    'utils',
    'weights',
)
