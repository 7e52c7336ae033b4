"""A board's engine is freed by reference counting alone: it makes no reference cycle (its router
reads its markers, not a method of it). An unloaded board's tables then go at once; in a cycle
they waited for the next full collection, and 10,000 boards loaded once each in `arena serve`
kept about 3 KB each of such garbage (docs/performance.md, "Many boards")."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from arena.config import parse_board
from arena.engine.board import BoardEngine
from arena.engine.periods import PeriodKind
from arena.engine.records import CloseRecord
from support.prized import DAY, MIN, W1

SPEC = parse_board("b", {"aggregation": "sum", "periods": ["alltime", "daily"], "keep_closed": 7})


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_an_engine_with_tables_and_markers_is_freed_without_the_cyclic_collector(no_collector: None) -> None:
    engine = BoardEngine(SPEC, 10)
    day = engine.schedule.window_at(PeriodKind.DAILY, W1)
    engine._table(day)
    engine.close(CloseRecord(1, day, (day.end_ms or 0) + MIN))
    engine._table(engine.schedule.window_at(PeriodKind.DAILY, W1 + DAY))
    assert engine.router.route(W1).legs  # the router has read the markers
    freed = weakref.ref(engine)
    del engine
    assert freed() is None
