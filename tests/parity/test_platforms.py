"""Which golden sets a run compares against, on fake machines and sets.

The three recorded kinds (their PLATFORM.json as shipped with the goldens)
each pick their own set in native mode and the other two in cross mode; a
kind that matches none (ARM, another vendor's or generation's AVX-512, a
GPU) runs in cross mode against all three; a set without PLATFORM.json is
never native. Machines are given as the /proc/cpuinfo text a real one
prints, so the reading of the system is tested too.
"""

import json
import pathlib

import pytest

from tests.parity import golden
from tests.parity import machines
from tests.parity import platforms

pytestmark = pytest.mark.without_goldens

# The records of the three sets (MANIFEST.md 3a and 3b).
_RECORDS = {
    'main': {
        'set': 'main',
        'vendor_id': 'GenuineIntel',
        'model_name': 'Intel Xeon (exact model not recorded)',
        'isa': 'avx512',
        'cpu_flags_known': ['avx2', 'fma', 'avx512f'],
    },
    'avx2': {
        'set': 'avx2',
        'vendor_id': 'AuthenticAMD',
        'model_name': 'AMD EPYC (exact model not recorded)',
        'isa': 'avx2',
        'cpu_flags_known': ['avx2', 'fma'],
        'cpu_flags_absent': ['avx512f'],
    },
    'avx512-amd': {
        'set': 'avx512-amd',
        'vendor_id': 'AuthenticAMD',
        'model_name': 'AMD EPYC',
        'cpu_family': 25,
        'model': 17,
        'isa': 'avx512',
        'cpu_flags_known': ['fma', 'avx2', 'avx512f', 'avx512_bf16'],
    },
}
_ALL = ('main', 'avx2', 'avx512-amd')

_X86 = 'fpu sse sse2 ssse3 sse4_1 sse4_2 avx fma'
_AVX512 = 'avx2 avx512f avx512dq avx512cd avx512bw avx512vl'


def _cpuinfo(vendor: str, family: int, model: int, name: str, flags: str):
  """/proc/cpuinfo of a two-processor x86 machine."""
  one = (
      f'processor\t: {{i}}\nvendor_id\t: {vendor}\ncpu family\t: {family}\n'
      f'model\t\t: {model}\nmodel name\t: {name}\nflags\t\t: {_X86} {flags}\n'
  )
  return one.format(i=0) + '\n' + one.format(i=1)


# name: (architecture, /proc/cpuinfo, the set it is native on or None).
_MACHINES = {
    'intel-xeon-sapphire-rapids': (
        'x86_64',
        _cpuinfo(
            'GenuineIntel', 6, 143, 'Intel(R) Xeon(R) Platinum 8480+', _AVX512
        ),
        'main',
    ),
    'amd-epyc-zen3-avx2': (
        'x86_64',
        _cpuinfo('AuthenticAMD', 25, 1, 'AMD EPYC 7B13', 'avx2'),
        'avx2',
    ),
    'amd-epyc-zen4': (
        'x86_64',
        _cpuinfo('AuthenticAMD', 25, 17, 'AMD EPYC', _AVX512 + ' avx512_bf16'),
        'avx512-amd',
    ),
    # Unknown kinds.
    'amd-epyc-zen5': (
        'x86_64',
        _cpuinfo('AuthenticAMD', 26, 2, 'AMD EPYC 9B45', _AVX512),
        None,
    ),
    'amd-epyc-zen4-other-model': (
        'x86_64',
        _cpuinfo(
            'AuthenticAMD', 25, 160, 'AMD EPYC 9754', _AVX512 + ' avx512_bf16'
        ),
        None,
    ),
    'hygon-avx512': (
        'x86_64',
        _cpuinfo('HygonGenuine', 24, 4, 'Hygon C86', _AVX512),
        None,
    ),
    'intel-avx2-only': (
        'x86_64',
        _cpuinfo('GenuineIntel', 6, 63, 'Intel(R) Xeon(R) E5-2686 v4', 'avx2'),
        None,
    ),
    'x86-without-avx2': (
        'x86_64',
        _cpuinfo('AuthenticAMD', 21, 2, 'AMD Opteron', ''),
        None,
    ),
    'arm64-neoverse': (
        'aarch64',
        (
            'processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve\n'
            'CPU implementer\t: 0x41\nCPU part\t: 0xd40\n'
        ),
        None,
    ),
}


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
  """The three sets laid out as shipped: main, platforms/{avx2,avx512-amd}."""
  for name, record in _RECORDS.items():
    directory = tmp_path
    if name != 'main':
      directory = tmp_path / platforms.PLATFORMS_SUBDIR / name
      directory.mkdir(parents=True)
    (directory / 'a.npz').touch()
    (directory / platforms.PLATFORM_FILE).write_text(json.dumps(record))
  return tmp_path


