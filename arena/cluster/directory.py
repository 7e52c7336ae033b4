"""Where each board is served now: by this node (its actor), by another node (the edges forward
to it), or by none (ownerless: frames wait for the next owner, queries answer 503 at once).

The node's ownership loop keeps it (`set` after each read of the owner rows, `renewed` after each
lease renewal); the edges only read it. A node answers for the boards it owns only while its last
lease renewal is younger than ``lease_seconds`` on its own monotonic clock: once that is older, another
node may have taken them over, so this node treats them as ownerless until it renews.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from arena.board.clock import wait_set


@dataclass(frozen=True, slots=True)
class Owner:
    """The node serving a board, reached by peers at ``url``, under its ownership ``epoch``."""

    node_id: str
    url: str
    epoch: int


class Directory:
    """Who serves each of ``boards``. ``node_id`` None: a single node (no ``[cluster]``), which
    serves every board itself, always."""

    def __init__(self, boards: Iterable[str], node_id: str | None = None, lease_seconds: float = 0.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.node_id = node_id
        self.lease_seconds = lease_seconds
        self._monotonic = monotonic
        self._owners: dict[str, Owner | None] = {board: None for board in boards}
        self._fresh_until = float("-inf")
        self._changed = asyncio.Event()

    @property
    def clustered(self) -> bool:
        return self.node_id is not None

    def renewed(self, sent_at: float) -> None:
        """The lease renewal sent at monotonic time ``sent_at`` committed: this node's lease is
        fresh until ``sent_at`` + ``lease_seconds`` (the database's expiry is later than that)."""
        self._fresh_until = max(self._fresh_until, sent_at + self.lease_seconds)
        self._wake()

    @property
    def lease_fresh(self) -> bool:
        return not self.clustered or self._monotonic() < self._fresh_until

    def set(self, board: str, owner: Owner | None) -> None:
        """The board's owner as the journal's tables now say (None: its owner's lease expired)."""
        if self._owners.get(board) != owner:
            self._owners[board] = owner
            self._wake()

    def owner(self, board: str) -> Owner | None:
        """The node answering for ``board`` now; None while it is ownerless, which includes the
        boards of this node while its lease is stale. Not meaningful for a single node."""
        owner = self._owners.get(board)
        if owner is not None and owner.node_id == self.node_id and not self.lease_fresh:
            return None
        return owner

    def local(self, board: str) -> bool:
        """Whether this node answers for ``board`` itself now."""
        if not self.clustered:
            return True
        owner = self.owner(board)
        return owner is not None and owner.node_id == self.node_id

    async def owner_within(self, board: str, seconds: float, *, not_node: str | None = None) -> Owner | None:
        """The board's owner once there is one other than ``not_node`` (a node that just failed to
        answer), waiting up to ``seconds``; None when none turned up in time."""
        deadline = self._monotonic() + seconds
        while True:
            owner = self.owner(board)
            if owner is not None and owner.node_id != not_node:
                return owner
            left = deadline - self._monotonic()
            if left <= 0:
                return None
            # a staleness that passes with no change is noticed within a tenth of a second
            await wait_set(self._changed, min(left, 0.1))

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
