"""Discovery: the paper's recipe for discovering an update rule.

`run_discovery` runs a `DiscoveryConfig` (start from a preset:
`preset('local')` or `preset('paper')`) over every device and returns a
`DiscoveryResult`; `maths` holds one meta-step of the population.
"""

# pylint: disable=g-importing-member,useless-import-alias
from disco.discovery.config import LOCAL as LOCAL
from disco.discovery.config import PAPER as PAPER
from disco.discovery.config import PRESETS as PRESETS
from disco.discovery.config import DiscoveryConfig as DiscoveryConfig
from disco.discovery.config import Member as Member
from disco.discovery.config import parse_member as parse_member
from disco.discovery.config import parse_population as parse_population
from disco.discovery.config import preset as preset
from disco.discovery.loop import DiscoveryResult as DiscoveryResult
from disco.discovery.loop import progress_bar as progress_bar
from disco.discovery.loop import run_discovery as run_discovery
from disco.discovery.maths import MemberState as MemberState
from disco.discovery.maths import discovery_step as discovery_step
