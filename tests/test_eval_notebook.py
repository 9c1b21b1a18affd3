"""Executes colabs/eval.ipynb for real, with a tiny configuration.

A cell inserted after the one tagged `config` shrinks the run (a few
iterations of a tiny agent that still takes learner steps with Disco103)
and checkpoints into a fresh directory, in the way papermill injects
parameters; everything else runs as written.
"""

import pathlib

import nbformat

from tests import notebooks

_NOTEBOOK = (
    pathlib.Path(__file__).resolve().parents[1] / 'colabs' / 'eval.ipynb'
)

_SHRINK = """
import dataclasses
import tempfile
CHECKPOINT_DIR = tempfile.mkdtemp()
config = dataclasses.replace(
    config, num_steps=5, learner_batch_size=8, replay_ratio=4, rollout_len=5,
    buffer_capacity=32, agent_dense=(16,), agent_lstm_size=8, agent_head_mlp_hiddens=(8,),
)
"""


def _tagged(notebook, tag: str) -> int:
  (index,) = [
      i
      for i, cell in enumerate(notebook.cells)
      if tag in cell.metadata.get('tags', [])
  ]
  return index


def test_notebook_defines_no_logic_of_its_own():
  notebook = nbformat.read(_NOTEBOOK, as_version=4)
  for cell in notebook.cells:
    if cell.cell_type == 'code':
      assert 'def ' not in cell.source and 'class ' not in cell.source
      assert 'wget' not in cell.source and 'np.load' not in cell.source
  config_cell = notebook.cells[_tagged(notebook, 'config')]
  assert 'eval_lib.EvalConfig(' in config_cell.source


def test_notebook_runs_and_plots():
  notebook = nbformat.read(_NOTEBOOK, as_version=4)
  notebook.cells.insert(
      _tagged(notebook, 'config') + 1, nbformat.v4.new_code_cell(_SHRINK)
  )
  text, images = notebooks.execute(notebook, str(_NOTEBOOK.parent), timeout=600)
  assert 'Loaded 42 tensors.' in text
  assert '5 iterations, 50 environment steps' in text
  assert images == 1
  # The log table shows learner losses (learning starts at iteration 4).
  assert 'total_loss' in text
