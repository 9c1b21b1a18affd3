"""Executing a notebook in a test and reading back what it showed."""

import nbclient
import nbformat


def execute(notebook: nbformat.NotebookNode, cwd: str, timeout: int):
  """Runs every cell of `notebook` in `cwd`; returns (text, PNG count).

  Raises `nbclient.exceptions.CellExecutionError` if any cell fails.
  """
  client = nbclient.NotebookClient(
      notebook,
      timeout=timeout,
      kernel_name='python3',
      resources={'metadata': {'path': cwd}},
  )
  client.execute()
  texts, images = [], 0
  for cell in notebook.cells:
    for output in cell.get('outputs', []):
      texts.append(output.get('text', ''))
      data = output.get('data', {})
      texts.append(data.get('text/plain', ''))
      images += 'image/png' in data
  return '\n'.join(texts), images
