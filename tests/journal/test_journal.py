"""The journal contract, on both backends (the `store` fixture: sqlite and PostgreSQL): one
transaction per append, the UNIQUE key index, reading back in seq order, close markers, voids,
the audit listing, read-only opens. Then what only sqlite has: durability pragmas, WAL, a full
disk, corrupt files. PostgreSQL's own: tests/journal/test_journal_postgresql.py."""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.engine.events import Event
from arena.engine.periods import ALLTIME_WINDOW, Calendar, PeriodKind
from arena.engine.records import CloseRecord, Record, ScoreRecord, StoredEvent, Voided, VoidRecord
from arena.errors import JournalCorrupt, JournalWriteFailed
from arena.journal import Journal, ScoreRow
from arena.journal.sqlite import SqliteJournal
from support.journals import SPEC, BackendKind, Store, journal_store, stored_property

T = 1_780_315_200_000  # 2026-06-01T12:00:00Z
DAY = Calendar("UTC").window_at(PeriodKind.DAILY, T)


def score(seq: int, member: str = "a", value: int = 1, occurred_at: int = T, key: str | None = None,
          meta: str | None = None, received_at: int | None = None, source: str = "gs") -> ScoreRecord:
    event = Event("b", member, value, occurred_at, key if key is not None else f"k{seq}", meta)
    return ScoreRecord(seq, event, received_at if received_at is not None else occurred_at + 5, source)


@pytest.fixture
async def journal(store: Store) -> AsyncIterator[Journal]:
    j = await store.open()
    yield j
    await j.close()


async def rows(journal: Journal, **kw: int | None) -> list[ScoreRow]:
    out: list[ScoreRow] = []
    async for chunk in journal.scan(**kw):
        out.extend(tuple(r) for r in chunk)  # type: ignore[misc]
    return out


def names(store: Store) -> str:
    """A pattern of the journal's name in messages."""
    return re.escape(store.where())


# -- append ----------------------------------------------------------------------------------------


async def test_append_writes_scores_markers_and_voids_and_advances_last_seq(journal: Journal) -> None:
    assert (journal.last_seq, await journal.committed_seq()) == (0, 0)
    marker = CloseRecord(3, DAY, DAY.end_ms + 60_000)  # type: ignore[operator]
    void = VoidRecord(4, 1, "k1", "cheat", "ops", T + 99)
    await journal.append([score(1), score(2, member="b"), marker, void])
    assert (journal.last_seq, await journal.committed_seq()) == (4, 4)
    assert await rows(journal) == [(1, "a", 1, T, "k1", None), (2, "b", 1, T, "k2", None)]
    assert await journal.close_markers() == [marker]
    assert await journal.voids() == [(void, T)]


async def test_an_empty_append_is_a_no_op(journal: Journal) -> None:
    await journal.append([])
    assert journal.last_seq == 0


async def test_an_append_is_one_transaction_nothing_is_written_when_a_record_fails(store: Store, journal: Journal) -> None:
    await journal.append([score(1)])
    batch: list[Record] = [score(2), CloseRecord(3, DAY, T), score(4, key="k1")]  # k1 again, last
    with pytest.raises(JournalWriteFailed, match=names(store)):
        await journal.append(batch)
    assert journal.last_seq == 1 and await journal.committed_seq() == 1
    assert await rows(journal) == [(1, "a", 1, T, "k1", None)]
    assert await journal.close_markers(upto_seq=10) == []
    # the connection is usable again afterwards
    await journal.append([score(2), CloseRecord(3, DAY, T)])
    assert await journal.committed_seq() == 3


async def test_an_append_is_committed_and_visible_to_other_readers(store: Store, journal: Journal) -> None:
    await journal.append([score(i) for i in range(1, 101)])
    other = await store.open(readonly=True)
    try:
        assert len(await rows(other, upto_seq=1000)) == 100
    finally:
        await other.close()


