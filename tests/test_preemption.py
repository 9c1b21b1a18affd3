"""SIGTERM ends a run like Ctrl-C: the step finishes, a checkpoint, exit.

The signal handling and the processes' agreement on a stop are tested
directly; a real `disco-train` process stopped by SIGTERM resumes to the
run it would have been; two processes joined by `jax.distributed`, one of
them signalled, stop after the same step.
"""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import jax
from jax.experimental import multihost_utils
import numpy as np
import pytest

from disco import checkpoint
from disco import interrupts
from disco import runtime
from disco.train import cli as train_cli
from tests import forced_devices
from tests import tiny_args


def test_the_first_sigterm_is_deferred_and_the_handlers_restored():
  before = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
  with interrupts.deferred_interrupts() as received:
    assert received() == 0
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.01)  # The handler runs between bytecodes.
    assert received() == signal.SIGTERM
  assert {s: signal.getsignal(s) for s in interrupts.SIGNALS} == before


def test_a_second_signal_interrupts_at_once():
  before = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
  with pytest.raises(KeyboardInterrupt) as raised:
    with interrupts.deferred_interrupts() as received:
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(0.01)
      assert received() == signal.SIGTERM
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(0.01)
  assert not isinstance(raised.value, interrupts.Interrupted)
  assert {s: signal.getsignal(s) for s in interrupts.SIGNALS} == before


def test_without_handling_no_handler_is_installed():
  before = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
  with interrupts.deferred_interrupts(enabled=False) as received:
    assert {s: signal.getsignal(s) for s in interrupts.SIGNALS} == before
    assert received() == 0


@pytest.mark.parametrize(
    'gathered, stops', [([0, 0], False), ([0, signal.SIGTERM], True)]
)
def test_every_process_stops_when_one_was_signalled(
    gathered, stops, monkeypatch
):
  # This process (index 0 of 2) received nothing; its peer maybe SIGTERM.
  monkeypatch.setattr(jax, 'process_count', lambda: 2)
  asked = []

  def _allgather(x):
    asked.append(int(x))
    return np.asarray(gathered, np.int32)

  monkeypatch.setattr(multihost_utils, 'process_allgather', _allgather)
  saved = []
  stop = runtime.stopper(lambda: 0)
  if stops:
    with pytest.raises(interrupts.Interrupted) as raised:
      stop(lambda: saved.append('saved'))
    assert raised.value.signum == signal.SIGTERM
    assert saved == ['saved']
  else:
    stop(lambda: saved.append('saved'))
    assert not saved
  assert asked == [0]  # Asked every step, whether or not it stops.


def test_without_handlers_the_processes_gather_nothing(monkeypatch):
  monkeypatch.setattr(jax, 'process_count', lambda: 2)
  asked = []

  def _allgather(x):
    asked.append(int(x))
    return np.zeros((2,), np.int32)

  monkeypatch.setattr(multihost_utils, 'process_allgather', _allgather)
  with runtime.stop_on_interrupt('step', enabled=False) as stop:
    stop(None)
  assert not asked
  with runtime.stop_on_interrupt('step', enabled=True) as stop:
    stop(None)
  assert asked == [0]


_TRAIN_ARGS = [
    *tiny_args.TRAIN,
    '--rule=actor_critic',
    '--env=catch',
    '--num-steps=30',
    '--num-seeds=2',
    '--checkpoint-every=0',
    '--no-progress',
    '--no-plot',
]

# `disco-train`, each step slowed down so that a signal lands mid-run.
_SLOW_TRAIN = r"""
import sys
import time

from disco import progress

_call = progress.ProgressBar.__call__


def _slow(self, current, metrics):
  _call(self, current, metrics)
  time.sleep(0.2)


progress.ProgressBar.__call__ = _slow
from disco.train import cli

sys.exit(cli.main(sys.argv[1:]))
"""


def _rows(path):
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  for row in rows:
    del row['elapsed']  # Wall time: the one column that differs.
  return rows


