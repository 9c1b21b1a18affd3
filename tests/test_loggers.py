"""`disco.loggers`: the CSV, TensorBoard and W&B sinks, resume, extras."""

import json
import math
import sys
import types

import pytest

from disco import loggers
from disco import logs
from disco import runtime
from tests import tensorboard_events


class _Recorder(loggers.Logger):
  """A sink that keeps what it is given."""

  def __init__(self, logged=None):
    super().__init__(logged)
    self.calls = []
    self.flushes = 0

  def _write(self, step, scalars, series):
    self.calls.append((series, step, scalars))

  def _flush(self):
    self.flushes += 1


def test_scalars_of_keeps_numbers_and_drops_nan_strings_and_skipped_keys():
  row = dict(seed=1, step=3, a=1, b=float('nan'), c='x', d=2.5, e=True)
  assert loggers.scalars_of(row, 'seed', 'step') == dict(a=1.0, d=2.5)


def test_a_logger_skips_the_steps_it_logged_before():
  sink = _Recorder(logged={'s': 4})
  for step in range(3, 7):
    sink.log(step, {'x': step}, 's')
  sink.log(2, {'x': 2.0}, 'other')  # Another series: nothing to skip.
  assert [(s, t) for s, t, _ in sink.calls] == [
      ('s', 5),
      ('s', 6),
      ('other', 2),
  ]
  assert sink.logged == {'s': 6, 'other': 2}
  sink.close()
  sink.close()
  assert sink.flushes == 1


def test_csv_logger_resumes_without_logging_a_step_twice(tmp_path):
  with loggers.make('csv', tmp_path) as sink:
    for step in (1, 2, 3):
      sink.log(step, {'loss': float(step)}, 'seed_0')
  # A resumed run computes steps 2 and 3 again (its checkpoint is step 1).
  with loggers.make(['csv'], tmp_path, resume=True) as sink:
    for step in (2, 3, 4):
      sink.log(step, {'loss': 10.0 * step}, 'seed_0')
  rows = logs.read_csv(tmp_path / 'log.csv')
  assert [(r['series'], r['step'], r['loss']) for r in rows] == [
      ('seed_0', 1, 1.0),
      ('seed_0', 2, 2.0),
      ('seed_0', 3, 3.0),
      ('seed_0', 4, 40.0),
  ]
  # A new run (no resume) starts the file afresh.
  with loggers.make('csv', tmp_path) as sink:
    sink.log(1, {'loss': 5.0})
  assert logs.read_csv(tmp_path / 'log.csv') == [dict(step=1, loss=5.0)]


def test_tensorboard_logger_writes_one_run_per_series_and_resumes(tmp_path):
  pytest.importorskip('tensorboardX')
  with loggers.make('tensorboard', tmp_path) as sink:
    for step in (0, 1, 2, 3):
      sink.log(step, {'loss': float(step), 'nan': math.nan}, 'seed_0')
      sink.log(step, {'loss': -float(step)}, 'seed_1')
  with loggers.make('tensorboard', tmp_path, resume=True) as sink:
    for step in (2, 3, 4, 5):
      sink.log(step, {'loss': 10.0 * step}, 'seed_0')
  root = tmp_path / 'tensorboard'
  assert tensorboard_events.tensorboard_scalars(root / 'seed_0') == {
      'loss': [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0), (4, 40.0), (5, 50.0)]
  }
  assert tensorboard_events.tensorboard_scalars(root / 'seed_1') == {
      'loss': [(0, 0.0), (1, -1.0), (2, -2.0), (3, -3.0)]
  }
  saved = json.loads((root / loggers.STEPS_FILENAME).read_text())
  assert saved == dict(logged_steps=dict(seed_0=5, seed_1=3))


class _FakeWandb:
  """The part of the `wandb` module the sink uses, recording its calls."""

  def __init__(self):
    self.runs = []

  def init(self, **kwargs):
    run = types.SimpleNamespace(
        kwargs=kwargs, metrics=[], logged=[], finished=False
    )
    run.define_metric = lambda name, **kw: run.metrics.append((name, kw))
    run.log = run.logged.append
    run.finish = lambda: setattr(run, 'finished', True)
    self.runs.append(run)
    return run


