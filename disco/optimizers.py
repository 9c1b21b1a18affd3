"""Optimizers used by agents and value functions."""

import jax
import jax.numpy as jnp
import optax


def scale_by_adam_sg_denom(
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
) -> optax.GradientTransformation:
  """Adam's rescaling with a constant denominator for meta-gradients.

  The update is mu_hat / (sqrt(nu_hat) + eps) as in Adam (Kingma & Ba,
  2014, https://arxiv.org/abs/1412.6980), but `nu_hat` is wrapped in a
  stop-gradient: when a meta-gradient flows through an agent's update, it
  sees the second-moment normaliser as a constant.

  Args:
    b1: decay of the first-moment average.
    b2: decay of the second-moment average.
    eps: added to the denominator for numerical stability.

  Returns:
    An `optax.GradientTransformation` whose state is `optax.ScaleByAdamState`.
  """

  def init_fn(params):
    return optax.ScaleByAdamState(
        count=jnp.zeros([], jnp.int32),
        mu=jax.tree.map(jnp.zeros_like, params),
        nu=jax.tree.map(jnp.zeros_like, params),
    )

  def update_fn(updates, state, params=None):
    del params
    mu = optax.tree_utils.tree_update_moment(updates, state.mu, b1, 1)
    nu = optax.tree_utils.tree_update_moment(updates, state.nu, b2, 2)
    count = optax.safe_int32_increment(state.count)
    mu_hat = optax.tree_utils.tree_bias_correction(mu, b1, count)
    nu_hat = optax.tree_utils.tree_bias_correction(nu, b2, count)
    nu_hat = jax.lax.stop_gradient(nu_hat)
    new_updates = jax.tree.map(
        lambda m, v: m / (jnp.sqrt(v) + eps), mu_hat, nu_hat
    )
    return new_updates, optax.ScaleByAdamState(count=count, mu=mu, nu=nu)

  return optax.GradientTransformation(init_fn, update_fn)


def get_agent_optimizer(
    learning_rate: float, max_abs_update: float
) -> optax.GradientTransformation:
  """The optimizer of agents and value functions: Adam, clip, then scale.

  Args:
    learning_rate: the step size.
    max_abs_update: element-wise bound on the Adam-normalised update.

  Returns:
    `optax.chain(scale_by_adam_sg_denom(), clip, scale(-learning_rate))`.
  """
  return optax.chain(
      scale_by_adam_sg_denom(),
      optax.clip(max_delta=max_abs_update),
      optax.scale(-learning_rate),
  )
