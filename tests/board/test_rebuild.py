"""Rebuild from the journal equals the live tables, digest for digest (arena.board.load.load).

The live side is EngineHarness (the actor's steps, clock injected); its journaled records go to
a MemoryJournal or a real journal (sqlite and PostgreSQL: support.journals), and a fresh
BoardEngine replays them. Both sides are also checked against the from-scratch oracle of
support/oracle.py.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.board.load import LoadReport, load
from arena.cli.rebuild import rebuild_board
from arena.config import Config, ServerSettings
from arena.engine.board import BoardEngine
from arena.engine.events import Event, Fingerprint, parse_event
from arena.engine.periods import PeriodKind
from arena.engine.records import CloseRecord, Record, VoidRecord
from arena.engine.routing import Plan
from arena.engine.scoring import Aggregation, Order, Tie
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.engine.times import parse_rfc3339_ms
from arena.errors import BoardDefinitionChanged
from arena.journal import Journal
from loadtest.config_toml import write_config
from support.engine_harness import EngineHarness
from support.journals import BackendKind, Store, journal_store, stored_property, write_journal
from support.memory_journal import MemoryJournal
from support.oracle import (
    Frame,
    OBoard,
    OEvent,
    Oracle,
    boards_and_frames,
    check_engine,
    drive,
    engine_rows,
    rank,
    spec_of,
)

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STORED_PROPERTY = stored_property(40)
MIN = 60_000
HOUR = 3_600_000


def ms(text: str) -> int:
    return parse_rfc3339_ms(text)


def ev(member: str, value: int, occurred_at: int | str, key: str, board: str = "b") -> dict[str, Any]:
    return {"board": board, "member": member, "value": value, "occurred_at": occurred_at, "idempotency_key": key}


async def replay_from(journal: Journal, spec: BoardSpec, now: int, **kw: Any) -> tuple[BoardEngine, LoadReport]:
    engine = BoardEngine(spec)
    report = await load(engine, journal, now, **kw)
    return engine, report


def replay_memory(spec: BoardSpec, records: Sequence[Record], now: int, **kw: Any) -> BoardEngine:
    async def run() -> BoardEngine:
        journal = MemoryJournal()
        await journal.append(list(records))
        return (await replay_from(journal, spec, now, **kw))[0]

    return asyncio.run(run())


async def replay_journal(store: Store, spec: BoardSpec, now: int, **kw: Any) -> tuple[BoardEngine, LoadReport]:
    """Replay a stored journal as `arena rebuild` does (read-only)."""
    journal = await store.open(spec, readonly=True)
    try:
        return await replay_from(journal, spec, now, **kw)
    finally:
        await journal.close()


def digests(engine: BoardEngine) -> dict[tuple[str, str], str]:
    return {key: t.digest() for key, t in engine.tables.items()}


def assert_same_as_live(rebuilt: BoardEngine, live: BoardEngine, *, everything: bool = False) -> None:
    """Every rebuilt table equals its live twin (digest, close marker). Extra ones are empty, or
    with ``everything`` closed tables the live engine has retired already."""
    for key, table in rebuilt.tables.items():
        twin = live.tables.get(key)
        if twin is None:
            assert len(table) == 0 or (everything and table.closed), key
            continue
        assert table.digest() == twin.digest(), key
        assert (table.closed_seq, table.closed_at) == (twin.closed_seq, twin.closed_at), key
    assert rebuilt.markers == live.markers
    assert rebuilt.last_seq == live.last_seq


# -- properties ----------------------------------------------------------------------------------


@PROPERTY
@given(boards_and_frames())
def test_rebuild_from_a_memory_journal_equals_the_live_tables(case: tuple[OBoard, list[Frame]]) -> None:
    board, frames = case
    harness, oracle = drive(board, frames)
    live = harness.engines["b"]
    now = frames[-1].now
    rebuilt = replay_memory(live.spec, harness.journals["b"], now)
    assert_same_as_live(rebuilt, live)
    check_engine(rebuilt, oracle, now, rotated_at=now)
    every = replay_memory(live.spec, harness.journals["b"], now, everything=True)
    assert_same_as_live(every, live, everything=True)
    check_engine(every, oracle, now, rotated_at=None, everything=True)


@PROPERTY
@given(boards_and_frames(), st.data())
def test_a_restart_between_any_two_frames_changes_no_ack_and_no_table(
    case: tuple[OBoard, list[Frame]], data: st.DataObject
) -> None:
    """Run the frames, restarting (replay into a fresh engine) at a random point on the way."""
    board, frames = case
    cut = data.draw(st.integers(0, len(frames)), label="cut")
    spec = spec_of(board)
    harness = EngineHarness({"b": spec})
    oracle = Oracle(board)
    rotated: list[int] = []

    def run(part: list[Frame]) -> None:
        for frame in part:
            if frame.tick:
                harness.tick("b", frame.now)
                oracle.submit([], frame.now)
                rotated.append(frame.now)
            else:
                got = [(r.status.value, r.reason and r.reason.value)
                       for r in harness.submit("gs", [e.raw("b") for e in frame.events], frame.now)]
                assert got == oracle.submit(list(frame.events), frame.now)

    run(frames[:cut])
    earliest = frames[cut - 1].now if cut else frames[0].now - HOUR
    latest = frames[cut].now if cut < len(frames) else earliest + 4 * HOUR
    restart = data.draw(st.integers(earliest, latest), label="restart at")
    harness.engines["b"] = replay_memory(spec, harness.journals["b"], restart)
    harness.tick("b", restart)  # what the actor's loop does first if a deadline passed meanwhile
    oracle.submit([], restart)
    rotated.append(restart)
    run(frames[cut:])
    check_engine(harness.engines["b"], oracle, max(restart, frames[-1].now), rotated_at=max(rotated))


@PROPERTY
@given(boards_and_frames(), st.integers(1, 4))
def test_deciding_a_batch_before_the_one_ahead_is_committed_changes_nothing(
    case: tuple[OBoard, list[Frame]], step: int
) -> None:
    """The actor decides batch N+1 while batch N is being journaled (N is in flight), then
    commits N in steps of ``step`` records, answering queries in between: records and final
    tables must be those of one batch at a time, and at every pause the tables must be a
    rebuild of the journal up to ``last_seq``."""
    board, frames = case
    serial, _ = drive(board, frames)
    spec = spec_of(board)
    engine = BoardEngine(spec)
    engine.publish(0, engine.kinds)
    known: dict[str, Fingerprint] = {}
    journal: list[Record] = []
    ahead: Plan | None = None

    def land(plan: Plan | None, now: int) -> None:
        if plan is None:
            return
        for _ in engine.commit_steps(plan, step):
            done = [r for r in plan.records if r.seq <= engine.last_seq]
            assert_same_as_live(replay_memory(spec, journal + done, now), engine)
        journal.extend(plan.records)
        known.update(plan.seen)

    for frame in frames:
        parsed = [parse_event(e.raw("b"), {"b": spec}, lambda _b: True) for e in frame.events]
        events = [e for e in parsed if isinstance(e, Event)]
        plan = engine.decide([(events, frame.now, "gs")] if not frame.tick else [], known, frame.now)
        land(ahead, frame.now)
        ahead = plan
        if frame.tick:
            land(ahead, frame.now)
            ahead = None
            engine.rotate(frame.now)
    land(ahead, frames[-1].now)
    assert journal == serial.journals["b"]
    assert_same_as_live(engine, serial.engines["b"])
    assert engine.tables.keys() == serial.engines["b"].tables.keys()


@STORED_PROPERTY
@given(boards_and_frames(), st.data())
def test_rebuild_from_a_stored_journal_equals_the_live_tables(
    backend_kind: BackendKind, case: tuple[OBoard, list[Frame]], data: st.DataObject
) -> None:
    """On sqlite and on PostgreSQL: the same digests as the live tables and the memory replay."""
    board, frames = case
    harness, oracle = drive(board, frames)
    live = harness.engines["b"]
    now = frames[-1].now
    records = harness.journals["b"]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(records)), max_size=4), label="transaction cuts"))
    bounds = [0, *cuts, len(records)]
    batches = [records[a:b] for a, b in itertools.pairwise(bounds) if b > a]

    async def run() -> tuple[BoardEngine, BoardEngine]:
        async with journal_store(*backend_kind) as store:
            await write_journal(store, live.spec, batches)
            rebuilt, _ = await replay_journal(store, live.spec, now)
            every, _ = await replay_journal(store, live.spec, now, everything=True)
            return rebuilt, every

    rebuilt, every = asyncio.run(run())
    assert_same_as_live(rebuilt, live)
    assert digests(rebuilt) == digests(replay_memory(live.spec, records, now))
    check_engine(rebuilt, oracle, now, rotated_at=now)
    assert_same_as_live(every, live, everything=True)
    check_engine(every, oracle, now, rotated_at=None, everything=True)


@PROPERTY
@given(boards_and_frames(), st.data())
def test_voids_live_and_on_rebuild_equal_the_oracle_without_the_voided_events(
    case: tuple[OBoard, list[Frame]], data: st.DataObject
) -> None:
    """BoardActor._void's engine step (BoardEngine.void) on the live engine, against
    a replay of the journal with the void records, against the oracle minus the voided keys."""
    board, frames = case
    harness, oracle = drive(board, frames)
    live = harness.engines["b"]
    accepted = harness.score_records("b")
    chosen = data.draw(st.lists(st.sampled_from(accepted), unique_by=lambda r: r.seq, max_size=6) if accepted
                       else st.just([]), label="voided")
    now = frames[-1].now
    journal = MemoryJournal()

    async def run() -> None:
        await journal.append(harness.journals["b"])
        for target in chosen:
            await void(live, journal, target.event.idempotency_key, now)

    asyncio.run(run())
    without = frozenset(r.event.idempotency_key for r in chosen)
    last_tick = max((f.now for f in frames if f.tick), default=None)
    check_engine(live, oracle, now, rotated_at=last_tick, without=without)
    rebuilt = replay_memory(live.spec, journal.journaled, now, everything=True)
    check_engine(rebuilt, oracle, now, rotated_at=None, without=without, everything=True)
    assert_same_as_live(replay_memory(live.spec, journal.journaled, now), live)
    assert rebuilt.disputes == live.disputes
    assert sum(live.disputes.values()) == sum(len(live.router.windows(r.seq, r.event.occurred_at)) for r in chosen)


async def void(engine: BoardEngine, journal: Journal, key: str, now: int) -> None:
    """What BoardActor.void_key does, minus the actor: journal a VoidRecord and apply it."""
    target = await journal.event_by_key(key)
    assert target is not None and not target.voided
    record = VoidRecord(engine.last_seq + 1, target.seq, key, "cheating", "ops", now)
    remaining = [e for e in await journal.member_events(target.member) if e.seq != target.seq]
    await journal.append([record])
    engine.void([record], [target], remaining)


# -- close markers, late events, retention ------------------------------------------------------


def daily_board(**kw: Any) -> BoardSpec:
    return BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY), **kw)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def rebuild(request: pytest.FixtureRequest) -> Any:
    """rebuild(spec, records, now, **replay_kw) -> BoardEngine, through any journal."""

    def memory(spec: BoardSpec, records: Sequence[Record], now: int, **kw: Any) -> BoardEngine:
        return replay_memory(spec, records, now, **kw)

    kind = request.param
    url = request.getfixturevalue("postgres") if kind == "postgresql" else None

    def stored(spec: BoardSpec, records: Sequence[Record], now: int, **kw: Any) -> BoardEngine:
        async def run() -> BoardEngine:
            async with journal_store(kind, url) as store:
                await write_journal(store, spec, [records])
                return (await replay_journal(store, spec, now, **kw))[0]

        return asyncio.run(run())

    return memory if kind == "memory" else stored


def test_a_closed_table_never_takes_later_journaled_events_on_rebuild(rebuild: Any) -> None:
    spec = daily_board()
    h = EngineHarness({"b": spec})
    day = ms("2026-06-01T12:00:00Z")
    close = ms("2026-06-02T00:01:00Z")  # end + 60 s grace
    assert h.submit("gs", [ev("a", 10, day, "1")], day)[0].status.value == "accepted"
    h.tick("b", close)  # the close marker is journaled
    late = h.submit("gs", [ev("b", 99, day, "2"), ev("a", 50, day, "3")], close + 5)
    assert [r.status.value for r in late] == ["accepted", "accepted"]  # by the alltime table only
    live = h.engines["b"]
    daily = live.tables[(PeriodKind.DAILY, "2026-06-01")]
    assert daily.closed and [(e.member, e.score) for e in daily.entries()] == [("a", 10)]
    rebuilt = rebuild(spec, h.journals["b"], close + 10)
    assert_same_as_live(rebuilt, live)
    assert [(e.member, e.score) for e in rebuilt.tables[(PeriodKind.DAILY, "2026-06-01")].entries()] == [("a", 10)]
    assert [(e.member, e.score) for e in rebuilt.tables[(PeriodKind.ALLTIME, "alltime")].entries()] == [("b", 99), ("a", 50)]


def test_the_marker_journaled_by_a_late_event_itself_keeps_it_out(rebuild: Any) -> None:
    """No tick: the first batch after the close moment journals the marker before the event."""
    spec = daily_board()
    h = EngineHarness({"b": spec})
    day = ms("2026-06-01T12:00:00Z")
    h.submit("gs", [ev("a", 10, day, "1")], day)
    h.submit("gs", [ev("a", 20, day, "2")], ms("2026-06-02T00:00:59.999Z"))  # inside the grace
    h.submit("gs", [ev("a", 30, day, "3")], ms("2026-06-02T00:01:00Z"))  # at the close moment
    kinds = [type(r).__name__ for r in h.journals["b"]]
    assert kinds == ["ScoreRecord", "ScoreRecord", "CloseRecord", "ScoreRecord"]
    rebuilt = rebuild(spec, h.journals["b"], ms("2026-06-02T00:02:00Z"))
    assert_same_as_live(rebuilt, h.engines["b"])
    assert rebuilt.tables[(PeriodKind.DAILY, "2026-06-01")].standing("a") == (20, day, "")
    assert rebuilt.tables[(PeriodKind.ALLTIME, "alltime")].standing("a") == (30, day, "")


def test_a_batch_received_before_the_close_is_applied_even_if_decided_after(rebuild: Any) -> None:
    spec = BoardSpec("b", periods=(PeriodKind.DAILY,))
    engine = BoardEngine(spec)
    engine.publish(0, engine.kinds)
    day = ms("2026-06-01T12:00:00Z")
    moment = ms("2026-06-02T00:01:00Z")
    event = Event("b", "a", 7, day, "k")
    plan = engine.decide([([event], moment - 1, "gs")], {}, close_until=moment + 30_000)
    assert [r.status.value for r in plan.results[0]] == ["accepted"]
    assert [type(r).__name__ for r in plan.records] == ["ScoreRecord", "CloseRecord"]
    engine.commit(plan)
    rebuilt = rebuild(spec, plan.records, moment + 30_000)
    assert_same_as_live(rebuilt, engine)
    assert rebuilt.tables[(PeriodKind.DAILY, "2026-06-01")].closed


def test_frames_of_one_batch_on_either_side_of_the_close_are_routed_each_by_its_own_arrival(rebuild: Any) -> None:
    # the same occurred_at in every frame: what differs is only received_at
    spec = daily_board()
    engine = BoardEngine(spec)
    engine.publish(0, engine.kinds)
    day = ms("2026-06-01T12:00:00Z")
    moment = ms("2026-06-02T00:01:00Z")
    frames = [([Event("b", "a", 7, day, "k1")], moment - 1, "gs"), ([Event("b", "b", 9, day, "k2")], moment, "gs")]
    plan = engine.decide(frames, {}, close_until=moment)
    assert [[r.status.value for r in results] for results in plan.results] == [["accepted"], ["accepted"]]
    assert [type(r).__name__ for r in plan.records] == ["ScoreRecord", "CloseRecord", "ScoreRecord"]
    engine.commit(plan)
    assert [e.member for e in engine.tables[(PeriodKind.DAILY, "2026-06-01")].entries()] == ["a"]
    assert [e.member for e in engine.tables[(PeriodKind.ALLTIME, "alltime")].entries()] == ["b", "a"]
    assert_same_as_live(rebuild(spec, plan.records, moment + 1), engine)


def five_days(spec: BoardSpec) -> EngineHarness:
    h = EngineHarness({"b": spec})
    for d in range(1, 6):
        t = ms(f"2026-06-0{d}T12:00:00Z")
        h.submit("gs", [ev(f"m{d}", d, t, f"k{d}")], t)
    return h


@pytest.mark.parametrize("keep_closed", [0, 1, 3, 10])
def test_rebuild_loads_open_and_retained_tables_and_everything_loads_all(rebuild: Any, keep_closed: int) -> None:
    spec = BoardSpec("b", periods=(PeriodKind.DAILY,), keep_closed=keep_closed)
    h = five_days(spec)
    now = ms("2026-06-05T12:00:00Z")  # 06-05 open, 06-01..06-04 closed
    live = h.engines["b"]
    days = [f"2026-06-0{d}" for d in range(1, 6)]
    retained = days[max(0, 4 - keep_closed):]
    rebuilt = rebuild(spec, h.journals["b"], now)
    assert sorted(pid for _k, pid in rebuilt.tables) == retained
    assert_same_as_live(rebuilt, live)
    every = rebuild(spec, h.journals["b"], now, everything=True)
    assert sorted(pid for _k, pid in every.tables) == days
    assert_same_as_live(every, live, everything=True)
    assert [len(every.tables[(PeriodKind.DAILY, d)]) for d in days] == [1] * 5


def test_keep_closed_zero_still_rebuilds_a_table_inside_its_grace(rebuild: Any) -> None:
    """Was a bug: with keep_closed = 0 the retention floor was the current window's start, so a
    restart during the grace of a monthly window dropped its (still open) table."""
    spec = BoardSpec("b", periods=(PeriodKind.MONTHLY,), keep_closed=0, close_grace_ms=HOUR)
    h = EngineHarness({"b": spec})
    may = ms("2026-05-31T23:00:00Z")
    h.submit("gs", [ev("a", 5, may, "1")], may)
    in_grace = ms("2026-06-01T00:10:00Z")
    h.submit("gs", [ev("b", 7, may, "2")], in_grace)
    rebuilt = rebuild(spec, h.journals["b"], in_grace)
    table = rebuilt.tables[(PeriodKind.MONTHLY, "2026-05")]
    assert not table.closed and [(e.member, e.score) for e in table.entries()] == [("b", 7), ("a", 5)]
    assert_same_as_live(rebuilt, h.engines["b"])
    assert rebuilt.view(PeriodKind.MONTHLY, "2026-05", in_grace) is table


class CountingJournal(MemoryJournal):
    """Counts the score rows each scan hands out."""

    def __init__(self) -> None:
        super().__init__()
        self.rows_read = 0

    async def scan(self, *args: Any, **kw: Any) -> Any:
        async for rows in super().scan(*args, **kw):
            self.rows_read += len(rows)
            yield rows


async def test_current_short_tables_answer_after_reading_only_their_events_and_each_event_is_read_once() -> None:
    spec = BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY))
    h = five_days(spec)
    journal = CountingJournal()
    await journal.append(h.journals["b"])
    engine = BoardEngine(spec)
    seen: list[tuple[frozenset[str], int, list[str]]] = []

    def on_ready(kinds: frozenset[str]) -> None:
        daily = engine.view(PeriodKind.DAILY, None, now)
        seen.append((kinds, journal.rows_read, [e.member for e in daily.entries()]))

    now = ms("2026-06-05T12:00:00Z")
    await load(engine, journal, now, on_ready=on_ready)
    assert seen == [
        (frozenset({PeriodKind.DAILY}), 1, ["m5"]),
        (frozenset({PeriodKind.ALLTIME, PeriodKind.DAILY}), 5, ["m5"]),
    ]
    assert_same_as_live(engine, h.engines["b"])


async def test_other_tasks_get_a_turn_between_two_table_builds_of_a_replay(monkeypatch: Any) -> None:
    spec = BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.WEEKLY, PeriodKind.DAILY))
    h = five_days(spec)
    journal = MemoryJournal()
    await journal.append(h.journals["b"])
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    build = RankedTable.from_states
    turns_at_build: list[int] = []

    def counted_build(*args: Any, **kw: Any) -> RankedTable:  # each build is one sort: ~1 s at 10**6 members
        turns_at_build.append(turns)
        return build(*args, **kw)

    monkeypatch.setattr(RankedTable, "from_states", counted_build)
    other_board = asyncio.create_task(count_turns())
    engine = BoardEngine(spec)
    await load(engine, journal, ms("2026-06-05T12:00:00Z"))
    other_board.cancel()
    assert len(turns_at_build) == 6  # the week, the open day, alltime, three retained days
    assert all(before < after for before, after in itertools.pairwise(turns_at_build)), turns_at_build
    assert_same_as_live(engine, h.engines["b"])


def test_replayed_tables_share_the_entries_they_agree_on_as_live_ones_do() -> None:
    spec = BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.WEEKLY, PeriodKind.DAILY))
    h = EngineHarness({"b": spec})
    now = ms("2026-06-03T12:00:00Z")
    h.submit("gs", [ev("old", 9, "2026-05-01T00:00:00Z", "k0"), ev("old", 1, now - MIN, "k1"),
                    ev("new", 5, now - MIN, "k2")], now)
    engine = replay_memory(spec, h.journals["b"], now)
    assert_same_as_live(engine, h.engines["b"])
    alltime, weekly, daily = (engine.view(kind, None, now)._items for kind in spec.periods)
    assert alltime["new"] is weekly["new"] is daily["new"]
    assert alltime["old"] != weekly["old"] and weekly["old"] is daily["old"]


# -- board definition ---------------------------------------------------------------------------


CHANGES: dict[str, dict[str, Any]] = {
    "aggregation": {"aggregation": Aggregation.SUM},
    "order": {"order": Order.ASC},
    "tie": {"tie": Tie.LATEST},
    "timezone": {"timezone": "Asia/Kolkata"},
    "periods": {"periods": (PeriodKind.ALLTIME,)},
}


async def journal_with_events(store: Store, spec: BoardSpec) -> EngineHarness:
    h = EngineHarness({"b": spec})
    t = ms("2026-06-01T12:00:00Z")
    h.submit("gs", [ev("a", 5, t, "1"), ev("b", 9, t, "2")], t)
    await write_journal(store, spec, [h.journals["b"]])
    return h


@pytest.mark.parametrize("field", sorted(CHANGES))
@pytest.mark.parametrize("readonly", [False, True], ids=["serve", "rebuild"])
async def test_a_changed_definition_with_events_stops_with_a_clear_error(store: Store, field: str, readonly: bool) -> None:
    spec = daily_board()
    await journal_with_events(store, spec)
    with pytest.raises(BoardDefinitionChanged) as raised:
        await store.open(replace(spec, **CHANGES[field]), readonly=readonly)
    message = str(raised.value)
    assert "'b'" in message and store.where() in message and "use a new board name" in message
    assert f"{field}:" in message
    assert all(f"{other}:" not in message for other in CHANGES if other != field)


async def test_a_changed_definition_is_fine_while_the_journal_holds_no_events(store: Store) -> None:
    spec = daily_board()
    await write_journal(store, spec, [])
    changed = replace(spec, aggregation=Aggregation.SUM)
    # read-only (arena rebuild) and then serving both take it; serving stores it
    await (await store.open(changed, readonly=True)).close()
    await (await store.open(changed)).close()
    h = EngineHarness({"b": changed})
    h.submit("gs", [ev("a", 5, ms("2026-06-01T12:00:00Z"), "1")], ms("2026-06-01T12:00:00Z"))
    await write_journal(store, changed, [h.journals["b"]])
    with pytest.raises(BoardDefinitionChanged, match="aggregation: 'sum' -> 'best'"):
        await store.open(spec, readonly=True)


async def test_a_journal_holding_only_close_markers_keeps_its_definition(store: Store) -> None:
    spec = daily_board()
    window = BoardEngine(spec).schedule.window_at(PeriodKind.DAILY, ms("2026-06-01T12:00:00Z"))
    await write_journal(store, spec, [[CloseRecord(1, window, ms("2026-06-02T00:01:00Z"))]])  # a late event's rejection
    with pytest.raises(BoardDefinitionChanged, match="timezone: 'UTC' -> 'Asia/Kolkata'"):
        await store.open(replace(spec, timezone="Asia/Kolkata"))


@pytest.mark.parametrize("change", [
    {"min_value": 8, "max_value": 8},
    {"close_grace_ms": 0},
    {"close_grace_ms": 3 * 86_400_000},
    {"max_future_skew_ms": 0},
    {"keep_closed": 0},
], ids=["bounds", "no-grace", "long-grace", "skew", "keep"])
async def test_bounds_grace_skew_and_retention_may_change_and_replay_never_revalidates(
    store: Store, change: dict[str, Any]
) -> None:
    spec = daily_board()
    live = (await journal_with_events(store, spec)).engines["b"]
    changed = replace(spec, **change)
    await (await store.open(changed)).close()  # no BoardDefinitionChanged
    now = ms("2026-06-01T12:00:30Z")
    rebuilt, report = await replay_journal(store, changed, now)
    # 5 and 9 are outside the new bounds [8, 8]: journaled events are never judged again
    assert_same_as_live(rebuilt, live)
    assert set(live.tables) <= set(rebuilt.tables)
    assert report.events == 2
    assert rebuilt.tables[(PeriodKind.ALLTIME, "alltime")].standing("a") == (5, ms("2026-06-01T12:00:00Z"), "")


# -- voids ---------------------------------------------------------------------------------------


async def test_a_voided_best_score_falls_back_to_the_members_next_best(store: Store) -> None:
    spec = daily_board()
    h = EngineHarness({"b": spec})
    t = ms("2026-06-01T12:00:00Z")
    h.submit("gs", [ev("a", 50, t, "1"), ev("a", 90, t + 1, "2"), ev("a", 70, t + 2, "3"), ev("b", 60, t, "4")], t + 5)
    live = h.engines["b"]
    await write_journal(store, spec, [h.journals["b"]])
    journal = await store.open(spec)
    try:
        await void(live, journal, "2", t + 10)
        stored = await journal.event_by_key("2")
        assert stored is not None and stored.voided
    finally:
        await journal.close()
    for table in live.tables.values():
        assert [(e.member, e.score, e.reached_at) for e in table.entries()] == [("a", 70, t + 2), ("b", 60, t)]
    assert live.disputes == {(PeriodKind.ALLTIME, "alltime"): 1, (PeriodKind.DAILY, "2026-06-01"): 1}
    rebuilt, _ = await replay_journal(store, spec, t + 20)
    assert_same_as_live(rebuilt, live)
    assert rebuilt.disputes == live.disputes
    # a retry of the voided event is still a duplicate: its key stays journaled
    assert h.submit("gs", [ev("a", 90, t + 1, "2")], t + 30)[0].status.value == "duplicate"
    assert digests(h.engines["b"]) == digests(rebuilt)


async def test_a_void_in_a_closed_table_recomputes_it_there_and_on_rebuild() -> None:
    spec = daily_board()
    h = EngineHarness({"b": spec})
    day = ms("2026-06-01T12:00:00Z")
    h.submit("gs", [ev("a", 9, day, "1"), ev("a", 4, day + 1, "2"), ev("b", 5, day, "3")], day)
    after = ms("2026-06-03T00:00:00Z")
    h.tick("b", after)
    h.submit("gs", [ev("a", 1, day, "late")], after)  # alltime only: the daily table is closed
    live = h.engines["b"]
    journal = MemoryJournal()
    await journal.append(h.journals["b"])
    await void(live, journal, "1", after + 1)
    daily = live.tables[(PeriodKind.DAILY, "2026-06-01")]
    assert daily.closed
    assert [(e.member, e.score) for e in daily.entries()] == [("b", 5), ("a", 4)]
    assert live.tables[(PeriodKind.ALLTIME, "alltime")].standing("a") == (4, day + 1, "")
    assert live.disputes[(PeriodKind.DAILY, "2026-06-01")] == 1
    rebuilt, _ = await replay_from(journal, spec, after + 2)
    assert_same_as_live(rebuilt, live)
    # voiding the member's last event in the daily table removes the member there
    await void(live, journal, "2", after + 3)
    assert daily.entry("a") is None and len(daily) == 1
    assert live.tables[(PeriodKind.ALLTIME, "alltime")].standing("a") == (1, day, "")
    rebuilt, _ = await replay_from(journal, spec, after + 4)
    assert_same_as_live(rebuilt, live)


async def test_replay_skips_voided_events_and_counts_their_disputes() -> None:
    spec = daily_board(aggregation=Aggregation.SUM)
    h = EngineHarness({"b": spec})
    t = ms("2026-06-01T12:00:00Z")
    h.submit("gs", [ev("a", 3, t, "1"), ev("a", 4, t, "2"), ev("b", 5, t, "3")], t)
    journal = MemoryJournal()
    await journal.append(h.journals["b"])
    await journal.append([VoidRecord(4, 2, "2", "bot", "ops", t + 1), VoidRecord(5, 3, "3", "bot", "ops", t + 1)])
    rebuilt, report = await replay_from(journal, spec, t + 2)
    table = rebuilt.tables[(PeriodKind.ALLTIME, "alltime")]
    assert [(e.member, e.score) for e in table.entries()] == [("a", 3)]
    assert report.events == 1
    assert rebuilt.last_seq == 5
    assert rebuilt.disputes == {(PeriodKind.ALLTIME, "alltime"): 2, (PeriodKind.DAILY, "2026-06-01"): 2}
    assert rank(OBoard(aggregation="sum"), [OEvent("a", 3, t, "1")]) == engine_rows(table)


# -- the command line ----------------------------------------------------------------------------


async def test_arena_rebuild_prints_the_live_digest_of_every_table(store: Store, tmp_path: Path) -> None:
    spec = BoardSpec("high", periods=(PeriodKind.ALLTIME,))
    h = EngineHarness({"high": spec})
    t = ms("2026-06-01T12:00:00Z")
    h.submit("gs", [ev("a", 5, t, "1", "high"), ev("b", 9, t, "2", "high"), ev("a", 7, t, "3", "high")], t)
    config = Config(server=ServerSettings(data_dir=tmp_path), servers=(), admins=(), boards={"high": spec},
                    journal=store.settings)
    await write_journal(store, spec, [h.journals["high"]])
    engine, report = await rebuild_board(config, spec, now=t + 1)
    live = h.engines["high"].tables[(PeriodKind.ALLTIME, "alltime")]
    assert engine.tables[(PeriodKind.ALLTIME, "alltime")].digest() == live.digest()
    assert report.events == 3

    done = subprocess.run(
        [sys.executable, "-m", "arena", "rebuild", "--config", str(write_config(config, tmp_path / "config.toml"))],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0].split("\t") == ["board", "period", "period_id", "events", "members", "seconds", "sha256"]
    fields = out[1].split("\t")
    assert fields[:5] == ["high", "alltime", "alltime", "3", "2"] and fields[6] == live.digest()
