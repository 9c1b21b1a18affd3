"""The update rules' names, as configs and command lines spell them.

A module below everything that chooses a rule (configs, the learner, the
checkpoints), so that none of them imports another run kind's config.
"""

DISCO = 'disco'
ACTOR_CRITIC = 'actor_critic'
POLICY_GRADIENT = 'policy_gradient'
# Every rule a run can name: the meta-learned one, then the baselines.
RULES = (DISCO, ACTOR_CRITIC, POLICY_GRADIENT)
