"""The sqlite journal backend: one WAL-mode file per board in `data_dir`."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import aiosqlite
import orjson
from prometheus_client import CollectorRegistry, Metric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from arena.engine.events import Fingerprint
from arena.engine.records import BoardRecord, CloseRecord, Record, ScoreRecord, StoredEvent, VoidRecord
from arena.engine.scoring import FoldRow
from arena.engine.spec import BoardSpec
from arena.errors import JournalCorrupt, JournalError, JournalWriteFailed
from arena.journal.interface import (
    EVENT_COLUMNS,
    STORED_COLUMNS,
    EventRow,
    MarkerRow,
    ScoreRow,
    check_definition,
    close_record,
    fold_kind,
    marker_row,
    merged_records,
    recorded_definitions,
    stored_event,
)

SCHEMA_VERSION = "1"

log = logging.getLogger("arena.journal")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS board_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS score_event (
    seq INTEGER PRIMARY KEY,
    board TEXT NOT NULL,
    member TEXT NOT NULL,
    value INTEGER NOT NULL,
    occurred_at INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    source TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    meta TEXT,
    region TEXT
);
CREATE INDEX IF NOT EXISTS score_event_occurred_at ON score_event (occurred_at);
CREATE TABLE IF NOT EXISTS board_period (
    id TEXT PRIMARY KEY,
    period TEXT NOT NULL,
    period_id TEXT NOT NULL,
    period_start INTEGER,
    period_end INTEGER,
    aggregation TEXT NOT NULL,
    tie_rule TEXT NOT NULL,
    closed_at INTEGER NOT NULL,
    closed_seq INTEGER NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS board_record (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS score_void (
    seq INTEGER PRIMARY KEY,
    target_seq INTEGER NOT NULL UNIQUE REFERENCES score_event (seq),
    idempotency_key TEXT NOT NULL,
    reason TEXT NOT NULL,
    admin TEXT NOT NULL,
    voided_at INTEGER NOT NULL
);
"""

