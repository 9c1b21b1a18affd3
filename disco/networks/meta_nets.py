"""The meta-network of the Disco update rule.

Given a rollout and the agent's outputs on it, the meta-network produces the
agent's targets: pi-hat [T, B, A], y-hat and z-hat [T, B, Y]. It combines

- a per-trajectory LSTM, unrolled backwards in time (so each step sees what
  follows it, like a bootstrapped return) and reset at episode ends;
- a per-lifetime meta-LSTM, stepped once per rollout on the batch-and-time
  average of an embedding, whose hidden state modulates the per-trajectory
  features multiplicatively;
- an action-conditional conv net (kernel 1 over the action axis) for pi-hat.

Module names and creation order reproduce the reference's parameter tree
(e.g. `lstm/~/meta_lstm/~unroll/lstm/linear`), so the published Disco103
weights load unchanged and random initialisations match bit for bit.
"""

from collections.abc import Callable, Mapping, Sequence
import functools
from typing import Any

import chex
import haiku as hk
import jax
import jax.numpy as jnp

from disco import types
from disco import utils
from disco.update_rules import input_transforms


class MetaNet(hk.Module):
  """Interface: maps `UpdateRuleInputs` to the update rule's outputs."""

  def __call__(
      self,
      inputs: types.UpdateRuleInputs,
      axis_name: str | None,
  ) -> types.UpdateRuleOuts:
    raise NotImplementedError


class LSTM(MetaNet):
  """The Disco meta-network: backward LSTM, meta-LSTM and policy conv net."""

  def __init__(
      self,
      hidden_size: int,
      embedding_size: Sequence[int],
      prediction_size: int,
      meta_rnn_kwargs: Mapping[str, Any],
      input_option: types.MetaNetInputOption,
      policy_channels: Sequence[int] = (16, 2),
      policy_target_channels: Sequence[int] = (128,),
      policy_target_stddev: float | None = None,
      output_stddev: float | None = None,
      aux_stddev: float | None = None,
      state_stddev: float | None = None,
      share_readings: bool = False,
      name: str | None = None,
  ) -> None:
    """Configures the meta-network.

    Args:
      hidden_size: width of the per-trajectory LSTM.
      embedding_size: layer sizes of the y/z embedding MLPs.
      prediction_size: size of y and z (and of y-hat, z-hat).
      meta_rnn_kwargs: arguments of the `MetaLSTM`.
      input_option: which inputs to read and how to transform them.
      policy_channels: channels of the action-conditional input conv net.
      policy_target_channels: channels of the pi-hat conv net.
      policy_target_stddev: init std of the pi-hat output layer.
      output_stddev: init std of the meta-input embedding layer.
      aux_stddev: init std of the y-hat and z-hat layers.
      state_stddev: init std of the layer embedding the meta-LSTM state.
      share_readings: compute what several inputs read alike once (see
        `_construct_input`): the same values up to float rounding, less
        work. Off: the reference's program.
      name: module name (default 'lstm').
    """
    super().__init__(name=name)
    self._hidden_size = hidden_size
    self._embedding_size = tuple(embedding_size)
    self._prediction_size = prediction_size
    self._input_option = input_option
    self._output_init = _maybe_truncated_normal(output_stddev)
    self._aux_init = _maybe_truncated_normal(aux_stddev)
    self._state_init = _maybe_truncated_normal(state_stddev)
    self._policy_target_init = _maybe_truncated_normal(policy_target_stddev)
    self._policy_channels = tuple(policy_channels)
    self._policy_target_channels = tuple(policy_target_channels)
    self._share_readings = share_readings
    self._meta_rnn_core = MetaLSTM(
        **meta_rnn_kwargs,
        input_option=input_option,
        share_readings=share_readings,
    )

  def meta_rnn_state(self) -> hk.LSTMState:
    """Reads the meta-LSTM state (Haiku state `meta_rnn_state`)."""
    initial = self._meta_rnn_core.initial_state()
    return hk.get_state(
        'meta_rnn_state',
        shape=jax.tree.map(lambda t: t.shape, initial),
        dtype=jax.tree.map(lambda t: t.dtype, initial),
        init=lambda *_: initial,
    )

  def __call__(
      self, inputs: types.UpdateRuleInputs, axis_name: str | None
  ) -> types.UpdateRuleOuts:
    meta_rnn_state = self.meta_rnn_state()
    logits = inputs.agent_out['logits']  # [T+1, B, A]
    _, batch_size, num_actions = logits.shape

    # Per-step features, plus the per-action embedding used for pi-hat. The
    # embedding modules are created here, in this order, on purpose.
    y_net = _batch_mlp(self._embedding_size, num_dims=2)
    z_net = _batch_mlp(self._embedding_size, num_dims=3)
    policy_net = _conv1d_net(self._policy_channels)
    x, policy_emb = _construct_input(
        inputs,
        y_net=y_net,
        z_net=z_net,
        policy_net=policy_net,
        input_option=self._input_option,
        axis_name=axis_name,
        share_readings=self._share_readings,
    )  # [T, B, F], [T, B, A, C]

    # Backwards in time, restarting at each terminal step, so that step t
    # summarises the rest of its own episode.
    core = hk.ResetCore(hk.LSTM(self._hidden_size))
    x, _ = hk.dynamic_unroll(
        core,
        (x, inputs.should_reset_mask_bwd[:-1]),
        core.initial_state(batch_size=batch_size),
        reverse=True,
    )  # [T, B, H]

    x = _multiplicative_interaction(
        x=x,
        y=self._meta_rnn_core.output(meta_rnn_state),
        initializer=self._state_init,
    )

    meta_input_emb = hk.BatchApply(hk.Linear(1, w_init=self._output_init))(x)
    y_hat = hk.BatchApply(
        hk.Linear(self._prediction_size, w_init=self._aux_init)
    )(x)
    z_hat = hk.BatchApply(
        hk.Linear(self._prediction_size, w_init=self._aux_init)
    )(x)

    # pi-hat: the step features next to each action's embedding, mixed over
    # actions by kernel-1 convolutions, then one logit per action.
    per_action = jnp.repeat(x[:, :, None], num_actions, axis=2)
    per_action = jnp.concatenate([per_action, policy_emb], axis=-1)
    per_action = _conv1d_net(self._policy_target_channels)(per_action)
    pi_hat = hk.BatchApply(hk.Linear(1, w_init=self._policy_target_init))(
        per_action
    )
    pi_hat = jnp.squeeze(pi_hat, axis=-1)  # [T, B, A]

    meta_out = dict(pi=pi_hat, y=y_hat, z=z_hat, meta_input_emb=meta_input_emb)
    new_meta_rnn_state = self._meta_rnn_core.unroll(
        inputs, meta_out, meta_rnn_state, axis_name=axis_name
    )
    hk.set_state('meta_rnn_state', new_meta_rnn_state)
    return meta_out


