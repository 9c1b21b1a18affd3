"""Discovery with the paper's recipe: config, lifetimes, averaging, resume."""

import json
import os
import signal
import subprocess
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from disco import checkpoint
from disco import configs
from disco import weights
from disco.discovery import cli as discovery_cli
from disco.discovery import config as discovery_config
from disco.discovery import loop as discovery_runtime
from disco.discovery import maths as discovery
from tests import forced_devices

# The tests that run `_TINY` share its compiled step (one pytest worker runs
# this file under `-n`).

# Two 5x5 Catch members with a tiny agent. Each meta-step takes 4 * (2 * 2 +
# 2 * 2) = 32 environment steps per member, so a lifetime of 50 ends at the
# second meta-step and one of 100 at the fourth.
_TINY = discovery_config.DiscoveryConfig(
    population=(('catch/rows=5/columns=5', 2),),
    num_steps=4,
    num_inner_steps=2,
    rollout_len=4,
    learner_batch_size=4,
    replay_fraction=0.5,
    buffer_capacity=8,
    valid_envs=2,
    lifetime_budgets=(100, 50),
    agent_dense=(16,),
    agent_lstm_size=8,
    agent_head_mlp_hiddens=(8,),
    value_fn_dense=(16,),
    checkpoint_every=0,
)


def test_presets_hold_the_papers_numbers():
  paper = discovery_config.preset('paper')
  assert paper.num_inner_steps == 20
  assert (paper.learner_batch_size, paper.rollout_len) == (96, 29)
  assert (paper.replay_per_batch, paper.fresh_per_batch) == (86, 10)
  assert paper.valid_envs == 48
  assert paper.lifetime_budgets == (200e6, 100e6, 50e6, 20e6)
  assert (paper.meta_learning_rate, paper.meta_max_grad_norm) == (1e-3, 1.0)
  assert paper.agent_learning_rate == 3e-4
  assert (paper.value_fn_discount_factor, paper.value_fn_td_lambda) == (
      0.997,
      0.95,
  )
  assert paper.value_fn_ema_decay == 0.99
  local = discovery_config.preset('local')
  assert local == discovery_config.DiscoveryConfig()
  assert len(local.members) >= 3
  assert local.env_steps_per_step == 16 * (2 * 16 + 2 * 32)


def test_population_specs_parse_and_round_trip():
  assert discovery_config.parse_population(
      'catch/rows=5/columns=5*2, gymnax:DeepSea-bsuite'
  ) == (('catch/rows=5/columns=5', 2), ('gymnax:DeepSea-bsuite', 1))
  member = discovery_config.parse_member('catch/rows=7/columns=5', 3)
  assert member.settings == (('columns', 5), ('rows', 7))
  assert member.label == 'catch_columns5_rows7'
  assert _TINY.num_members == 2
  again = discovery_config.DiscoveryConfig.from_dict(_TINY.to_dict())
  assert again == _TINY
  scaled = discovery_config.parse_member('catch/rows=5/reward_scale=10')
  assert scaled.settings == (('rows', 5),) and scaled.reward_scale == 10
  assert scaled.label == 'catch_rows5_reward_scale10'
  assert discovery_config.parse_member('catch').reward_scale == 1.0


@pytest.mark.parametrize(
    'changes, match',
    [
        (dict(population=()), 'at least one'),
        (dict(population=(('pong', 2),)), 'jittable'),
        (dict(population=(('catch', 0),)), 'at least one member'),
        (dict(population=(('catch', 1), ('catch', 2))), 'twice'),
        (dict(population=('catch',)), 'pairs'),
        (dict(replay_fraction=1.0), 'fresh'),
        (dict(learner_batch_size=1, replay_fraction=0.9), 'no fresh'),
        (dict(buffer_capacity=1), 'one rollout'),
        (dict(lifetime_budgets=(100, 0)), 'lifetime_budgets'),
        (dict(meta_max_grad_norm=0.0), 'meta_max_grad_norm'),
        (dict(num_inner_steps=0), 'num_inner_steps'),
        (dict(population=(('catch/reward_scale=0', 1),)), 'reward_scale'),
    ],
)
def test_bad_configs_name_the_problem(changes, match):
  with pytest.raises(configs.ConfigError, match=match):
    _TINY.replace(**changes)


