"""Tests of `disco.studies.records`: finished runs skipped, others kept."""

import numpy as np
import pytest

from disco.studies import records


def test_finished_runs_are_read_back_and_other_settings_stop(tmp_path):
  name = 'DeepSea-bsuite__ppo'
  settings = dict(env_steps=100, seeds=[0, 1], overrides={})
  assert records.load_record(tmp_path, name, settings) is None
  record = dict(name=name, status=records.DONE, settings=settings, seeds=[])
  path = records.record_path(tmp_path, name)
  records.write_json(path, record)
  assert path == tmp_path / 'runs' / 'DeepSea-bsuite__ppo.json'
  assert records.load_record(tmp_path, name, settings) == record
  # Tuples are lists once written.
  assert records.load_record(tmp_path, name, settings | dict(seeds=(0, 1)))
  # Other settings: an error naming the field, not a silent rerun.
  with pytest.raises(records.RecordError, match='differing: seeds'):
    records.load_record(tmp_path, name, settings | dict(seeds=[0, 2]))
  # Runs that did not finish, and broken files, run again.
  records.write_json(path, record | dict(status='not run: reasons'))
  assert records.load_record(tmp_path, name, settings) is None
  path.write_text('{"env": ')
  assert records.load_record(tmp_path, name, settings) is None


def test_load_records_prefers_a_finished_record_to_its_partial_one(tmp_path):
  runs = tmp_path / records.RUNS_DIR
  records.write_json(runs / 'a.partial.json', dict(status=records.PARTIAL))
  records.write_json(runs / 'a.json', dict(status=records.DONE, n=1))
  records.write_json(runs / 'b.partial.json', dict(status=records.PARTIAL))
  assert records.load_records(tmp_path) == [dict(status=records.DONE, n=1)]
  assert [r['status'] for r in records.load_records(tmp_path, True)] == [
      records.DONE,
      records.PARTIAL,
  ]
  assert records.load_records(tmp_path / 'none') == []


def test_seed_columns_and_json_numbers():
  assert records.json_numbers(np.array([1, np.nan, np.inf, 2.5])) == [
      1.0,
      None,
      None,
      2.5,
  ]
  record = dict(logs=dict(seed=[0, 1, 0], x=[1.0, 2.0, None]))
  columns = records.seed_columns(record, 0)
  np.testing.assert_array_equal(columns['x'], [1.0, np.nan])