async def test_the_idempotency_key_is_unique_forever(journal: Journal) -> None:
    await journal.append([score(1, key="same")])
    with pytest.raises(JournalWriteFailed):
        await journal.append([score(2, key="same", value=1)])  # even with the very same payload
    with pytest.raises(JournalWriteFailed):
        await journal.append([score(2, key="x"), score(3, key="x")])  # and inside one batch
    assert await rows(journal) == [(1, "a", 1, T, "same", None)]


async def test_a_seq_is_never_written_twice(journal: Journal) -> None:
    await journal.append([score(1)])
    with pytest.raises(JournalWriteFailed):
        await journal.append([score(1, key="other")])


# -- lookup ----------------------------------------------------------------------------------------


async def test_lookup_of_many_keys_chunks_the_query(journal: Journal) -> None:
    await journal.append([score(i, member=f"m{i}", value=i, occurred_at=T + i) for i in range(1, 1301)])
    wanted = [f"k{i}" for i in range(0, 2600, 2)]  # 1300 keys: k0 and k1302.. are not journaled
    found = await journal.lookup(wanted)
    assert found == {f"k{i}": (f"m{i}", i, T + i, None) for i in range(2, 1301, 2)}
    assert await journal.lookup([]) == {}
    assert await journal.lookup(["k7", "k7"]) == {"k7": ("m7", 7, T + 7, None)}


async def test_a_lookup_finds_keys_however_old_they_are(store: Store) -> None:
    j = await store.open()
    await j.append([score(1, key="ancient")])
    await j.close()
    j = await store.open()
    try:
        assert await j.lookup(["ancient"]) == {"ancient": ("a", 1, T, None)}
    finally:
        await j.close()


_KEYS = st.text(st.characters(codec="utf-8"), min_size=1, max_size=128)
"""Any key the wire can carry: U+0000, backslashes, quotes, JSON escapes written out, astral."""


@stored_property(60)
@given(st.lists(_KEYS, min_size=1, max_size=30, unique=True), st.data())
def test_keys_of_any_text_round_trip_through_append_lookup_and_scan(
    backend_kind: BackendKind, keys: list[str], data: st.DataObject
) -> None:
    """A batch is sent to sqlite as one JSON parameter unless a string holds U+0000 (sqlite's
    JSON ends a string there), and to PostgreSQL as bytea: every path must store and find every
    key exactly."""
    batch = [score(i + 1, member=f"m{i}", value=i, key=k) for i, k in enumerate(keys)]
    cut = data.draw(st.integers(0, len(batch)), label="cut")
    absent = data.draw(st.lists(_KEYS.filter(lambda k: k not in keys), max_size=5), label="absent")

    async def run() -> None:
        async with journal_store(*backend_kind) as store:
            j = await store.open()
            try:
                await j.append(batch[:cut])
                await j.append([*batch[cut:], CloseRecord(len(batch) + 1, DAY, T)])  # the multi-table path
                assert await j.lookup([*keys, *absent]) == {k: (f"m{i}", i, T, None) for i, k in enumerate(keys)}
                assert [r[4] for r in await rows(j)] == keys
                stored = await j.event_by_key(keys[-1])
                assert stored is not None and stored.idempotency_key == keys[-1]
            finally:
                await j.close()

    asyncio.run(run())


# -- scan ------------------------------------------------------------------------------------------


async def test_scan_yields_score_events_in_seq_order_in_chunks(journal: Journal) -> None:
    n = 45_000  # more than two scan chunks
    await journal.append([score(i, member=f"m{i % 7}", occurred_at=T - i) for i in range(1, n + 1)])
    chunks = [len(chunk) async for chunk in journal.scan()]
    assert len(chunks) >= 3 and sum(chunks) == n
    seqs = [r[0] for r in await rows(journal)]
    assert seqs == list(range(1, n + 1))


