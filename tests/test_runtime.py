"""The shared run driver: metadata, digest, cadence, programs, progress."""

import json
import threading

import chex
import jax
import numpy as np
import pytest

from disco import checkpoint
from disco import discovery
from disco import eval as eval_lib
from disco import logs
from disco import meta_train
from disco import progress
from disco import run_checkpoints
from disco import runtime
from disco.runtime import metadata as metadata_lib

# tests/test_meta_train.py's tiny run: runs of one setting share one
# compiled meta-step (and their pytest worker).
_TINY = meta_train.MetaTrainConfig(
    num_steps=2,
    num_inner_steps=1,
    rollout_len=4,
    envs_per_device=4,
    agent_dense=(16,),
    agent_head_mlp_hiddens=(8,),
    agent_lstm_size=8,
    value_fn_dense=(16,),
    checkpoint_every=1,
)


def test_one_result_type():
  assert meta_train.MetaTrainResult is runtime.RunResult
  assert discovery.DiscoveryResult is runtime.RunResult


@pytest.mark.parametrize(
    'step, every, since, due',
    [
        (4, 2, None, True),
        (3, 2, None, False),
        (3, 0, None, False),
        (5, 4, 3, True),  # 4 lies in (3, 5].
        (7, 4, 4, False),
        (8, 4, 4, True),
    ],
)
def test_is_due(step, every, since, due):
  assert runtime.is_due(step, every, since) is due


def test_digest_sees_values_shapes_and_names_not_float_width():
  params = {'m': {'w': np.arange(6, dtype=np.float32).reshape(2, 3)}}
  digest = runtime.params_digest(params)
  wide = jax.tree.map(lambda x: x.astype(np.float64), params)
  assert runtime.params_digest(wide) == digest
  for other in (
      {'m': {'w': params['m']['w'] + 1}},
      {'m': {'w': params['m']['w'].reshape(3, 2)}},
      {'n': {'w': params['m']['w']}},
  ):
    assert runtime.params_digest(other) != digest
  assert run_checkpoints.params_digest is runtime.params_digest


def test_old_schemas_are_read():
  config = meta_train.MetaTrainConfig()
  meta_v1 = dict(
      kind='disco.meta_train',
      config=config.to_dict(),
      init_params_sha256='abc',
      num_local_devices=1,
      num_processes=1,
      jax_version=jax.__version__,
  )
  eval_v1 = dict(
      kind='disco-eval',
      config=config.to_dict(),
      seeds=[0],
      update_rule_params_sha256='def',
      num_devices=2,
      jax_version=jax.__version__,
  )
  current = runtime.run_metadata('disco-eval', config, 'def', 2, seeds=[0])
  for old, digest, scheme, devices, seeds in [
      (meta_v1, 'abc', metadata_lib.META_DIGEST_V1, 1, None),
      (eval_v1, 'def', metadata_lib.EVAL_DIGEST_V1, 2, [0]),
      (current, 'def', metadata_lib.DIGEST, 2, [0]),
  ]:
    read = runtime.read_metadata(old)
    assert read['schema'] == metadata_lib.SCHEMA
    assert (read['rule_sha256'], read['rule_digest']) == (digest, scheme)
    assert (read['num_local_devices'], read['seeds']) == (devices, seeds)
    assert read['num_processes'] == 1
    assert read['config'] == config.to_dict()


def test_mismatches_are_named():
  config = meta_train.MetaTrainConfig()
  params = {'m': {'w': np.zeros(3, np.float32)}}
  meta = runtime.run_metadata(
      'disco.meta_train', config, runtime.params_digest(params), 1
  )

  def check(**kw):
    return runtime.check_metadata(
        meta,
        'here',
        **(
            dict(kind='disco.meta_train', config=config, num_local_devices=1)
            | kw
        ),
    )

  check(rule_params=params)
  mismatch = checkpoint.CheckpointMismatchError
  with pytest.raises(mismatch, match="'disco.discovery'"):
    check(kind='disco.discovery')
  with pytest.raises(mismatch, match='num_steps'):
    check(config=config.replace(num_steps=7))
  check(config=config.replace(num_steps=7), execution_fields={'num_steps'})
  with pytest.raises(mismatch, match='2 device'):
    check(num_local_devices=2)
  with pytest.raises(mismatch, match='initial update-rule parameters'):
    check(rule_params={'m': {'w': np.ones(3, np.float32)}})


def test_program_cache_shares_programs_of_one_computation():
  built = []
  cache = runtime.ProgramCache(
      lambda config: built.append(config) or object(), neutral=dict(num_steps=1)
  )
  config = meta_train.MetaTrainConfig()
  first = cache(config)
  assert cache(config.replace(num_steps=9)) is first
  assert cache(config.replace(seed=3)) is not first
  assert [c.num_steps for c in built] == [1, 1]


def test_background_compile_runs_once_and_reraises():
  calls, release = [], threading.Event()

  def _compile():
    release.wait()
    calls.append(1)
    raise RuntimeError('bad program')

  compiler = runtime.BackgroundCompile()
  wait = compiler.start(_compile)
  assert compiler.start(_compile) is not None and len(calls) == 0
  release.set()
  with pytest.raises(RuntimeError, match='bad program'):
    wait()
  assert calls == [1]
  ok = compiler.start(lambda: calls.append(2))
  ok()  # A failed compilation may be tried again.
  assert calls == [1, 2]