_STORED = f"SELECT {STORED_COLUMNS} FROM score_event e LEFT JOIN score_void v ON v.target_seq = e.seq"
# A batch travels as one JSON parameter, so sqlite runs it in one step: executemany steps (and
# hands the GIL back and forth with the event loop) once per row, which under load tripled the
# journal's share of the event-to-visibility lag.
_INSERT_EVENTS_JSON = (
    "INSERT INTO score_event SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5,"
    " value->>6, value->>7, value->>8, value->>9 FROM json_each(?)"
)
_LOOKUP_JSON = (
    "SELECT json_group_array(json_array(idempotency_key, member, value, occurred_at, region)) FROM score_event"
    " WHERE idempotency_key IN (SELECT value FROM json_each(?))"
)
# A fold per aggregation, as SQL over the bucket's rows (``{rows}``) whose columns are a `FoldRow`.
# sqlite has neither an exact sum past 2**63 (SUM raises) nor an arg-max, so a sum is made of
# three pieces of the values (each under 2**20 in size: exact up to 2**43 events of a member,
# more than a sqlite file can hold; `_fold_rows` adds them up), and a best or latest is the max
# (or min) of one text that orders like the standing, cut up again in SQL. Journaled values lie
# within ±(2**53 - 1) and instants within 0..10**16 (the config check and validation), which the
# fixed widths hold.
_FOLDS = {
    "sum": "SELECT member, sum(value >> 40), sum((value >> 20) & 1048575), sum(value & 1048575), max(occurred_at) AS"
           " reached_at, count(*) FROM {rows} GROUP BY member",
    "best_desc": "SELECT member, CAST(substr(t, 1, 17) AS INTEGER) - 9007199254740992 AS score,"
                 " 9999999999999999 - CAST(substr(t, 18) AS INTEGER) AS reached_at, '', n FROM (SELECT member,"
                 " max(printf('%017d%016d', value + 9007199254740992, 9999999999999999 - occurred_at)) AS t, count(*) AS n"
                 " FROM {rows} GROUP BY member)",
    "best_asc": "SELECT member, CAST(substr(t, 1, 17) AS INTEGER) - 9007199254740992 AS score,"
                " CAST(substr(t, 18) AS INTEGER) AS reached_at, '', n FROM (SELECT member,"
                " min(printf('%017d%016d', value + 9007199254740992, occurred_at)) AS t, count(*) AS n"
                " FROM {rows} GROUP BY member)",
    # the one max() makes the bare ``value`` that of its row: unique, as keys are
    "latest": "SELECT member, value AS score, CAST(substr(t, 1, 16) AS INTEGER) AS reached_at, substr(t, 17), n"
              " FROM (SELECT member, max(printf('%016d', occurred_at) || idempotency_key) AS t, value, count(*) AS n"
              " FROM {rows} GROUP BY member)",
}
# A best in one integer when the board's bounds and the bucket's span of instants fit in 62 bits
# (the common case: 30 bits of default bounds leave a 49-day span): sqlite's max() of an integer
# instead of a formatted text made the fold's query about 25 % cheaper at 10M events. {gain}: how
# far a value is from the worst bound; {last}: the bucket's last instant; {factor}: 2**{width},
# the span of its instants. Bounds may change while older events stay journaled: a value worse
# than the bounds packs below 0 and loses to the member's in-bounds ones, as it should; a member
# whose best is such a value, or a value better than the bounds by more than the 62 bits hold,
# packs outside 0..2**62 (a product past 2**63 turns into a real number, still past it). Those
# members come first, and the first row tells (`_packed_best`).
_PACKED_BEST = (
    "SELECT member, {score} AS score, {last} - (k & {mask}) AS reached_at, '', n FROM (SELECT member,"
    " max(({gain}) * {factor} + {last} - occurred_at) AS k, count(*) AS n FROM {{rows}} GROUP BY member)"
)
_MEMBER_ORDER = " ORDER BY member"
"""The order of a fold's rows: the GROUP BY's own (no sort of its output). A rank order cost
sqlite a second sort, of the members: about 40 % of the query's CPU at 10**6 members, where
Python's sort of the entries costs what the sort of the names it saves did (`RankedTable.from_states`)."""
_INSTANTS = "SELECT (SELECT min(occurred_at) FROM score_event), (SELECT max(occurred_at) FROM score_event)"
_CACHE_KIB = 8192
"""sqlite's page cache of a journal's writer. Appends touch the right edge of the table and of its
indexes (seqs, occurred_at near now, time-ordered keys such as UUIDv7): a few pages; a larger
cache only kept pages read once, and counted in the process's memory (64 MB was 22 B a member a
table at 10**6 members, 3 tables). Pages beyond it come from the OS's file cache: the CPU of a
10**6-event ingest was the same with 64 and 8 MB, with time-ordered or random keys
(`python -m loadtest.bench_memory`, issue 39)."""
_FOLD_CACHE_KIB = 4096
"""sqlite's page cache while a fold's query runs: its GROUP BY sorts in runs of the cache's size,
and runs of a few MB (that stay in the CPU's caches) then merged cost about 25 % less CPU than
runs of 64 MB at 10M events."""
_SPLIT_EVENTS = 200_000
"""A fold of more events than this (counted by its seqs) runs as two queries, each on a range of
members and a connection of its own (`SqliteJournal.fold`): sqlite's sort of the GROUP BY is
most of a replay's CPU, and two sorts of half the rows run on two cores. Each scans the whole
bucket: about 1.15x the CPU at 10M events, for a shorter time to the last row only while a second
core is free (docs/performance.md, "The fold in member order, split in two member ranges")."""
_PIVOT_SAMPLE = 1000
_SAMPLE = "SELECT member FROM score_event WHERE seq IN (SELECT value FROM json_each(?))"
_WAL_HEADER_BYTES = 32
_CLEAN_KEY = "closed_cleanly"
"""The board_meta row of the clean-close mark (`_clean_mark`): an open that finds it, matching,
skips the integrity check (`_check_integrity`)."""
_LOOKUP_CHUNK = 500
_SCAN_CHUNK = 2_000
"""Rows per read of a replay, each folded in one turn of the event loop: a few ms, so that one
board's replay does not stall the other boards. 20,000-row reads held the loop about 70 ms each
and made the replay slower, not faster."""


