"""The convolutional agents, a user's network by name, and image observations.

`ConvNet` reads stacked frames on the channels (or embeds each frame once
over an unroll), the `conv`, `conv_frames` and `paper` agents build it,
`register_network` lets a network of one's own train by name, and uint8
pixels reach the network as [0, 1].
"""

import chex
from dm_env import specs
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco import acting
from disco import configs
from disco import conv_nets
from disco import learner
from disco import train
from disco.networks import nets
from tests import actors

_FRAMES = 3
_T = 7  # Catch of 4 rows ends an episode every 3 steps: restarts inside.
# A per-frame unroll sums in another order than one step at a time:
# measured 3e-7 on outputs up to 3; an embedding off by one frame moves
# them by 1e-2 and more.
_ATOL = 1e-5


def _config(**changes) -> train.TrainConfig:
  return train.preset(
      'colab',
      **(
          dict(
              agent='conv',
              env='catch',
              env_settings={'rows': 4, 'columns': 5},
              agent_conv_channels=(4, 6),
              agent_dense=(16,),
              agent_lstm_size=8,
              agent_head_mlp_hiddens=(8,),
              num_envs=4,
              rollout_len=_T,
          )
          | changes
      ),
  )


def _network_and_rollout(config: train.TrainConfig):
  setup = learner.build(config, None)
  env, agent = setup.env, setup.agent
  env_state, timestep = env.reset(jax.random.key(0))
  rollout, *_ = acting.unroll_jittable_actor(
      None,
      {},
      timestep,
      env_state,
      jax.random.key(1),
      env=env,
      rollout_len=_T,
      actor_step_fn=actors.random_actor,
  )
  params = agent.initial_learner_state(jax.random.key(2)).params
  return agent, params, rollout


def test_agents_name_convolutional_networks_of_both_sizes():
  paper = train.agent_fields('paper')
  assert paper['agent_network'] == 'conv'
  assert paper['agent_conv_channels'] == (256, 384, 384, 256)
  assert paper['agent_dense'] == (768,)
  assert paper['agent_lstm_size'] == 1024
  assert paper['agent_head_mlp_hiddens'] == (1024,)
  small = train.agent_fields('conv')
  assert small['agent_conv_channels'] == (16, 32, 32)
  # The paper's agent on MinAtar-sized grids, shapes only.
  config = train.preset('atari', agent='paper', env='catch',
                        env_settings={'rows': 10, 'columns': 10})  # fmt: skip
  agent = learner.build(config, None).agent
  shapes = jax.eval_shape(agent.initial_learner_state, jax.random.key(0))
  params = shapes.params
  first = params['conv_net/~_convolve/section_0/conv']['w']
  last = params['conv_net/~_convolve/section_3/block_1_conv_1']['w']
  assert first.shape == (3, 3, 4, 256)  # 4 frames of 1 channel.
  assert last.shape == (3, 3, 256, 256)
  # 10 x 10 pooled four times: 1 x 1 x 256, then 768.
  assert params['conv_net/~_embedding_pass/torso/~/linear_0']['w'].shape == (
      256,
      768,
  )
  # The LSTM's gates: 4 x 1,024 over its state and a one-hot action.
  assert params['conv_net/action_cond/linear']['w'].shape == (1027, 4096)
  assert params['conv_net/mlp/~/linear_0']['w'].shape == (1024, 1024)
  # A switch back to an MLP agent replaces the network whole.
  mlp = config.replace(**train.agent_fields('minatar'))
  assert mlp.agent_network == 'mlp' and mlp.agent_conv_channels == ()


