"""Where each board is served now: by this node (its actor), by another node (the edges forward
to it), or by none (ownerless: frames wait for the next owner, queries answer 503 at once).

The answer is read from the node's `BoardStates` (`arena.board.state`): the board's owner as the
last read of the owner rows said, and this node's lease freshness. The node's ownership loop
tells it (`set` after each read of the owner rows, `renewed` after each lease renewal); the edges
only read it, and may wait for an owner to turn up (`owner_within`).
"""

from __future__ import annotations

import asyncio

from arena.board.clock import wait_set
from arena.board.state import BoardStates, Owner

__all__ = ["Directory", "Owner"]


class Directory:
    """Who serves each board of ``states``: a single node (no ``[cluster]``) serves every board
    itself, always."""

    def __init__(self, states: BoardStates) -> None:
        self.states = states
        self.nodes: dict[str, str] = {}
        """The cluster's live nodes (node id -> advertised URL), this one included, as the last
        read of the leases said (`seen_nodes`); empty on a single node."""
        self._changed = asyncio.Event()

    @property
    def node_id(self) -> str | None:
        return self.states.node_id

    def renewed(self, sent_at: float) -> None:
        """The lease renewal sent at monotonic time ``sent_at`` committed (`BoardStates.renewed`)."""
        self.states.renewed(sent_at)
        self._wake()

    def seen_nodes(self, nodes: dict[str, str]) -> None:
        """The live nodes as the journal's tables now say."""
        self.nodes = nodes

    def set(self, board: str, owner: Owner | None, *, released: bool = False) -> None:
        """The board's owner as the journal's tables now say (None: its owner's lease expired,
        or with ``released`` its owner handed it off: `BoardStates.handed_over`)."""
        if self.states.seen(board, owner, released=released):
            self._wake()

    async def owner_within(self, board: str, seconds: float, *, not_node: str | None = None) -> Owner | None:
        """The board's owner once there is one other than ``not_node`` (a node that just failed to
        answer), waiting up to ``seconds``; None when none turned up in time."""
        monotonic = self.states.monotonic
        deadline = monotonic() + seconds
        while True:
            owner = self.states.owner_of(board)
            if owner is not None and owner.node_id != not_node:
                return owner
            left = deadline - monotonic()
            if left <= 0:
                return None
            # a staleness that passes with no change is noticed within a tenth of a second
            await wait_set(self._changed, min(left, 0.1))

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