class MetaLSTM(hk.Module):
  """The per-lifetime meta-LSTM: one step per rollout (agent update)."""

  def __init__(
      self,
      input_option: types.MetaNetInputOption,
      policy_channels: Sequence[int],
      embedding_size: Sequence[int],
      pred_embedding_size: Sequence[int],
      hidden_size: int,
      share_readings: bool = False,
  ):
    """Configures the meta-LSTM.

    Args:
      input_option: which rollout inputs to read (as for the meta-network).
      policy_channels: channels of its action-conditional conv net.
      embedding_size: layer sizes of the MLP embedding its inputs.
      pred_embedding_size: layer sizes of its y/z embedding MLPs.
      hidden_size: width of the LSTM.
      share_readings: as for the meta-network.
    """
    super().__init__()
    self._input_option = input_option
    self._share_readings = share_readings
    self._hidden_size = hidden_size
    self._embedding_size = tuple(embedding_size)
    self._policy_channels = tuple(policy_channels)
    self._pred_embedding_size = tuple(pred_embedding_size)
    # A plain callable, not a method: Haiku would otherwise scope the LSTM
    # under the method's name and change its parameter path.
    self._make_core = functools.partial(hk.LSTM, hidden_size)

  def unroll(
      self,
      inputs: types.UpdateRuleInputs,
      meta_out: types.UpdateRuleOuts,
      state: hk.LSTMState,
      axis_name: str | None,
  ) -> hk.LSTMState:
    """Steps the LSTM once on the averaged embedding of a rollout.

    Args:
      inputs: the rollout, as given to the meta-network.
      meta_out: the meta-network's outputs on it (meta_input_emb and y).
      state: the current meta-LSTM state.
      axis_name: `pmap` axis to average the embedding over, if any.

    Returns:
      The next meta-LSTM state.
    """
    y_net = _batch_mlp(self._pred_embedding_size, num_dims=2)
    z_net = _batch_mlp(self._pred_embedding_size, num_dims=3)
    policy_net = _conv1d_net(self._policy_channels)
    features, _ = _construct_input(
        inputs,
        y_net=y_net,
        z_net=z_net,
        policy_net=policy_net,
        input_option=self._input_option,
        axis_name=axis_name,
        share_readings=self._share_readings,
    )  # [T, B, F]
    x = jnp.concatenate(
        [
            features,
            meta_out['meta_input_emb'],
            y_net(jax.nn.softmax(meta_out['y'])),
        ],
        axis=-1,
    )
    x = _batch_mlp(self._embedding_size)(x)  # [T, B, E]
    x_avg = jnp.mean(x, axis=(0, 1))  # [E]
    if axis_name is not None:
      x_avg = jax.lax.pmean(x_avg, axis_name=axis_name)
    _, new_state = self._make_core()(x_avg, state)
    return new_state

  def initial_state(self) -> hk.LSTMState:
    """Zero state, without a batch axis."""
    return self._make_core().initial_state(batch_size=None)

  def output(self, state: hk.LSTMState) -> chex.Array:
    """The meta-LSTM's output: its hidden state [H]."""
    return state.hidden