async def test_scan_filters_by_upto_seq_and_occurred_at(journal: Journal) -> None:
    times = [T + 30, T + 10, T + 20, T, T + 40]
    await journal.append([score(i + 1, occurred_at=t) for i, t in enumerate(times)]
                         + [CloseRecord(6, DAY, T)] + [score(7, occurred_at=T + 25)])
    assert [r[0] for r in await rows(journal)] == [1, 2, 3, 4, 5, 7]
    assert [r[0] for r in await rows(journal, upto_seq=3)] == [1, 2, 3]
    assert [r[0] for r in await rows(journal, min_occurred_at=T + 20)] == [1, 3, 5, 7]
    assert [r[0] for r in await rows(journal, upto_seq=5, min_occurred_at=T + 20)] == [1, 3, 5]
    assert [r[0] for r in await rows(journal, before_occurred_at=T + 20)] == [2, 4]
    assert [r[0] for r in await rows(journal, min_occurred_at=T + 10, before_occurred_at=T + 30)] == [2, 3, 7]
    assert await rows(journal, upto_seq=0) == []


async def test_scan_reads_back_exact_integers_and_unicode(journal: Journal) -> None:
    big = 2**53 - 1
    await journal.append([score(1, member="zoë/%2F 😀", value=-big), score(2, member="x", value=big, occurred_at=0)])
    assert await rows(journal) == [(1, "zoë/%2F 😀", -big, T, "k1", None), (2, "x", big, 0, "k2", None)]


# -- close markers and voids -----------------------------------------------------------------------


async def test_close_markers_round_trip_for_every_kind(store: Store, journal: Journal) -> None:
    cal = Calendar("Asia/Kolkata")
    markers = [CloseRecord(i + 2, cal.window_at(kind, T), 10 * i + T)
               for i, kind in enumerate([PeriodKind.HOURLY, PeriodKind.DAILY, PeriodKind.WEEKLY, PeriodKind.MONTHLY])]
    await journal.append([score(1), *markers])
    assert await journal.close_markers() == markers
    assert await journal.close_markers(upto_seq=3) == markers[:2]
    await journal.close()
    reopened = await store.open(readonly=True)
    try:
        assert await reopened.close_markers() == markers
        assert reopened.last_seq == 5
    finally:
        await reopened.close()


async def test_a_table_is_closed_only_once(journal: Journal) -> None:
    await journal.append([CloseRecord(1, DAY, T)])
    with pytest.raises(JournalWriteFailed):
        await journal.append([CloseRecord(2, DAY, T + 1)])


async def test_voids_come_back_in_seq_order_with_their_events_occurred_at(journal: Journal) -> None:
    await journal.append([score(1, occurred_at=T + 1), score(2, occurred_at=T + 2), score(3, occurred_at=T + 3)])
    v1, v2 = VoidRecord(4, 3, "k3", "bot", "ops", T + 10), VoidRecord(5, 1, "k1", "ban", "ops", T + 11)
    await journal.append([v1, v2])
    assert await journal.voids() == [(v1, T + 3), (v2, T + 1)]
    assert await journal.voids(upto_seq=4) == [(v1, T + 3)]
    assert (await journal.event_by_key("k3")) is not None
    with pytest.raises(JournalWriteFailed):  # an event is voided once
        await journal.append([VoidRecord(6, 3, "k3", "again", "ops", T + 12)])


async def records(journal: Journal, upto_seq: int | None = None) -> list[Record]:
    return [r async for chunk in journal.records(upto_seq) for r in chunk]


def history() -> list[Record]:
    """Events over several read chunks, with a marker and a void between them, and strings only
    an exact store keeps."""
    out: list[Record] = []
    for seq in range(1, 4_503):
        if seq == 11:
            out.append(CloseRecord(seq, DAY, T + 1))
        elif seq == 2_501:
            out.append(VoidRecord(seq, 5, "k\x005", "r\x00", "ops", T + 2))
        else:
            out.append(score(seq, member=f"m{seq % 7}", value=seq * 3, key=f"k\x00{seq}", meta='{"b":1,"a":[2]}'))
    return out


async def test_records_come_back_in_seq_order_exactly_as_journaled(journal: Journal) -> None:
    written = history()
    assert [r.seq for r in written] == list(range(1, len(written) + 1))
    for i in range(0, len(written), 1_000):
        await journal.append(written[i : i + 1_000])
    assert await records(journal) == written
    assert await records(journal, upto_seq=2_501) == written[:2_501]
    assert max([len(chunk) async for chunk in journal.records()]) <= 2_002  # streamed in chunks


