"""The node's webhook deliverer wired to its boards: which boards it delivers (those this node
owns) and each delivery's body."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping

import orjson

from arena.api import wire
from arena.board.actor import BoardHandle
from arena.board.state import BoardState, BoardStates
from arena.delivery.outbox import PAGE_AWARDS, Delivery
from arena.engine import settlement as settlements
from arena.engine.periods import period_name

_DELIVERING = (BoardState.SERVING, BoardState.INACTIVE)
"""A board in these states whose owner is this node has its deliveries sent from here (an inactive
one is activated for its body)."""


class ServedBoards:
    """`arena.delivery.deliverer.DeliveryBoards` over this node's boards (``activated``: wait
until a dormant board is loaded, `Arena.activated`)."""

    def __init__(self, boards: Mapping[str, BoardHandle], states: BoardStates,
                 activated: Callable[[str], Awaitable[None]]) -> None:
        self.boards = boards
        self.states = states
        self.activated = activated

    def delivered_here(self) -> list[str]:
        """O(boards)."""
        return [board for board in self.boards if self.states.state(board) in _DELIVERING and self.states.local(board)]

    async def body(self, delivery: Delivery) -> bytes | None:
        """The settlement answer of the delivery's revision with the awards of its page, made from
        the journaled revision alone: the same bytes at every attempt, on any owner."""
        d = delivery
        await self.activated(d.board)
        handle = self.boards.get(d.board)
        engine = handle.engine if handle is not None else None
        if engine is None or not self.states.answering(d.board):
            return None
        revisions = engine.settlements.get((period_name(d.period), d.period_id), [])
        record = next((r for r in revisions if r.settlement.revision == d.revision and r.partition == d.partition), None)
        if record is None:
            raise LookupError(f"board {d.board!r} has no settlement revision {d.revision} of {d.period} {d.period_id}")
        fields = {**wire.window_fields(d.board, record.window, record.size, True), "seq": record.seq}
        answer = settlements.body(fields, record.settlement, PAGE_AWARDS, d.offset)
        if d.page is not None:
            answer["page"] = d.page
        return orjson.dumps(answer)


def wall_ms() -> int:
    """Deliveries are timed by the wall clock, not the server's clock (pinned in tests): their
    retries wait real seconds."""
    return time.time_ns() // 1_000_000