def test_stacked_frames_go_onto_the_channels_in_order():
  config = _config(frame_stack=_FRAMES)
  agent, params, rollout = _network_and_rollout(config)
  stacks = rollout.observations[0]  # [B, K, 4, 5, 1]
  assert stacks.shape == (4, _FRAMES, 4, 5, 1)
  # Frame k's channel c is channel k C + c of one [H, W, K C] image.
  merged = jnp.moveaxis(stacks, 1, 3).reshape(4, 4, 5, _FRAMES)
  state = agent.initial_actor_state(jax.random.key(0))
  stacked_out, _ = agent.network.one_step(params, state, stacks)
  merged_out, _ = agent.network.one_step(params, state, merged)
  chex.assert_trees_all_equal(stacked_out, merged_out)
  # Frames in another order give other outputs.
  reversed_out, _ = agent.network.one_step(params, state, stacks[:, ::-1])
  assert not np.allclose(stacked_out['logits'], reversed_out['logits'])


def test_each_frame_embedded_once_matches_every_step_embedded():
  config = _config(agent='conv_frames', frame_stack=_FRAMES,
                   agent_frame_embedding=5)  # fmt: skip
  agent, params, rollout = _network_and_rollout(config)
  assert not np.all(rollout.discounts)  # Episodes restart inside.
  state = agent.initial_actor_state(jax.random.key(0))
  no_reset = jnp.zeros(rollout.discounts.shape, bool)
  unrolled, _ = agent.network.unroll(
      params, state, rollout.observations, no_reset
  )
  for t in range(_T):
    step, _ = agent.network.one_step(params, state, rollout.observations[t])
    chex.assert_trees_all_close(
        jax.tree.map(lambda x, t=t: x[t], unrolled), step, atol=_ATOL, rtol=0
    )
  # Stacks out of order are caught: their outputs are NaN.
  shuffled = rollout.observations[::-1]
  bad, _ = agent.network.unroll(params, state, shuffled, no_reset)
  assert np.isnan(np.asarray(bad['logits'])).any()


def test_uint8_pixels_are_read_as_fractions():
  pixels = jnp.array([0, 51, 255], jnp.uint8)
  np.testing.assert_allclose(conv_nets.as_float(pixels), [0.0, 0.2, 1.0])
  assert conv_nets.as_float(jnp.ones(2, jnp.float32)).dtype == jnp.float32


def test_a_network_without_an_image_is_named():
  def forward(x):
    return conv_nets.ConvNet(
        out_spec={'logits': specs.Array((3,), np.float32)},
        dense=(4,),
        action_spec=None,
        head_w_init_std=None,
    )(x)

  with pytest.raises(ValueError, match='image observation'):
    hk.transform(forward).init(jax.random.key(0), jnp.zeros((2, 7)))


class _TanhTorso(nets.MLP):
  """A user's network: one tanh layer of the last `dense` width."""

  def _embedding_pass(self, inputs, should_reset=None):
    del should_reset
    flat = [hk.Flatten()(x) for x in jax.tree.leaves(inputs)]
    x = jnp.concatenate(flat, axis=-1)
    return jnp.tanh(hk.Linear(self._dense[-1], name='users_layer')(x))


def test_a_users_registered_network_trains_by_name():
  nets.register_network('tanh_torso_of_a_test', _TanhTorso)
  assert 'tanh_torso_of_a_test' in nets.network_names()
  # The network is what is tested, not the rule: actor-critic (whose
  # program compiles in a third of Disco's time), in a small run that
  # learns from its first iteration (no acting-only program to compile).
  config = train.preset(
      'colab',
      rule='actor_critic',
      env='catch',
      env_settings={'rows': 4, 'columns': 5},
      agent_network='tanh_torso_of_a_test',
      agent_dense=(12,),
      agent_lstm_size=8,
      agent_head_mlp_hiddens=(8,),
      rollout_len=5,
      learner_batch_size=4,
      buffer_capacity=8,
      learning_starts=2,
      num_steps=2,
      steps_per_chunk=2,
  )
  result = train.run_train(config)
  (params,) = result.params
  layer = [k for k in params if k.endswith('users_layer')]
  assert layer and params[layer[0]]['w'].shape == (20, 12)
  assert result.logs['learner_steps'][-1] > 0
  # An unknown name is named, with the registered ones.
  with pytest.raises(configs.ConfigError, match='tanh_torso_of_a_test'):
    config.replace(agent_network='no_such_network')


