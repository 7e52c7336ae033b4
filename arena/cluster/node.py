"""A cluster node's own life, as its process knows it: one state, moved only along `MOVES`.

    starting ──> joining ──> serving ──> leaving
        │           │  <──────┘            ^
        └───────────┴──────────────────────┘

The states but ``starting`` are also what its lease row says (``node_lease.state``,
`arena.cluster.membership.NodeRow.state`), for the other nodes to read:
- ``starting``: the process has not renewed its lease yet (not stored);
- ``joining``: a process's lease starts so: it follows the boards placed on it as a standby, and
  their owners keep them until it is ``serving`` (caught up), then hand them off;
- ``serving``: placement spreads the boards over it, and their owners hand them to it;
- ``leaving``: it hands its boards off (SIGTERM): no placement names it, though it still holds them.
A serving node whose lease row was made again (another process of its node id held the lease
meanwhile) joins again.
"""

from __future__ import annotations

import enum

from arena.errors import IllegalTransition


class NodeState(enum.Enum):
    STARTING = "starting"
    JOINING = "joining"
    SERVING = "serving"
    LEAVING = "leaving"


MOVES: dict[NodeState, frozenset[NodeState]] = {
    NodeState.STARTING: frozenset({NodeState.JOINING, NodeState.LEAVING}),
    NodeState.JOINING: frozenset({NodeState.SERVING, NodeState.LEAVING}),
    NodeState.SERVING: frozenset({NodeState.JOINING, NodeState.LEAVING}),
    NodeState.LEAVING: frozenset(),
}
"""The moves allowed from each state: the one table of a node's life."""


class IllegalMove(IllegalTransition):
    """A move `MOVES` does not allow (a bug, not a fault of the store): the state is unchanged."""

    def __init__(self, state: NodeState, to: NodeState) -> None:
        super().__init__(f"a node cannot move from {state.value} to {to.value}")
        self.state = state
        self.to = to


class NodeLife:
    """This process's `NodeState`, ``starting`` at first."""

    def __init__(self) -> None:
        self._state = NodeState.STARTING

    @property
    def state(self) -> NodeState:
        return self._state

    def move(self, to: NodeState) -> None:
        """Move to ``to``. Raises IllegalMove (the state is then unchanged)."""
        if to not in MOVES[self._state]:
            raise IllegalMove(self._state, to)
        self._state = to
