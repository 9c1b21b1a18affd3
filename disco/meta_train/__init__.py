"""Meta-training: the reference's meta-training colab as library code.

`run_meta_train` meta-trains an update rule from a `MetaTrainConfig` on every
device and returns a `MetaTrainResult`; `maths` holds one meta-step.
"""

# pylint: disable=g-importing-member,useless-import-alias
from disco.meta_train.config import EXECUTION_FIELDS as EXECUTION_FIELDS
from disco.meta_train.config import POLICY_ENTROPY_COST as POLICY_ENTROPY_COST
from disco.meta_train.config import (
    PREDICTION_ENTROPY_COST as PREDICTION_ENTROPY_COST,
)
from disco.meta_train.config import TARGET_KL_COST as TARGET_KL_COST
from disco.meta_train.config import TARGET_MEAN_COST as TARGET_MEAN_COST
from disco.meta_train.config import MetaTrainConfig as MetaTrainConfig
from disco.meta_train.loop import MetaTrainResult as MetaTrainResult
from disco.meta_train.loop import checkpoint_root as checkpoint_root
from disco.meta_train.loop import progress_bar as progress_bar
from disco.meta_train.loop import random_init_params as random_init_params
from disco.meta_train.loop import run_meta_train as run_meta_train
from disco.meta_train.maths import meta_update as meta_update
from disco.meta_train.meta_agent import MetaTrainAgent as MetaTrainAgent
from disco.meta_train.meta_agent import MetaTrainState as MetaTrainState
from disco.meta_train.meta_gradient import (
    calculate_meta_gradient as calculate_meta_gradient,
)
