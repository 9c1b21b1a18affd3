"""Agent presets (`train.AGENTS`) and mixed precision (`disco.precision`)."""

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import configs
from disco import precision
from disco import train
from disco.train import cli as train_cli
from tests import tiny_args


def test_agent_presets_set_the_agent_fields_and_changes_win():
  config = train.preset('paper', agent='minatar', env='catch')
  assert config.agent_dense == (256, 256)
  assert config.agent_lstm_size == 64
  assert config.agent_head_mlp_hiddens == (64,)
  assert config.learner_batch_size == 96  # The preset's own fields stay.
  config = train.preset('paper', agent='craftax', agent_lstm_size=32)
  assert config.agent_dense == (512, 512) and config.agent_lstm_size == 32
  # The colab agent is the config's default network.
  default = train.TrainConfig()
  colab = train.preset('colab', agent='colab')
  assert colab == default


def test_unknown_agent_and_dtype_are_named_errors():
  with pytest.raises(configs.ConfigError, match="Unknown agent 'atari'"):
    train.preset('paper', agent='atari')
  with pytest.raises(configs.ConfigError, match="compute_dtype.*'float16'"):
    train.TrainConfig(compute_dtype='float16')
  with pytest.raises(ValueError, match="Unknown compute dtype 'int8'"):
    precision.policy('int8')


def _linear_apply(dtype):
  net = hk.without_apply_rng(hk.transform(lambda x: hk.Linear(4)(x)))
  x = jnp.ones((2, 3), jnp.float32)
  params = net.init(jax.random.PRNGKey(0), x)
  apply = precision.compute_in(dtype, net.apply)
  return apply, params, x


def test_bfloat16_multiplies_in_bfloat16_and_returns_float32():
  apply, params, x = _linear_apply('bfloat16')
  jaxpr = str(jax.make_jaxpr(apply)(params, x))
  assert 'bf16' in jaxpr and 'dot_general' in jaxpr
  out = apply(params, x)
  assert out.dtype == jnp.float32
  assert params['linear']['w'].dtype == jnp.float32
  # Outside the wrapped call no policy is left behind.
  f32_apply, _, _ = _linear_apply('float32')
  assert 'bf16' not in str(jax.make_jaxpr(f32_apply)(params, x))
  assert hk.mixed_precision.get_policy(hk.Linear) is None


def _tiny(**changes):
  # Actor-critic: the compute dtype wraps the agent's network whatever the
  # rule, and its programs compile in a fraction of Disco103's.
  return train.preset(
      'colab',
      rule='actor_critic',
      env='catch',
      num_envs=2,
      rollout_len=5,
      learner_batch_size=4,
      replay_fraction=0.5,
      buffer_capacity=8,
      learning_starts=4,
      agent_dense=(16,),
      agent_lstm_size=8,
      agent_head_mlp_hiddens=(8,),
      num_steps=4,
      steps_per_chunk=2,
      **changes,
  )


def test_bfloat16_training_keeps_float32_parameters_and_changes_rounding():
  f32 = train.run_train(_tiny())
  bf16 = train.run_train(_tiny(compute_dtype='bfloat16'))
  leaves32 = jax.tree.leaves(f32.params[0])
  leaves16 = jax.tree.leaves(bf16.params[0])
  assert all(x.dtype == np.float32 for x in leaves16)
  assert all(np.all(np.isfinite(x)) for x in leaves16)
  # Same run, other rounding: close, not equal.
  assert any(not np.array_equal(a, b) for a, b in zip(leaves32, leaves16))
  for a, b in zip(leaves32, leaves16):
    np.testing.assert_allclose(a, b, atol=0.05)


def test_cli_agent_flag_sets_the_sizes_and_other_flags_change_them(
    capsys, tmp_path
):
  # One acting-only iteration, no evaluation: the run compiles two small
  # programs; the flags' sizes are what it saves.
  argv = [
      *tiny_args.TRAIN,
      '--rule=actor_critic',
      '--env=catch',
      '--no-progress',
      '--num-steps=1',
      '--eval-every=0',
      f'--out-dir={tmp_path}',
  ]
  # --agent goes after the tiny sizes and replaces all three; a later
  # --agent-* flag still wins (flags change the preset and the agent).
  argv = [a for a in argv if not a.startswith('--agent-')]
  status = train_cli.main([*argv, '--agent=minatar', '--agent-lstm-size=8'])
  assert status == 0, capsys.readouterr().err
  import json  # pylint: disable=g-import-not-at-top

  saved = json.loads((tmp_path / 'config.json').read_text())['config']
  assert saved['agent_dense'] == [256, 256]
  assert saved['agent_head_mlp_hiddens'] == [64]
  assert saved['agent_lstm_size'] == 8
  try:
    status = train_cli.main(
        [f'--out-dir={tmp_path}', '--resume', '--agent=craftax']
    )
  except SystemExit as e:
    status = e.code
  assert status == 2
  assert '--agent starts a new run' in capsys.readouterr().err


def test_threads_tracing_at_once_keep_their_own_dtype():
  import threading  # pylint: disable=g-import-not-at-top

  bf16_apply, params, x = _linear_apply('bfloat16')
  f32_apply, _, _ = _linear_apply('float32')
  seen = {}

  def trace(name, apply):
    for _ in range(20):
      text = str(jax.make_jaxpr(apply)(params, x))
      seen.setdefault(name, set()).add('bf16' in text)

  threads = [
      threading.Thread(target=trace, args=('bf16', bf16_apply)),
      threading.Thread(target=trace, args=('f32', f32_apply)),
  ]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert seen == {'bf16': {True}, 'f32': {False}}
  assert hk.mixed_precision.get_policy(hk.Linear) is None
