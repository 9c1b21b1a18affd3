"""Evaluation: the reference's evaluation colab as library code.

`run_eval` trains one agent with a fixed update rule and records its
learning curve (`EvalHistory`); `run_eval_seeds` runs several seeds.
"""

# pylint: disable=g-importing-member,useless-import-alias
from disco.eval.config import ACTOR_CRITIC as ACTOR_CRITIC
from disco.eval.config import CHECKPOINT_KIND as CHECKPOINT_KIND
from disco.eval.config import DISCO as DISCO
from disco.eval.config import EXECUTION_FIELDS as EXECUTION_FIELDS
from disco.eval.config import POLICY_GRADIENT as POLICY_GRADIENT
from disco.eval.config import RULES as RULES
from disco.eval.config import EvalConfig as EvalConfig
from disco.eval.history import EvalHistory as EvalHistory
from disco.eval.history import LogFn as LogFn
from disco.eval.history import RolloutRecord as RolloutRecord
from disco.eval.run import ProgressBar as ProgressBar
from disco.eval.run import ProgressFn as ProgressFn
from disco.eval.run import (
    default_update_rule_params as default_update_rule_params,
)
from disco.eval.run import make_agent_settings as make_agent_settings
from disco.eval.run import make_value_function as make_value_function
from disco.eval.run import progress_bar as progress_bar
from disco.eval.run import run_eval as run_eval
from disco.eval.run import run_eval_seeds as run_eval_seeds
from disco.eval.run import seed_checkpoint_dir as seed_checkpoint_dir
from disco.eval.run import select_devices as select_devices
from disco.eval.run import to_train_config as to_train_config
