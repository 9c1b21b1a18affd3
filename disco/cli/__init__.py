"""The command lines' shared skeleton: flags, outputs, errors, Ctrl-C, resume.

Each command (`disco-eval`, `disco-train`, `disco-meta-train`,
`disco-discover`) declares a `Command`; `run_command` parses its flags
(generated from its config dataclass), loads or resumes its run directory
and runs it under one error policy (usage error: exit 2; named error of
the run: one line, exit 1; Ctrl-C or SIGTERM: checkpoint, print the
resume command, exit 128 + the signal's number: 130 or 143).
"""

# pylint: disable=g-importing-member,useless-import-alias
from disco.cli.command import Command as Command
from disco.cli.command import Run as Run
from disco.cli.command import build_parser as build_parser
from disco.cli.command import check_environment as check_environment
from disco.cli.command import entry_points as entry_points
from disco.cli.command import logger_names as logger_names
from disco.cli.command import make_config as make_config
from disco.cli.command import overrides as overrides
from disco.cli.command import prepare_run as prepare_run
from disco.cli.command import preset_config as preset_config
from disco.cli.command import refuse_with_resume as refuse_with_resume
from disco.cli.command import resumed_step as resumed_step
from disco.cli.command import run_command as run_command
from disco.cli.command import steps_up_to as steps_up_to
from disco.cli.command import use_compilation_cache as use_compilation_cache
from disco.cli.errors import EXIT_ERROR as EXIT_ERROR
from disco.cli.errors import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from disco.cli.errors import EXIT_USAGE as EXIT_USAGE
from disco.cli.errors import NAMED_ERRORS as NAMED_ERRORS
from disco.cli.errors import UsageError as UsageError
from disco.cli.errors import main as main
from disco.cli.errors import report as report
from disco.cli.flags import COMMON_FLAGS as COMMON_FLAGS
from disco.cli.flags import HIDDEN_FIELDS as HIDDEN_FIELDS
from disco.cli.flags import FlagType as FlagType
from disco.cli.flags import add_common_flags as add_common_flags
from disco.cli.flags import add_config_flags as add_config_flags
from disco.cli.flags import add_deprecated_flag as add_deprecated_flag
from disco.cli.flags import flag as flag
from disco.cli.flags import flags_table as flags_table
from disco.cli.flags import parse_bool as parse_bool
from disco.cli.flags import parse_int as parse_int
from disco.cli.flags import parse_ints as parse_ints
from disco.cli.flags import parse_settings as parse_settings
from disco.cli.meta_steps import meta_step_command as meta_step_command
from disco.cli.meta_steps import run_meta_steps as run_meta_steps
from disco.cli.run_dir import CHECKPOINTS_DIRNAME as CHECKPOINTS_DIRNAME
from disco.cli.run_dir import CONFIG_FILENAME as CONFIG_FILENAME
from disco.cli.run_dir import LOG_FILENAME as LOG_FILENAME
from disco.cli.run_dir import RunDir as RunDir
