"""Training agents with a fixed update rule on any jittable environment.

`run_train` runs a `TrainConfig` (start from a preset: `preset('colab')`) and
returns a `TrainResult`; `Trainer` is the compiled program behind it.
"""

# pylint: disable=g-importing-member,useless-import-alias
from disco.train.config import TrainConfig as TrainConfig
from disco.train.loop import Trainer as Trainer
from disco.train.presets import AGENTS as AGENTS
from disco.train.presets import PRESETS as PRESETS
from disco.train.presets import agent_fields as agent_fields
from disco.train.presets import preset as preset
from disco.train.presets import protocol_buffer as protocol_buffer
from disco.train.program import TrainState as TrainState
from disco.train.result import TrainResult as TrainResult
from disco.train.run import run_train as run_train
