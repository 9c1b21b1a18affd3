"""Algorithms compared across environments at equal environment steps.

A `Comparison` runs the trainer's rules (e.g. disco, actor_critic) and
rejax's PPO on environments, each run all its seeds at once, and keeps one
record per run in `<out>/runs/<env>__<algo>[__lr<rate>].json`
(`disco.studies.finals`, `disco.studies.ppo_runs`): a run whose record
holds the same settings is read back, not run again, so an interrupted
comparison goes on at the run it was in. `select` chooses the rules' step
sizes on one environment first (`disco.studies.selection`), and `rows`
gives the results and curves of the runs (`disco.studies.final_tables`).
"""

from collections.abc import Callable, Sequence
import dataclasses
import pathlib
import sys
from typing import Any

from disco.studies import final_tables
from disco.studies import finals
from disco.studies import ppo_runs
from disco.studies import records
from disco.studies import selection as selection_lib
from disco.studies import tables

PPO = ppo_runs.PPO


@dataclasses.dataclass(frozen=True)
class RunKey:
  """One run: an environment, an algorithm and (a rule's) learning rate."""

  env: str
  algo: str
  learning_rate: float | None = None

  @property
  def name(self) -> str:
    """The record's file name: '<env>__<algo>[__lr<rate>]'."""
    name, rate = (
        f'{tables.env_label(self.env)}__{self.algo}',
        self.learning_rate,
    )
    return name if rate is None else f'{name}__lr{rate:g}'

  def label(self) -> str:
    """'<env> <algo>[ lr=<rate>]'."""
    text, rate = f'{tables.env_label(self.env)} {self.algo}', self.learning_rate
    return text if rate is None else f'{text} lr={rate:g}'


@dataclasses.dataclass
class Comparison:
  """The runs of a comparison: their settings, and their records so far.

  Attributes:
    out: the comparison's directory.
    seeds: the seeds of every run, trained together.
    config_fn: a rule's run -> its `disco.train.TrainConfig`.
    budget_fn: an environment -> PPO's env steps per seed there.
    first_learning_step_fn: a config -> its last iteration that only acts
      (for the timing of the trainer's runs).
    ppo_overrides: PPO settings over `disco.studies.ppo.config_for`.
    rule_params: per rule, its parameters (None: the config's).
    show_progress: progress bars.
    records: the records so far, by run.
    timings: a line per run: its wall time and final returns, or why it
      did not run.
  """

  out: pathlib.Path
  seeds: Sequence[int]
  config_fn: Callable[[RunKey], Any]
  budget_fn: Callable[[str], int]
  first_learning_step_fn: Callable[[Any], int]
  ppo_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
  rule_params: dict[str, Any] = dataclasses.field(default_factory=dict)
  show_progress: bool = True
  records: dict[RunKey, dict[str, Any]] = dataclasses.field(
      default_factory=dict
  )
  timings: list[str] = dataclasses.field(default_factory=list)

  def settings(self, key: RunKey) -> dict[str, Any]:
    """What a finished record of `key` must hold to be read back."""
    if key.algo != PPO:
      return dict(
          config=self.config_fn(key).to_dict(), num_seeds=len(self.seeds)
      )
    budget = self.budget_fn(key.env)
    return ppo_runs.settings(key.env, budget, self.seeds, self.ppo_overrides)

  def check(self, keys: Sequence[RunKey]) -> None:
    """Raises `records.RecordError` if a run's record has other settings."""
    for key in keys:
      records.load_record(self.out, key.name, self.settings(key))

  def _train(self, key: RunKey) -> dict[str, Any]:
    """Runs `key`: its record, or a 'not run' one where PPO failed."""
    head = dict(env=key.env, algo=key.algo, learning_rate=key.learning_rate)
    if key.algo != PPO:
      config = self.config_fn(key)
      return head | finals.train(
          config,
          num_seeds=len(self.seeds),
          first_learning_step=self.first_learning_step_fn(config),
          update_rule_params=self.rule_params.get(key.algo),
          label=key.label(),
          show_progress=self.show_progress,
      )
    try:
      return ppo_runs.run(
          key.env,
          self.budget_fn(key.env),
          self.seeds,
          self.ppo_overrides,
          label=key.label(),
          show_progress=self.show_progress,
      )
    except Exception as e:  # pylint: disable=broad-exception-caught
      # A 'not run' row, tried again by the next call.
      reason = f'{type(e).__name__}: {e}'.splitlines()[0][:200]
      return head | dict(status=f'not run: {reason}', seeds=[], curves=[])

  def run(self, key: RunKey) -> dict[str, Any]:
    """The run's record: read back if it finished before, else run now."""
    if key in self.records:  # E.g. a selection run that is also a row.
      return self.records[key]
    path = records.record_path(self.out, key.name)
    record = records.load_record(self.out, key.name, self.settings(key))
    if record is not None:
      print(f'{key.label()}: done before ({path})')
    else:
      record = self._train(key)
      if record['status'] == records.DONE:
        records.write_json(path, record)
    if record['status'] == records.DONE:
      line = final_tables.timing_line(key.label(), record)
      print(line)
    else:
      line = f'{key.label()}: {record["status"]}'
      print(line, file=sys.stderr)
    self.timings.append(line)
    self.records[key] = record
    return record

  def select(
      self, env: str, rules: Sequence[str], rates: Sequence[float]
  ) -> list[dict[str, Any]]:
    """Runs each rule at each rate on `env`; returns the selection's rows.

    Rows as `disco.studies.selection.COLUMNS`: per rule and rate the final
    returns' summary, whether it was chosen, and the run's wall time.
    """

    def finals_of(rule: str, rate: float) -> list[float]:
      return [
          s['final_return'] for s in self.run(RunKey(env, rule, rate))['seeds']
      ]

    rows = selection_lib.select_learning_rates({
        rule: {rate: finals_of(rule, rate) for rate in rates} for rule in rules
    })
    for row in rows:
      record = self.records[RunKey(env, row['rule'], row['learning_rate'])]
      row |= dict(env=env, run_wall_seconds=round(record['wall_seconds'], 1))
    return rows

  def rows(
      self, keys: Sequence[RunKey], selected_on: Callable[[RunKey], bool]
  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Runs `keys` in turn; returns results.csv's and curves.csv's rows."""
    results, curves = [], []
    for key in keys:
      record = self.run(key)
      if record['status'] == records.DONE:
        results += final_tables.result_rows(record, selected_on(key))
      else:
        reason = record['status'].removeprefix('not run: ')
        results += final_tables.not_run_rows(
            key.env, key.algo, key.learning_rate, self.seeds, reason
        )
      curves += final_tables.curve_rows(record)
    return results, curves
