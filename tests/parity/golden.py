"""Loading and comparing the reference's golden parity cases.

The goldens live outside the repository (see ../shared/parity/MANIFEST.md),
in the directory named by `$DISCO_PARITY_DIR`, one set per kind of machine
they were recorded on (`platforms.py` picks the sets and the mode; each
test runs once per set compared, see conftest.py). The parity tests read
both halves through this module:

- `cases`: which set the running test compares against, and `Case`, one
  golden case loaded from it.
- `compare`: `assert_close` and the other comparisons, and the report.
"""

# pylint: disable=g-importing-member,useless-import-alias
from tests.parity.cases import CASE_PROPERTY as CASE_PROPERTY
from tests.parity.cases import CROSS as CROSS
from tests.parity.cases import GPU_NOT_REPRODUCIBLE as GPU_NOT_REPRODUCIBLE
from tests.parity.cases import NATIVE as NATIVE
from tests.parity.cases import PARITY_DIR_ENV as PARITY_DIR_ENV
from tests.parity.cases import Case as Case
from tests.parity.cases import cross_reason as cross_reason
from tests.parity.cases import current_set as current_set
from tests.parity.cases import flatten as flatten
from tests.parity.cases import loaded as loaded
from tests.parity.cases import missing as missing
from tests.parity.cases import nest as nest
from tests.parity.cases import root_dir as root_dir
from tests.parity.cases import selection as selection
from tests.parity.cases import to_haiku as to_haiku
from tests.parity.cases import use_set as use_set
from tests.parity.compare import MUTATION_ENV as MUTATION_ENV
from tests.parity.compare import REPORT_ENV as REPORT_ENV
from tests.parity.compare import as_steps as as_steps
from tests.parity.compare import assert_close as assert_close
from tests.parity.compare import assert_scalar as assert_scalar
from tests.parity.compare import checks as checks
from tests.parity.compare import ema_mean_floor as ema_mean_floor
from tests.parity.compare import step_group as step_group
