"""Finding, verifying and downloading Disco103; loading any update rule.

`load_disco103` finds the published Disco103 rule (or downloads it) and
checks it; `load_update_rule_params_from` takes a path or `'disco103'`. The
Disco103 weights are by the DiscoRL authors (Google DeepMind), CC-BY 4.0.

- `published`: the published file's address, digest and tensors, and the
  check that holds bytes to them.
- `downloads`: the user cache and the verified download into it.
- `lookup`: where `load_disco103` looks, in which order.

The flat `.npz` layout itself (`load_update_rule_params`,
`save_update_rule_params`) is `disco.params_file`, re-exported here.
"""

# pylint: disable=g-importing-member,useless-import-alias
from disco.params_file import HostParams as HostParams
from disco.params_file import Params as Params
from disco.params_file import PathLike as PathLike
from disco.params_file import StructureError as StructureError
from disco.params_file import WeightsError as WeightsError
from disco.params_file import WeightsNotFoundError as WeightsNotFoundError
from disco.params_file import flatten_params as flatten_params
from disco.params_file import load_update_rule_params as load_update_rule_params
from disco.params_file import save_update_rule_params as save_update_rule_params
from disco.params_file import unflatten_params as unflatten_params
from disco.params_file import validate_params as validate_params
from disco.weights.downloads import CACHE_DIR_ENV_VAR as CACHE_DIR_ENV_VAR
from disco.weights.downloads import (
    DEFAULT_TIMEOUT_SECONDS as DEFAULT_TIMEOUT_SECONDS,
)
from disco.weights.downloads import URL_ENV_VAR as URL_ENV_VAR
from disco.weights.downloads import DownloadError as DownloadError
from disco.weights.downloads import default_cache_dir as default_cache_dir
from disco.weights.downloads import download_disco103 as download_disco103
from disco.weights.lookup import DISCO103 as DISCO103
from disco.weights.lookup import WEIGHTS_ENV_VAR as WEIGHTS_ENV_VAR
from disco.weights.lookup import load_disco103 as load_disco103
from disco.weights.lookup import (
    load_update_rule_params_from as load_update_rule_params_from,
)
from disco.weights.lookup import repo_weights_path as repo_weights_path
from disco.weights.published import DISCO103_FILENAME as DISCO103_FILENAME
from disco.weights.published import DISCO103_NUM_BYTES as DISCO103_NUM_BYTES
from disco.weights.published import DISCO103_NUM_FLOATS as DISCO103_NUM_FLOATS
from disco.weights.published import DISCO103_NUM_TENSORS as DISCO103_NUM_TENSORS
from disco.weights.published import DISCO103_SHA256 as DISCO103_SHA256
from disco.weights.published import DISCO103_SHAPES as DISCO103_SHAPES
from disco.weights.published import DISCO103_URL as DISCO103_URL
from disco.weights.published import ChecksumError as ChecksumError
