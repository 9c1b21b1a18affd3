"""The `UpdateRule` interface shared by Disco, actor-critic and policy gradient.

An update rule decides what an agent's network outputs (its output specs),
carries its own state between learner steps (`meta_state`), turns a rollout
into targets or advantages (`unroll_meta_net`) and defines the agent's loss
from them (`agent_loss`, plus `agent_loss_no_meta` for terms that must not
receive meta-gradients).
"""

import chex
from dm_env import specs as dm_env_specs
import jax
import jax.numpy as jnp

from disco import files
from disco import types
from disco import utils

ArraySpec = types.ArraySpec


def _shapes_by_path(tree: chex.ArrayTree) -> dict[str, tuple[int, ...]]:
  """Leaf shapes by '/'-joined key path, e.g. `{'lstm/linear/w': (2, 3)}`."""
  return {k: files.shape_of(x) for k, x in files.named_leaves(tree).items()}


def check_meta_params(
    rule: 'UpdateRule',
    meta_params: chex.ArrayTree,
    what: str = 'Update-rule parameters',
) -> None:
  """Raises `files.TreeMismatchError` naming the first differences.

  Compares keys and shapes with those of `rule.init_params`, so that e.g.
  weights of another architecture fail here, with names, rather than as a
  shape error deep inside XLA. Cheap: the expected shapes are computed once
  per rule (abstractly) and the check runs at trace time. The message lists
  differences like `disco.weights.validate_params` does (`disco.files`),
  starting with `what` (e.g. the file the parameters came from).
  """
  diff = files.diff_trees(
      _shapes_by_path(meta_params), rule.meta_param_shapes()
  )
  if diff:
    raise files.TreeMismatchError(
        f'{what} do not match {type(rule).__name__}: {diff.describe()}.', diff
    )


def get_agent_out_spec(
    action_spec: types.ActionSpec,
    flat_out_spec: types.Specs,
    model_out_spec: types.Specs,
) -> types.Specs:
  """Specs of all agent outputs: flat ones as given, model ones per action.

  For example, with A actions, flat {'logits': (A,), 'y': (Y,)} and model
  {'z': (Z,)}, the agent outputs {'logits': (A,), 'y': (Y,), 'z': (A, Z)}.

  Args:
    action_spec: the discrete action spec.
    flat_out_spec: specs of the per-state outputs.
    model_out_spec: specs of the per-action outputs (without the action axis).

  Returns:
    The specs of every output, per state.

  Raises:
    ValueError: if the two groups share a key.
  """
  shared = set(flat_out_spec).intersection(model_out_spec)
  if shared:
    raise ValueError(
        f'Output keys {sorted(shared)} appear both as flat outputs'
        f' {flat_out_spec} and as model outputs {model_out_spec}.'
    )
  num_actions = utils.get_num_actions_from_spec(action_spec)
  specs = dict(flat_out_spec)
  for key, spec in model_out_spec.items():
    specs[key] = ArraySpec((num_actions,) + tuple(spec.shape), spec.dtype)
  return specs


def taken_action_output(
    agent_out: types.AgentOuts, key: str, actions: chex.Array
) -> chex.Array:
  """`agent_out[key]` [T, B, A, ...] at `actions` [T, B]: [T, B, ...].

  Reads `agent_out[types.TAKEN][key]` where the network gave it (the same
  values, with the gradient at the taken actions alone), else looks the
  actions up, as the reference did.
  """
  taken = agent_out.get(types.TAKEN, {})
  if key in taken:
    chex.assert_shape(actions, taken[key].shape[: actions.ndim])
    return taken[key]
  return utils.batch_lookup(agent_out[key], actions)


