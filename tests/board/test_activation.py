"""The pure rules of activation on demand (`arena.board.activation`): which boards to unload
(idle, then least recently used past the bound, never one with subscriptions), what a board
records when it is unloaded, and the close markers of an inactive board due at an instant."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from arena.board.activation import Unloaded, due_markers, to_unload
from arena.engine.board import BoardEngine
from arena.engine.events import Event
from arena.engine.periods import PeriodKind
from arena.engine.records import CloseRecord
from arena.engine.spec import BoardSpec

DAY = 86_400_000
NOW = 20_000 * DAY + 3_600_000  # 1h into a UTC day


def spec() -> BoardSpec:
    return BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY), close_grace_ms=60_000)


def test_idle_boards_go_and_the_least_recently_used_past_the_bound() -> None:
    used = {"a": 0.0, "b": 5.0, "c": 9.0, "d": 10.0}  # least recently used first
    assert to_unload(used, set(), 10.0, 8.0, 10) == [("a", "idle")]
    assert to_unload(used, set(), 10.0, 8.0, 2) == [("a", "idle"), ("b", "lru")]
    assert to_unload(used, {"a", "b"}, 10.0, 8.0, 2) == [("c", "lru"), ("d", "lru")]  # a subscription keeps it
    assert to_unload(used, set(), 10.0, 0, 3) == [("a", "lru")]  # 0: never idle, still bounded


@given(st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0, 100)), st.sets(st.sampled_from("abcdefgh")),
       st.floats(0, 50), st.integers(1, 8))
def test_unloading_against_an_oracle(used: dict[str, float], subscribed: set[str], idle: float, bound: int) -> None:
    order = dict(sorted(used.items(), key=lambda kv: kv[1]))
    chosen = to_unload(order, subscribed, 100.0, idle, bound)
    gone = [board for board, _ in chosen]
    assert len(gone) == len(set(gone)) and not set(gone) & subscribed
    idle_ones = {b for b, at in order.items() if b not in subscribed and idle > 0 and 100.0 - at >= idle}
    assert {b for b, why in chosen if why == "idle"} == idle_ones
    kept = [b for b in order if b not in gone]
    unsubscribed_kept = [b for b in kept if b not in subscribed]
    assert len(kept) <= bound or not unsubscribed_kept  # the bound holds unless subscriptions hold more
    lru = [b for b, why in chosen if why == "lru"]
    assert all(order[b] <= order[k] for b in lru for k in unsubscribed_kept)  # the least recently used go


def test_what_an_unloaded_board_records_and_its_due_close_markers() -> None:
    engine = BoardEngine(spec())
    plan = engine.decide([([Event("b", "m", 5, NOW - 1000, "k1")], NOW, "gs")], {}, NOW)
    engine.commit(plan)
    engine.publish(engine.last_seq, engine.kinds)
    unloaded = Unloaded.of(engine, NOW)
    assert unloaded.seq == 1
    assert [(w.kind, size) for w, size in unloaded.sizes] == [(PeriodKind.ALLTIME, 1), (PeriodKind.DAILY, 1)]
    today = engine.schedule.window_at(PeriodKind.DAILY, NOW)
    close = (today.end_ms or 0) + 60_000
    assert unloaded.closing == ((close, today),) and unloaded.next_close == close
    assert due_markers(unloaded, 7, close - 1) == []
    markers = due_markers(unloaded, 7, close)
    assert markers == [CloseRecord(8, today, close)]
    after = unloaded.closed(markers, 8)
    assert after.seq == 8 and after.closing == () and after.next_close is None and after.sizes == unloaded.sizes


def test_what_a_board_not_loaded_since_the_start_records_from_its_journal() -> None:
    """The same close moments as an actor loaded at the start would hold: the current window of
    each kind and the one before while in its grace, less those the journal's markers close."""
    engine = BoardEngine(spec())
    today = engine.schedule.window_at(PeriodKind.DAILY, NOW)
    yesterday = engine.schedule.previous(today)
    in_grace = (today.start_ms or 0) + 30_000
    at_start = Unloaded.at_start(spec(), 4, [], True, in_grace)
    assert at_start.seq == 4 and at_start.sizes == ()
    assert at_start.closing == (((yesterday.end_ms or 0) + 60_000, yesterday), ((today.end_ms or 0) + 60_000, today))
    closed = Unloaded.at_start(spec(), 4, [CloseRecord(3, yesterday, in_grace - 1)], True, in_grace)
    assert closed.closing == (((today.end_ms or 0) + 60_000, today),)
    assert Unloaded.at_start(spec(), 4, [], True, NOW).closing == (((today.end_ms or 0) + 60_000, today),)
    assert Unloaded.at_start(spec(), 4, [], False, NOW).closing == ()  # retired, or its definition not journaled yet