def test_members_must_split_over_the_devices():
  with pytest.raises(configs.ConfigError, match='multiple of the 4 devices'):
    discovery_config.check_members(_TINY.members, 4)
  discovery_config.check_members(_TINY.members, 2)


def test_budgets_are_drawn_with_weight_one_over_budget():
  budgets = (200, 100, 50, 20)
  draws = jax.jit(jax.vmap(lambda k: discovery.sample_budget(k, budgets)))(
      jax.random.split(jax.random.PRNGKey(0), 40_000)
  )
  counts = np.asarray([(draws == b).sum() for b in budgets])
  expected = (
      40_000 * (1 / np.asarray(budgets)) / np.sum(1 / np.asarray(budgets))
  )
  # Within 4 binomial standard deviations (uniform draws miss by > 50).
  assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected)), counts
  # So every budget gets the same experience.
  experience = counts * np.asarray(budgets)
  assert experience.max() / experience.min() < 1.1


def test_meta_optimizer_clips_then_adam():
  config = _TINY.replace(meta_max_grad_norm=1.0, meta_learning_rate=0.1)
  opt = discovery.meta_optimizer(config)
  adam = optax.adam(0.1)
  # Norm 5, clipped to norm 1; then a small gradient left as it is. Adam's
  # first step is sign-like, so the second tells the orders apart.
  grads = [{'w': jnp.asarray([3.0, 4.0])}, {'w': jnp.asarray([0.3, 0.0])}]
  clipped = [{'w': grads[0]['w'] / 5.0}, grads[1]]
  state, adam_state = opt.init(grads[0]), adam.init(grads[0])
  for g, c in zip(grads, clipped):
    update, state = opt.update(g, state)
    expected, adam_state = adam.update(c, adam_state)
  chex.assert_trees_all_close(update, expected, rtol=1e-6)


@chex.dataclass(frozen=True)
class _FakeMember:
  index: chex.Array
  grad: chex.Array


class _FakeGroup:
  """A group whose members' updates are their `grad`; logs are zeros."""

  def __init__(self, label):
    self.label = label

  def member_step(self, params, state, rng):
    del params, rng
    logs = {
        name: jnp.zeros(())
        for name in (
            'meta_loss', 'total_return', 'num_episodes', 'lifetimes_ended'
        )
    }  # fmt: skip
    return {'w': state.grad}, state, logs


def test_the_rule_moves_by_the_mean_of_all_members_updates():
  # Groups of 1 and 3 members: a mean of the groups' means would differ.
  groups = (_FakeGroup('a'), _FakeGroup('b'))
  members = (
      _FakeMember(index=jnp.asarray([0]), grad=jnp.asarray([[4.0, 0.0]])),
      _FakeMember(
          index=jnp.asarray([1, 2, 3]),
          grad=jnp.asarray([[0.0, 4.0], [0.0, 0.0], [0.0, 0.0]]),
      ),
  )
  params = {'w': jnp.asarray([1.0, 1.0])}
  new_params, _, logs = discovery.discovery_step(
      params, members, jax.random.PRNGKey(0), groups=groups, num_members=4,
      axis_name=None,
  )  # fmt: skip
  np.testing.assert_allclose(new_params['w'], [2.0, 2.0])
  assert np.isnan(logs['return'])  # No episode ended.


def _run(config, **kwargs):
  return discovery_runtime.run_discovery(config, **kwargs)


def test_a_members_reward_scale_reaches_what_the_rule_reads(monkeypatch):
  config = _TINY.replace(
      population=(('catch/rows=5/columns=5/reward_scale=10', 1),)
  )
  (member,) = config.members
  group = discovery.Group(member, config)

  def meta_gradient_of(rule_params, state, train_rollouts, valid_rollout, rng):
    """What the inner updates and the meta-loss read, as the meta-logs."""
    del rng
    train, valid = train_rollouts.rewards, valid_rollout.rewards
    both = jnp.concatenate([train.reshape(-1), valid.reshape(-1)])
    log = dict(
        meta_loss=jnp.abs(train).max(),
        pg_loss=jnp.abs(valid).max(),
        # Rewards other than -10, 0 and 10.
        entropy=jnp.sum(~jnp.isin(both, jnp.array([-10.0, 0.0, 10.0]))),
    )
    return jax.tree.map(jnp.zeros_like, rule_params), (state, {}, log)

  monkeypatch.setattr(
      discovery.meta_gradient,
      'configured_meta_gradient',
      lambda agent, config: meta_gradient_of,
  )
  params = discovery_runtime.discoverer_for(_TINY).random_params()
  key = jax.random.PRNGKey(0)
  state = jax.jit(group.init_member)(key, jnp.asarray(0), params)
  step = jax.jit(group.member_step)
  seen = dict(meta_loss=0.0, pg_loss=0.0)
  for i in range(4):  # Until both rollouts have seen an episode end.
    _, state, logs = step(params, state, jax.random.fold_in(key, i))
    # Catch pays -1 or 1: the rule reads -10 or 10, the logs Catch's units.
    assert logs['entropy'] == 0
    assert jnp.abs(logs['rewards']) <= 1 and logs['meta_loss'] in (0, 10)
    assert abs(float(logs['total_return'])) <= float(logs['num_episodes'])
    for name in seen:
      seen[name] = max(seen[name], float(logs[name]))
  assert seen == dict(meta_loss=10.0, pg_loss=10.0)