def _extract(x: Any, path: str) -> Any:
  """Follows a '/'-separated path of attributes or keys, e.g. 'a/b/c'."""
  visited = []
  for key in path.split('/'):
    if x is None:
      raise ValueError(
          f'Cannot read {path!r}: {"/".join(visited) or "the input"} is None.'
      )
    if hasattr(x, key):
      x = getattr(x, key)
    else:
      try:
        x = x[key]
      except (KeyError, TypeError, IndexError):
        raise KeyError(
            f'Cannot read {path!r}: no attribute or key {key!r} in'
            f' {"/".join(visited) or "the input"}.'
        ) from None
    visited.append(key)
  return x


def _needs_feature_axis(source: str) -> bool:
  """Whether a source is a per-step scalar that needs a trailing axis.

  The update rule's extra quantities (values, advantages, Q) are scalars per
  step (or per action); the target network's outputs already carry a
  feature axis, except its Q values.
  """
  if not source.startswith('extra_from_rule'):
    return False
  return 'target_out' not in source or source == 'extra_from_rule/target_out/q'


def _construct_input(
    inputs: types.UpdateRuleInputs,
    input_option: types.MetaNetInputOption,
    y_net: Callable[[chex.Array], chex.Array],
    z_net: Callable[[chex.Array], chex.Array],
    policy_net: Callable[[chex.Array], chex.Array],
    axis_name: str | None = None,
    share_readings: bool = False,
) -> tuple[chex.Array, chex.Array | None]:
  """Reads and transforms every configured input into one feature vector.

  With `share_readings`, inputs that share a source and their first
  transforms share those transforms' result, and `drop_last` comes after
  the per-step transforms that follow it: Disco103 reads z (online and
  target) through softmax and z_net at T+1 and at T steps, four times
  each, and computes that twice instead. The values are the same up to
  float rounding (XLA compiles the products over T+1 steps, not T).

  Args:
    inputs: the rollout and extra quantities.
    input_option: the inputs to read and their transforms.
    y_net: embedding MLP for y-like inputs (transform name 'y_net').
    z_net: embedding MLP for z-like inputs (transform name 'z_net').
    policy_net: conv net over the action axis for action-conditional inputs.
    axis_name: `pmap` axis, passed to the transforms.
    share_readings: see above; off, the reference's program.

  Returns:
    Features [T, B, F] and the per-action embedding [T, B, A, C] (None if
    there are no action-conditional inputs).
  """
  unroll_len, batch_size = inputs.is_terminal.shape
  actions = jax.tree.map(lambda a: a[:-1], inputs.actions)  # [T, B]
  policy = jax.lax.stop_gradient(
      jax.nn.softmax(inputs.agent_out['logits'])
  )  # [T+1, B, A]
  num_actions = policy.shape[2]

  computed = {}  # (source, transforms) -> their result, when shared.

  def _apply(name, x):
    if name == 'y_net':
      return y_net(x)
    if name == 'z_net':
      return z_net(x)
    return input_transforms.TRANSFORMS[name]()(x, actions, policy, axis_name)

  def _transformed(source, transforms):
    for name in transforms:
      if name not in _NETS and name not in input_transforms.TRANSFORMS:
        raise KeyError(
            f'Unknown input transform {name!r} for {source!r}; known:'
            f' {sorted(input_transforms.TRANSFORMS)} and y_net, z_net.'
        )
    x = _extract(inputs, source)
    if _needs_feature_axis(source):
      x = x[..., None]
    if share_readings:
      transforms, done = _drop_last_later(transforms), ()
    else:
      done = None
    for name in transforms:
      # A stateful transform's result, and all that follows it, is this
      # input's own: each call has a state of its own.
      done = None if done is None or name in _STATEFUL else done + (name,)
      if done is None:
        x = _apply(name, x)
        continue
      if (source, done) not in computed:
        computed[(source, done)] = _apply(name, x)
      x = computed[(source, done)]
    return x

  def _features(configs, prefix_shape):
    return [
        jnp.reshape(
            _transformed(config.source, config.transforms),
            prefix_shape + (-1,),
        )
        for config in configs
    ]

  features = _features(input_option.base, (unroll_len, batch_size))
  per_action_emb = None
  if input_option.action_conditional:
    per_action = _features(
        input_option.action_conditional,
        (unroll_len, batch_size, num_actions),
    )
    one_hot = jax.nn.one_hot(actions, num_actions, dtype=jnp.float32)
    per_action.append(one_hot[..., None])
    per_action_emb = policy_net(jnp.concatenate(per_action, axis=-1))
    features.append(jnp.mean(per_action_emb, axis=2))  # [T, B, C]
    features.append(utils.batch_lookup(per_action_emb, actions))  # [T, B, C]

  chex.assert_rank(features, 3)
  chex.assert_tree_shape_prefix(features, (unroll_len, batch_size))
  return jnp.concatenate(features, axis=-1), per_action_emb


