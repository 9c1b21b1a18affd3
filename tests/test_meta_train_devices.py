"""Meta-training on 2 and 4 (forced) CPU devices.

Each case runs in a subprocess whose `XLA_FLAGS` asks for N host devices
before JAX starts. It checks the reference's `pmap` semantics: the rule,
the logs and the agents' parameters are identical on every device
(meta-gradients, learner gradients and logs are averaged) while the
devices' environments differ (each device acts with its own key); on 2
devices, one meta-step `pmap`ped equals the same function `vmap`ped over a
named axis on one device (where `pmean` has the same meaning); and a
resumed multi-device run equals a straight one bit for bit. Every test here
is `slow` (`pytest -m slow`), kept out of CI's 20 minutes.

The last test runs two processes joined by `jax.distributed.initialize`
(one CPU device each, Gloo collectives) and checks that they compute what
one process with two devices computes, checkpoints and resume included.
"""

import json
import subprocess
import sys

import pytest

from tests import forced_devices

_WORKER = r"""
import functools
import json
import sys

import jax
import numpy as np

num_devices, out_dir, emulate = int(sys.argv[1]), sys.argv[2], sys.argv[3]
emulate = emulate == 'emulate'
assert jax.device_count() == num_devices, jax.devices()

from disco import meta_train
from disco.meta_train import loop as meta_train_runtime

# 1 inner rollout of 3 steps + a validation rollout of 6: 9 steps, so the
# 4-step Catch episodes are mid-way and the paddles show each device's own
# actions (their balls and resets follow the replicated environment keys).
config = meta_train.MetaTrainConfig(
    num_steps=2, num_inner_steps=1, rollout_len=3, envs_per_device=2,
    agent_dense=(16,), agent_head_mlp_hiddens=(8,), agent_lstm_size=8,
    value_fn_dense=(16,), checkpoint_every=1,
)
trainer = meta_train_runtime._trainer_for(config)
state = trainer.initial_state(trainer.random_params())
_, keys = trainer._step_keys(state.rng)
keys = np.asarray(keys)
inputs = (
    state.update_rule_params, state.meta_opt_state, state.agents_states,
    trainer.layout.put(keys, replicate=False),
)
host_inputs = jax.device_get(inputs)
pmapped = jax.device_get(trainer._update(*inputs))
report = {}
if emulate:
  emulated = jax.device_get(jax.jit(jax.vmap(
      functools.partial(
          meta_train.meta_update, agent=trainer.agent,
          meta_opt=trainer.meta_opt, config=config,
      ),
      axis_name='i',
  ))(*host_inputs))

params, opt_state, agents, train_logs, meta_log = pmapped
same = lambda tree: all(
    np.array_equal(x, np.broadcast_to(x[:1], x.shape))
    for x in jax.tree.leaves(tree)
)
report['rule_same_on_devices'] = same((params, opt_state))
report['logs_same_on_devices'] = same((train_logs, meta_log))
report['agent_params_same_on_devices'] = same(agents.learner_state.params)
report['envs_differ'] = not same(agents.env_state.state)
report['inputs_replicated'] = same(host_inputs[2])
if emulate:
  log_errors = {}
  for key, value in {**meta_log, **train_logs}.items():
    other = {**emulated[4], **emulated[3]}[key]
    log_errors[key] = float(np.max(
        np.abs(value - other) / (1e-6 + 1e-4 * np.abs(other))))
  report['worst_log_error'] = max(log_errors.values())
  diffs = np.concatenate([
      np.abs(a - b).ravel() for a, b in zip(
          jax.tree.leaves(params), jax.tree.leaves(emulated[0]))
  ])
  report['rule_max_diff'] = float(diffs.max())
  report['rule_share_diff_above_1e-6'] = float(np.mean(diffs > 1e-6))
report['meta_log'] = {k: float(v[0]) for k, v in meta_log.items()}

straight = meta_train.run_meta_train(
    config, checkpoint_dir=out_dir + '/straight')
meta_train.run_meta_train(
    config.replace(num_steps=1), checkpoint_dir=out_dir + '/resumed')
resumed = meta_train.run_meta_train(
    config, checkpoint_dir=out_dir + '/resumed', resume=True)
report['resume_exact'] = all(
    np.array_equal(a, b, equal_nan=True) for a, b in zip(
        jax.tree.leaves((straight.update_rule_params, straight.logs)),
        jax.tree.leaves((resumed.update_rule_params, resumed.logs)))
)
report['num_steps'] = resumed.num_steps
print(json.dumps(report))
"""


