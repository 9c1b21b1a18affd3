"""Every plausible porting bug fails the cross-platform suite (slow).

Runs `python -m tests.parity.teeth --modes cross`: the parity suite once
without a bug and once per bug of mutations.py, each against all three
golden sets, about 65 minutes on 2 CPU cores, so it is marked `slow` and
CI does not run it; docs/parity.md has its table.
"""

import pathlib

import pytest

from tests.parity import golden
from tests.parity import teeth

pytestmark = pytest.mark.without_goldens


@pytest.mark.slow
def test_every_bug_is_caught_in_cross_platform_mode(tmp_path: pathlib.Path):
  golden.selection()  # Fails (CI) or skips without the goldens.
  assert teeth.main(['--modes', 'cross', '--out', str(tmp_path)]) == 0
