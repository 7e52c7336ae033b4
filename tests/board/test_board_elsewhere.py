"""A board this node does not answer for (in a cluster: served elsewhere, or its lease here is
stale): its queries raise `unavailable` (503), its submits are answered `unavailable`, never queued."""

from __future__ import annotations

import pytest

from arena.board.actor import BoardHandle
from arena.board.load import load
from arena.board.state import BoardEvent, BoardState, BoardStates, Owner
from arena.engine.board import BoardEngine
from arena.engine.events import Event, Reason, Status
from arena.engine.periods import PeriodKind
from arena.engine.spec import BoardSpec
from arena.errors import QueryError
from arena.metrics import Metrics
from support.memory_journal import MemoryJournal


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def loaded_handle(states: BoardStates | None = None) -> BoardHandle:
    """A board served here (on a single node, unless ``states`` say a cluster node's)."""
    handle = BoardHandle(BoardSpec("b"), 100, Metrics(), states)
    handle.engine = BoardEngine(handle.spec)
    await load(handle.engine, MemoryJournal(), 0)
    if handle.states.clustered:
        handle.move(BoardEvent.TAKE)
        handle.move(BoardEvent.GRANTED)
    handle.move(BoardEvent.START)
    handle.move(BoardEvent.LOADED)
    return handle


def assert_not_answered_here(handle: BoardHandle) -> None:
    with pytest.raises(QueryError) as raised:
        handle.view(PeriodKind.ALLTIME, None, 0)
    assert (raised.value.code, raised.value.status) == ("unavailable", 503)
    answer = handle.submit([Event("b", "m", 1, 0, "k")], 0, "gs")
    assert [(r.status, r.reason) for r in answer.result()] == [(Status.REJECTED, Reason.UNAVAILABLE)]
    assert handle.mailbox.depth == 0


async def test_a_board_served_elsewhere_answers_unavailable_and_drops_its_tables() -> None:
    handle = await loaded_handle()
    handle.view(PeriodKind.ALLTIME, None, 0)
    handle.move(BoardEvent.DISOWN)
    handle.elsewhere(BoardEvent.STOPPED)
    assert handle.engine is None and handle.state is BoardState.ELSEWHERE
    assert_not_answered_here(handle)


async def test_a_board_whose_node_lease_is_stale_answers_unavailable_from_loaded_tables() -> None:
    ticks = Ticks()
    states = BoardStates(["b"], node_id="n1", lease_seconds=3, monotonic=ticks)
    handle = await loaded_handle(states)
    states.seen("b", Owner("n1", "http://n1", 1))
    states.renewed(ticks.now)
    handle.view(PeriodKind.ALLTIME, None, 0)
    ticks.now += 3  # the lease is lease_seconds old on this node's clock
    assert_not_answered_here(handle)
    states.renewed(ticks.now)
    handle.view(PeriodKind.ALLTIME, None, 0)