def test_lifetimes_end_and_restart_the_agent():
  trainer = discovery_runtime.discoverer_for(_TINY)
  state = trainer.initial_state(trainer.random_params())
  members = jax.device_get(state.members[0])
  np.testing.assert_array_equal(members.index[0], [0, 1])
  budgets = members.lifetime_budget[0]
  assert set(budgets) <= {50, 100}
  assert 50 in budgets  # So that a lifetime ends within the test.
  group = trainer.groups[0]
  for step in (1, 2):
    rng, step_key = jax.random.split(state.rng)
    state, logs = trainer.step(state)
    members = jax.device_get(state.members[0])
    for i in range(2):
      steps = 32 * step
      if steps < budgets[i]:
        assert members.lifetime_steps[0, i] == steps
        assert members.lifetimes[0, i] == 1
        assert members.replay.size[0, i] == min(2 * 2 * step, 8)
      else:  # Ended at this step: a new agent, an empty buffer.
        assert members.lifetime_steps[0, i] == 0
        assert members.lifetimes[0, i] == 2
        assert members.replay.size[0, i] == 0
        assert members.lifetime_budget[0, i] in (50, 100)
        key = jax.random.fold_in(jnp.asarray(step_key), i)
        reset_key = jax.random.split(key, 5)[4]
        fresh = group.agent.init_state(reset_key)
        chex.assert_trees_all_equal(
            jax.tree.map(lambda x, i=i: x[0, i], members.agent.learner_state),
            jax.device_get(fresh.learner_state),
        )
    del rng
  assert logs['lifetimes_ended'] == np.sum(budgets <= 64) - np.sum(
      budgets <= 32
  )


def test_resume_is_exact_and_logs_are_complete(tmp_path):
  straight = _run(_TINY, checkpoint_dir=tmp_path / 'a')
  half = _TINY.replace(num_steps=2)
  _run(half, checkpoint_dir=tmp_path / 'b')
  resumed = _run(_TINY, checkpoint_dir=tmp_path / 'b', resume=True)
  chex.assert_trees_all_equal(
      resumed.update_rule_params, straight.update_rule_params
  )
  chex.assert_trees_all_equal(resumed.logs, straight.logs)
  assert checkpoint.list_steps(tmp_path / 'b') == [2, 4]
  label = _TINY.members[0].label
  for key in ('meta_loss', 'meta_up_norm', f'{label}/meta_loss',
              f'{label}/rewards', 'lifetimes_ended'):  # fmt: skip
    assert straight.logs[key].shape == (4,), key
    assert np.all(np.isfinite(straight.logs[key])), key
  assert straight.logs['lifetimes_ended'].sum() >= 2
  with pytest.raises(checkpoint.CheckpointMismatchError, match='valid_envs'):
    _run(_TINY.replace(valid_envs=4), checkpoint_dir=tmp_path / 'b',
         resume=True)  # fmt: skip
  with pytest.raises(checkpoint.CheckpointExistsError, match='resume=True'):
    _run(_TINY, checkpoint_dir=tmp_path / 'b')


def test_ctrl_c_writes_a_checkpoint(tmp_path):
  def _interrupt(step, logs):
    del logs
    if step == 1:
      os.kill(os.getpid(), signal.SIGINT)

  with pytest.raises(KeyboardInterrupt):
    _run(
        _TINY,
        checkpoint_dir=tmp_path,
        progress_fn=_interrupt,
        handle_interrupts=True,
    )
  assert checkpoint.list_steps(tmp_path) == [1]


