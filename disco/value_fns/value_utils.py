"""Value estimation: scalar values from network outputs, V-trace, Retrace.

`get_value_outs` is the entry point used by the update rules and by the
meta-training value function: it turns network outputs (scalar or
categorical, optionally in signed-hyperbolic space) into values, computes
off-policy corrected targets and advantages, and normalises them with
moving averages.
"""

import functools

import chex
import distrax
import jax
import jax.numpy as jnp
import optax
import rlax

from disco import types
from disco import utils

DEFAULT_DISCOUNT = 0.995
DEFAULT_TD_LAMBDA = 0.95

_MISSING_MAX_ABS_VALUE = (
    'A categorical value function needs `max_abs_value` (the largest'
    ' absolute value its bins represent); got None.'
)


def _check_categorical_args(
    categorical_value: bool, max_abs_value: float | None
) -> None:
  if categorical_value and max_abs_value is None:
    raise ValueError(_MISSING_MAX_ABS_VALUE)


def get_value_outs(
    value_net_out: chex.Array | None,
    q_net_out: chex.ArrayTree | None,
    target_value_net_out: chex.Array | None,
    target_q_net_out: chex.ArrayTree | None,
    rollout: types.ActorRollout | types.UpdateRuleInputs,
    pi_logits: chex.Array,
    discount: jax.typing.ArrayLike,
    lambda_: jax.typing.ArrayLike = DEFAULT_TD_LAMBDA,
    nonlinear_transform: bool = False,
    categorical_value: bool = False,
    max_abs_value: float | None = None,
    drop_last: bool = True,
    adv_ema_state: types.EmaState | None = None,
    adv_ema_fn: utils.MovingAverage | None = None,
    td_ema_state: types.EmaState | None = None,
    td_ema_fn: utils.MovingAverage | None = None,
    axis_name: str | None = None,
) -> tuple[types.ValueOuts, types.EmaState | None, types.EmaState | None]:
  """Values, targets and (normalised) advantages for a rollout.

  With action values (`q_net_out`) the targets are Retrace returns for
  Q(s_t, a_t) (Munos et al., 2016); with state values only, they are V-trace
  returns (Espeholt et al., 2018). State values default to the policy-
  weighted average of the action values when only Q is given.

  Args:
    value_net_out: [T+1, B, 1 or num_bins] state-value outputs, or None.
    q_net_out: [T+1, B, A, 1 or num_bins] action-value outputs, or None.
    target_value_net_out: target network's state-value outputs, or None.
    target_q_net_out: target network's action-value outputs, or None. When
      both targets are None the online values are used as targets.
    rollout: an `ActorRollout` (discounts and behaviour logits are read from
      it) or `UpdateRuleInputs` (is_terminal, behaviour_agent_out['logits']).
    pi_logits: [T+1, B, A] logits of the policy being evaluated.
    discount: discount factor.
    lambda_: trace parameter.
    nonlinear_transform: outputs live in signed-hyperbolic space.
    categorical_value: outputs are logits over value bins.
    max_abs_value: the bins span [-max_abs_value, max_abs_value]; needed
      when `categorical_value` is True.
    drop_last: rewards and discounts have T+1 steps; drop the last one.
      (Used by the value function on actor rollouts: it pairs step t with the
      reward stored at t, not t+1. Reference behaviour, kept.)
    adv_ema_state: moving-average state for advantages, or None.
    adv_ema_fn: the `MovingAverage` for advantages, or None.
    td_ema_state: moving-average state for TD errors, or None.
    td_ema_fn: the `MovingAverage` for TD errors, or None.
    axis_name: `pmap` axis over which the moving averages are shared.

  Returns:
    (value outputs, new advantage EMA state or None, new TD EMA state or
    None).
  """
  if value_net_out is None and q_net_out is None:
    raise ValueError('Both value_net_out and q_net_out are None.')
  _check_categorical_args(categorical_value, max_abs_value)

  if value_net_out is not None:
    t, b = value_net_out.shape[:2]
  else:
    t, b = jax.tree.leaves(q_net_out)[0].shape[:2]

  rewards, actions = rollout.rewards, rollout.actions
  if isinstance(rollout, types.ActorRollout):
    env_discounts, mu_logits = rollout.discounts, rollout.logits
  elif isinstance(rollout, types.UpdateRuleInputs):
    env_discounts = 1.0 - rollout.is_terminal
    mu_logits = rollout.behaviour_agent_out['logits']
  else:
    raise TypeError(
        'rollout must be an ActorRollout or UpdateRuleInputs, got'
        f' {type(rollout).__name__}.'
    )

  chex.assert_tree_shape_prefix((pi_logits, actions), (t, b))
  if drop_last:
    chex.assert_tree_shape_prefix((rewards, env_discounts, actions), (t, b))
  else:
    chex.assert_tree_shape_prefix((rewards, env_discounts), (t - 1, b))

  to_scalars = functools.partial(
      extract_scalar_values_from_net_out,
      pi_logits=pi_logits,
      categorical_value=categorical_value,
      max_abs_value=max_abs_value,
      nonlinear_transform=nonlinear_transform,
  )
  values, q_values = to_scalars(value_net_out, q_net_out)
  if target_value_net_out is None and target_q_net_out is None:
    target_values, target_q_values = values, q_values
  else:
    target_values, target_q_values = to_scalars(
        target_value_net_out, target_q_net_out
    )

  if drop_last:
    rewards = rewards[:-1]
    env_discounts = env_discounts[:-1]
  # The last action has no transition after it, whatever `drop_last` says.
  actions = jax.tree.map(lambda x: x[:-1], actions)
  rho = importance_weight(
      jax.tree.map(lambda x: x[:-1], pi_logits),
      jax.tree.map(lambda x: x[:-1], mu_logits),
      actions,
  )

  if q_values is not None:
    chex.assert_rank(q_values, 3)
    value_outs = estimate_q_values(
        rewards,
        actions,
        env_discounts,
        rho,
        values,
        target_values,
        q_values,
        target_q_values,
        discount,
        lambda_,
    )
  else:
    value_outs = estimate_values(
        rewards,
        actions,
        env_discounts,
        rho,
        values,
        target_values,
        discount,
        lambda_,
    )

  advantages = value_outs.adv
  if adv_ema_state is not None and adv_ema_fn is not None:
    new_adv_ema_state = adv_ema_fn.update_state(
        advantages, adv_ema_state, axis_name
    )
    normalized_adv = adv_ema_fn.normalize(advantages, new_adv_ema_state)
    # Map over the action tree only, so that the normalisation (a scalar
    # tree) applies to each action's Q - V as a whole.
    normalized_qv_adv = jax.tree.map(
        lambda _, x: adv_ema_fn.normalize(x, new_adv_ema_state),
        rollout.actions,
        value_outs.qv_adv,
    )
  else:
    new_adv_ema_state = None
    normalized_adv = jax.tree.map(jnp.zeros_like, value_outs.td)
    normalized_qv_adv = jax.tree.map(jnp.zeros_like, value_outs.qv_adv)

  tds, q_tds = value_outs.td, value_outs.q_td
  normalized_td = jax.tree.map(jnp.zeros_like, tds)
  normalized_q_td = jax.tree.map(jnp.zeros_like, q_tds)
  if td_ema_state is not None and td_ema_fn is not None:
    # The TD statistics follow Q's TD errors when there is a Q head.
    if q_net_out is None:
      new_td_ema_state = td_ema_fn.update_state(tds, td_ema_state, axis_name)
      normalized_td = td_ema_fn.normalize(
          tds, new_td_ema_state, subtract_mean=False
      )
    else:
      new_td_ema_state = td_ema_fn.update_state(q_tds, td_ema_state, axis_name)
      normalized_q_td = td_ema_fn.normalize(
          q_tds, new_td_ema_state, subtract_mean=False
      )
  else:
    new_td_ema_state = None

  value_outs = value_outs.replace(
      normalized_adv=normalized_adv,
      normalized_qv_adv=normalized_qv_adv,
      normalized_td=normalized_td,
      normalized_q_td=normalized_q_td,
  )
  return value_outs, new_adv_ema_state, new_td_ema_state


