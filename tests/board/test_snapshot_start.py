"""A start from a snapshot equals a full replay, digest for digest (voids, close markers and closed
tables included), on sqlite and PostgreSQL, also when batches land while it is taken; a snapshot that may not serve (corrupt, truncated,
foreign, of an older or a future format, another record at its seq, another definition, a larger keep_closed) is ignored
with a log line naming why, and the board replays in full."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import struct
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.board.load import load
from arena.board.snapshots import Snapshotter
from arena.engine.board import BoardEngine
from arena.engine.periods import PeriodKind, Window
from arena.engine.records import VoidRecord
from arena.engine.routing import table_key
from arena.engine.snapshot import FORMAT, MAGIC, decode
from arena.engine.spec import BoardSpec
from arena.engine.table import Freeze, RankedTable
from arena.engine.times import parse_rfc3339_ms
from arena.errors import JournalCorrupt, QueryError
from arena.journal import Journal, sqlite
from arena.journal.snapshots import SnapshotStore, snapshot_store
from support.engine_harness import EngineHarness
from support.engines import Live, full_replay, on_a_journal, pinned, state
from support.journals import BackendKind, Store, journal_store, stored_property
from support.oracle import Frame, OBoard, boards_and_frames, spec_of

STORED_PROPERTY = stored_property(30)
DAY = 86_400_000


@STORED_PROPERTY
@given(boards_and_frames(), st.data())
def test_a_start_from_a_snapshot_equals_a_full_replay(
    backend_kind: BackendKind, case: tuple[OBoard, list[Frame]], data: st.DataObject
) -> None:
    """The live engine runs some frames (and voids), is snapshotted, runs the rest (and more
    voids, of events on both sides of the snapshot); a start from the snapshot then equals a full
    replay of the journal."""
    board, frames = case
    spec = spec_of(board)
    cut = data.draw(st.integers(0, len(frames)), label="snapshot after frame")

    async def body(live: Live, snapshots: SnapshotStore) -> None:
        journal = live.journal
        await live.snapshot_after(frames, cut, snapshots)
        await live.play(frames[cut:])
        now = frames[-1].now + data.draw(st.sampled_from([0, DAY, 40 * DAY]), label="start later by")
        started = BoardEngine(spec)
        await load(started, journal, now, snapshots=snapshots)  # from the snapshot, or in full when it may not serve
        assert state(started) == state(await full_replay(journal, spec, now))

    on_a_journal(backend_kind, spec, data, body)


@STORED_PROPERTY
@given(boards_and_frames(), st.data())
def test_a_snapshot_taken_while_batches_land_holds_the_tables_at_its_seq(
    backend_kind: BackendKind, case: tuple[OBoard, list[Frame]], data: st.DataObject
) -> None:
    """The live engine runs some frames, a snapshot begins, and the rest of the frames (and
    voids) land between its steps (a run of one entry a step, a step a turn); the snapshot then
    holds exactly the tables of a replay of the journal up to its seq."""
    board, frames = case
    spec = spec_of(board)
    cut = data.draw(st.integers(1, len(frames)), label="snapshot after frame")

    async def body(live: Live, snapshots: SnapshotStore) -> None:
        journal = live.journal
        await live.play(frames[:cut], turns=True)
        seq, taken_at = live.engine.last_seq, frames[cut - 1].now
        if seq == 0:
            return
        taking = asyncio.create_task(Snapshotter(live.engine, journal, snapshots, 1, pinned(taken_at)).take())
        await asyncio.sleep(0)  # the freeze begins
        await live.play(frames[cut:], turns=True)
        await taking
        stored = await snapshots.load("b")
        assert stored is not None
        snapshot = decode(stored)
        assert snapshot.seq == seq
        replayed = BoardEngine(spec)
        await load(replayed, journal, taken_at, upto_seq=seq)

        def retained(window: Window) -> bool:  # a replay leaves out tables past the retention
            floor = snapshot.floors[window.kind]
            return floor is None or window.start_ms is None or window.start_ms >= floor

        tables = {table_key(t.window, t.partition):
                  RankedTable.from_sorted(replayed.rule, t.window, t.names, t.entries, t.order, t.keys)
                  for t in snapshot.tables if retained(t.window)}
        replayed_tables = [*replayed.tables.values(), *(p for parts in replayed.partitions.values() for p in parts.values())]
        assert {k: t.digest() for k, t in tables.items() if len(t)} == \
            {table_key(t.window, t.partition): t.digest() for t in replayed_tables if len(t)}
        assert snapshot.disputes == replayed.disputes

    with patch("arena.board.snapshots.TURN", 0), patch.object(Freeze, "step", 1):
        on_a_journal(backend_kind, spec, data, body)


# -- invalid snapshots --------------------------------------------------------------------------------


SPEC = BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY), keep_closed=1)
T0 = parse_rfc3339_ms("2026-06-01T12:00:00Z")


def ev(member: str, value: int, at: int, key: str) -> dict[str, Any]:
    return {"board": "b", "member": member, "value": value, "occurred_at": at, "idempotency_key": key}


async def journal_with_snapshot(store: Store, spec: BoardSpec = SPEC) -> tuple[Journal, SnapshotStore, EngineHarness]:
    """Two days of events, a snapshot in the middle of the second, and a tail after it."""
    harness = EngineHarness({"b": spec})
    journal = await store.open(spec)
    snapshots = snapshot_store(store.backend())
    for day in range(2):
        at = T0 + day * DAY
        harness.submit("gs", [ev(f"m{i}", i + day, at, f"k{day}-{i}") for i in range(5)], at)
        harness.tick("b", at + DAY // 2)
    await journal.append(harness.journals["b"])
    await Snapshotter(harness.engines["b"], journal, snapshots, 1, pinned(T0 + DAY)).take()
    harness.submit("gs", [ev("tail", 100, T0 + DAY, "tail")], T0 + DAY)
    await journal.append([r for r in harness.journals["b"] if r.seq > journal.last_seq])
    return journal, snapshots, harness


async def corrupt(store: Store, snapshots: SnapshotStore) -> None:
    data = await snapshots.load("b")
    assert data is not None
    await snapshots.save("b", 0, [data[:100], bytes([data[100] ^ 1]), data[101:]])


async def truncated(store: Store, snapshots: SnapshotStore) -> None:
    data = await snapshots.load("b")
    assert data is not None
    await snapshots.save("b", 0, [data[: len(data) // 2]])


async def future(store: Store, snapshots: SnapshotStore, format: int = FORMAT + 1) -> None:
    data = await snapshots.load("b")
    assert data is not None
    await snapshots.save("b", 0, [MAGIC, struct.pack("<I", format), data[len(MAGIC) + 4 :]])


async def older(store: Store, snapshots: SnapshotStore) -> None:
    await future(store, snapshots, 1)  # format 1 held each table's entries in rank order, without names


async def foreign(store: Store, snapshots: SnapshotStore) -> None:
    other, other_snapshots, _ = await journal_with_snapshot(store, replace(SPEC, name="c"))
    await other.close()
    data = await other_snapshots.load("c")
    assert data is not None
    await snapshots.save("b", 0, [data])


async def journal_replaced(store: Store, snapshots: SnapshotStore) -> None:
    """Another journal of the same length in place of the one the snapshot was made from."""
    journal = await store.open(SPEC)
    last = journal.last_seq
    await journal.close()
    if store.kind == "sqlite":
        (snapshots.data_dir / "b.journal.sqlite").unlink()  # type: ignore[attr-defined]
    else:
        from support.postgres import fetchval

        assert store.settings.url is not None
        for table in ("score_void", "board_period", "score_event", "board_owner", "board"):
            await fetchval(store.settings.url, f"DELETE FROM {store.settings.schema}.{table}")
    harness = EngineHarness({"b": SPEC})
    fresh = await store.open(SPEC)
    while harness.engines["b"].last_seq < last:
        n = harness.engines["b"].last_seq
        harness.submit("gs", [ev("x", 1, T0, f"other-{n}")], T0)
    await fresh.append(harness.journals["b"])
    await fresh.close()


CASES: dict[str, tuple[Callable[[Store, SnapshotStore], Awaitable[None]], BoardSpec, str]] = {
    "corrupt": (corrupt, SPEC, "checksum does not hold"),
    "truncated": (truncated, SPEC, "checksum does not hold"),
    "future": (future, SPEC, f"snapshot format {FORMAT + 1}"),
    "format 1": (older, SPEC, "snapshot format 1, this Arena reads format 2"),
    "foreign": (foreign, SPEC, "it is board 'c'"),
    "journal replaced": (journal_replaced, SPEC, "another record at its seq"),
    "another definition": (lambda store, snapshots: asyncio.sleep(0), replace(SPEC, order=SPEC.order.__class__("asc")),
                           "another board definition"),
    "larger keep_closed": (lambda store, snapshots: asyncio.sleep(0), replace(SPEC, keep_closed=5), "keep_closed"),
}


@pytest.mark.parametrize("case", CASES)
async def test_a_snapshot_that_may_not_serve_is_ignored_with_the_reason_and_the_board_replays_in_full(
    store: Store, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    change, spec, reason = CASES[case]
    journal, snapshots, _ = await journal_with_snapshot(store)
    await journal.close()
    await change(store, snapshots)
    # a changed definition is read from the snapshot only: the journal keeps its own
    journal = await store.open(SPEC if spec.definition() != SPEC.definition() else spec, readonly=True)
    now = T0 + DAY + 1000
    caplog.set_level(logging.INFO, "arena.board")
    engine = BoardEngine(spec)
    assert (await load(engine, journal, now, snapshots=snapshots)).snapshot_seq == 0
    assert reason in caplog.text and "replaying the journal in full" in caplog.text
    assert state(engine) == state(await full_replay(journal, spec, now))
    await journal.close()


async def test_a_valid_snapshot_serves_and_only_the_tail_is_replayed(store: Store) -> None:
    journal, snapshots, harness = await journal_with_snapshot(store)
    now = T0 + DAY + 1000
    started = BoardEngine(SPEC)
    report = await load(started, journal, now, snapshots=snapshots)
    assert (report.events, report.snapshot_seq) == (1, journal.last_seq - 1)
    assert state(started) == state(await full_replay(journal, SPEC, now))
    await journal.close()


@pytest.mark.parametrize("tail_days", [(0,), (0, 1)], ids=["fed alike", "parted by a new day"])
async def test_a_repeated_table_is_fed_with_the_table_it_repeats_and_parts_when_the_tail_does(
    store: Store, tail_days: tuple[int, ...]
) -> None:
    """A snapshot whose alltime and daily tables hold the same events writes the daily once
    (``same_as``); the tail feeds the alltime table alone while it feeds both alike, and the
    daily becomes its copy (at the end, or where a new day's events reach the alltime only):
    the same tables as a full replay either way, and the two change apart afterwards."""
    harness = EngineHarness({"b": SPEC})
    journal = await store.open(SPEC)
    snapshots = snapshot_store(store.backend())
    harness.submit("gs", [ev(f"m{i}", i, T0, f"k{i}") for i in range(5)], T0)
    await journal.append(harness.journals["b"])
    await Snapshotter(harness.engines["b"], journal, snapshots, 1, pinned(T0)).take()
    stored = await snapshots.load("b")
    assert stored is not None and [t.same_as for t in decode(stored).tables] == [None, 0]
    for day in tail_days:
        at = T0 + day * DAY + 1000
        harness.submit("gs", [ev(f"m{i}", 10 + i + day, at, f"t{day}-{i}") for i in range(3, 8)], at)
    await journal.append([r for r in harness.journals["b"] if r.seq > journal.last_seq])
    now = T0 + tail_days[-1] * DAY + 2000
    started = BoardEngine(SPEC)
    report = await load(started, journal, now, snapshots=snapshots)
    assert report.snapshot_seq > 0 and report.events == 5 * len(tail_days)
    assert state(started) == state(await full_replay(journal, SPEC, now))
    daily = started.tables[(PeriodKind.DAILY, "2026-06-01")]
    before = daily.digest()
    started.tables[(PeriodKind.ALLTIME, "alltime")].set_standing("joins alltime", (1, 1, "k"))
    assert daily.digest() == before  # a copy, not the same lists
    await journal.close()


# -- the journal's integrity check beside the load (sqlite, after an unclean stop) ---------------------


@pytest.mark.parametrize("passes", [True, False], ids=["passes", "fails"])
async def test_a_start_after_an_unclean_stop_loads_beside_the_check_and_answers_only_once_it_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, passes: bool
) -> None:
    """A journal not closed cleanly, opened to write through its backend: its check runs in its
    own thread while the snapshot and the tail load; the load, done, waits for it: the tables
    answer `not_ready` and a write waits until it passed. A failed check fails the load and every
    write with its JournalCorrupt, and the journal is checked again at its next open."""
    now = T0 + DAY + 1000
    async with journal_store("sqlite", None, data_dir=tmp_path) as store:
        written, snapshots, _ = await journal_with_snapshot(store)
        expected = state(await full_replay(written, SPEC, now))
        await written.close()
        path = Path(store.where())
        shutil.copyfile(path, tmp_path / "copy")
        os.replace(tmp_path / "copy", path)  # another file: its clean-close mark no longer matches
        held = asyncio.Event()
        checking = asyncio.Event()
        real = sqlite._check_integrity

        async def check_held(db: Any, name: str) -> None:
            checking.set()
            await held.wait()
            if not passes:
                raise JournalCorrupt(f"{name}: journal is corrupt (quick_check: a test's)")
            await real(db, name)

        monkeypatch.setattr(sqlite, "_check_integrity", check_held)
        caplog.set_level(logging.INFO, "arena")
        journal = await store.open(SPEC)
        assert "integrity check begun in its own thread" in caplog.text
        last = journal.last_seq
        started = BoardEngine(SPEC)
        loading = asyncio.create_task(load(started, journal, now, snapshots=snapshots))
        writing = asyncio.create_task(journal.append([VoidRecord(last + 1, 1, "k0-1", "test", "admin", now)]))
        alltime = (PeriodKind.ALLTIME, "alltime")
        async with asyncio.timeout(60):
            await checking.wait()
            while alltime not in started.tables or started.tables[alltime].standing("tail") is None:  # the tail, beside the check
                await asyncio.wait([loading], timeout=0.01)
                assert not loading.done(), loading
        assert not loading.done() and not writing.done()
        for kind in SPEC.periods:
            with pytest.raises(QueryError) as hidden:
                started.view(kind, None, now)
            assert hidden.value.code == "not_ready"
        assert await journal.committed_seq() == last  # nothing written meanwhile
        held.set()
        if passes:
            report = await loading
            assert report.snapshot_seq == last - 1 and report.events == 1
            assert state(started) == expected
            await writing
            assert await journal.committed_seq() == last + 1
        else:
            with pytest.raises(JournalCorrupt, match="quick_check: a test's"):
                await loading
            with pytest.raises(JournalCorrupt, match="quick_check: a test's"):
                await writing
            with pytest.raises(QueryError):
                started.view(PeriodKind.ALLTIME, None, now)
            assert await journal.committed_seq() == last
        await journal.close()
        monkeypatch.setattr(sqlite, "_check_integrity", real)
        caplog.clear()
        again = await store.open(SPEC)
        await again.checked()
        await again.close()
        # marked when it was closed after a check that passed; checked again after one that failed
        assert ("integrity check skipped" in caplog.text) == passes
        assert ("integrity check passed" in caplog.text) != passes
