"""The README's quickstart: its code, and the check of what it prints.

Standard library only, so that `.ci/wheel_smoke` can use it with any Python
to run the quickstart against an installed wheel, outside the repository:

  python tests/readme_quickstart.py code > quickstart.py
  python quickstart.py > out.txt && python tests/readme_quickstart.py check out.txt
"""

import pathlib
import re
import sys

README = pathlib.Path(__file__).resolve().parents[1] / 'README.md'
MARKER = '<!-- readme-quickstart -->'


def code(readme: pathlib.Path = README) -> str:
  """The Python block that follows the quickstart marker in the README."""
  text = readme.read_text()
  if MARKER not in text:
    raise ValueError(f'{MARKER} is missing from {readme}')
  after = text.split(MARKER, 1)[1]
  match = re.match(r'\s*```python\n(.*?)```', after, re.DOTALL)
  if not match:
    raise ValueError(
        f'no python block follows the quickstart marker in {readme}'
    )
  return match.group(1)


def check(stdout: str) -> None:
  """Raises ValueError unless the quickstart printed a learner step's logs."""
  lines = stdout.strip().splitlines()
  printed = lines[-1] if lines else ''
  if "'total_loss'" not in printed or "'pi_loss'" not in printed:
    raise ValueError(
        'the quickstart did not print the learner logs; its last line:'
        f' {printed!r}'
    )


def main(argv: list[str]) -> int:
  if argv[1:] == ['code']:
    sys.stdout.write(code())
    return 0
  if len(argv) == 3 and argv[1] == 'check':
    try:
      check(pathlib.Path(argv[2]).read_text())
    except ValueError as e:
      print(f'readme_quickstart: {e}', file=sys.stderr)
      return 1
    print('readme_quickstart: the quickstart printed the learner logs')
    return 0
  print(f'usage: {argv[0]} code | check STDOUT_FILE', file=sys.stderr)
  return 2


if __name__ == '__main__':
  sys.exit(main(sys.argv))
