"""The directory alone: who answers for a board, and the lease's freshness on a fake monotonic clock."""

from __future__ import annotations

import asyncio

from arena.board.state import BoardStates
from arena.cluster.directory import Directory, Owner

A = Owner("a", "http://a", 1)
B = Owner("b", "http://b", 2)


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_single_node_serves_every_board_itself() -> None:
    directory = Directory(BoardStates(["x"]))
    assert directory.local("x") and directory.lease_fresh


def test_a_node_answers_for_its_boards_only_while_its_lease_is_fresh() -> None:
    ticks = Ticks()
    directory = Directory(BoardStates(["x", "y"], node_id="a", lease_seconds=3, monotonic=ticks))
    directory.set("x", A)
    directory.set("y", B)
    assert not directory.local("x")  # never renewed yet
    directory.renewed(ticks.now)
    assert directory.local("x") and directory.owner("x") == A
    assert not directory.local("y") and directory.owner("y") == B
    ticks.now += 3
    assert not directory.local("x") and directory.owner("x") is None
    assert directory.owner("y") == B  # another node's lease is judged by the database's clock


async def test_owner_within_waits_for_the_next_owner() -> None:
    directory = Directory(BoardStates(["x"], node_id="a", lease_seconds=3))
    directory.set("x", B)
    assert await directory.owner_within("x", 0.01, not_node="b") is None
    waiting = asyncio.create_task(directory.owner_within("x", 5, not_node="b"))
    await asyncio.sleep(0)  # one turn: it is waiting, and the owner changes then
    directory.set("x", Owner("c", "http://c", 3))
    async with asyncio.timeout(5):
        assert await waiting == Owner("c", "http://c", 3)