# Each case compiles the meta-step for its devices in a process of its own
# (about 80 s on CI's machine), so all are slow (`pytest -m slow`); in CI,
# test_train.py and test_eval.py run the shared device layout on 2 forced
# devices, and test_discovery.py the mean of the members' rule updates.
@pytest.mark.parametrize(
    'num_devices, emulate',
    [
        pytest.param(2, False, marks=pytest.mark.slow),
        pytest.param(2, True, marks=pytest.mark.slow),
        pytest.param(4, False, marks=pytest.mark.slow),
    ],
)
def test_pmap_semantics_on_forced_cpu_devices(num_devices, emulate, tmp_path):
  result = subprocess.run(
      [
          sys.executable,
          '-c',
          _WORKER,
          str(num_devices),
          str(tmp_path),
          'emulate' if emulate else 'no',
      ],
      env=forced_devices.env(num_devices),
      cwd=forced_devices.REPO,
      capture_output=True,
      text=True,
      timeout=1200,
      check=False,
  )
  assert result.returncode == 0, result.stderr[-4000:]
  report = json.loads(result.stdout.strip().splitlines()[-1])
  assert report['inputs_replicated']
  assert report['rule_same_on_devices']
  assert report['logs_same_on_devices']
  assert report['agent_params_same_on_devices']
  assert report['envs_differ']
  if emulate:
    # pmap over N devices == vmap over a named axis of size N (to rounding).
    assert report['worst_log_error'] <= 1.0, report
    # Adam's first step moves each parameter by about +-lr (5e-4): a
    # near-zero gradient may flip sign, so allow a few elements to differ.
    assert report['rule_max_diff'] <= 1e-3 + 1e-6, report
    assert report['rule_share_diff_above_1e-6'] <= 1e-3, report
  assert report['resume_exact']
  assert report['num_steps'] == 2


_MULTI_PROCESS_WORKER = r"""
import json
import sys

import jax

out_dir, process_id = sys.argv[1], int(sys.argv[2])
if process_id >= 0:
  jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  jax.distributed.initialize(
      coordinator_address=sys.argv[3], num_processes=2, process_id=process_id
  )
assert jax.device_count() == 2

from disco import meta_train

config = meta_train.MetaTrainConfig(
    num_steps=2, num_inner_steps=1, rollout_len=3, envs_per_device=2,
    agent_dense=(16,), agent_head_mlp_hiddens=(8,), agent_lstm_size=8,
    value_fn_dense=(16,), checkpoint_every=1,
)
meta_train.run_meta_train(config, checkpoint_dir=out_dir)
result = meta_train.run_meta_train(
    config.replace(num_steps=3), checkpoint_dir=out_dir, resume=True
)
print(json.dumps(dict(
    logs={k: v.tolist() for k, v in result.logs.items()},
    rule=[x.ravel()[:50].tolist() for x in jax.tree.leaves(
        result.update_rule_params)],
)))
"""


@pytest.mark.slow
def test_two_processes_compute_what_two_local_devices_do(tmp_path):
  """Two processes joined by `jax.distributed` == one with two devices."""
  forced_devices.check_two_processes_match_two_devices(
      _MULTI_PROCESS_WORKER, tmp_path
  )