class UpdateRule:
  """Base class of update rules. See the module docstring.

  Attributes:
    taken_action_outputs: per-action (model) outputs that `agent_loss` and
      `agent_loss_no_meta` read only at the taken actions; the learner
      differentiates them there alone, which gives the same gradient for
      less work. Empty by default (always safe).
    can_share_meta_inputs: whether the rule takes `share_meta_inputs`
      (compute what several meta-network inputs read alike once).
    has_meta_params: whether `unroll_meta_net` reads its meta-parameters.
      `Agent.learner_step` lets rules that do not (their `init_params` is a
      placeholder) take None or {} there, as the reference did.
  """

  taken_action_outputs: frozenset[str] = frozenset()
  can_share_meta_inputs: bool = False
  has_meta_params: bool = True

  def _get_dummy_input(
      self,
      include_behaviour_out: bool = True,
      include_value_out: bool = False,
      include_agent_adv: bool = False,
  ) -> types.UpdateRuleInputs:
    """A small all-zeros rollout (T=2, B=1, 4 actions) to initialise with."""
    t, b = 2, 1
    steps, steps_plus_one = (t, b), (t + 1, b)
    dummy_action_spec = dm_env_specs.BoundedArray(
        shape=(3,), dtype=int, minimum=0, maximum=3
    )
    num_actions = utils.get_num_actions_from_spec(dummy_action_spec)
    agent_out = jax.tree.map(
        lambda s: jnp.zeros(steps_plus_one + tuple(s.shape)),
        self.agent_output_spec(dummy_action_spec),
    )
    behaviour_agent_out = dict(agent_out) if include_behaviour_out else None
    extra_from_rule = dict(target_out=agent_out)
    if include_agent_adv:
      per_step = (t, b, 1)
      per_state = (t + 1, b, 1)
      per_action = (t + 1, b, num_actions, 1)
      extra_from_rule = dict(
          adv=jnp.zeros(per_step),
          normalized_adv=jnp.zeros(per_step),
          v_scalar=jnp.zeros(per_state),
          q=jnp.zeros(per_action),
          qv_adv=jnp.zeros(per_action),
          normalized_qv_adv=jnp.zeros(per_action),
          target_out=agent_out,
      )
    value_out = None
    if include_value_out:
      per_step = (t, b, 1)
      per_state = (t + 1, b, 1)
      q_shape = (t, b, num_actions, 1)
      q_plus_one = (t + 1, b, num_actions, 1)
      value_out = types.ValueOuts(
          value=jnp.ones(per_state),
          target_value=jnp.ones(per_state),
          rho=jnp.ones(steps),
          adv=jnp.ones(per_step),
          normalized_adv=jnp.ones(per_step),
          td=jnp.ones(per_step),
          normalized_td=jnp.ones(per_step),
          value_target=jnp.ones(per_step),
          qv_adv=jnp.ones(q_plus_one),
          normalized_qv_adv=jnp.ones(q_plus_one),
          q_target=jnp.ones(q_shape),
          q_value=jnp.ones(q_shape),
          target_q_value=jnp.ones(q_shape),
          q_td=jnp.ones(q_shape),
          normalized_q_td=jnp.ones(q_shape),
      )
    return types.UpdateRuleInputs(
        observations=jnp.zeros(steps_plus_one),
        actions=jnp.zeros(steps_plus_one, dtype=jnp.int32),
        rewards=jnp.zeros(steps),
        is_terminal=jnp.ones(steps, dtype=jnp.bool_),
        agent_out=agent_out,
        behaviour_agent_out=behaviour_agent_out,
        value_out=value_out,
        extra_from_rule=extra_from_rule,
    )

  def init_params(
      self, rng: chex.PRNGKey
  ) -> tuple[types.MetaParams, chex.ArrayTree]:
    """Initial meta-parameters and meta-network state."""
    raise NotImplementedError

  def meta_param_shapes(self) -> dict[str, tuple[int, ...]]:
    """Shapes of `init_params`' parameters by tree path (computed once)."""
    cached = getattr(self, '_meta_param_shapes', None)
    if cached is None:
      params, _ = jax.eval_shape(self.init_params, jax.random.key(0))
      cached = _shapes_by_path(params)
      self._meta_param_shapes = cached
    return cached

  def flat_output_spec(self, action_spec: types.ActionSpec) -> types.Specs:
    """Specs of the agent's per-state outputs (e.g. logits)."""
    del action_spec
    return dict()

  def model_output_spec(self, action_spec: types.ActionSpec) -> types.Specs:
    """Specs of the agent's per-action outputs, without the action axis."""
    del action_spec
    return dict()

  def agent_output_spec(self, action_spec: types.ActionSpec) -> types.Specs:
    """Specs of all the agent's outputs (see `get_agent_out_spec`)."""
    return get_agent_out_spec(
        action_spec=action_spec,
        flat_out_spec=self.flat_output_spec(action_spec),
        model_out_spec=self.model_output_spec(action_spec),
    )

  def init_meta_state(
      self,
      rng: chex.PRNGKey,
      params: types.AgentParams,
  ) -> types.MetaState:
    """The rule's state at the start of an agent's lifetime."""
    raise NotImplementedError

  def unroll_meta_net(
      self,
      meta_params: types.MetaParams,
      params: types.AgentParams,
      state: types.HaikuState,
      meta_state: types.MetaState,
      rollout: types.UpdateRuleInputs,
      hyper_params: types.HyperParams,
      unroll_policy_fn: types.AgentUnrollFn,
      rng: chex.PRNGKey,
      axis_name: str | None,
  ) -> tuple[types.UpdateRuleOuts, types.MetaState]:
    """Computes what the loss needs from a rollout.

    Args:
      meta_params: the rule's parameters.
      params: the agent's parameters.
      state: the agent network's state.
      meta_state: the rule's state.
      rollout: [T, B] transitions; `agent_out` and `actions` are [T+1, B].
      hyper_params: the rule's hyperparameters.
      unroll_policy_fn: the agent network's unroll function.
      rng: random key.
      axis_name: `pmap` axis for collective operations, if any.

    Returns:
      The rule's outputs [T, B, ...] and its next state.
    """
    raise NotImplementedError

  def agent_loss(
      self,
      rollout: types.UpdateRuleInputs,
      meta_out: types.UpdateRuleOuts,
      hyper_params: types.HyperParams,
      backprop: bool,
  ) -> tuple[chex.Array, types.UpdateRuleLog]:
    """Per-step loss [T, B] and logs.

    Args:
      rollout: the rollout with the agent's current outputs.
      meta_out: the outputs of `unroll_meta_net`.
      hyper_params: the rule's hyperparameters.
      backprop: let gradients reach `meta_out` (for meta-gradients).

    Returns:
      The per-step loss and scalar logs.
    """
    raise NotImplementedError

  def agent_loss_no_meta(
      self,
      rollout: types.UpdateRuleInputs,
      meta_out: types.UpdateRuleOuts | None,
      hyper_params: types.HyperParams,
  ) -> tuple[chex.Array, types.UpdateRuleLog]:
    """Per-step loss terms that never receive meta-gradients (default 0)."""
    del meta_out, hyper_params
    return jnp.zeros_like(rollout.rewards), {}

  def __call__(
      self,
      meta_params: types.MetaParams,
      params: types.AgentParams,
      state: types.HaikuState,
      rollout: types.UpdateRuleInputs,
      hyper_params: types.HyperParams,
      meta_state: types.MetaState,
      unroll_policy_fn: types.AgentUnrollFn,
      rng: chex.PRNGKey,
      axis_name: str | None,
      backprop: bool = False,
  ) -> tuple[chex.Array, types.MetaState, types.UpdateRuleLog]:
    """The whole rule in one call: (per-step loss, next meta_state, logs).

    Convenient for evaluation; meta-training needs the parts separately so
    that the agent's outputs can be recomputed inside the gradient.
    """
    meta_out, new_meta_state = self.unroll_meta_net(
        meta_params=meta_params,
        params=params,
        state=state,
        meta_state=meta_state,
        rollout=rollout,
        hyper_params=hyper_params,
        unroll_policy_fn=unroll_policy_fn,
        rng=rng,
        axis_name=axis_name,
    )
    loss, log = self.agent_loss(
        rollout, meta_out, hyper_params, backprop=backprop
    )
    loss_no_meta, log_no_meta = self.agent_loss_no_meta(
        rollout, meta_out, hyper_params
    )
    return loss + loss_no_meta, new_meta_state, log | log_no_meta
