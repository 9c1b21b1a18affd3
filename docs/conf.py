"""Sphinx configuration: Markdown pages (MyST) and an API reference from docstrings."""

import os
import re
import sys

# The package is imported from this checkout, installed or not.
sys.path.insert(0, os.path.abspath('..'))

project = 'disco'
author = 'the disco authors'
copyright = '2026, the disco authors'  # pylint: disable=redefined-builtin

extensions = [
    'myst_parser',
    'sphinx.ext.autodoc',
    'sphinx.ext.napoleon',
]

source_suffix = {'.md': 'markdown'}
root_doc = 'index'
exclude_patterns = ['_build']

# `[text](#heading)` links within and across pages.
myst_heading_anchors = 4

# Docstrings are Google style.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Attributes as a field list: the fields are documented as members too.
napoleon_use_ivar = True
autodoc_member_order = 'bysource'
autodoc_typehints = 'signature'
autodoc_default_options = {'show-inheritance': True}
# Only our docstrings: not those of the base classes of other libraries.
autodoc_inherit_docstrings = False

html_theme = 'furo'
html_title = 'disco'


# The docstrings are written to read well as plain text: code in single
# backticks, and indented blocks (formulas, examples) after a line ending in
# a colon. reStructuredText reads the first as interpreted text (an error
# when joined to a word, as in `Trainer`s) and the second as a block quote
# (a list, where a line starts with '- '). Make them literals.
_CODE_SPAN = re.compile(r'(?<![`:])`([^`]+?)`(?![`_])')
_OPENS_AFTER = '\'"<([{-:/'
_CLOSES_BEFORE = '-.,:;!?\\/\'")]}>'


def _literal(match: re.Match[str]) -> str:
  source = match.string
  start, end = match.span()
  span = f'``{match.group(1)}``'
  before = source[start - 1] if start else ' '
  after = source[end] if end < len(source) else ' '
  if not before.isspace() and before not in _OPENS_AFTER:
    span = '\\ ' + span
  if not after.isspace() and after not in _CLOSES_BEFORE:
    span += '\\ '
  return span


_STARS = re.compile(r'(?<![\w*\\])(\*{1,2})(?=\w)')


def _escape_open_stars(line: str) -> str:
  """Escapes `*` and `**` that open no emphasis (`[*batch]`, `**kwargs`)."""

  def escape(match: re.Match[str]) -> str:
    stars = match.group(1)
    closing = re.compile(r'\w' + re.escape(stars) + r'(?![\w*])')
    if closing.search(line, match.end()):
      return stars
    return '\\*' * len(stars)

  # Outside inline literals only, where a backslash would show.
  parts = re.split(r'(``.*?``)', line)
  return ''.join(
      part if part.startswith('``') else _STARS.sub(escape, part)
      for part in parts
  )


def _indent(line: str) -> int:
  return len(line) - len(line.lstrip())


def _literal_blocks(lines: list[str]) -> list[bool]:
  """Marks the lines of indented blocks that follow 'text:' and a blank line.

  The introducing line's colon is doubled, which makes the block literal.
  """
  in_block = [False] * len(lines)
  i = 0
  while i + 2 < len(lines):
    intro, blank, first = lines[i], lines[i + 1], lines[i + 2]
    if (
        intro.rstrip().endswith(':')
        and not intro.rstrip().endswith('::')
        and not blank.strip()
        and first.strip()
        and _indent(first) > _indent(intro)
    ):
      lines[i] = intro.rstrip() + ':'
      j = i + 2
      while j < len(lines) and (
          not lines[j].strip() or _indent(lines[j]) > _indent(intro)
      ):
        in_block[j] = True
        j += 1
      i = j
    else:
      i += 1
  return in_block


def _docstring_to_rest(app, what, name, obj, options, lines):
  """Rewrites a docstring's `lines` in place (autodoc's hook)."""
  del app, what, name, obj, options  # Unused.
  in_block = _literal_blocks(lines)
  result, prose = [], []
  for line, literal in zip(lines + [''], in_block + [True]):
    if literal:
      if prose:
        text = _CODE_SPAN.sub(_literal, '\n'.join(prose))
        result.extend(_escape_open_stars(part) for part in text.split('\n'))
        prose = []
      result.append(line)
    else:
      prose.append(line)
  lines[:] = result[:-1]


def setup(app):
  # Before napoleon (priority 500), which reads `a: b` as a type and text.
  app.connect('autodoc-process-docstring', _docstring_to_rest, priority=400)
