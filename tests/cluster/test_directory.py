"""The directory alone: waiting for a board's next owner (who answers for a board now is
`BoardStates`', tests/board/test_state.py)."""

from __future__ import annotations

import asyncio

from arena.board.state import BoardStates
from arena.cluster.directory import Directory, Owner

A = Owner("a", "http://a", 1)
B = Owner("b", "http://b", 2)


async def test_owner_within_waits_for_the_next_owner() -> None:
    directory = Directory(BoardStates(["x"], node_id="a", lease_seconds=3))
    directory.set("x", B)
    assert await directory.owner_within("x", 0.01, not_node="b") is None
    waiting = asyncio.create_task(directory.owner_within("x", 5, not_node="b"))
    await asyncio.sleep(0)  # one turn: it is waiting, and the owner changes then
    directory.set("x", Owner("c", "http://c", 3))
    async with asyncio.timeout(5):
        assert await waiting == Owner("c", "http://c", 3)