@pytest.mark.parametrize(
    'argv, message',
    [
        (['--population', 'catch*x'], 'SPEC*COUNT'),
        (['--population', 'pong*2'], 'jittable'),
        (['--population', 'gymnax:NoSuchGame*2'], 'NoSuchGame'),
        (['--preset', 'paper', '--resume'], '--preset starts a new run'),
    ],
)
def test_cli_usage_errors(tmp_path, capsys, argv, message):
  code = None
  try:
    code = discovery_cli.main(argv + ['--out-dir', str(tmp_path / 'run')])
  except SystemExit as e:  # argparse's own errors.
    code = e.code
  assert code == 2
  assert message in capsys.readouterr().err


# `_TINY` as flags, so that the command shares its compiled step.
_TINY_FLAGS = [
    '--population', 'catch/rows=5/columns=5*2', '--num-inner-steps', '2',
    '--rollout-len', '4', '--learner-batch-size', '4', '--replay-fraction',
    '0.5', '--buffer-capacity', '8', '--valid-envs', '2',
    '--lifetime-budgets', '100,50', '--agent-dense', '16',
    '--agent-lstm-size', '8', '--agent-head-mlp-hiddens', '8',
    '--value-fn-dense', '16', '--checkpoint-every', '0', '--no-progress',
]  # fmt: skip


def test_cli_runs_resumes_and_writes_its_files(tmp_path, capsys):
  out = tmp_path / 'run'
  args = _TINY_FLAGS + ['--out-dir', str(out)]
  assert discovery_cli.main(args + ['--num-steps', '2']) == 0
  assert discovery_cli.main(args + ['--num-steps', '3', '--resume']) == 0
  printed = capsys.readouterr().out
  assert 'update_rule_params.npz' in printed
  rows = (out / 'log.csv').read_text().splitlines()
  assert len(rows) == 1 + 3
  assert 'catch_columns5_rows5/return' in rows[0]
  for name in ('returns.png', 'config.json', 'update_rule_params.npz'):
    assert (out / name).is_file(), name
  assert checkpoint.list_steps(out / 'checkpoints') == [2, 3]
  rule = weights.load_update_rule_params(out / 'update_rule_params.npz')
  straight = _run(_TINY.replace(num_steps=3))
  chex.assert_trees_all_equal(rule, straight.update_rule_params)


# Two Catch sizes, `{members}` members each, with tiny agents: the population
# the subprocess workers below run (source text, formatted into them).
_SMALL_POPULATION = """
config = discovery_config.DiscoveryConfig(
    population=(('catch/rows=5/columns=5', {members}),
                ('catch/rows=6/columns=5', {members})),
    num_steps=2, num_inner_steps=2, rollout_len=4, learner_batch_size=4,
    replay_fraction=0.5, buffer_capacity=8, valid_envs=2,
    lifetime_budgets=(100, 50), agent_dense=(16,), agent_lstm_size=8,
    agent_head_mlp_hiddens=(8,), value_fn_dense=(16,),
    checkpoint_every={checkpoint_every})
"""

_DEVICES_WORKER = (
    r"""
import json, sys
import jax, numpy as np
from disco.discovery import config as discovery_config
from disco.discovery import loop as discovery_runtime
assert jax.device_count() == int(sys.argv[1])
"""
    + _SMALL_POPULATION.format(members=4, checkpoint_every=0)
    + r"""
init = discovery_runtime.discoverer_for(config).random_params()
result = discovery_runtime.run_discovery(config)
flat = lambda tree: np.concatenate(
    [np.ravel(x) for x in jax.tree.leaves(tree)]).tolist()
json.dump(dict(
    logs={k: v.tolist() for k, v in result.logs.items()},
    init=flat(init), params=flat(result.update_rule_params),
), open(sys.argv[2], 'w'))
"""
)


def _run_on_devices(num_devices, path):
  subprocess.run(
      [sys.executable, '-c', _DEVICES_WORKER, str(num_devices), str(path)],
      env=forced_devices.env(num_devices),
      cwd=forced_devices.REPO,
      check=True,
      timeout=1200,
  )
  return json.loads(path.read_text())


