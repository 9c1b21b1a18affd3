"""Tests of `disco.studies.report` and `disco.studies.plots` on records."""

import csv

import pytest

from disco.studies import plots
from disco.studies import records
from disco.studies import report
from tests.studies import tiny


def _ppo_record(env):
  return dict(
      status='done',
      env=env,
      wall_seconds=30.0,
      seeds=[
          dict(seed=s, final_return=float(s + 3), env_steps=1000)
          for s in (0, 1)
      ],
      curves=[
          dict(seed=s, env_steps=x, value=float(s + x / 1000.0))
          for s in (0, 1)
          for x in (0, 500, 1000)
      ],
  )


def test_report_gives_iqm_intervals_per_seed_values_and_plots(tmp_path):
  env = 'gymnax:Breakout-MinAtar'
  runs = tmp_path / records.RUNS_DIR
  for seed, final in enumerate((1.0, 2.0, 6.0)):
    records.write_json(
        runs / f'd{seed}.json',
        tiny.trainer_record(env, 'disco', seed, [0.0, None, final]),
    )
  records.write_json(runs / 'ppo.json', _ppo_record(env))
  rows = report.per_seed_rows(records.load_records(tmp_path))
  summary = report.write(tmp_path, rows)
  with open(tmp_path / 'summary.csv', newline='') as f:
    written = {row['algo']: row for row in csv.DictReader(f)}
  assert [r['algo'] for r in summary] == ['disco', 'ppo']
  assert float(written['disco']['iqm']) == pytest.approx(3.0)
  assert written['disco']['per_seed'] == '1.00 2.00 6.00'
  low, high = float(written['disco']['ci_low']), float(
      written['disco']['ci_high']
  )
  assert 1.0 <= low <= 3.0 <= high <= 6.0
  assert float(written['ppo']['iqm']) == pytest.approx(3.5)
  assert float(written['ppo']['wall_seconds_per_seed']) == 15.0
  for name in ('results.csv', 'curves.csv', 'curves.png'):
    assert (tmp_path / name).is_file(), name
  table = report.markdown(summary).splitlines()
  assert table[0] == (
      '| environment | algorithm | env steps / seed | updates | IQM [95% CI]'
      ' | per seed |'
  )
  assert table[2].startswith('| Breakout-MinAtar | disco | 14,500 | 50 | 3.00')


def test_summary_pools_seeds_at_the_budget_every_seed_reached(tmp_path):
  """A stopped seed beside finished ones: the IQM is at its last evaluation."""
  env = 'craftax:Craftax-Classic-Symbolic-v1'
  runs = tmp_path / records.RUNS_DIR
  for seed, finals in enumerate(([0.0, 1.0, 5.0], [0.0, 3.0, 6.0])):
    records.write_json(
        runs / f'd{seed}.json', tiny.trainer_record(env, 'disco', seed, finals)
    )
  stopped = tiny.trainer_record(env, 'disco', 2, [0.0, 4.0], records.PARTIAL)
  records.write_json(runs / 'd2.partial.json', stopped)
  rows = report.per_seed_rows(
      records.load_records(tmp_path, include_partial=True)
  )
  assert [r['env_steps'] for r in rows] == [290 * 50, 290 * 50, 290 * 25]
  (summary,) = report.summary_rows(rows)
  assert summary['env_steps'] == 290 * 25
  assert summary['learner_updates'] == 25
  assert summary['per_seed'] == '1.00 3.00 4.00'
  (done,) = report.summary_rows(rows[:2])
  assert done['env_steps'] == 290 * 50 and done['per_seed'] == '5.00 6.00'


def test_plot_tells_seeds_of_one_algorithm_apart(tmp_path):
  """Seeds share their algorithm's colour and differ in line style."""
  env = 'craftax:Craftax-Classic-Symbolic-v1'
  found = [
      tiny.trainer_record(env, 'disco', seed, [0.0, 1.0 + seed])
      for seed in (0, 1)
  ]
  found.append(tiny.trainer_record(env, 'actor_critic', 0, [0.0, 0.5]))
  fig = plots.seed_curves(report.per_seed_rows(found), tmp_path / 'curves.png')
  lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
  assert sorted(lines) == ['actor_critic s0', 'disco s0', 'disco s1']
  disco0, disco1 = lines['disco s0'], lines['disco s1']
  assert disco0.get_color() == disco1.get_color()
  assert disco0.get_linestyle() != disco1.get_linestyle()
  assert lines['actor_critic s0'].get_color() != disco0.get_color()


def test_plots_leave_no_figure_open(tmp_path):
  """A process reporting many times must not pile up open figures."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  env = 'craftax:Craftax-Classic-Symbolic-v1'
  rows = report.per_seed_rows([tiny.trainer_record(env, 'disco', 0, [0, 1])])
  before = set(plt.get_fignums())
  for _ in range(3):
    plots.seed_curves(rows, tmp_path / 'curves.png')
  assert set(plt.get_fignums()) == before
  assert (tmp_path / 'curves.png').read_bytes()[:4] == b'\x89PNG'