def estimate_values(
    rewards: chex.Array,
    actions: chex.ArrayTree,
    env_discounts: chex.Array,
    rho: chex.Array,
    values: chex.Array,
    target_values: chex.Array,
    discount: float = DEFAULT_DISCOUNT,
    lambda_: float = DEFAULT_TD_LAMBDA,
) -> types.ValueOuts:
  """V-trace targets and advantages from state values.

  Args:
    rewards: [T, B] rewards.
    actions: tree of [T, B] actions (shapes the placeholder Q fields).
    env_discounts: [T, B] environment discounts (0 at terminations).
    rho: [T, B] importance weights pi/mu.
    values: [T+1, B] state values.
    target_values: [T+1, B] state values used for bootstrapping.
    discount: discount factor.
    lambda_: trace parameter.

  Returns:
    `ValueOuts` with value, target_value, rho, adv, value_target and td; the
    Q fields hold zeros shaped like the actions.
  """
  chex.assert_rank([values, target_values], [2, 2])
  chex.assert_equal_shape(
      [values[:-1], target_values[:-1], rho, rewards, env_discounts]
  )
  discounts = env_discounts * discount
  chex.assert_equal_shape([discounts, values[1:], target_values[1:]])
  vtrace_per_column = jax.vmap(
      functools.partial(rlax.vtrace_td_error_and_advantage, lambda_=lambda_),
      in_axes=1,
      out_axes=1,
  )
  vtrace = vtrace_per_column(
      target_values[:-1], target_values[1:], rewards, discounts, rho
  )
  value_target = vtrace.errors + target_values[:-1]

  # No action values here: fill the Q fields with zeros of the right shapes.
  zeros_like_actions = jax.tree.map(jnp.zeros_like, actions)
  zeros_like_target = jax.tree.map(
      lambda _: jnp.zeros_like(value_target), actions
  )
  return types.ValueOuts(
      adv=vtrace.pg_advantage,
      value=values,
      target_value=target_values,
      rho=rho,
      value_target=value_target,
      td=value_target - values[:-1],
      qv_adv=zeros_like_actions,
      q_target=zeros_like_target,
      q_value=zeros_like_actions,
      target_q_value=zeros_like_actions,
      q_td=zeros_like_target,
  )


