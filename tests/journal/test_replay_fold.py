"""A replay that folds in the journal (`FoldingJournal.fold`, sqlite and PostgreSQL) builds the
same tables as a replay of every event one by one, and both are the oracle's: every aggregation,
order and tie rule, voids, close markers with late events behind them, and values at the board
bounds' limits (±(2**53 - 1)), whose sums pass 2**63."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.board.load import load
from arena.engine.board import BoardEngine
from arena.engine.events import Event
from arena.engine.periods import PeriodKind
from arena.engine.records import Record, ScoreRecord, VoidRecord
from arena.engine.scoring import Aggregation, Order, ScoringRule, Tie
from arena.engine.spec import BoardSpec
from arena.journal import FoldingJournal
from arena.journal import sqlite as sqlite_journal
from arena.journal.sqlite import SqliteJournal
from support.journals import BackendKind, Store, journal_store, stored_property, write_journal
from support.oracle import OBoard, OEvent, Oracle, check_engine, drive, frames_for, oboards, rank

FOLD_PROPERTY = stored_property(40)
LIMIT = 2**53 - 1
HOUR = 3_600_000


async def both_replays(store: Store, spec: BoardSpec, now: int, **kw: Any) -> tuple[BoardEngine, BoardEngine]:
    """The journal replayed folded and event by event, each from its own read-only open."""
    engines = []
    for fold in (True, False):
        journal = await store.open(spec, readonly=True)
        try:
            assert isinstance(journal, FoldingJournal)
            engine = BoardEngine(spec)
            await load(engine, journal, now, fold=fold, **kw)
            engines.append(engine)
        finally:
            await journal.close()
    return engines[0], engines[1]


def assert_same(folded: BoardEngine, eager: BoardEngine) -> None:
    assert {k: t.digest() for k, t in folded.tables.items()} == {k: t.digest() for k, t in eager.tables.items()}
    assert {k: (t.closed_seq, t.closed_at) for k, t in folded.tables.items()} == {
        k: (t.closed_seq, t.closed_at) for k, t in eager.tables.items()}
    assert folded.disputes == eager.disputes


@st.composite
def cases(draw: st.DrawFn) -> tuple[OBoard, Any]:
    """A board (bounds small, or the widest the config allows) and frames for it."""
    limit = draw(st.sampled_from([5, LIMIT]))
    board = draw(oboards(min_value=-limit, max_value=limit))
    return board, draw(frames_for(board))


@FOLD_PROPERTY
@given(cases(), st.data())
def test_a_folded_replay_equals_the_event_by_event_one_and_the_oracle(
    backend_kind: BackendKind, case: tuple[OBoard, Any], data: st.DataObject
) -> None:
    oracle, spec, now, records, scores = _driven(case)
    voids = _voids(data, records, scores, now, 4)
    _check_replays(oracle, now, voids, *_replayed(backend_kind, spec, now, records, voids))



def _driven(case: tuple[OBoard, Any]) -> tuple[Oracle, BoardSpec, int, list[Record], list[ScoreRecord]]:
    """The case's frames driven through the engine and the oracle: the oracle, the board, the
    last frame's instant, the journal's records and its score records."""
    board, frames = case
    harness, oracle = drive(board, frames)
    return oracle, harness.engines["b"].spec, frames[-1].now, list(harness.journals["b"]), harness.score_records("b")


def _replayed(backend_kind: BackendKind, spec: BoardSpec, now: int, records: list[Record],
              voids: list[VoidRecord]) -> tuple[BoardEngine, BoardEngine, BoardEngine, BoardEngine]:
    """Folded and event-by-event replays of ``records`` and ``voids`` journaled on the backend,
    then the same of everything retained."""
    async def run() -> tuple[BoardEngine, BoardEngine, BoardEngine, BoardEngine]:
        async with journal_store(*backend_kind) as store:
            await write_journal(store, spec, [records, voids] if voids else [records])
            return (*await both_replays(store, spec, now), *await both_replays(store, spec, now, everything=True))

    return asyncio.run(run())


def _voids(data: st.DataObject, records: list[Record], scores: list[ScoreRecord], now: int, most: int) -> list[VoidRecord]:
    """Up to ``most`` of the score records drawn and voided after the last record."""
    chosen = data.draw(st.lists(st.sampled_from(scores), unique_by=lambda r: r.seq, max_size=most) if scores
                       else st.just([]), label="voided")
    seq = records[-1].seq if records else 0
    return [VoidRecord(seq + i, r.seq, r.event.idempotency_key, "cheating", "ops", now) for i, r in enumerate(chosen, start=1)]


def _check_replays(oracle: Oracle, now: int, voids: list[VoidRecord], folded: BoardEngine, eager: BoardEngine,
                   folded_all: BoardEngine, eager_all: BoardEngine) -> None:
    """Folded replays equal the event-by-event ones, and the oracle's tables (without the voided)."""
    assert_same(folded, eager)
    assert_same(folded_all, eager_all)
    without = frozenset(v.idempotency_key for v in voids)
    check_engine(folded_all, oracle, now, rotated_at=None, without=without, everything=True)
    if not voids:
        check_engine(folded, oracle, now, rotated_at=now)


