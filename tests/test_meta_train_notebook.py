"""Executes colabs/meta_train.ipynb for real, with a tiny configuration.

The cell tagged `parameters` is replaced by tiny settings (as papermill
injects parameters); every other cell runs as written, in a fresh kernel.
"""

import pathlib

import chex
import nbformat

from disco import checkpoint
from disco import weights
from tests import notebooks

_NOTEBOOK = (
    pathlib.Path(__file__).resolve().parents[1] / 'colabs' / 'meta_train.ipynb'
)
_TINY = """
NUM_STEPS = 2
UPDATE_RULE_PARAMS = 'random'
CHECKPOINT_DIR = 'checkpoints'
RESUME = False
OVERRIDES = dict(
    rollout_len=4, envs_per_device=4, agent_dense=(16,),
    agent_head_mlp_hiddens=(8,), agent_lstm_size=8, value_fn_dense=(16,),
    num_inner_steps=1,
)
"""


def _parameters_cell(notebook) -> int:
  (index,) = [
      i
      for i, cell in enumerate(notebook.cells)
      if 'parameters' in cell.metadata.get('tags', [])
  ]
  return index


def test_notebook_is_thin():
  notebook = nbformat.read(_NOTEBOOK, as_version=4)
  for cell in notebook.cells:
    if cell.cell_type == 'code':
      assert 'def ' not in cell.source and 'class ' not in cell.source
      assert 'wget' not in cell.source and 'np.load' not in cell.source
  source = '\n'.join(c.source for c in notebook.cells)
  assert 'meta_train.run_meta_train(' in source
  assert 'update_rule_params=UPDATE_RULE_PARAMS' in source
  defaults = notebook.cells[_parameters_cell(notebook)].source
  assert 'NUM_STEPS = 800' in defaults
  assert "UPDATE_RULE_PARAMS = 'random'" in defaults


def test_notebook_runs_and_plots(tmp_path):
  notebook = nbformat.read(_NOTEBOOK, as_version=4)
  notebook.cells[_parameters_cell(notebook)].source = _TINY
  text, images = notebooks.execute(notebook, str(tmp_path), timeout=900)
  assert '2 meta-steps' in text
  assert images == 2
  assert checkpoint.list_steps(tmp_path / 'checkpoints') == [2]
  chex.assert_trees_all_equal(
      weights.load_update_rule_params(tmp_path / 'meta_trained_rule.npz'),
      checkpoint.load(tmp_path / 'checkpoints').update_rule_params,
  )