def _select(
    monkeypatch, root, *, mode=None, platform=None, machine=None, cross_dir=None
):
  """`platforms.select(root)` on a fake machine (`_MACHINES` key)."""
  platforms.select.cache_clear()
  for env, value in (
      (platforms.MODE_ENV, mode),
      (platforms.PLATFORM_ENV, platform),
      (platforms.CROSS_DIR_ENV, cross_dir and str(cross_dir)),
  ):
    if value is None:
      monkeypatch.delenv(env, raising=False)
    else:
      monkeypatch.setenv(env, value)
  if machine is not None:
    arch, cpuinfo = _MACHINES[machine][:2]
    monkeypatch.setattr(machines.jax, 'default_backend', lambda: 'cpu')
    monkeypatch.setattr(machines.platform_lib, 'machine', lambda: arch)
    monkeypatch.setattr(
        machines, '_cpuinfo', lambda: machines.parse_cpuinfo(cpuinfo)
    )
  try:
    return platforms.select(root)
  finally:
    platforms.select.cache_clear()


def _names(sets) -> tuple[str, ...]:
  return tuple(s.name for s in sets)


@pytest.mark.parametrize('machine', sorted(_MACHINES))
def test_each_machine_picks_its_own_set_or_none(monkeypatch, root, machine):
  native = _MACHINES[machine][2]
  auto = _select(monkeypatch, root, machine=machine)
  cross = _select(monkeypatch, root, machine=machine, mode='cross')
  report = '\n'.join(auto.describe())
  if native is None:
    # A kind without a set: cross mode against every set, in both runs CI
    # makes.
    assert (auto.mode, _names(auto.compared)) == ('cross', _ALL), report
    assert _names(cross.compared) == _ALL
    with pytest.raises(platforms.SelectionError, match='no golden set matches'):
      _select(monkeypatch, root, machine=machine, mode='native')
  else:
    assert (auto.mode, _names(auto.compared)) == ('native', (native,)), report
    others = tuple(n for n in _ALL if n != native)
    assert (cross.mode, _names(cross.compared)) == ('cross', others)
    assert f'set {native!r}' in report and 'matches (same' in report
  # The report says, for every set, whether it matches and why.
  assert all(f'set {n!r}' in report for n in _ALL)


def test_the_reasons_name_the_difference(monkeypatch, root):
  chosen = _select(monkeypatch, root, machine='amd-epyc-zen5')
  assert chosen.matching['avx512-amd'] == (
      False,
      'cpu_family 26 here, 25 there',
  )
  assert chosen.matching['main'] == (
      False,
      'vendor_id AuthenticAMD here, GenuineIntel there',
  )
  assert chosen.matching['avx2'] == (False, 'isa avx512 here, avx2 there')
  zen4 = _select(monkeypatch, root, machine='amd-epyc-zen4')
  assert zen4.matching['avx512-amd'] == (
      True,
      'same backend, arch, vendor_id, isa, cpu_family, model',
  )
  intel = _select(monkeypatch, root, machine='intel-xeon-sapphire-rapids')
  assert intel.matching['main'] == (
      True,
      'same backend, arch, vendor_id, isa (cpu_family/model not recorded)',
  )
  arm = _select(monkeypatch, root, machine='arm64-neoverse')
  assert arm.matching['main'] == (False, 'arch arm64 here, x86_64 there')