async def test_append_all_copies_a_journal_in_one_transaction(backend_kind: BackendKind, journal: Journal) -> None:
    await journal.append(history())
    async with journal_store(*backend_kind) as other:
        copy = await other.open()
        await copy.append_all(journal.records())
        assert copy.last_seq == journal.last_seq
        assert await records(copy) == await records(journal)
        await copy.close()


async def test_append_all_writes_nothing_when_its_source_fails(backend_kind: BackendKind, journal: Journal) -> None:
    async def failing() -> AsyncIterator[list[Record]]:
        yield [score(1), score(2)]
        raise JournalCorrupt("source unreadable")

    with pytest.raises(JournalCorrupt):
        await journal.append_all(failing())
    assert (journal.last_seq, await journal.committed_seq()) == (0, 0)

    async def one() -> AsyncIterator[list[Record]]:
        yield [score(1)]

    await journal.append_all(one())
    assert await records(journal) == [score(1)]


async def test_committed_seq_is_the_greatest_seq_of_any_record(store: Store, journal: Journal) -> None:
    await journal.append([score(1), score(2), VoidRecord(3, 1, "k1", "r", "ops", T), CloseRecord(4, DAY, T)])
    assert await journal.committed_seq() == 4
    await journal.append([VoidRecord(5, 2, "k2", "r", "ops", T)])
    assert await journal.committed_seq() == 5
    await journal.close()
    reopened = await store.open()
    try:
        assert reopened.last_seq == 5
    finally:
        await reopened.close()


async def test_a_marker_with_null_bounds_round_trips(journal: Journal) -> None:
    """Markers store nullable bounds (the engine never closes alltime, but the columns allow it)."""
    marker = CloseRecord(1, ALLTIME_WINDOW, T)
    await journal.append([marker])
    assert await journal.close_markers() == [marker]


# -- audit -----------------------------------------------------------------------------------------


async def test_member_events_are_newest_first_with_before_seq_and_limit(journal: Journal) -> None:
    records: list[Record] = []
    for seq in range(1, 21):
        records.append(score(seq, member="a" if seq % 2 else "b", value=seq, meta='{"n":1}' if seq == 5 else None,
                             received_at=T + 100 + seq, source=f"gs{seq % 3}"))
    await journal.append(records)
    await journal.append([VoidRecord(21, 7, "k7", "r", "ops", T)])
    events = await journal.member_events("a")
    assert [e.seq for e in events] == [19, 17, 15, 13, 11, 9, 7, 5, 3, 1]
    assert [e.seq for e in await journal.member_events("a", limit=3)] == [19, 17, 15]
    assert [e.seq for e in await journal.member_events("a", before_seq=15)] == [13, 11, 9, 7, 5, 3, 1]
    assert [e.seq for e in await journal.member_events("a", limit=2, before_seq=9)] == [7, 5]
    assert await journal.member_events("a", before_seq=1) == []
    assert await journal.member_events("nobody") == []
    by_seq = {e.seq: e for e in events}
    assert by_seq[5] == StoredEvent(5, "a", 5, T, T + 105, "gs2", "k5", '{"n":1}', voided=None)
    assert by_seq[7].voided == Voided(21, "r", "ops", T) and by_seq[9].voided is None


async def test_event_by_key(journal: Journal) -> None:
    await journal.append([score(1, key="x", meta='{"a":[1]}')])
    assert await journal.event_by_key("x") == StoredEvent(1, "a", 1, T, T + 5, "gs", "x", '{"a":[1]}', voided=None)
    assert await journal.event_by_key("y") is None


# -- read-only opens -------------------------------------------------------------------------------


async def test_a_journal_never_opened_cannot_be_opened_read_only(store: Store) -> None:
    with pytest.raises(JournalCorrupt, match=names(store)):
        await store.open(readonly=True)


