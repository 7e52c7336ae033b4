"""`BoardEngine.missed_closes`: the close markers of the retained windows with prizes that no
table and no marker closes, within the board's life (from its earliest closed window), each at
its close moment, in that order; none for a board that never closed a table. Pure."""

from __future__ import annotations

from arena.config import parse_board
from arena.engine.board import BoardEngine
from arena.engine.periods import PeriodKind
from arena.engine.records import CloseRecord
from support.prized import DAY, MIN, W1

SPEC = parse_board("b", {"aggregation": "sum", "periods": ["alltime", "daily", "weekly"], "keep_closed": 7,
                         "close_grace_seconds": 60, "prizes": {"daily": [{"reward": "r", "ranks": [1, 1]}]}})


def engine_with(*closed_days: int, last_seq: int = 10) -> BoardEngine:
    engine = BoardEngine(SPEC, last_seq)
    for seq, day in enumerate(closed_days, 1):
        window = engine.schedule.window_at(PeriodKind.DAILY, W1 + day * DAY)
        engine.close(CloseRecord(seq, window, (window.end_ms or 0) + MIN))
    return engine


def test_a_board_that_never_closed_a_table_misses_nothing() -> None:
    assert engine_with().missed_closes(W1 + 9 * DAY) == []


def test_the_retained_days_after_the_first_close_with_no_table_or_marker_close_at_their_moments() -> None:
    engine = engine_with(0, 2)  # 01-04 and 01-06 closed; now 01-09 01:00: 01-02 .. 01-08 retained
    engine._table(engine.schedule.window_at(PeriodKind.DAILY, W1 + 4 * DAY))  # 01-08 has a table: it closes itself
    missed = engine.missed_closes(W1 + 5 * DAY + 60 * MIN)
    assert [(m.seq, m.window.period_id, m.closed_at) for m in missed] == [
        (11, "2027-01-05", W1 + 2 * DAY + MIN), (12, "2027-01-07", W1 + 4 * DAY + MIN)]
    for marker in missed:
        engine.close(marker)
    assert set(engine.unsettled) == {("daily", "2027-01-04"), ("daily", "2027-01-05"), ("daily", "2027-01-06"),
                                     ("daily", "2027-01-07")}  # they settle as any closed table (weekly has no prizes)
    assert engine.missed_closes(W1 + 5 * DAY + 60 * MIN) == []


def test_a_day_still_in_its_grace_is_not_missed() -> None:
    engine = engine_with(0)
    assert engine.missed_closes(W1 + 2 * DAY + 30_000) == []  # 01-05 closes at 01-06 00:01
    assert [m.window.period_id for m in engine.missed_closes(W1 + 2 * DAY + MIN)] == ["2027-01-05"]