@pytest.mark.parametrize(
    'platform, want',
    [
        ('main', 'main'),
        ('avx512', 'main'),  # The earlier name of the main set's kind.
        ('avx2', 'avx2'),
        ('avx512-amd', 'avx512-amd'),
        (
            'vendor_id=AuthenticAMD,isa=avx512,cpu_family=25,model=17',
            'avx512-amd',
        ),
        ('vendor_id=GenuineIntel,isa=avx512', 'main'),
        ('vendor_id=AuthenticAMD,isa=avx512', None),
        ('arm64', None),
        ('gpu', None),
    ],
)
def test_the_override_names_a_kind(monkeypatch, root, platform, want):
  chosen = _select(monkeypatch, root, platform=platform)
  if want is None:
    assert (chosen.mode, _names(chosen.compared)) == ('cross', _ALL)
  else:
    assert (chosen.mode, _names(chosen.compared)) == ('native', (want,))
  assert platform in chosen.reason


def test_another_jaxlib_is_another_kind(monkeypatch, root):
  """The compiler's version is part of the kind, read from the cases' JSON."""
  amd = root / platforms.PLATFORMS_SUBDIR / 'avx512-amd'
  (amd / 'a.json').write_text(json.dumps({'versions': {'jaxlib': '0.0.1'}}))
  chosen = _select(monkeypatch, root, machine='amd-epyc-zen4')
  assert chosen.mode == 'cross' and _names(chosen.compared) == _ALL
  here = machines.jaxlib.__version__
  assert chosen.matching['avx512-amd'] == (
      False,
      f'jaxlib {here} here, 0.0.1 there',
  )
  (amd / 'a.json').write_text(json.dumps({'versions': {'jaxlib': here}}))
  chosen = _select(monkeypatch, root, machine='amd-epyc-zen4')
  assert _names(chosen.compared) == ('avx512-amd',)
  assert 'jaxlib' in chosen.matching['avx512-amd'][1]


def test_a_set_without_platform_json_is_never_native(monkeypatch, root):
  (root / platforms.PLATFORM_FILE).unlink()  # The main set's.
  chosen = _select(monkeypatch, root, machine='intel-xeon-sapphire-rapids')
  assert chosen.mode == 'cross' and _names(chosen.compared) == _ALL
  assert chosen.matching['main'][1].startswith('no PLATFORM.json')
  with pytest.raises(platforms.SelectionError, match='no golden set matches'):
    _select(monkeypatch, root, platform='main', mode='native')


def test_one_set_alone_is_compared_in_cross_mode(monkeypatch, tmp_path):
  """`$DISCO_PARITY_DIR` at one set's files, with or without PLATFORM.json."""
  (tmp_path / 'a.npz').touch()
  (tmp_path / 'a.json').touch()
  for machine in ('amd-epyc-zen4', 'intel-xeon-sapphire-rapids'):
    for mode in (None, 'cross'):
      chosen = _select(monkeypatch, tmp_path, machine=machine, mode=mode)
      assert chosen.mode == 'cross' and chosen.compared == chosen.sets
      assert chosen.compared[0].directory == tmp_path
  # A set with its record, forced to cross mode on its own machine: cross
  # against it, as asked.
  record = dict(_RECORDS['avx512-amd'])
  (tmp_path / platforms.PLATFORM_FILE).write_text(json.dumps(record))
  chosen = _select(monkeypatch, tmp_path, machine='amd-epyc-zen4', mode='cross')
  assert chosen.mode == 'cross' and _names(chosen.compared) == ('avx512-amd',)
  chosen = _select(monkeypatch, tmp_path, machine='amd-epyc-zen4')
  assert chosen.mode == 'native'


def test_errors_say_what_is_wrong(monkeypatch, root, tmp_path_factory):
  with pytest.raises(platforms.SelectionError, match='expected one of'):
    _select(monkeypatch, root, machine='amd-epyc-zen4', mode='loose')
  with pytest.raises(platforms.SelectionError, match='unknown fields vendor'):
    _select(monkeypatch, root, platform='vendor=AMD')
  with pytest.raises(platforms.SelectionError, match='No golden cases'):
    _select(monkeypatch, tmp_path_factory.mktemp('empty'), platform='gpu')
  (root / platforms.PLATFORM_FILE).write_text('{not json')
  with pytest.raises(platforms.SelectionError, match='not readable JSON'):
    _select(monkeypatch, root, platform='gpu')