async def test_a_read_only_journal_reads_but_cannot_write(store: Store, journal: Journal) -> None:
    await journal.append([score(1)])
    await journal.close()
    ro = await store.open(readonly=True)
    try:
        assert await rows(ro) == [(1, "a", 1, T, "k1", None)]
        assert ro.last_seq == 1
        with pytest.raises(JournalWriteFailed, match=names(store)):
            await ro.append([score(2)])
        assert await ro.committed_seq() == 1
    finally:
        await ro.close()
    rw = await store.open()
    try:
        assert await rw.committed_seq() == 1
    finally:
        await rw.close()


async def test_a_read_only_open_works_while_the_server_holds_it_open(store: Store, journal: Journal) -> None:
    await journal.append([score(1)])
    ro = await store.open(readonly=True)
    try:
        await journal.append([score(2)])
        assert [r[0] for r in await rows(ro, upto_seq=10)] == [1, 2]
    finally:
        await ro.close()


# == sqlite only ===================================================================================


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "b.journal.sqlite"


@pytest.fixture
async def sqlite_journal(path: Path) -> AsyncIterator[SqliteJournal]:
    j = await SqliteJournal.open(path, SPEC)
    yield j
    await j.close()


async def pragma(journal: SqliteJournal, name: str) -> object:
    return list(await journal._db.execute_fetchall(f"PRAGMA {name}"))[0][0]


async def test_the_journal_is_in_wal_mode_with_synchronous_full_by_default(sqlite_journal: SqliteJournal) -> None:
    assert await pragma(sqlite_journal, "journal_mode") == "wal"
    assert await pragma(sqlite_journal, "synchronous") == 2  # FULL


async def test_durability_normal_is_opt_in(path: Path) -> None:
    j = await SqliteJournal.open(path, SPEC, durability="normal")
    try:
        assert await pragma(j, "journal_mode") == "wal"
        assert await pragma(j, "synchronous") == 1  # NORMAL
    finally:
        await j.close()


async def test_wal_mode_is_stored_in_the_file(path: Path, sqlite_journal: SqliteJournal) -> None:
    await sqlite_journal.append([score(1)])
    with sqlite3.connect(path) as other:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_closing_checkpoints_and_removes_the_wal(path: Path) -> None:
    # Only the last connection to close can do it, and it must be the writer: run a few opens,
    # so that a close order left to object ids (a set) fails here rather than now and then.
    for run in range(8):
        j = await SqliteJournal.open(path, SPEC)
        await j.lookup([f"k{run}"])  # the lookup connection has read the WAL too
        await j.append([score(run + 1)])
        await j.close()
        assert not path.with_name(path.name + "-wal").exists()


async def test_a_full_disk_fails_the_append_and_writes_nothing_until_space_returns(sqlite_journal: SqliteJournal) -> None:
    journal = sqlite_journal
    await journal.append([score(1)])
    unbounded = await pragma(journal, "max_page_count")
    await journal._db.execute(f"PRAGMA max_page_count={await pragma(journal, 'page_count')}")  # SQLITE_FULL on growth
    big = [score(i, meta='{"blob":"' + "x" * 900 + '"}') for i in range(2, 52)]
    with pytest.raises(JournalWriteFailed, match="database or disk is full"):
        await journal.append(big)
    assert journal.last_seq == 1 and await journal.committed_seq() == 1
    assert await journal.lookup([r.event.idempotency_key for r in big]) == {}
    await journal._db.execute(f"PRAGMA max_page_count={unbounded}")
    await journal.append(big)
    assert await journal.committed_seq() == 51


@pytest.mark.parametrize("readonly", [False, True], ids=["serve", "rebuild"])
async def test_a_corrupt_file_raises_journal_corrupt_naming_the_file(path: Path, readonly: bool) -> None:
    path.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(JournalCorrupt) as raised:
        await SqliteJournal.open(path, SPEC, readonly=readonly)
    assert str(path) in str(raised.value)


async def test_a_file_that_is_another_sqlite_database_is_corrupt_for_arena(path: Path) -> None:
    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE unrelated (x)")
    with pytest.raises(JournalCorrupt, match=str(path)):
        await SqliteJournal.open(path, SPEC, readonly=True)