def _wait_for_step(log, step, proc, timeout=600):
  """Waits until `log` (a `log.csv`) has a row of `step` or later."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    assert proc.poll() is None, 'the run ended before it was signalled'
    if log.exists():
      steps = [int(r['step']) for r in _rows(log)]
      if steps and max(steps) >= step:
        return
    time.sleep(0.05)
  raise TimeoutError(f'{log} never reached step {step}')


# tests/test_train_cli.py's runs of the same programs (two seeds).
def test_disco_train_stopped_by_sigterm_resumes_exactly(tmp_path, capsys):
  straight, stopped = tmp_path / 'straight', tmp_path / 'stopped'
  assert train_cli.main(_TRAIN_ARGS + [f'--out-dir={straight}']) == 0
  with (
      (tmp_path / 'out').open('w') as out,
      (tmp_path / 'err').open('w') as err,
  ):
    # This process's environment (so a JAX compilation cache, as in CI, is
    # shared: the programs compiled above load instead of compiling).
    path = [str(forced_devices.REPO), os.environ.get('PYTHONPATH', '')]
    proc = subprocess.Popen(
        [sys.executable, '-c', _SLOW_TRAIN]
        + _TRAIN_ARGS
        + [f'--out-dir={stopped}'],
        env=dict(
            os.environ, PYTHONPATH=os.pathsep.join(path).rstrip(os.pathsep)
        ),
        cwd=forced_devices.REPO,
        stdout=out,
        stderr=err,
    )
    try:
      _wait_for_step(stopped / 'log.csv', 3, proc)
      proc.send_signal(signal.SIGTERM)
      proc.wait(timeout=300)
    finally:
      proc.kill()
  err = (tmp_path / 'err').read_text()
  assert proc.returncode == 128 + signal.SIGTERM, err
  assert 'disco-train: stopped by SIGTERM' in err
  assert f'Continue with: disco-train --out-dir {stopped} --resume' in err
  # It finished the step it was in, and checkpointed there.
  last = max(int(r['step']) for r in _rows(stopped / 'log.csv'))
  assert 3 <= last < 30
  assert checkpoint.latest_step(stopped / 'checkpoints') == last

  capsys.readouterr()
  assert train_cli.main([f'--out-dir={stopped}', '--resume']) == 0
  assert _rows(stopped / 'log.csv') == _rows(straight / 'log.csv')
  for seed in (0, 1):
    name = f'agent_params_seed{seed}.npz'
    with np.load(straight / name) as a, np.load(stopped / name) as b:
      assert sorted(a) == sorted(b)
      for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


_TWO_PROCESS_WORKER = r"""
import json
import sys
import time

import jax

out_dir, process_id, address = sys.argv[1], int(sys.argv[2]), sys.argv[3]
jax.config.update('jax_cpu_collectives_implementation', 'gloo')
jax.distributed.initialize(
    coordinator_address=address, num_processes=2, process_id=process_id
)

from disco import interrupts
from disco import meta_train

config = meta_train.MetaTrainConfig(
    num_steps=100, num_inner_steps=1, rollout_len=3, envs_per_device=2,
    agent_dense=(16,), agent_head_mlp_hiddens=(8,), agent_lstm_size=8,
    value_fn_dense=(16,), checkpoint_every=0,
)


def progress(step, logs):
  print(json.dumps(dict(step=step)), flush=True)
  time.sleep(0.2)


try:
  meta_train.run_meta_train(
      config, progress_fn=progress, checkpoint_dir=out_dir,
      handle_interrupts=True,
  )
except interrupts.Interrupted as e:
  print(json.dumps(dict(stopped=e.signum)), flush=True)
"""


def _reports(path):
  text = path.read_text() if path.exists() else ''
  return [json.loads(line) for line in text.splitlines() if line[:1] == '{']


@pytest.mark.slow  # Two processes compiling meta-training: minutes.
def test_two_processes_stop_at_the_same_step_on_one_sigterm(tmp_path):
  address = forced_devices.free_address()
  procs = []
  for i in range(2):
    with (
        (tmp_path / f'{i}.out').open('w') as out,
        (tmp_path / f'{i}.err').open('w') as err,
    ):
      procs.append(
          subprocess.Popen(
              [
                  sys.executable,
                  '-c',
                  _TWO_PROCESS_WORKER,
                  str(tmp_path / 'run'),
                  str(i),
                  address,
              ],
              env=forced_devices.env(1),
              cwd=forced_devices.REPO,
              stdout=out,
              stderr=err,
          )
      )
  try:
    deadline = time.monotonic() + 600
    while not any(r.get('step', 0) >= 2 for r in _reports(tmp_path / '1.out')):
      for i, proc in enumerate(procs):
        assert proc.poll() is None, (tmp_path / f'{i}.err').read_text()
      assert time.monotonic() < deadline, 'no step 2 in time'
      time.sleep(0.05)
    procs[1].send_signal(signal.SIGTERM)  # One process only.
    for proc in procs:
      proc.wait(timeout=300)
  finally:
    for proc in procs:
      proc.kill()
  stopped_at = []
  for i, proc in enumerate(procs):
    assert proc.returncode == 0, (tmp_path / f'{i}.err').read_text()
    reports = _reports(tmp_path / f'{i}.out')
    assert reports[-1] == dict(stopped=signal.SIGTERM)
    stopped_at.append(reports[-2]['step'])
    root = tmp_path / 'run' / f'process_{i}'
    assert checkpoint.latest_step(root) == stopped_at[-1]
  assert stopped_at[0] == stopped_at[1] < 100
