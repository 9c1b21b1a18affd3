"""The driver that every run kind shares.

Checkpoint metadata and the rule's digest (`metadata`), the step loop with
its cadence, Ctrl-C handling and logs (`steps`), compiled programs
(`programs`) and starting or resuming a run (`driver`).
"""

# pylint: disable=g-importing-member,useless-import-alias
from disco.runtime.driver import RULE_PROGRAM_NEUTRAL as RULE_PROGRAM_NEUTRAL
from disco.runtime.driver import Program as Program
from disco.runtime.driver import RuleProgram as RuleProgram
from disco.runtime.driver import initial_rule as initial_rule
from disco.runtime.driver import run as run
from disco.runtime.metadata import check_metadata as check_metadata
from disco.runtime.metadata import params_digest as params_digest
from disco.runtime.metadata import read_metadata as read_metadata
from disco.runtime.metadata import run_metadata as run_metadata
from disco.runtime.programs import BackgroundCompile as BackgroundCompile
from disco.runtime.programs import ProgramCache as ProgramCache
from disco.runtime.steps import RunResult as RunResult
from disco.runtime.steps import checkpoint_root as checkpoint_root
from disco.runtime.steps import is_due as is_due
from disco.runtime.steps import restore_rng_and_logs as restore_rng_and_logs
from disco.runtime.steps import run_steps as run_steps
from disco.runtime.steps import save_with_rng_and_logs as save_with_rng_and_logs
from disco.runtime.steps import stacked_logs as stacked_logs
from disco.runtime.steps import stop_on_interrupt as stop_on_interrupt
from disco.runtime.steps import stopper as stopper
