"""Replay: store trajectories, draw them back, mix them into batches.

- `host`: the reference evaluation loop's buffer on the host
  (`SimpleReplayBuffer`, numpy; the faithful loop's parity).
- `ring`: the same first-in-first-out ring in pure JAX (`ReplayState`,
  `init_replay_state`, `add_to_replay`) and its one draw (`sample_grid`,
  across devices; the trainer's and discovery's).
- `batches`: learner batches of fresh and replayed trajectories.
- `sizes`: a buffer's capacity and the iterations before learning starts.

Frames stacked for the agent are stored once (`disco.frame_stack.pack`)
and stacked where a batch is read.
"""

# pylint: disable=g-importing-member,useless-import-alias
from disco.replay.batches import each_slot_drawn as each_slot_drawn
from disco.replay.batches import fresh_then_replayed as fresh_then_replayed
from disco.replay.batches import spread_fresh as spread_fresh
from disco.replay.batches import spread_fresh_slots as spread_fresh_slots
from disco.replay.batches import spread_replayed as spread_replayed
from disco.replay.host import SimpleReplayBuffer as SimpleReplayBuffer
from disco.replay.ring import ReplayState as ReplayState
from disco.replay.ring import add_to_replay as add_to_replay
from disco.replay.ring import init_replay_state as init_replay_state
from disco.replay.ring import sample_grid as sample_grid
from disco.replay.sizes import capacity_for as capacity_for
from disco.replay.sizes import capacity_of_run as capacity_of_run
from disco.replay.sizes import (
    iterations_before_learning as iterations_before_learning,
)