async def test_a_missing_file_is_not_created_by_a_read_only_open(path: Path) -> None:
    with pytest.raises(JournalCorrupt, match=str(path)):
        await SqliteJournal.open(path, SPEC, readonly=True)
    assert not path.exists()


async def test_a_read_only_open_leaves_the_file_as_it_was(path: Path, sqlite_journal: SqliteJournal) -> None:
    await sqlite_journal.append([score(1)])
    await sqlite_journal.close()
    before = path.read_bytes()
    ro = await SqliteJournal.open(path, SPEC, readonly=True)
    try:
        assert await rows(ro) == [(1, "a", 1, T, "k1", None)]
        with pytest.raises(JournalWriteFailed):
            await ro.append([score(2)])
    finally:
        await ro.close()
    assert path.read_bytes() == before


async def test_a_journal_made_before_regions_gets_its_region_column_at_a_writable_open(
    path: Path, sqlite_journal: SqliteJournal
) -> None:
    await sqlite_journal.append([score(1)])
    await sqlite_journal.close()
    with sqlite3.connect(path) as db:  # as an Arena before regions made it
        db.execute("ALTER TABLE score_event DROP COLUMN region")
    journal = await SqliteJournal.open(path, SPEC)
    try:
        assert await journal.lookup(["k1"]) == {"k1": ("a", 1, T, None)}
        await journal.append([ScoreRecord(2, Event("b", "a", 2, T, "k2", None, "eu"), T, "gs")])
        assert await rows(journal) == [(1, "a", 1, T, "k1", None), (2, "a", 2, T, "k2", "eu")]
        assert (await journal.event_by_key("k2")) == StoredEvent(2, "a", 2, T, T, "gs", "k2", None, None, "eu")
    finally:
        await journal.close()


@pytest.mark.parametrize("directory", ["with#hash", "with?query", "percent%41", "a space"])
async def test_a_read_only_open_takes_any_directory_name(tmp_path: Path, directory: str) -> None:
    """Was a bug: the read-only URI was built unescaped, so "#" or "?" cut the path short (and
    opened, even created, another file read-write) and "%41" was decoded to "A"."""
    folder = tmp_path / directory
    folder.mkdir()
    path = folder / "b.journal.sqlite"
    j = await SqliteJournal.open(path, SPEC)
    await j.append([score(1)])
    await j.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    ro = await SqliteJournal.open(path, SPEC, readonly=True)
    try:
        assert await rows(ro) == [(1, "a", 1, T, "k1", None)]
    finally:
        await ro.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# -- the integrity check at an open, skipped after a clean close -----------------------------------

SKIPPED = "integrity check skipped"
CHECKED = "integrity check passed"


async def checks_at_open(path: Path, caplog: pytest.LogCaptureFixture, *, readonly: bool = False) -> str:
    """Open and close the journal at ``path``: whether its open ran the check ("checked") or
    skipped it ("skipped"), by its log line."""
    caplog.clear()
    with caplog.at_level(logging.INFO, "arena.journal"):
        journal = await SqliteJournal.open(path, SPEC, readonly=readonly)
        await journal.close()
    said = {"skipped": SKIPPED in caplog.text, "checked": CHECKED in caplog.text}
    assert list(said.values()).count(True) == 1, caplog.text
    return next(what for what, yes in said.items() if yes)


