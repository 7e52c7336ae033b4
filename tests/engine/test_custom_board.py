"""A board with custom periods in the engine: rule 7 (`outside_window`, then `period_closed` over
the windows that hold the instant), close at end + grace, the current window of a route without
``period_id``, retention of every_days windows, and yearly tables."""

from __future__ import annotations

import pytest

from arena.config import parse_board
from arena.engine.events import Reason, Status
from arena.engine.periods import PeriodKind
from arena.engine.records import CloseRecord
from arena.engine.times import parse_rfc3339_ms
from arena.errors import QueryError
from support.engine_harness import EngineHarness

MIN = 60_000
START = parse_rfc3339_ms("2026-12-12T17:00:00Z")
END = parse_rfc3339_ms("2026-12-13T17:00:00Z")
CUP = {"finals": {"start": "2026-12-12T18:00:00+01:00", "end": "2026-12-13T18:00:00+01:00"}}


def harness() -> EngineHarness:
    return EngineHarness({
        "cup": parse_board("cup", {"periods": [], "custom_periods": CUP}),
        "mixed": parse_board("mixed", {"periods": ["alltime", "yearly"], "custom_periods": CUP}),
        "season": parse_board("season", {"periods": [], "keep_closed": 2, "timezone": "Europe/Berlin",
                                         "custom_periods": {"s": {"every_days": 7, "anchor": "2026-11-02"}}}),
    })


def submit(h: EngineHarness, board: str, occurred_at: int, now: int, key: str, member: str = "m", value: int = 5) -> str:
    (result,) = h.submit("gs", [{"board": board, "member": member, "value": value, "occurred_at": occurred_at,
                                 "idempotency_key": key}], now)
    if result.status is Status.REJECTED:
        assert result.reason is not None and result.message
        return result.reason.value
    return result.status.value


def test_a_tournament_takes_events_in_its_window_only() -> None:
    h = harness()
    assert submit(h, "cup", START - 1, START - 1, "early") == Reason.OUTSIDE_WINDOW
    assert submit(h, "cup", START, START, "first") == "accepted"
    assert submit(h, "cup", END - 1, END - 1, "last") == "accepted"
    assert submit(h, "cup", END, END, "late") == Reason.OUTSIDE_WINDOW
    (result,) = h.submit("gs", [{"board": "cup", "member": "m", "value": 1, "occurred_at": END, "idempotency_key": "x"}], END)
    assert result.message is not None and "occurred_at: no period of board 'cup' has a window containing" in result.message
    assert list(h.engines["cup"].tables) == [("finals", "2026-12-12T17Z")]


def test_after_end_plus_grace_the_window_is_closed_not_outside() -> None:
    h = harness()
    assert submit(h, "cup", END - 1, END + 59_999, "in-grace") == "accepted"
    assert submit(h, "cup", END - 1, END + MIN, "after-grace") == Reason.PERIOD_CLOSED
    markers = [r for r in h.journals["cup"] if isinstance(r, CloseRecord)]
    assert [(m.window.kind, m.window.period_id, m.closed_at) for m in markers] == [("finals", "2026-12-12T17Z", END + MIN)]


def test_outside_a_tournament_a_board_with_other_periods_takes_the_event_there() -> None:
    h = harness()
    assert submit(h, "mixed", START - MIN, START, "before") == "accepted"
    assert sorted(h.engines["mixed"].tables) == [(PeriodKind.ALLTIME, "alltime"), (PeriodKind.YEARLY, "2026")]
    assert submit(h, "mixed", START + MIN, START + MIN, "during") == "accepted"
    assert ("finals", "2026-12-12T17Z") in h.engines["mixed"].tables


def test_a_route_without_period_id_names_the_next_window_then_the_last() -> None:
    h = harness()
    engine = h.engines["cup"]
    before = engine.view("finals", None, START - MIN)
    assert (before.window.period_id, len(before), before.closed) == ("2026-12-12T17Z", 0, False)
    assert engine.view("finals", "2026-12-12T17Z", START - MIN).window == before.window  # the id it shows
    submit(h, "cup", START, START, "k1")
    h.tick("cup", END + MIN)
    after = engine.view("finals", None, END + 10 * MIN)
    assert (after.window.period_id, len(after), after.closed) == ("2026-12-12T17Z", 1, True)
    assert [t.window.period_id for t in engine.listed_tables("finals", END + 10 * MIN)] == ["2026-12-12T17Z"]
    with pytest.raises(QueryError) as info:
        engine.view("finals", "2026-12-13T17Z", END)
    assert info.value.code == "unknown_period"


def test_the_actor_wakes_at_a_tournament_start_and_at_its_close() -> None:
    h = harness()
    engine = h.engines["cup"]
    assert engine.next_deadline(START - MIN) == START
    h.tick("cup", START)
    assert ("finals", "2026-12-12T17Z") in engine.tables
    assert engine.next_deadline(START) == END
    assert engine.next_deadline(END) == END + MIN  # the open table's close moment


def test_every_days_windows_close_and_retire_like_built_in_ones() -> None:
    h = harness()
    engine = h.engines["season"]
    week = 7 * 86_400_000
    first = parse_rfc3339_ms("2026-11-01T23:00:00Z")  # local midnight of the anchor in Berlin (UTC+1)
    assert submit(h, "season", first - 1, first, "before") == Reason.OUTSIDE_WINDOW
    for i in range(5):
        assert submit(h, "season", first + i * week, first + i * week, f"k{i}", member=f"m{i}") == "accepted"
    now = first + 4 * week + MIN
    h.tick("season", now)
    listed = [(t.window.period_id, t.closed, len(t)) for t in engine.listed_tables("s", now)]
    assert listed == [("2026-11-30", False, 1), ("2026-11-23", True, 1), ("2026-11-16", True, 1)]
    with pytest.raises(QueryError) as info:
        engine.view("s", "2026-11-09", now)
    assert info.value.code == "period_not_retained"
    assert [key for key in engine.tables] == [("s", "2026-11-16"), ("s", "2026-11-23"), ("s", "2026-11-30")]
