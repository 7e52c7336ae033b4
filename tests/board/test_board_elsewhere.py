"""A board this node does not answer for (in a cluster: served elsewhere, or its lease here is
stale): its queries raise `unavailable` (503), its submits are answered `unavailable`, never queued."""

from __future__ import annotations

import pytest

from arena.board.actor import BoardHandle, BoardState
from arena.board.load import load
from arena.engine.board import BoardEngine
from arena.engine.events import Event, Reason, Status
from arena.engine.periods import PeriodKind
from arena.engine.spec import BoardSpec
from arena.errors import QueryError
from arena.metrics import Metrics
from support.memory_journal import MemoryJournal


async def loaded_handle() -> BoardHandle:
    handle = BoardHandle(BoardSpec("b"), 100, Metrics())
    handle.engine = BoardEngine(handle.spec)
    await load(handle.engine, MemoryJournal(), 0)
    handle.state = BoardState.READY
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
    handle.elsewhere()
    assert handle.engine is None and handle.state is BoardState.ELSEWHERE
    assert_not_answered_here(handle)


async def test_a_board_whose_node_lease_is_stale_answers_unavailable_from_loaded_tables() -> None:
    handle = await loaded_handle()
    handle.here = lambda: False  # Directory.local: the lease is lease_seconds old on this node's clock
    assert_not_answered_here(handle)
    handle.here = lambda: True
    handle.view(PeriodKind.ALLTIME, None, 0)