@FOLD_PROPERTY
@given(cases(), st.data())
def test_a_fold_split_at_a_member_equals_the_event_by_event_replay_and_the_oracle(
    case: tuple[OBoard, Any], data: st.DataObject
) -> None:
    """sqlite splits a big fold in two member ranges (`SqliteJournal._split`): here every fold,
    at the pivot its sample finds, at one of the members (whose events all go to the upper
    half), or at any text (below every member or above: one half empty); voids too."""
    oracle, spec, now, records, scores = _driven(case)
    members = sorted({r.event.member for r in scores})
    pivot = data.draw(st.one_of(st.none(), st.sampled_from(members), st.text(max_size=3)) if members else st.none(),
                      label="pivot (None: sampled)")
    voids = _voids(data, records, scores, now, 3)

    async def split_at(journal: SqliteJournal, last: int) -> str | None:
        return pivot if pivot is not None else await sampled(journal, last)

    sampled = SqliteJournal._pivot
    with patch.object(sqlite_journal, "_SPLIT_EVENTS", 0), patch.object(SqliteJournal, "_pivot", split_at):
        replays = _replayed(("sqlite", None), spec, now, records, voids)
    _check_replays(oracle, now, voids, *replays)


@pytest.mark.parametrize("pivot", ["", "m", "n"])
def test_a_one_member_journal_folds_split_below_at_or_above_its_member(pivot: str) -> None:
    spec = BoardSpec("b", periods=(PeriodKind.ALLTIME,))
    start = 1_780_000_000_000 // HOUR * HOUR
    records = [ScoreRecord(seq, Event("b", "m", value, start + seq, f"k{seq}"), start + seq, "gs")
               for seq, value in enumerate([4, 9, 2], start=1)]

    async def split_at(_journal: SqliteJournal, _last: int) -> str:
        return pivot

    async def run() -> tuple[BoardEngine, BoardEngine]:
        async with journal_store("sqlite", None) as store:
            await write_journal(store, spec, [records])
            return await both_replays(store, spec, start + HOUR)

    with patch.object(SqliteJournal, "_pivot", split_at):
        folded, eager = asyncio.run(run())
    assert_same(folded, eager)
    assert folded.tables[(PeriodKind.ALLTIME, "alltime")].standing("m") == (9, start + 2, "")


def test_sums_past_two_to_the_63_are_exact_on_both_backends(backend_kind: BackendKind) -> None:
    """1,100 events of ±(2**53 - 1) by one member in one hour: a sum past ±2**63, beyond sqlite's
    SUM; a member whose huge values cancel out, and a small one beside them."""
    spec = BoardSpec("b", aggregation=Aggregation.SUM, order=Order.ASC,
                     periods=(PeriodKind.ALLTIME, PeriodKind.HOURLY), min_value=-LIMIT, max_value=LIMIT)
    start = 1_780_000_000_000 // HOUR * HOUR
    events = [("big", LIMIT), ("low", -LIMIT), ("mix", LIMIT), ("mix", -LIMIT)] * 1100 + [("small", 3), ("mix", 7)]
    records = [ScoreRecord(seq, Event("b", member, value, start + seq, f"k{seq}"), start + seq, "gs")
               for seq, (member, value) in enumerate(events, start=1)]
    now = start + 10 * 60_000

    async def run() -> tuple[BoardEngine, BoardEngine]:
        async with journal_store(*backend_kind) as store:
            await write_journal(store, spec, [records[i : i + 500] for i in range(0, len(records), 500)])
            return await both_replays(store, spec, now)

    folded, eager = asyncio.run(run())
    assert_same(folded, eager)
    oboard = OBoard(aggregation="sum", order="asc", periods=("alltime", "hourly"), min_value=-LIMIT, max_value=LIMIT)
    want = rank(oboard, [OEvent(r.event.member, r.event.value, r.event.occurred_at, r.event.idempotency_key)
                         for r in records])
    for table in folded.tables.values():
        assert [(e.rank, e.member, e.score, e.reached_at) for e in table.entries()] == want
    assert folded.tables[(PeriodKind.ALLTIME, "alltime")].standing("big") == (1100 * LIMIT, start + 4397, "")
    assert 1100 * LIMIT > 2**63