def test_one_progress_bar_factory():
  for kind, (unit, postfix) in progress.BARS.items():
    with progress.progress_bar(kind, 3, enabled=False) as bar:
      assert bar.total == 3
      bar(1, {postfix[0]: 1.0})
    del unit
  with meta_train.progress_bar(3, enabled=False) as bar:
    assert isinstance(bar, progress.ProgressBar)
  with discovery.progress_bar(3, enabled=False) as bar:
    assert isinstance(bar, progress.ProgressBar)


def _rewrite_metadata(step_dir, metadata):
  record_path = step_dir / checkpoint.METADATA_FILENAME
  record = json.loads(record_path.read_text())
  record['metadata'] = metadata
  record_path.write_text(json.dumps(record))


@pytest.mark.parametrize('give_params', [False, True])
def test_a_meta_train_checkpoint_of_the_old_schema_resumes(
    tmp_path, give_params
):
  init = meta_train.random_init_params(_TINY)
  straight = meta_train.run_meta_train(_TINY)
  meta_train.run_meta_train(_TINY.replace(num_steps=1), checkpoint_dir=tmp_path)
  old = dict(
      kind='disco.meta_train',
      config=_TINY.replace(num_steps=1).to_dict(),
      init_params_sha256=runtime.params_digest(
          init, metadata_lib.META_DIGEST_V1
      ),
      num_local_devices=jax.local_device_count(),
      num_processes=1,
      jax_version=jax.__version__,
  )
  _rewrite_metadata(checkpoint.step_path(tmp_path, 1), old)
  resumed = meta_train.run_meta_train(
      _TINY,
      update_rule_params=init if give_params else None,
      checkpoint_dir=tmp_path,
      resume=True,
  )
  chex.assert_trees_all_equal(
      resumed.update_rule_params, straight.update_rule_params
  )
  chex.assert_trees_all_equal(resumed.logs, straight.logs)
  # The new checkpoint keeps the old digest (and says which it is).
  meta = checkpoint.load(tmp_path).metadata
  assert meta['rule_sha256'] == old['init_params_sha256']
  assert meta['rule_digest'] == metadata_lib.META_DIGEST_V1
  other = jax.tree.map(lambda x: x + 1.0, init)
  with pytest.raises(checkpoint.CheckpointMismatchError, match='initial'):
    meta_train.run_meta_train(
        _TINY.replace(num_steps=3),
        update_rule_params=other,
        checkpoint_dir=tmp_path,
        resume=True,
    )


_EVAL_CHECKPOINTS = dict(
    kind=eval_lib.CHECKPOINT_KIND, execution_fields=eval_lib.EXECUTION_FIELDS
)


def test_an_eval_checkpoint_of_the_old_schema_is_accepted(tmp_path):
  config = eval_lib.EvalConfig(rule='actor_critic', num_steps=4)
  params = {'w': np.ones(3, np.float32)}
  checkpoints = run_checkpoints.RunCheckpoints(
      tmp_path, config, [0], params, 1, **_EVAL_CHECKPOINTS
  )
  old = dict(
      kind='disco-eval',
      config=config.to_dict(),
      seeds=[0],
      update_rule_params_sha256=runtime.params_digest(
          params, metadata_lib.EVAL_DIGEST_V1
      ),
      num_devices=1,
      jax_version=jax.__version__,
  )
  arrays = {'x': np.arange(3)}
  checkpoint.save(
      tmp_path,
      2,
      update_rule_params={'placeholder': params},
      arrays=arrays,
      metadata=old,
  )
  ckpt = checkpoints.latest(resume=True)
  assert ckpt.step == 2 and checkpoints.last_saved == 2
  np.testing.assert_array_equal(ckpt.arrays['x'], arrays['x'])
  other = run_checkpoints.RunCheckpoints(
      tmp_path,
      config,
      [0],
      {'w': np.zeros(3, np.float32)},
      1,
      **_EVAL_CHECKPOINTS,
  )
  with pytest.raises(
      checkpoint.CheckpointMismatchError, match='update-rule parameters'
  ):
    other.latest(resume=True)
  # New checkpoints are written in the current schema.
  checkpoints.save(4, lambda: arrays)
  assert checkpoint.load(tmp_path).metadata['schema'] == metadata_lib.SCHEMA


def test_the_log_codec_round_trips_rows_in_their_column_order():
  rows = [dict(step=1, loss=0.5), dict(step=2, loss=np.nan, z=3.0)]
  arrays = logs.to_arrays(rows, prefix='run/')
  assert sorted(arrays) == ['run/log_columns', 'run/logs/loss', 'run/logs/step',
                            'run/logs/z']  # fmt: skip
  back = logs.from_arrays(arrays, prefix='run/')
  assert [list(r) for r in back] == [['step', 'loss', 'z']] * 2
  np.testing.assert_array_equal(back[1]['loss'], np.nan)
  np.testing.assert_array_equal(back[0]['z'], np.nan)
  assert back[1]['z'] == 3.0 and back[0]['step'] == 1.0
  # Checkpoints without the column order (before it was kept): names sorted.
  del arrays['run/log_columns']
  assert list(logs.from_arrays(arrays, prefix='run/')[0]) == [
      'loss',
      'step',
      'z',
  ]
  arrays['run/logs/z'] = np.zeros(3)
  with pytest.raises(ValueError, match='different lengths'):
    logs.from_arrays(arrays, prefix='run/')