@pytest.mark.slow
@pytest.mark.parametrize('num_devices', [2, 4])
def test_members_spread_over_devices_compute_the_same(tmp_path, num_devices):
  """1 device against 2 or 4: the same members, the same rule up to rounding.

  The members act, replay and reset with keys of their own index, so their
  episodes are identical (exact counts, rewards and returns) and their
  losses agree to float rounding. The rule's step after 2 meta-steps is
  compared as a vector: measured 2.6e-2 relative on 2 devices and 5.8e-3
  on 4, because Adam's first steps are nearly sign(g) and turn the
  meta-gradients' rounding (1e-3 relative) into whole steps on the elements
  whose gradients are near zero. Bugs are far off: without the sum of the
  updates over devices the step is 0.68 away on 2 devices (measured) and
  meta_up_norm 20% off, and a device-dependent key changes the episodes.
  """
  one = _run_on_devices(1, tmp_path / 'one.json')
  many = _run_on_devices(num_devices, tmp_path / 'many.json')
  for key, values in one['logs'].items():
    if key.rsplit('/', 1)[-1] in (
        'num_episodes',
        'return',
        'rewards',
        'lifetimes_ended',
    ):
      np.testing.assert_array_equal(many['logs'][key], values, err_msg=key)
    elif key.endswith('meta_grad_norm') or key == 'meta_up_norm':
      np.testing.assert_allclose(
          many['logs'][key], values, rtol=1e-2, err_msg=key
      )
    else:
      np.testing.assert_allclose(
          many['logs'][key], values, rtol=1e-5, atol=1e-6, err_msg=key
      )
  init = np.asarray(one['init'])
  step_one, step_many = (np.asarray(r['params']) - init for r in (one, many))
  error = np.linalg.norm(step_many - step_one) / np.linalg.norm(step_one)
  assert error <= 0.1, error


_PROCESSES_WORKER = (
    r"""
import json, sys
import jax
out_dir, process_id = sys.argv[1], int(sys.argv[2])
if process_id >= 0:
  jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  jax.distributed.initialize(
      coordinator_address=sys.argv[3], num_processes=2, process_id=process_id)
assert jax.device_count() == 2
from disco.discovery import config as discovery_config
from disco.discovery import loop as discovery_runtime
from disco.meta_train import loop as meta_train_runtime
"""
    + _SMALL_POPULATION.format(members=2, checkpoint_every=1)
    + r"""
discovery_runtime.run_discovery(config, checkpoint_dir=out_dir)
result = discovery_runtime.run_discovery(
    config.replace(num_steps=3), checkpoint_dir=out_dir, resume=True)
print(json.dumps(dict(
    logs={k: v.tolist() for k, v in result.logs.items()},
    rule=meta_train_runtime.params_digest(result.update_rule_params),
)))
"""
)


@pytest.mark.slow
def test_two_processes_compute_what_two_local_devices_do(tmp_path):
  """`jax.distributed` over two processes (Gloo) == one process, 2 devices.

  Each process holds one device's members, checkpoints them under
  `process_<i>/` and resumes them; the rule (its SHA-256) and every log (a
  sum of two numbers, so no rounding differs) come out identical.
  """
  forced_devices.check_two_processes_match_two_devices(
      _PROCESSES_WORKER, tmp_path
  )


@pytest.mark.slow
def test_a_short_discovery_learns_beyond_random():
  """From a random rule, two 5x5 Catch members learn to catch (~10 min).

  The `local` preset on one of its environments for 650 meta-steps. A
  uniformly random policy returns about -0.6 on 5x5 Catch, and 50
  meta-steps average a few hundred of its episodes, so their mean stays
  within a few hundredths of that; the members must first stay there (the
  random rule moves nobody) and later reach a mean of 0 or more (more
  catches than misses) in some window of 50 meta-steps. A rule that never
  changes, or changes the wrong way, fails.
  """
  config = discovery_config.preset(
      discovery_config.LOCAL,
      population=(('catch/rows=5/columns=5', 2),),
      num_steps=650,
      checkpoint_every=0,
  )
  result = _run(config)
  returns = result.logs[f'{config.members[0].label}/return']  # [650]
  windows = np.convolve(np.nan_to_num(returns, nan=-1.0), np.ones(50) / 50,
                        mode='valid')  # fmt: skip
  assert windows[0] < -0.4, windows[0]
  assert windows.max() >= 0.0, windows.max()