@pytest.mark.parametrize("order", list(Order))
def test_values_outside_todays_bounds_fold_exactly(backend_kind: BackendKind, order: Order) -> None:
    """Bounds may change while events journaled under the old ones stay (DESIGN.md "Period
    close"): a best folds exactly whatever the journaled values (up to ±(2**53 - 1)), also where
    today's bounds let sqlite pack a standing into one integer (from the first member it cannot
    pack, in member order, it folds the text form: here "a", "huge" and "out"). Buckets of one
    hour, and of all the instants; on sqlite, also split at "in" (`SqliteJournal._split`)."""
    start = 1_780_000_000_000 // HOUR * HOUR
    events = [("in", 3, 5), ("in", 3, 2), ("out", 12, 9), ("out", -4, 1), ("edge", 10, 4), ("edge", 0, 3), ("tie", 7, 8),
              ("tie", 7, 6), ("later", 2, HOUR + 7), ("later", 11, HOUR + 3), ("huge", LIMIT, 2), ("huge", 5, 3),
              ("huge", -LIMIT, 4), ("low", -7, 4), ("a", 11, 5)]
    records = [ScoreRecord(seq, Event("b", member, value, start + at, f"k{seq}"), start + at, "gs")
               for seq, (member, value, at) in enumerate(events, start=1)]
    now = start + HOUR + 10 * 60_000
    pivots = [None, "in"] if backend_kind[0] == "sqlite" else [None]  # only sqlite splits a fold
    for periods, pivot in itertools.product([(PeriodKind.ALLTIME,), (PeriodKind.ALLTIME, PeriodKind.HOURLY)], pivots):
        spec = BoardSpec("b", aggregation=Aggregation.BEST, order=order, periods=periods, min_value=0, max_value=10)

        async def run(spec: BoardSpec = spec) -> tuple[BoardEngine, BoardEngine]:
            async with journal_store(*backend_kind) as store:
                await write_journal(store, spec, [records])
                return await both_replays(store, spec, now)

        async def split_at(_journal: SqliteJournal, _last: int, pivot: str | None = pivot) -> str | None:
            return pivot

        with patch.object(SqliteJournal, "_pivot", split_at):
            folded, eager = asyncio.run(run())
        assert_same(folded, eager)
        best = max if order is Order.DESC else min
        alltime = folded.tables[(PeriodKind.ALLTIME, "alltime")]
        assert alltime.standing("out") == (best(12, -4), start + (9 if order is Order.DESC else 1), "")
        assert alltime.standing("tie") == (7, start + 6, "")
        assert alltime.standing("huge") == (best(LIMIT, -LIMIT), start + (2 if order is Order.DESC else 4), "")
        assert alltime.standing("low") == (-7, start + 4, "")


@given(st.sampled_from(list(Aggregation)), st.sampled_from(list(Order)), st.sampled_from(list(Tie)),
       st.dictionaries(st.text(max_size=3), st.tuples(st.integers(-(2**70), 2**70), st.integers(0, 2**45), st.text(max_size=2))))
def test_states_in_bulk_are_what_merging_each_into_nothing_makes(
    aggregation: Aggregation, order: Order, tie: Tie, standings: dict[str, tuple[int, int, str]]
) -> None:
    rule = ScoringRule.for_board(aggregation, order, tie)
    latest = aggregation is Aggregation.LATEST  # a FoldRow's key is "" for the others
    rows = [(member, score, reached_at, key if latest else "", 1) for member, (score, reached_at, key) in standings.items()]
    assert rule.states(rows) == {m: rule.merge(None, rule.update(m, s, r, k)) for m, s, r, k, _ in rows}


@pytest.mark.parametrize("aggregation", [Aggregation.BEST, Aggregation.LATEST])
def test_tables_fed_the_same_rows_are_built_as_copies_that_change_apart(backend_kind: BackendKind,
                                                                         aggregation: Aggregation) -> None:
    """Last week's bucket feeds alltime, that week and that day alike; this week's feeds alltime
    again but not last week: alltime and last week part. This week's and today's tables are fed
    the same rows: one is a copy of the other, and a later event changes one of them only."""
    spec = BoardSpec("b", aggregation=aggregation, periods=(PeriodKind.ALLTIME, PeriodKind.WEEKLY, PeriodKind.DAILY))
    now = 1_796_216_400_000  # Wednesday 2026-12-02T13:00:00Z
    last_week = now - 7 * 24 * HOUR
    events = [("a", 5, last_week), ("b", 7, last_week + 1), ("a", 9, now - HOUR), ("c", 1, now - HOUR + 1)]
    records = [ScoreRecord(seq, Event("b", member, value, at, f"k{seq}"), at, "gs")
               for seq, (member, value, at) in enumerate(events, start=1)]

    async def run() -> tuple[BoardEngine, BoardEngine]:
        async with journal_store(*backend_kind) as store:
            await write_journal(store, spec, [records])
            return await both_replays(store, spec, now, everything=True)

    folded, eager = asyncio.run(run())
    assert_same(folded, eager)
    tables = {kind: folded.view(kind, None, now) for kind in spec.periods}
    assert len(tables[PeriodKind.ALLTIME]) == 3 and len(tables[PeriodKind.WEEKLY]) == 2
    weekly, daily = tables[PeriodKind.WEEKLY], tables[PeriodKind.DAILY]
    assert weekly.digest() == daily.digest()
    assert weekly.apply("d", 3, now, "k9")
    assert len(weekly) == 3 and len(daily) == 2 and daily.entry("d") is None