@pytest.mark.parametrize(
    'changes, message',
    [
        (dict(agent_network='conv', agent_conv_channels=()), 'agent_conv'),
        (dict(agent_network='mlp', agent_conv_channels=(8,)), "'conv'"),
        (dict(agent_network='frame_mlp'), 'agent_frame_embedding'),
    ],
)
def test_bad_network_settings_are_named(changes, message):
  with pytest.raises(configs.ConfigError, match=message):
    train.TrainConfig(**changes)


def test_pixel_craftax_trains_with_frames_stored_once_as_uint8():
  pytest.importorskip('craftax')
  config = train.preset(
      'crafter',
      agent='conv',
      env='craftax:Craftax-Classic-Pixels-v1',
      frame_stack=2,
      agent_conv_channels=(4,),
      agent_dense=(8,),
      agent_lstm_size=8,
      agent_head_mlp_hiddens=(8,),
      rollout_len=4,
      learner_batch_size=4,
      replay_fraction=0.75,
      num_envs=2,
      buffer_capacity=8,
      learning_starts=4,
      num_steps=4,
      steps_per_chunk=2,
  )
  trainer = train.Trainer(config, [0])
  state = trainer.initial_state()
  observations = state.replay.storage.observations
  # Each frame once ([T, N, 63, 63, 3], not [T, N, K, ...]), as uint8.
  assert observations['frames'].dtype == jnp.uint8
  assert observations['frames'].shape[-4:] == (8, 63, 63, 3)
  assert observations['context'].shape[-5:] == (1, 8, 63, 63, 3)
  result = train.run_train(config)
  assert result.logs['learner_steps'][-1] > 0
  assert 'unlocked/collect_wood' in result.logs


def test_convolutions_as_shifted_matmuls_match_xlas():
  images = jax.random.normal(jax.random.key(0), (6, 7, 9, 5))

  # One residual section (a convolution, a max-pool, two residual blocks):
  # every kind of convolution the network has, in fewer eagerly compiled
  # initialisations than two.
  def forward(x, shifted_matmuls):
    return conv_nets.ConvNet(
        out_spec={'logits': specs.Array((3,), np.float32)},
        dense=(8,),
        action_spec=None,
        head_w_init_std=None,
        conv_channels=(4,),
        shifted_matmuls=shifted_matmuls,
    )(x)['logits']

  xla = hk.without_apply_rng(hk.transform(lambda x: forward(x, False)))
  matmuls = hk.without_apply_rng(hk.transform(lambda x: forward(x, True)))
  params = xla.init(jax.random.key(1), images)
  # The same parameters (hk.Conv2D's names, shapes and initialisation).
  chex.assert_trees_all_equal(params, matmuls.init(jax.random.key(1), images))
  ref = hk.without_apply_rng(
      hk.transform(lambda x: hk.Conv2D(4, 3, name='conv')(x))
  )
  mine = hk.without_apply_rng(
      hk.transform(lambda x: conv_nets.Conv3x3(4, True, name='conv')(x))
  )
  conv_params = ref.init(jax.random.key(2), images)
  chex.assert_trees_all_equal(conv_params, mine.init(jax.random.key(2), images))
  # Values and gradients up to float rounding: measured 1e-6 relative; a
  # shift off by one cell moves them by 1e-1.
  np.testing.assert_allclose(
      mine.apply(conv_params, images), ref.apply(conv_params, images),
      rtol=1e-5, atol=1e-5,
  )  # fmt: skip
  np.testing.assert_allclose(
      matmuls.apply(params, images), xla.apply(params, images),
      rtol=1e-5, atol=1e-5,
  )  # fmt: skip

  def loss(fn):
    return jax.grad(lambda p: jnp.sum(fn.apply(p, images) ** 2))(params)

  chex.assert_trees_all_close(loss(matmuls), loss(xla), rtol=1e-4, atol=1e-5)