class SqliteJournal:
    """A board's journal in one WAL-mode sqlite file, driven through aiosqlite's thread."""

    def __init__(self, db: aiosqlite.Connection, path: str, spec: BoardSpec, last_seq: int) -> None:
        self._db = db
        # Key lookups get their own connection (and thread): the actor looks up the next batch's
        # keys while this batch's commit waits on fsync. WAL lets it read the committed state.
        self._lookups = db
        self.path = path
        self._spec = spec
        self.last_seq = last_seq
        self._clean = True
        """False once any statement failed: then `close` leaves no clean-close mark."""
        self._mark: str | None = None
        """The clean-close mark (`_clean_mark`) the file holds, as this open found it."""
        self._board_records = True
        """Whether the file has the board_record table: a journal of an older Arena opened
        read-only has none (a writable open creates it)."""
        self._checking: asyncio.Task[None] | None = None
        """The integrity check running beside the caller's reads (`open`'s ``beside``)."""

    @classmethod
    async def open(cls, path: Path, spec: BoardSpec, *, durability: str = "full", readonly: bool = False,
                   beside: bool = False) -> SqliteJournal:
        """Open (or create) a board's journal and check it belongs to this board definition.

        ``beside`` (to write only): the integrity check, when one is due, runs in its own
        connection and thread while the caller reads; `checked` waits for it, and so does every
        write. Otherwise the open waits for it. Raises JournalCorrupt (unreadable file, named),
        BoardDefinitionChanged.
        """
        name = str(path)
        if readonly and not path.exists():
            # said here, not by a failed connect: aiosqlite then leaves its worker thread to
            # report to an event loop that may be gone by the time it does
            raise JournalCorrupt(f"board {spec.name}: no journal at {name}")
        _check_not_truncated(path)
        try:
            if readonly:
                db = await _connect_readonly(path)
            else:
                # autocommit: `append` sends a common batch as one statement, its own transaction
                db = await aiosqlite.connect(name, isolation_level=None)
        except sqlite3.Error as exc:
            raise JournalCorrupt(f"{name}: cannot open journal: {exc}") from exc
        journal = cls(db, name, spec, 0)
        try:
            if not readonly:
                await db.execute("PRAGMA journal_mode=WAL")
                await db.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
                await db.executescript(_SCHEMA)
                await _add_region_column(db)
            await db.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
            if readonly:
                found = await db.execute_fetchall("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'board_record'")
                journal._board_records = bool(list(found))
            if not readonly:
                marks = await db.execute_fetchall(f"SELECT value FROM board_meta WHERE key = '{_CLEAN_KEY}'")
                journal._mark = next((row[0] for row in marks), None)
            if journal._mark is not None and journal._mark == _clean_mark(path, await journal.committed_seq()):
                log.info("journal %s: closed cleanly at seq %s, integrity check skipped", name, journal._mark.split()[0])
            elif beside and not readonly:
                journal._checking = asyncio.create_task(journal._check_beside(), name=f"check:{name}")
                log.info("journal %s: not closed cleanly: integrity check begun in its own thread, no write before it passes", name)
            else:
                await _check_integrity(db, name)
            await journal._check_definition(readonly)
            journal.last_seq = await journal.committed_seq()
            if not readonly:
                journal._lookups = await _connect_readonly(path)
            return journal
        except JournalError:
            await journal._failed_open()
            raise
        except sqlite3.Error as exc:
            await journal._failed_open()
            raise JournalCorrupt(f"{name}: not a readable Arena journal: {exc}") from exc

    async def _failed_open(self) -> None:
        """Close what a failed `open` opened; a failed check begun beside it is the error the
        open raises, as when the open waited for it."""
        await self._settle_check()
        await self._db.close()
        await self.checked()

    async def _check_beside(self) -> None:
        """`_check_integrity` in a connection (and thread) of its own, which sqlite runs without
        the GIL. A failure leaves no clean-close mark at `close`."""
        try:
            db = await _connect_readonly(Path(self.path))
            try:
                await _check_integrity(db, self.path)
            finally:
                await db.close()
        except JournalError:
            self._clean = False
            raise
        except sqlite3.Error as exc:
            self._clean = False
            raise JournalCorrupt(f"{self.path}: not a readable Arena journal: {exc}") from exc

    async def checked(self) -> None:
        if self._checking is not None:
            await asyncio.shield(self._checking)  # a cancelled waiter leaves the check to finish

    async def _settle_check(self) -> None:
        """Wait for a check begun beside, whatever its outcome (`close` marks the journal only
        if it passed): its connection closes with it."""
        if self._checking is not None:
            await asyncio.wait([self._checking])
            if not self._checking.cancelled():
                self._checking.exception()  # retrieved: a failure is what `checked` raises

    async def _unmark(self) -> None:
        """Inside the caller's transaction: the clean-close mark deleted with the first write, so
        that they commit together (the caller forgets ``_mark`` once committed). A journal opened
        and closed without a write, or killed before its first, stays as it was closed."""
        if self._mark is not None:
            await self._db.execute(f"DELETE FROM board_meta WHERE key = '{_CLEAN_KEY}'")

    async def _distrust(self) -> None:
        """After a failed statement: no clean-close mark now nor at `close`, so that the next
        open checks the file (unless it cannot even delete the mark: a full disk, say). Each
        failure deletes it again until a write commits: a delete that landed inside a write's
        transaction is rolled back with it. Not while a check began beside the open: a mark the
        file holds then did not match it (the next open checks anyway), and nothing is written
        before the check passed."""
        self._clean = False
        if self._db is not self._lookups and self._checking is None:
            try:
                await self._unmark()
            except sqlite3.Error:
                pass

    async def _check_definition(self, readonly: bool) -> None:
        rows = await self._db.execute_fetchall("SELECT value FROM board_meta WHERE key = 'definition'")
        stored = [row[0] for row in rows]
        records = await self._db.execute_fetchall("SELECT 1 FROM score_event UNION ALL SELECT 1 FROM board_period LIMIT 1")
        wanted = check_definition(self._spec, stored[0] if stored else None, bool(records), self.path)
        if wanted is None or readonly:
            return
        await self.checked()
        await self._db.execute("BEGIN IMMEDIATE")
        await self._unmark()
        await self._db.execute("INSERT OR REPLACE INTO board_meta VALUES ('definition', ?)", (wanted,))
        await self._db.execute("INSERT OR REPLACE INTO board_meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        await self._db.execute("COMMIT")
        self._mark = None

    async def lookup(self, keys: Sequence[str]) -> dict[str, Fingerprint]:
        found: dict[str, Fingerprint] = {}
        payload = _json_rows(keys)
        try:
            if payload is not None:
                rows = await self._lookups.execute_fetchall(_LOOKUP_JSON, (payload,))
                for key, member, value, occurred_at, region in orjson.loads(list(rows)[0][0]):
                    found[key] = (member, value, occurred_at, region)
                return found
            for i in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = keys[i : i + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = await self._lookups.execute_fetchall(
                    f"SELECT idempotency_key, member, value, occurred_at, region FROM score_event WHERE idempotency_key IN ({marks})",
                    chunk,
                )
                for key, member, value, occurred_at, region in rows:
                    found[key] = (member, value, occurred_at, region)
        except (sqlite3.Error, UnicodeEncodeError) as exc:
            await self._distrust()
            raise JournalError(f"{self.path}: key lookup failed: {exc}") from exc
        return found

    async def append(self, records: Sequence[Record]) -> None:
        if not records:
            return
        await self.checked()
        events, markers, voids, others = self._rows(records)
        db = self._db
        payload = _json_rows(events) if events else None
        try:
            if payload is not None and not markers and not voids and not others and self._mark is None:
                # the common batch: one statement is one transaction (autocommit), in one step
                await db.execute(_INSERT_EVENTS_JSON, (payload,))
            else:
                await db.execute("BEGIN IMMEDIATE")
                await self._unmark()
                await self._insert(events, markers, voids, others)
                await db.execute("COMMIT")
                self._mark = None
        except (sqlite3.Error, UnicodeEncodeError) as exc:  # a string without a UTF-8 form is refused too
            await self._rollback()
            await self._distrust()
            raise JournalWriteFailed(f"{self.path}: write failed: {exc}") from exc
        self.last_seq = records[-1].seq

    async def append_all(self, chunks: AsyncIterable[Sequence[Record]]) -> None:
        await self.checked()
        last_seq = self.last_seq
        try:
            await self._db.execute("BEGIN IMMEDIATE")
            await self._unmark()
            async for records in chunks:
                if records:
                    await self._insert(*self._rows(records))
                    last_seq = records[-1].seq
            await self._db.execute("COMMIT")
            self._mark = None
        except (sqlite3.Error, UnicodeEncodeError) as exc:
            await self._rollback()
            await self._distrust()
            raise JournalWriteFailed(f"{self.path}: write failed: {exc}") from exc
        except BaseException:
            await self._rollback()
            raise
        self.last_seq = last_seq

    def _rows(
        self, records: Sequence[Record]
    ) -> tuple[list[tuple[Any, ...]], list[MarkerRow], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The rows of ``records``: score events, close markers, voids, board records."""
        board = self._spec.name
        events = []
        markers = []
        voids = []
        others = []
        for r in records:
            if isinstance(r, ScoreRecord):
                e = r.event
                events.append((r.seq, board, e.member, e.value, e.occurred_at, r.received_at, r.source, e.idempotency_key,
                               e.meta, e.region))
            elif isinstance(r, CloseRecord):
                markers.append(marker_row(self._spec, r))
            elif isinstance(r, BoardRecord):
                others.append((r.seq, r.kind, r.body))
            else:
                voids.append((r.seq, r.target_seq, r.idempotency_key, r.reason, r.admin, r.voided_at))
        return events, markers, voids, others

    async def _insert(self, events: list[tuple[Any, ...]], markers: list[MarkerRow], voids: list[tuple[Any, ...]],
                      others: list[tuple[Any, ...]]) -> None:
        """Insert rows inside the caller's transaction."""
        db = self._db
        payload = _json_rows(events) if events else None
        if payload is not None:
            await db.execute(_INSERT_EVENTS_JSON, (payload,))
        elif events:
            await db.executemany("INSERT INTO score_event VALUES (?,?,?,?,?,?,?,?,?,?)", events)
        if markers:
            await db.executemany("INSERT INTO board_period VALUES (?,?,?,?,?,?,?,?,?)", markers)
        if voids:
            await db.executemany("INSERT INTO score_void VALUES (?,?,?,?,?,?)", voids)
        if others:
            await db.executemany("INSERT INTO board_record VALUES (?,?,?)", others)
            definitions = recorded_definitions(self._spec.name, (BoardRecord(*row) for row in others))
            if definitions:
                await db.execute("INSERT OR REPLACE INTO board_meta VALUES ('definition', ?)", (definitions[-1],))

    async def _rollback(self) -> None:
        try:
            await self._db.rollback()
        except sqlite3.Error:
            pass

    async def committed_seq(self) -> int:
        try:
            others = " UNION ALL SELECT max(seq) FROM board_record" if self._board_records else ""
            rows = await self._db.execute_fetchall(
                "SELECT max(m) FROM (SELECT max(seq) AS m FROM score_event"
                " UNION ALL SELECT max(closed_seq) FROM board_period UNION ALL SELECT max(seq) FROM score_void" + others + ")"
            )
        except sqlite3.Error as exc:
            await self._distrust()
            raise JournalError(f"{self.path}: cannot read: {exc}") from exc
        value = list(rows)[0][0]
        return int(value) if value is not None else 0

    async def scan(
        self,
        upto_seq: int | None = None,
        min_occurred_at: int | None = None,
        before_occurred_at: int | None = None,
        min_seq: int | None = None,
    ) -> AsyncIterator[list[ScoreRow]]:
        sql = "SELECT seq, member, value, occurred_at, idempotency_key, region FROM score_event WHERE seq <= ?"
        params: list[int] = [upto_seq if upto_seq is not None else self.last_seq]
        if min_seq is not None:
            sql += " AND seq >= ?"
            params.append(min_seq)
        if min_occurred_at is not None:
            sql += " AND occurred_at >= ?"
            params.append(min_occurred_at)
        if before_occurred_at is not None:
            sql += " AND occurred_at < ?"
            params.append(before_occurred_at)
        try:
            async with self._db.execute(sql + " ORDER BY seq", params) as cursor:
                while True:
                    rows = await cursor.fetchmany(_SCAN_CHUNK)
                    if not rows:
                        break
                    yield rows  # type: ignore[misc]
        except sqlite3.Error as exc:
            await self._distrust()
            raise JournalCorrupt(f"{self.path}: journal unreadable: {exc}") from exc

    async def records(self, upto_seq: int | None = None) -> AsyncIterator[list[Record]]:
        upto = self._upto(upto_seq)
        others: list[CloseRecord | VoidRecord | BoardRecord] = [
            *await self.close_markers(upto), *(void for void, _ in await self.voids(upto)), *await self.board_records(upto)]
        async for chunk in merged_records(self._spec.name, self._events(upto), others):
            yield chunk

    async def _events(self, upto: int) -> AsyncIterator[list[EventRow]]:
        try:
            async with self._db.execute(f"SELECT {EVENT_COLUMNS} FROM score_event WHERE seq <= ? ORDER BY seq", (upto,)) as cursor:
                while rows := await cursor.fetchmany(_SCAN_CHUNK):
                    yield rows  # type: ignore[misc]
        except sqlite3.Error as exc:
            await self._distrust()
            raise JournalCorrupt(f"{self.path}: journal unreadable: {exc}") from exc

    async def next_instant(self, at: int, before: int | None) -> int | None:
        sql = "SELECT min(occurred_at) FROM score_event WHERE occurred_at >= ?"
        params = [at]
        if before is not None:
            sql += " AND occurred_at < ?"
            params.append(before)
        value = (await self._read(sql, params))[0][0]
        return None if value is None else int(value)

    async def fold(self, start: int, end: int | None, below_seq: int, upto_seq: int) -> AsyncIterator[list[FoldRow]]:
        spec = self._spec
        kind = fold_kind(spec)
        first, last = (await self._read(_INSTANTS, ()))[0]
        instants = ""
        bounds: list[int] = []
        if first is not None and (start > first or (end is not None and end <= last)):
            # a bucket of some instants only: read through the occurred_at index (otherwise the
            # table in seq order, which is cheaper than the index for all of it)
            instants, bounds = " AND occurred_at >= ?", [start]
            if end is not None:
                instants += " AND occurred_at < ?"
                bounds.append(end)
            last = (await self._read("SELECT max(occurred_at) FROM score_event WHERE true" + instants, bounds))[0][0]
        rows = "score_event e WHERE seq < ? AND seq <= ?" + instants
        params: list[Any] = [below_seq, upto_seq, *bounds]
        if (await self._read("SELECT EXISTS (SELECT 1 FROM score_void WHERE seq <= ?)", (upto_seq,)))[0][0]:
            rows += " AND NOT EXISTS (SELECT 1 FROM score_void v WHERE v.target_seq = e.seq AND v.seq <= ?)"
            params.append(upto_seq)
        packed = None if last is None else _packed_best(spec, kind, start, last)
        pivot = await self._pivot(min(below_seq - 1, upto_seq))
        try:
            await self._db.execute(f"PRAGMA cache_size=-{_FOLD_CACHE_KIB}")
            try:
                halves = _folded(self._db, kind, packed, rows, params) if pivot is None else \
                    self._split(kind, packed, rows, params, pivot)
                async for chunk in halves:
                    yield chunk
            finally:
                await self._db.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        except sqlite3.Error as exc:
            await self._distrust()
            raise JournalCorrupt(f"{self.path}: journal unreadable: {exc}") from exc

    async def _split(self, kind: str, packed: tuple[str, range] | None, rows: str, params: list[Any],
                     pivot: str) -> AsyncIterator[list[FoldRow]]:
        """A fold's rows of the members below ``pivot``, then of the others. The upper half's
        query sorts meanwhile on a connection (a thread) of its own: two sorts on two cores, and
        its rows are ready, or nearly, when the lower half's have been read."""
        upper = await _connect_readonly(Path(self.path))
        try:
            await upper.execute(f"PRAGMA cache_size=-{_FOLD_CACHE_KIB}")
            above = rows + " AND member >= ?", [*params, pivot]
            sorting = asyncio.ensure_future(upper.execute(_first_fold(kind, packed).format(rows=above[0]), above[1]))
            try:
                async for chunk in _folded(self._db, kind, packed, rows + " AND member < ?", [*params, pivot]):
                    yield chunk
                async for chunk in _folded(upper, kind, packed, *above, await sorting):
                    yield chunk
            finally:
                sorting.cancel()  # the lower half failed, or its reader stopped early
                await asyncio.gather(sorting, return_exceptions=True)
        finally:
            await upper.close()

    async def _pivot(self, last: int) -> str | None:
        """Where a fold of the events up to seq ``last`` is split in two member ranges (`fold`):
        the median member of events sampled at evenly spaced seqs (members weighted by their
        events, as the sorts' work is), or None for a fold too small to split. A few hundred
        index probes."""
        if last <= _SPLIT_EVENTS:
            return None
        seqs = orjson.dumps([1 + i * (last - 1) // _PIVOT_SAMPLE for i in range(_PIVOT_SAMPLE + 1)]).decode()
        members = sorted(row[0] for row in await self._read(_SAMPLE, (seqs,)))
        return members[len(members) // 2] if members else None

    async def close_markers(self, upto_seq: int | None = None) -> list[CloseRecord]:
        rows = await self._read(
            "SELECT period, period_id, period_start, period_end, closed_at, closed_seq FROM board_period"
            " WHERE closed_seq <= ? ORDER BY closed_seq",
            (self._upto(upto_seq),),
        )
        return [close_record(row) for row in rows]

    async def voids(self, upto_seq: int | None = None) -> list[tuple[VoidRecord, int]]:
        rows = await self._read(
            "SELECT v.seq, v.target_seq, v.idempotency_key, v.reason, v.admin, v.voided_at, e.occurred_at"
            " FROM score_void v JOIN score_event e ON e.seq = v.target_seq WHERE v.seq <= ? ORDER BY v.seq",
            (self._upto(upto_seq),),
        )
        return [(VoidRecord(*row[:6]), row[6]) for row in rows]

    async def board_records(self, upto_seq: int | None = None) -> list[BoardRecord]:
        if not self._board_records:
            return []
        rows = await self._read("SELECT seq, kind, body FROM board_record WHERE seq <= ? ORDER BY seq", (self._upto(upto_seq),))
        return [BoardRecord(*row) for row in rows]

    async def event_by_key(self, key: str) -> StoredEvent | None:
        rows = await self._read(_STORED + " WHERE e.idempotency_key = ?", (key,))
        return stored_event(rows[0]) if rows else None

    async def member_events(self, member: str, limit: int | None = None, before_seq: int | None = None) -> list[StoredEvent]:
        sql = _STORED + " WHERE e.member = ?"
        params: list[object] = [member]
        if before_seq is not None:
            sql += " AND e.seq < ?"
            params.append(before_seq)
        sql += " ORDER BY e.seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [stored_event(row) for row in await self._read(sql, params)]

    async def close(self) -> None:
        await self._settle_check()
        if self._db is not self._lookups and self._clean:
            # the last write: a journal closed after no failure is marked for the next open
            try:
                mark = _clean_mark(Path(self.path), await self.committed_seq())
                if mark != self._mark:
                    await self._db.execute("INSERT OR REPLACE INTO board_meta VALUES (?, ?)", (_CLEAN_KEY, mark))
            except (JournalError, sqlite3.Error, OSError, ValueError) as exc:  # ValueError: aiosqlite's connection is gone
                log.warning("journal %s: not marked as closed cleanly (%s): its next open checks it", self.path, exc)
            self._clean = False  # closed: a second close writes nothing
        # The writer last: only the last connection to close checkpoints the WAL and deletes it
        # (a read-only one cannot). A read-only journal has one connection for both.
        for db in dict.fromkeys([self._lookups, self._db]):
            try:
                await db.close()
            except sqlite3.Error:
                pass

    def _upto(self, upto_seq: int | None) -> int:
        return upto_seq if upto_seq is not None else self.last_seq

    async def _read(self, sql: str, params: Iterable[object]) -> list[tuple[Any, ...]]:  # sqlite rows: untyped
        try:
            return list(await self._db.execute_fetchall(sql, tuple(params)))  # type: ignore[arg-type]
        except sqlite3.Error as exc:
            await self._distrust()
            raise JournalCorrupt(f"{self.path}: journal unreadable: {exc}") from exc


@dataclass(frozen=True, slots=True)
class SqliteBackend:
    """The journals as one sqlite file per board in ``data_dir`` (see `journal_path`)."""

    data_dir: Path
    durability: str = "full"

    def where(self, board: str) -> str:
        return str(journal_path(self.data_dir, board))

    async def open(self, spec: BoardSpec, *, readonly: bool = False) -> SqliteJournal:
        path = journal_path(self.data_dir, spec.name)
        return await SqliteJournal.open(path, spec, durability=self.durability, readonly=readonly, beside=True)

    def watch(self, registry: CollectorRegistry, boards: Iterable[str]) -> None:
        registry.register(_WalSizes(self.data_dir, boards))

    async def close(self) -> None:
        pass  # each journal holds its own connections


def journal_path(data_dir: Path, board: str) -> Path:
    return data_dir / f"{board}.journal.sqlite"


async def _add_region_column(db: aiosqlite.Connection) -> None:
    """Give a journal made before regions its ``region`` column (null: no region)."""
    columns = [row[1] for row in await db.execute_fetchall("PRAGMA table_info(score_event)")]
    if "region" not in columns:
        await db.execute("ALTER TABLE score_event ADD COLUMN region TEXT")


async def _connect_readonly(path: Path) -> aiosqlite.Connection:
    # as_uri percent-encodes the path: a "#", "?" or "%" in it would otherwise end or change the
    # URI (and open, even create, another file read-write)
    return await aiosqlite.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)


async def _check_integrity(db: aiosqlite.Connection, name: str) -> None:
    """Every page's structure, in C: about 5% of a replay's time, and it catches a torn or
    overwritten page (an index one included) before a replay or a lookup trusts it. Raises
    JournalCorrupt."""
    started = time.perf_counter()
    problems = [row[0] for row in await db.execute_fetchall("PRAGMA quick_check")]
    if problems != ["ok"]:
        detail = " ".join(problems[0].split())[:200]
        raise JournalCorrupt(f"{name}: journal is corrupt (quick_check: {detail})")
    log.info("journal %s: integrity check passed in %.2fs", name, time.perf_counter() - started)


def _clean_mark(path: Path, seq: int) -> str:
    """What `SqliteJournal.close` records of a journal it closed cleanly, and an open compares
    with the file it opened: its last seq (an older Arena, which leaves the mark, writing after it
    changes that) and the file's identity (a copy from elsewhere is another file)."""
    found = os.stat(path)
    return f"{seq} {found.st_dev} {found.st_ino}"


def wal_path(journal: Path) -> Path:
    """The WAL file sqlite keeps beside a journal while it is open."""
    return Path(f"{journal}-wal")


def _check_not_truncated(path: Path) -> None:
    """Raise JournalCorrupt when the main file is shorter than its header says (SQLite would read
    the missing pages as zeros). Decidable only while the WAL holds no frames: mid-checkpoint the
    main file may lag its header, and the WAL has those pages. O(1)."""
    try:
        size = path.stat().st_size
        wal = wal_path(path)
        if size == 0 or (wal.exists() and wal.stat().st_size > _WAL_HEADER_BYTES):
            return
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError:
        return  # sqlite's open names the problem
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return  # not a database at all: sqlite's open says so
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if header[92:96] == header[24:28] and size < pages * page_size:  # the in-header size is valid
        raise JournalCorrupt(f"{path}: journal is truncated: {size} bytes, its header says {pages} pages of {page_size}")


class _WalSizes(Collector):
    """`arena_journal_wal_bytes`: the WAL size of every board ``boards`` names at each scrape, so
    a board added at runtime is measured too. A WAL that is never reset (a checkpoint starved by
    readers) slows every write and key lookup: measured, unbounded WAL growth took the lag p50
    from about 2 to 14 ms."""

    def __init__(self, data_dir: Path, boards: Iterable[str]) -> None:
        self.data_dir = data_dir
        self.boards = boards

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily("arena_journal_wal_bytes",
                                 "Size of a board's journal WAL file: a few MB while checkpoints keep up, growing when starved",
                                 labels=["board"])

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for board in list(self.boards):
            family.add_metric([board], _file_size(wal_path(journal_path(self.data_dir, board))))
        yield family


def _file_size(path: Path) -> float:
    try:
        return float(path.stat().st_size)
    except FileNotFoundError:  # before the journal's first write, and after a clean close
        return 0.0


def _packed_best(spec: BoardSpec, kind: str, start: int, last: int) -> tuple[str, range] | None:
    """The query folding a best as one integer a member (`_PACKED_BEST`), and the scores it
    packs: a row whose score is not one of them is a member it cannot pack, whose fold needs the
    text form. None when it cannot be used: not a best, or the bounds and the span are too wide."""
    if kind not in ("best_desc", "best_asc"):
        return None
    lo, hi = spec.min_value, spec.max_value
    width = max(0, last - start).bit_length()
    if (hi - lo).bit_length() + width > 62:
        return None
    room = 1 << (62 - width)
    if kind == "best_desc":
        gain, score, scores = f"value - {lo}", f"{lo} + (k >> {width})", range(lo, lo + room)
    else:
        gain, score, scores = f"{hi} - value", f"{hi} - (k >> {width})", range(hi - room + 1, hi + 1)
    sql = _PACKED_BEST.format(score=score, gain=gain, factor=1 << width, last=last, mask=(1 << width) - 1)
    return sql, scores


async def _folded(db: aiosqlite.Connection, kind: str, packed: tuple[str, range] | None, rows: str, params: list[Any],
                  started: aiosqlite.Cursor | None = None) -> AsyncIterator[list[FoldRow]]:
    """The rows of a fold over ``rows`` (the FROM and WHERE of `SqliteJournal.fold`) on ``db``,
    in chunks, members in code point order. The packed best first when there is one: from the
    first member it cannot pack on, the text form. ``started``: the cursor of the first query
    (`_first_fold`), executed already."""
    if packed is not None:
        scores = packed[1]
        async with started or await db.execute(_first_fold(kind, packed).format(rows=rows), params) as cursor:
            while chunk := await cursor.fetchmany(_SCAN_CHUNK):
                packed_scores = list(map(itemgetter(1), chunk))
                if min(packed_scores) in scores and max(packed_scores) in scores:
                    yield chunk  # rows of FoldRow's columns
                    continue
                cut = next(i for i, score in enumerate(packed_scores) if score not in scores)
                if cut:
                    yield chunk[:cut]
                rows, params = rows + " AND member >= ?", [*params, chunk[cut][0]]
                break
            else:
                return
        started = None
    async with started or await db.execute(_first_fold(kind, None).format(rows=rows), params) as text:
        while folded := await text.fetchmany(_SCAN_CHUNK):
            yield _sums(folded) if kind == "sum" else folded


def _first_fold(kind: str, packed: tuple[str, range] | None) -> str:
    """The fold query to try first (its ``{rows}`` left to fill): the packed best when there is
    one (`_packed_best`), else the text form."""
    return (_FOLDS[kind] if packed is None else packed[0]) + _MEMBER_ORDER


def _sums(rows: Iterable[Any]) -> list[FoldRow]:
    """The rows of a sum's fold with their pieces added up."""
    return [(m, (high << 40) + (middle << 20) + low, r, "", n) for m, high, middle, low, r, n in rows]


def _json_rows(rows: Sequence[object]) -> str | None:
    """Rows as one JSON array for the one-step statements, or None when a string holds U+0000
    (sqlite's JSON functions end a string there; only idempotency keys may hold one) or has no
    UTF-8 form (validation refuses those; binding it then fails as a write, never as a crash)."""
    try:
        payload = orjson.dumps(rows)
    except TypeError:
        return None
    return None if b"\\u0000" in payload else payload.decode()