def estimate_q_values(
    rewards: chex.Array,
    actions: chex.ArrayTree,
    env_discounts: chex.Array,
    rho: chex.Array,
    values: chex.Array,
    target_values: chex.Array,
    q_values: chex.ArrayTree,
    target_q_values: chex.ArrayTree,
    discount: float = DEFAULT_DISCOUNT,
    lambda_: float = DEFAULT_TD_LAMBDA,
) -> types.ValueOuts:
  """Retrace targets for the taken actions, and the advantages they imply.

  Args:
    rewards: [T, B] rewards.
    actions: tree of [T, B] actions.
    env_discounts: [T, B] environment discounts (0 at terminations).
    rho: [T, B] importance weights pi/mu.
    values: [T+1, B] state values.
    target_values: [T+1, B] state values used for bootstrapping.
    q_values: tree of [T+1, B, A] action values.
    target_q_values: tree of [T+1, B, A] action values used in the targets.
    discount: discount factor.
    lambda_: trace parameter; the traces are lambda * min(rho, 1).

  Returns:
    `ValueOuts` with every field but the normalised ones.
  """
  first_q = jax.tree.leaves(q_values)[0]
  chex.assert_rank([values, first_q], [2, 3])
  chex.assert_equal_shape([values[:-1], rho, rewards, env_discounts])
  chex.assert_equal_shape_prefix((values, first_q), 2)

  def _taken(q):
    return utils.batch_lookup(q[:-1], actions)

  q_a = jax.tree.map(_taken, q_values)
  target_q_a = jax.tree.map(_taken, target_q_values)

  discounts = env_discounts * discount
  chex.assert_equal_shape([discounts, values[1:]])

  # rlax's off-policy returns read r_t, discount_t and q_t one step later
  # than ours; a dummy step in front lines them up and is dropped after.
  def _pad_front(x):
    return jnp.concatenate([jnp.zeros_like(x[:1]), x], axis=0)

  clipped_rho = jnp.minimum(rho, 1.0)
  traces = lambda_ * clipped_rho
  retrace_per_column = jax.vmap(
      functools.partial(
          rlax.general_off_policy_returns_from_q_and_v,
          stop_target_gradients=True,
      ),
      in_axes=1,
      out_axes=1,
  )
  q_target = jax.tree.map(
      lambda q: retrace_per_column(
          q,
          target_values,
          _pad_front(rewards),
          _pad_front(discounts),
          traces,
      )[1:],
      target_q_a,
  )
  chex.assert_equal_shape([q_a, q_target])

  qv_adv = jax.tree.map(lambda q: q - target_values[..., None], target_q_values)
  first_q_target = jax.tree.leaves(q_target)[0]
  adv = first_q_target - target_values[:-1]
  v_target = target_values[:-1] + clipped_rho * adv
  q_td = jax.tree.map(lambda target, q: target - q, q_target, q_a)
  return types.ValueOuts(
      adv=adv,
      value=values,
      target_value=target_values,
      rho=rho,
      value_target=v_target,
      td=v_target - values[:-1],
      qv_adv=qv_adv,
      q_target=q_target,
      q_value=q_values,
      target_q_value=target_q_values,
      q_td=q_td,
  )