def test_wandb_logger_continues_its_run_on_resume(tmp_path, monkeypatch):
  fake = _FakeWandb()
  monkeypatch.setitem(sys.modules, 'wandb', fake)
  with loggers.make(
      'wandb', tmp_path, config={'lr': 0.1}, run_name='disco-train x'
  ) as sink:
    sink.log(1, {'loss': 1.0}, 'seed_0')
    sink.log(2, {'loss': 2.0}, 'seed_0')
  with loggers.make('wandb', tmp_path, resume=True) as sink:
    sink.log(2, {'loss': 20.0}, 'seed_0')
    sink.log(3, {'loss': 30.0}, 'seed_0')
  first, second = fake.runs
  assert first.kwargs['config'] == {'lr': 0.1}
  assert first.kwargs['name'] == 'disco-train x'
  assert first.kwargs['dir'] == str(tmp_path)
  assert second.kwargs['id'] == first.kwargs['id']  # The same run, resumed.
  assert second.kwargs['resume'] == 'allow'
  assert ('seed_0/*', {'step_metric': 'seed_0/step'}) in first.metrics
  assert first.logged == [
      {'seed_0/loss': 1.0, 'seed_0/step': 1},
      {'seed_0/loss': 2.0, 'seed_0/step': 2},
  ]
  assert second.logged == [{'seed_0/loss': 30.0, 'seed_0/step': 3}]
  assert first.finished and second.finished
  # A new run in the directory gets a new id.
  with loggers.make('wandb', tmp_path):
    pass
  assert fake.runs[2].kwargs['id'] != first.kwargs['id']


@pytest.mark.parametrize(
    'name, module', [('tensorboard', 'tensorboardX'), ('wandb', 'wandb')]
)
def test_a_missing_extra_is_named(name, module, tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, module, None)  # `import` fails.
  with pytest.raises(loggers.MissingExtraError) as error:
    loggers.make(['csv', name], tmp_path)
  assert str(error.value) == (
      f'The {name} logger needs the {module} package: pip install'
      f' "disco-jax[{name}]"'
  )
  assert not (tmp_path / 'log.csv').exists()  # Nothing opened.


def test_bad_logger_arguments_are_named(tmp_path):
  with pytest.raises(ValueError, match="Unknown logger 'mlflow'"):
    loggers.make('mlflow', tmp_path)
  with pytest.raises(ValueError, match='needs a log_dir'):
    with loggers.open_logger('csv', None, resume=False):
      pass
  with pytest.raises(TypeError, match='sink names'):
    with loggers.open_logger([print], tmp_path, resume=False):
      pass


def test_open_logger_closes_the_named_sinks_and_flushes_the_given(tmp_path):
  given = _Recorder()
  with loggers.open_logger(['csv', given], tmp_path, resume=False) as sink:
    sink.log(1, {'x': 1.0})
  assert given.calls == [('', 1, {'x': 1.0})]
  assert given.flushes == 1 and not given._closed  # pylint: disable=protected-access
  assert logs.read_csv(tmp_path / 'log.csv') == [dict(step=1, x=1.0)]


def test_run_steps_gives_each_step_to_the_logger():
  state = types.SimpleNamespace(step=0)

  def step_fn(s):
    return types.SimpleNamespace(step=s.step + 1), {'loss': s.step * 2.0}

  sink = _Recorder()
  runtime.run_steps(
      state,
      step_fn,
      [],
      num_steps=3,
      checkpoint_every=0,
      save=None,
      latest_saved=lambda: None,
      last_saved=None,
      progress_fn=None,
      handle_interrupts=False,
      logger=sink,
  )
  assert sink.calls == [
      ('', 1, {'loss': 0.0}),
      ('', 2, {'loss': 2.0}),
      ('', 3, {'loss': 4.0}),
  ]