def test_this_machine_is_read(monkeypatch):
  monkeypatch.delenv(platforms.PLATFORM_ENV, raising=False)
  machine, reason = platforms.detect_machine()
  assert machine.fields['backend'] and reason == 'read from this system'


def test_the_shipped_sets_select_themselves(monkeypatch):
  """With the real goldens, one set or several: each picks itself alone.

  `$DISCO_PARITY_DIR` may hold the shipped sets or a single one (a set
  copied alone to another machine, or one's own recording).
  """
  golden.selection()  # Fails (CI) or skips without the goldens.
  root = golden.root_dir()
  # The sets of `$DISCO_PARITY_DIR` alone (not `$DISCO_PARITY_CROSS_DIR`'s).
  sets = platforms.golden_sets(root)
  names = _names(sets)
  assert names, 'no golden set'
  for golden_set in sets:
    name = golden_set.name
    if golden_set.recorded is None:
      continue  # No PLATFORM.json: no kind of machine is its own.
    picked = _select(monkeypatch, root, platform=name)
    assert (picked.mode, _names(picked.compared)) == ('native', (name,))
    crossed = _select(monkeypatch, root, platform=name, mode='cross')
    # Cross mode compares against the other sets; a lone set, against
    # itself, as asked.
    others = tuple(n for n in names if n != name) or (name,)
    assert _names(crossed.compared) == others
  # On this machine: native against the set that matches it, else cross
  # against every set (a lone set that matches nothing included).
  here = _select(monkeypatch, root)
  matching = tuple(n for n in names if here.matching[n][0])
  if matching:
    assert (here.mode, _names(here.compared)) == ('native', matching[:1])
  else:
    assert (here.mode, _names(here.compared)) == ('cross', names)


def test_a_run_compares_natively_and_cross_against_another_root(
    monkeypatch, root, tmp_path_factory
):
  """One run in both modes: a recording natively, the shipped sets of other
  kinds in cross mode (`$DISCO_PARITY_CROSS_DIR`)."""
  own = tmp_path_factory.mktemp('recorded')
  (own / 'a.npz').touch()
  record = dict(_RECORDS['avx512-amd'], set='recorded-here')
  (own / platforms.PLATFORM_FILE).write_text(json.dumps(record))
  chosen = _select(monkeypatch, own, machine='amd-epyc-zen4', cross_dir=root)
  assert chosen.mode == 'native'
  assert _names(chosen.compared) == ('recorded-here', 'main', 'avx2')
  assert _names(chosen.cross_also) == ('main', 'avx2')
  modes = [chosen.mode_of(s) for s in chosen.compared]
  assert modes == ['native', 'cross', 'cross']
  # The shipped set of this kind is not compared (the recording stands for
  # it), and the report says which sets go in which mode.
  assert chosen.by_name('avx512-amd').directory.name == 'avx512-amd'
  assert chosen.matching['avx512-amd'][0]
  assert any('mode cross' in line and 'main, avx2' in line
             for line in chosen.describe())  # fmt: skip
  # A machine of no shipped kind: every shipped set in cross mode.
  chosen = _select(monkeypatch, own, platform='arm64', cross_dir=root)
  assert _names(chosen.cross_also) == _ALL
  # The run's own root given again: native against its set of this kind,
  # cross against the others, each set once.
  chosen = _select(monkeypatch, root, machine='amd-epyc-zen4', cross_dir=root)
  assert _names(chosen.compared) == ('avx512-amd', 'main', 'avx2')
  assert _names(chosen.cross_also) == ('main', 'avx2')
  assert _names(chosen.sets) == _ALL
  chosen = _select(
      monkeypatch, root, machine='amd-epyc-zen4', cross_dir=root, mode='cross'
  )
  assert _names(chosen.compared) == ('main', 'avx2') and not chosen.cross_also
  with pytest.raises(platforms.SelectionError, match='CROSS_DIR.*no golden'):
    _select(
        monkeypatch,
        own,
        machine='amd-epyc-zen4',
        cross_dir=tmp_path_factory.mktemp('empty'),
    )