def get_values_from_net_outs(
    x: chex.Array,
    categorical_value: bool,
    max_abs_value: float | None,
    nonlinear_transform: bool,
) -> chex.Array:
  """[T, B, 1 or num_bins] network outputs -> [T, B] scalar values."""
  chex.assert_rank(x, 3)
  _check_categorical_args(categorical_value, max_abs_value)
  if categorical_value:
    v = value_logits_to_scalar(x, max_abs_value)
  else:
    v = jnp.squeeze(x, axis=2)
  if nonlinear_transform:
    _, from_transformed_space = rlax.SIGNED_HYPERBOLIC_PAIR
    v = from_transformed_space(v)
  return v


def extract_scalar_values_from_net_out(
    value_net_out: chex.Array | None,
    q_net_out: chex.ArrayTree | None,
    pi_logits: chex.ArrayTree,
    categorical_value: bool,
    max_abs_value: float | None,
    nonlinear_transform: bool,
) -> tuple[chex.Array, chex.ArrayTree | None]:
  """Scalar state values [T, B] and action values [T, B, A] (or None).

  When only action values are given, state values are their expectation
  under softmax(pi_logits).
  """
  _check_categorical_args(categorical_value, max_abs_value)
  to_values = functools.partial(
      get_values_from_net_outs,
      categorical_value=categorical_value,
      max_abs_value=max_abs_value,
      nonlinear_transform=nonlinear_transform,
  )
  values = None if value_net_out is None else to_values(value_net_out)
  q_values = None
  if q_net_out is not None:
    chex.assert_rank(jax.tree.leaves(q_net_out), 4)  # [T, B, A, bins]
    per_action = jax.vmap(to_values, in_axes=2, out_axes=2)
    q_values = jax.tree.map(per_action, q_net_out)
  if values is None:
    policy = jax.tree.map(jax.nn.softmax, pi_logits)
    values = jax.tree.map(lambda p, q: jnp.sum(p * q, axis=2), policy, q_values)
  return values, q_values


def importance_weight(
    pi_logits: chex.ArrayTree,
    mu_logits: chex.ArrayTree,
    actions: chex.ArrayTree,
) -> chex.Array:
  """pi(a)/mu(a) of the taken actions (a constant for gradients).

  With a tree of action components the probabilities are joint, i.e. the
  log-probabilities of the components are summed.
  """

  def _log_prob(logits, a):
    return distrax.Softmax(logits).log_prob(a)

  log_pi_a = sum(jax.tree.leaves(jax.tree.map(_log_prob, pi_logits, actions)))
  log_mu_a = sum(jax.tree.leaves(jax.tree.map(_log_prob, mu_logits, actions)))
  return jax.lax.stop_gradient(jnp.exp(log_pi_a - log_mu_a))