_NETS = frozenset({'y_net', 'z_net'})
# Transforms that act on each step alone: dropping the last step before or
# after them gives the same values. `drop_last` moves past them, so that
# [T+1] and [T] readings of a source share the work.
_PER_STEP = frozenset({
    'y_net',
    'z_net',
    'identity',
    'softmax',
    'max_a',
    'stop_grad',
    'clip',
    'sign',
    'sign_log',
    'sign_hyp',
    'masks_to_discounts',
})
# Transforms with a state of their own per call (a new module each time).
_STATEFUL = frozenset({'normalize'})


def _drop_last_later(transforms: Sequence[str]) -> tuple[str, ...]:
  """`transforms` with each 'drop_last' moved past the per-step ones after it.

  E.g. (drop_last, softmax, z_net, select_a) -> (softmax, z_net, drop_last,
  select_a): the same values, with softmax and z_net shared with a reading
  of all T+1 steps.
  """
  out = list(transforms)
  i = 0
  while i < len(out):
    if out[i] == 'drop_last':
      j = i
      while j + 1 < len(out) and out[j + 1] in _PER_STEP:
        out[j], out[j + 1] = out[j + 1], out[j]
        j += 1
      i = j + 1
    else:
      i += 1
  return tuple(out)


def _maybe_truncated_normal(
    stddev: float | None,
) -> hk.initializers.Initializer | None:
  if stddev is None:
    return None
  return hk.initializers.TruncatedNormal(stddev=stddev)


def _multiplicative_interaction(
    x: chex.Array,
    y: chex.Array | None,
    initializer: hk.initializers.Initializer,
) -> chex.Array:
  """x * Linear(y) when y is a non-scalar array; x unchanged otherwise.

  The reference tested `isinstance(y, chex.Array)`, which is False for
  tracers on current JAX and would silently drop the interaction under
  `jit`; this tests for any non-scalar array.
  """
  if y is None or not jnp.ndim(y):
    return x
  y_embed = hk.Linear(x.shape[-1], w_init=initializer)(y)
  return x * y_embed


def _batch_mlp(
    hiddens: Sequence[int], num_dims: int = 2
) -> Callable[[chex.Array], chex.Array]:
  """An MLP applied over the last axis of inputs with `num_dims` batch axes."""
  return hk.BatchApply(hk.nets.MLP(tuple(hiddens)), num_dims=num_dims)


def _conv1d_block(x: chex.Array, n_channels: int) -> chex.Array:
  """Kernel-1 conv over actions of [x, mean_a(x)]: [T, B, A, C] -> [.., n]."""
  x_avg = jnp.mean(x, axis=2, keepdims=True)
  x_avg = jnp.repeat(x_avg, x.shape[2], axis=2)
  x = jnp.concatenate([x, x_avg], axis=-1)
  x = hk.BatchApply(hk.Conv1D(output_channels=n_channels, kernel_shape=1))(x)
  return jax.nn.relu(x)


def _conv1d_net(channels: Sequence[int]) -> Callable[[chex.Array], chex.Array]:
  return hk.Sequential(
      [functools.partial(_conv1d_block, n_channels=c) for c in channels]
  )
