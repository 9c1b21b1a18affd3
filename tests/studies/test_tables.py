"""Tests of `disco.studies.tables` and `disco.studies.final_tables`."""

import math

import pytest

from disco.studies import final_tables
from disco.studies import tables


def test_csv_round_trip(tmp_path):
  rows = [
      dict(env='catch', seed=0, value=0.123456, flag=True, missing=None),
      dict(env='catch', seed=1, value=math.nan, flag=False, missing=None),
  ]
  path = tables.write_csv(tmp_path / 'a.csv', rows, blank_nan=True)
  assert path.read_text().splitlines() == [
      'env,seed,value,flag,missing',
      'catch,0,0.123456,True,',
      'catch,1,,False,',
  ]
  parsers = dict(
      seed=int, value=tables.float_or_nan, flag=tables.true,
      missing=tables.int_or_none,
  )  # fmt: skip
  back = tables.read_csv(path, parsers)
  assert back[0] == dict(seed=0, value=0.123456, flag=True, missing=None)
  assert math.isnan(back[1]['value'])
  rounded = tables.write_csv(
      tmp_path / 'b.csv', rows, ('seed', 'value'), digits=2, comment='here'
  )
  assert rounded.read_text().splitlines() == [
      '# here',
      'seed,value',
      '0,0.12',
      '1,nan',
  ]
  with pytest.raises(ValueError, match='lacks the columns'):
    tables.read_csv(rounded, dict(env=str))


def test_markdown_and_cells():
  assert tables.markdown(('a', 'b'), [(1, ''), ('x', 2.5)]).splitlines() == [
      '| a | b |',
      '|---|---|',
      '| 1 |  |',
      '| x | 2.5 |',
  ]
  assert tables.seeds_cell([1.0, math.nan, 3.0]) == (
      '2 ± 1.41 [1, 3] (1 seed(s) without episodes)'
  )
  assert tables.seeds_cell([5.5]) == '5.5 ± n/a [5.5, 5.5]'
  assert tables.seeds_cell([math.nan]) == 'no episode ended'
  assert tables.iqm_cell([1.0, 2.0, 6.0]).endswith('; 1.00 / 2.00 / 6.00')
  assert tables.iqm_cell([1.0, 2.0, 6.0]).startswith('3.00 [')
  assert tables.iqm_cell([math.nan]) == ''
  assert tables.env_label('gymnax:Breakout-MinAtar') == 'Breakout-MinAtar'


def test_ratios_compare_like_with_like():
  rows = [
      dict(env='e', rule=r, dtype=d, rate=v)
      for r, d, v in (('a', 'f32', 2.0), ('a', 'bf16', 1.0), ('b', 'f32', 8.0))
  ]
  rows.append(rows[0] | dict(scans='unrolled', rate=3.0))
  like = dict(fields=('env', 'rule', 'dtype', 'scans'), value='rate')
  defaults = dict(scans='rolled')
  tables.ratios(
      rows, 'vs_f32', field='dtype', other=lambda r: 'f32',
      defaults=defaults, **like,
  )  # fmt: skip
  tables.ratios(
      rows, 'vs_b', field='rule', other=lambda r: 'b', defaults=defaults,
      **like,
  )  # fmt: skip
  tables.ratios(
      rows, 'vs_rolled', field='scans', other=lambda r: 'rolled',
      defaults=defaults, **like,
  )  # fmt: skip
  assert [r['vs_f32'] for r in rows] == [1.0, 0.5, 1.0, 1.0]
  assert [r['vs_b'] for r in rows] == [0.25, '', 1.0, '']
  assert [r['vs_rolled'] for r in rows] == [1.0, 1.0, 1.0, 1.5]
  tables.ratios(rows, 'none', field='dtype', other=lambda r: None, **like)
  assert {r['none'] for r in rows} == {''}


def test_final_tables_rows_and_markdown():
  record = dict(
      env='gymnax:DeepSea-bsuite', algo='disco', learning_rate=3e-4,
      status='done', wall_seconds=120.04,
      seeds=[
          dict(seed=s, final_return=r, final_eval_episodes=16,
               final_train_return=0.5, final_train_episodes=10,
               env_steps=100, learner_steps=5)
          for s, r in ((0, 1.0), (1, 3.0))
      ],
      curves=[dict(seed=0, point=0, kind='eval', env_steps=0, value=0.0,
                   episodes=16)],
  )  # fmt: skip
  rows = final_tables.result_rows(record, selected_on=True)
  assert [r['run_wall_seconds'] for r in rows] == [120.0, 120.0]
  rows += final_tables.not_run_rows('craftax:C', 'ppo', None, [0], 'slow')
  (curve,) = final_tables.curve_rows(record)
  assert curve['return'] == 0.0 and curve['env'] == 'gymnax:DeepSea-bsuite'
  lines = final_tables.markdown(rows, notes=['A note.']).splitlines()
  assert lines[2] == (
      '| DeepSea-bsuite † | disco | 0.0003 | 2 ± 1.41 [1, 3] | 0.5 ± 0 [0.5,'
      ' 0.5] | 2 | 100 | 2.0 min |'
  )
  assert lines[3] == '| C | ppo | - | not run: slow | - | 1 | - | - |'
  assert lines[5].startswith('† The learning-rate selection environment')
  assert lines[6:] == ['A note.', 'Runs: 2.0 min wall in total.']
  timing = dict(record, compile_seconds=3.0)
  assert final_tables.timing_line('x', timing) == (
      'x: 120 s (compiling 3 s); final return 2 ± 1.41 [1, 3]'
  )