def value_logits_to_scalar(
    value_logits: chex.Array, max_abs_value: float
) -> chex.Array:
  """Expected value of a categorical value over integer-spaced bins.

  The bins are evenly spaced over [-max_abs_value, max_abs_value].
  """
  if max_abs_value <= 0.0:
    raise ValueError(f'max_abs_value must be positive, got {max_abs_value}.')
  return rlax.transform_from_2hot(
      jax.nn.softmax(value_logits),
      min_value=-max_abs_value,
      max_value=max_abs_value,
      num_bins=value_logits.shape[-1],
  )


def scalar_to_categorical_value(
    num_bins: int, value: chex.Array, max_abs_value: float
) -> chex.Array:
  """Two-hot probabilities [..., num_bins] of a (clipped) scalar value."""
  if max_abs_value <= 0.0:
    raise ValueError(f'max_abs_value must be positive, got {max_abs_value}.')
  return rlax.transform_to_2hot(
      value,
      min_value=-max_abs_value,
      max_value=max_abs_value,
      num_bins=num_bins,
  )


def value_loss_from_target(
    value_net_out: chex.Array,
    value_target: chex.Array,
    nonlinear_transform: bool = False,
    categorical_value: bool = False,
    max_abs_value: float | None = None,
) -> chex.Array:
  """Per-step loss of value outputs towards a scalar target.

  No stop-gradient is applied to the target; callers add one if needed.

  Args:
    value_net_out: [T, B, 1 or num_bins] value outputs.
    value_target: [T, B] scalar targets (in plain, untransformed space).
    nonlinear_transform: outputs live in signed-hyperbolic space.
    categorical_value: outputs are logits over value bins.
    max_abs_value: range of the bins, for categorical values.

  Returns:
    [T, B] cross-entropy against the target's two-hot encoding
    (categorical) or half squared error (scalar).
  """
  _check_categorical_args(categorical_value, max_abs_value)
  if nonlinear_transform:
    to_transformed_space, _ = rlax.SIGNED_HYPERBOLIC_PAIR
    value_target = to_transformed_space(value_target)
  if categorical_value:
    target_probs = scalar_to_categorical_value(
        value_net_out.shape[-1], value_target, max_abs_value
    )
    chex.assert_equal_shape([value_net_out, target_probs])
    return optax.losses.softmax_cross_entropy(value_net_out, target_probs)
  values = jnp.squeeze(value_net_out, axis=-1)
  return 0.5 * jnp.square(values - value_target)


def value_loss_from_td(
    value_net_out: chex.Array,
    td: chex.Array,
    nonlinear_transform: bool = False,
    categorical_value: bool = False,
    max_abs_value: float | None = None,
) -> chex.Array:
  """Per-step value loss towards the fixed target value + td.

  The gradient of 0.5 * (v - stop_grad(v + td))**2 is -td, so this moves the
  value along a (possibly normalised) TD error.

  Args:
    value_net_out: [T, B, 1 or num_bins] value outputs.
    td: [T, B] TD errors in plain space.
    nonlinear_transform: outputs live in signed-hyperbolic space.
    categorical_value: outputs are logits over value bins.
    max_abs_value: range of the bins, for categorical values.

  Returns:
    [T, B] per-step losses.
  """
  _check_categorical_args(categorical_value, max_abs_value)
  values = get_values_from_net_outs(
      value_net_out,
      categorical_value=categorical_value,
      max_abs_value=max_abs_value,
      nonlinear_transform=nonlinear_transform,
  )
  chex.assert_rank(values, 2)
  chex.assert_equal_shape([values, td])
  return value_loss_from_target(
      value_net_out,
      jax.lax.stop_gradient(values + td),
      nonlinear_transform=nonlinear_transform,
      categorical_value=categorical_value,
      max_abs_value=max_abs_value,
  )