async def test_a_journal_closed_cleanly_is_opened_without_the_check_and_a_read_only_open_always_checks(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert await checks_at_open(path, caplog) == "checked"  # a new file: nothing marked it
    journal = await SqliteJournal.open(path, SPEC)
    await journal.append([score(1), score(2)])
    await journal.close()
    assert await checks_at_open(path, caplog) == "skipped"
    assert await checks_at_open(path, caplog) == "skipped"  # an open without a write keeps the mark
    assert await checks_at_open(path, caplog, readonly=True) == "checked"  # `arena rebuild`, `verify`, `migrate`
    assert await checks_at_open(path, caplog) == "skipped"


async def test_a_journal_not_closed_after_a_write_is_checked_at_its_next_open(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A write clears the mark in its own transaction: a process killed after it leaves none."""
    first = await SqliteJournal.open(path, SPEC)
    await first.close()
    killed = await SqliteJournal.open(path, SPEC)  # never closed before the next open: a SIGKILL
    try:
        await killed.append([score(1)])
        assert await checks_at_open(path, caplog) == "checked"
    finally:
        await killed.close()
    assert await checks_at_open(path, caplog) == "skipped"
    killed = await SqliteJournal.open(path, SPEC)
    try:
        async def chunks() -> AsyncIterator[list[Record]]:
            yield [score(2)]

        await killed.append_all(chunks())  # the bulk write of `arena migrate` clears it too
        assert await checks_at_open(path, caplog) == "checked"
    finally:
        await killed.close()


async def test_a_journal_killed_before_any_write_is_still_as_it_was_closed(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    journal = await SqliteJournal.open(path, SPEC)
    await journal.append([score(1)])
    await journal.close()
    killed = await SqliteJournal.open(path, SPEC)
    try:
        assert [r[0] for r in await rows(killed)] == [1]  # reads leave the file as it was
        assert await checks_at_open(path, caplog) == "skipped"
    finally:
        await killed.close()


async def test_a_copy_of_a_clean_journal_or_one_written_past_its_mark_is_checked(
    path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = await SqliteJournal.open(path, SPEC)
    await journal.append([score(1)])
    await journal.close()
    copy = tmp_path / "copy" / "b.journal.sqlite"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())  # another file: from a backup, another machine
    assert await checks_at_open(copy, caplog) == "checked"
    assert await checks_at_open(copy, caplog) == "skipped"  # its own mark now
    with sqlite3.connect(path) as db:  # a writer that does not know the mark (an older Arena)
        db.execute("INSERT INTO score_event VALUES (2, 'b', 'a', 1, ?, ?, 'gs', 'k2', NULL, NULL)", (T, T))
    assert await checks_at_open(path, caplog) == "checked"


async def test_a_journal_whose_statement_failed_is_checked_at_its_next_open(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    journal = await SqliteJournal.open(path, SPEC)
    await journal.append([score(1)])
    await journal.close()
    journal = await SqliteJournal.open(path, SPEC)
    with pytest.raises(JournalWriteFailed):
        await journal.append([score(2, key="k1")])  # k1 again
    await journal.close()
    assert await checks_at_open(path, caplog) == "checked"


async def test_a_page_overwritten_after_a_clean_close_is_found_by_the_first_read_of_it_not_at_the_open(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The decided trade: after a clean close an open trusts sqlite's own guarantees, so damage
    done to the file at rest (the same file, written by no Arena) is not looked for at the open;
    a read that reaches the page fails with JournalCorrupt naming the file, and a read-only open
    (`arena rebuild`, `verify`, `migrate`) finds it at once."""
    journal = await SqliteJournal.open(path, SPEC)
    await journal.append([score(i, member=f"m{i}", meta='{"pad":"' + "x" * 200 + '"}') for i in range(1, 2001)])
    await journal.close()
    size = path.stat().st_size
    with open(path, "r+b") as f:  # a page in the middle of the events, in place
        f.seek(size // 2 // 4096 * 4096)
        f.write(bytes(range(256)) * 16)
    caplog.clear()
    with caplog.at_level(logging.INFO, "arena.journal"):
        opened = await SqliteJournal.open(path, SPEC)
    try:
        assert SKIPPED in caplog.text
        with pytest.raises(JournalCorrupt, match=re.escape(str(path))):
            await rows(opened)
    finally:
        await opened.close()
    with pytest.raises(JournalCorrupt, match=re.escape(str(path))):  # the failed read took the mark away
        await SqliteJournal.open(path, SPEC)
    with pytest.raises(JournalCorrupt, match=re.escape(str(path))):
        await SqliteJournal.open(path, SPEC, readonly=True)
