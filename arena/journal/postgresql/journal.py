"""The PostgreSQL journal backend: the journals of all boards in the tables of one schema (a
``board`` column tells them apart), through one asyncpg pool per process.

It answers byte for byte what the sqlite backend answers:
- idempotency keys and void reasons are stored as ``bytea``, the UTF-8 of the string: PostgreSQL
  ``text`` cannot hold U+0000, which both may contain. A codec on every connection turns them
  into ``str`` and back, so that no code above it sees bytes;
- members never hold U+0000 (validation refuses category Cc); ``meta`` is the compact JSON text
  received (U+0000 is escaped in it), kept as ``text``: ``jsonb`` reorders keys and drops duplicates;
- text columns compare in code point order (``COLLATE "C"``: Python's ``str`` order);
- values are ``bigint`` (board bounds lie within ±2**53); sums are made in Python, exact at any size.

A write either commits or raises JournalWriteFailed; when the connection broke while the server
had the statement, the outcome is unknown and `PostgresJournal.committed_seq` settles it against
the store, waiting for the server to come back (`Journal.append` says why).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from arena.config import JournalSettings
from arena.engine.events import Fingerprint
from arena.engine.records import BoardRecord, CloseRecord, Record, ScoreRecord, StoredEvent, VoidRecord
from arena.engine.scoring import FoldRow
from arena.engine.spec import BoardSpec
from arena.errors import JournalCorrupt, JournalError, JournalUnavailable, JournalWriteFailed, OwnershipLost
from arena.journal.interface import (
    EVENT_COLUMNS,
    STORED_COLUMNS,
    EventRow,
    ScoreRow,
    check_definition,
    close_record,
    fold_kind,
    fold_order,
    marker_row,
    merged_records,
    recorded_definitions,
    stored_event,
)
from arena.journal.postgresql.store import RETRY_MAX_SECONDS, STORE_ERRORS, PostgresStore, connection_broke

log = logging.getLogger("arena.journal")

# The batch as one array per column, unnested by the server: one statement, one round trip.
# Measured against executemany (loadtest/bench_pg_insert.py, in the commit that chose it).
_INSERT_EVENTS = (
    "INSERT INTO {s}.score_event SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[],"
    " $5::bigint[], $6::bigint[], $7::text[], $8::bytea[], $9::text[], $10::text[])"
)
# Fencing: an append commits only while the board's owner row still holds the epoch this
# journal was granted (a conditional UPDATE that must touch one row, in the same transaction).
_FENCE = "UPDATE {s}.board_owner SET epoch = epoch WHERE board = $1 AND epoch = $2"
_INSERT_EVENTS_FENCED = (
    "WITH fence AS (UPDATE {s}.board_owner SET epoch = epoch WHERE board = $1 AND epoch = $11 RETURNING 1) "
    + _INSERT_EVENTS + " WHERE EXISTS (SELECT FROM fence)"
)
_GRANT = (
    "INSERT INTO {s}.board_owner AS o VALUES ($1, $2, $3, 1) ON CONFLICT (board) DO UPDATE"
    " SET node_id = EXCLUDED.node_id, instance = EXCLUDED.instance, epoch = o.epoch + 1 RETURNING epoch"
)
"""A new epoch for this process, whoever held the board: its appends fence off any older writer."""
_INSERT_MARKERS = "INSERT INTO {s}.board_period VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
_INSERT_VOIDS = "INSERT INTO {s}.score_void VALUES ($1, $2, $3, $4, $5, $6, $7)"
_INSERT_BOARD_RECORDS = "INSERT INTO {s}.board_record VALUES ($1, $2, $3, $4)"
_LOOKUP = (
    "SELECT idempotency_key, member, value, occurred_at, region FROM {s}.score_event"
    " WHERE board = $1 AND idempotency_key = ANY($2::bytea[])"
)
_COMMITTED = (
    "SELECT coalesce(greatest((SELECT max(seq) FROM {s}.score_event WHERE board = $1),"
    " (SELECT max(closed_seq) FROM {s}.board_period WHERE board = $1),"
    " (SELECT max(seq) FROM {s}.score_void WHERE board = $1){records}), 0)"
)
BOARD_RECORDS_VERSION = 5
"""The schema version that has ``board_record``: a read-only start on older tables finds none."""


def _committed(version: int) -> str:
    return _COMMITTED.replace("{records}", ", (SELECT max(seq) FROM {s}.board_record WHERE board = $1)"
                              if version >= BOARD_RECORDS_VERSION else "")
_HAS_RECORDS = (
    "SELECT EXISTS (SELECT 1 FROM {s}.score_event WHERE board = $1)"
    " OR EXISTS (SELECT 1 FROM {s}.board_period WHERE board = $1)"
)
_STORED = (
    f"SELECT {STORED_COLUMNS} FROM {{s}}.score_event e"
    " LEFT JOIN {s}.score_void v ON v.board = e.board AND v.target_seq = e.seq WHERE e.board = $1"
)
# A fold per aggregation over the bucket's rows (``{rows}``), in `FoldRow`'s columns: a sum of
# bigint is numeric, exact at any size; an array of two bigints orders like a best standing;
# latest takes the value and key of the greatest (occurred_at, key), bytea comparing in code
# point order as sqlite's text does.
_FOLDS = {
    "sum": "SELECT member, sum(value) AS score, max(occurred_at) AS reached_at, '', count(*) FROM {rows} GROUP BY member",
    "best_desc": "SELECT member, best[1] AS score, -best[2] AS reached_at, '', n FROM (SELECT member,"
                 " max(ARRAY[value, -occurred_at]) AS best, count(*) AS n FROM {rows} GROUP BY member) f",
    "best_asc": "SELECT member, best[1] AS score, best[2] AS reached_at, '', n FROM (SELECT member,"
                " min(ARRAY[value, occurred_at]) AS best, count(*) AS n FROM {rows} GROUP BY member) f",
    "latest": "SELECT member, (array_agg(value ORDER BY occurred_at DESC, idempotency_key DESC))[1] AS score,"
              " max(occurred_at) AS reached_at, (array_agg(idempotency_key ORDER BY occurred_at DESC,"
              " idempotency_key DESC))[1], count(*) FROM {rows} GROUP BY member",
}

_SCAN_CHUNK = 2_000
"""Rows per fetch of a replay's server-side cursor, each folded in one turn of the event loop
(as sqlite's chunks, for the same reason)."""
SETTLE_SECONDS = 30.0
"""How long `committed_seq` waits for the server to settle a write of unknown outcome. Past it
the actor crashes, and the supervisor opens the journal again once the server is back."""


@dataclass(frozen=True, slots=True)
class Fence:
    """What a journal's appends commit under: ``board``'s owner row still holds ``epoch``."""

    board: str
    epoch: int
class PostgresJournal:
    """One board's journal in the shared tables of a `PostgresBackend`'s schema."""

    def __init__(self, store: PostgresStore, spec: BoardSpec, path: str, last_seq: int, fence: Fence | None) -> None:
        self._store = store
        self._spec = spec
        self._board = spec.name
        self.path = path
        self.last_seq = last_seq
        self.fence = fence
        """What its appends commit under; None: opened read-only."""
        self._unsettled = False
        """An append broke off with its outcome unknown, and `committed_seq` has not read it since."""

    async def lookup(self, keys: Sequence[str]) -> dict[str, Fingerprint]:
        if not keys:
            return {}
        rows = await self._fetch(_LOOKUP, list(keys), what="key lookup failed")
        return {key: (member, value, occurred_at, region) for key, member, value, occurred_at, region in rows}

    async def append(self, records: Sequence[Record]) -> None:
        if not records:
            return
        epoch = self._writable_epoch()
        store = self._store
        events, markers, voids, others = self._rows(records)
        async with self._writing(), store.connection() as conn:
            if not markers and not voids and not others:  # the common batch: one statement is one transaction
                owned = await conn.execute(store.sql(_INSERT_EVENTS_FENCED), self._board, *events, epoch) != "INSERT 0 0"
            else:
                async with conn.transaction():
                    owned = await conn.execute(store.sql(_FENCE), self._board, epoch) == "UPDATE 1"
                    if owned:
                        await self._insert(conn, events, markers, voids, others)
        if not owned:
            raise self._granted_again(epoch)
        self.last_seq = records[-1].seq

    async def append_all(self, chunks: AsyncIterable[Sequence[Record]]) -> None:
        epoch = self._writable_epoch()
        store = self._store
        last_seq = self.last_seq
        async with self._writing(), store.connection() as conn, conn.transaction():
            owned = await conn.execute(store.sql(_FENCE), self._board, epoch) == "UPDATE 1"
            if owned:
                async for records in chunks:
                    if records:
                        await self._insert(conn, *self._rows(records))
                        last_seq = records[-1].seq
        if not owned:
            raise self._granted_again(epoch)
        self.last_seq = last_seq

    def _writable_epoch(self) -> int:
        if self.fence is None:
            raise JournalWriteFailed(f"{self.path}: write failed: the journal is open read-only")
        return self.fence.epoch

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        """Around a write: its failures as JournalWriteFailed, an outcome left unknown (the
        connection broke while the server had it) marked for `committed_seq` to settle."""
        try:
            yield
        except JournalUnavailable as exc:  # no connection: nothing was sent
            raise JournalWriteFailed(f"{self.path}: write failed: {exc}") from exc
        except STORE_ERRORS as exc:
            self._unsettled = connection_broke(exc)
            raise JournalWriteFailed(self._store.redact(f"{self.path}: write failed: {exc}")) from exc

    def _granted_again(self, epoch: int) -> OwnershipLost:
        """The error of an append refused by its fence: this process no longer owns the board."""
        return OwnershipLost(f"{self.path}: write failed: the board was granted again since its epoch {epoch}")

    async def _insert(
        self, conn: asyncpg.Connection, events: list[list[Any]], markers: list[tuple[Any, ...]], voids: list[tuple[Any, ...]],
        others: list[tuple[Any, ...]],
    ) -> None:
        """Insert rows (`_rows`) inside the caller's transaction."""
        sql = self._store.sql
        if events[0]:
            await conn.execute(sql(_INSERT_EVENTS), self._board, *events)
        if markers:
            await conn.executemany(sql(_INSERT_MARKERS), markers)
        if voids:
            await conn.executemany(sql(_INSERT_VOIDS), voids)
        if others:
            await conn.executemany(sql(_INSERT_BOARD_RECORDS), others)
            definitions = recorded_definitions(self._board, (BoardRecord(*row[1:]) for row in others))
            if definitions:
                await conn.execute(sql("UPDATE {s}.board SET definition = $2 WHERE name = $1"), self._board, definitions[-1])

    def _rows(
        self, records: Sequence[Record]
    ) -> tuple[list[list[Any]], list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The score events as one list per column (for unnest), the markers, voids and board
        records as rows."""
        seqs: list[int] = []
        members: list[str] = []
        values: list[int] = []
        occurred: list[int] = []
        received: list[int] = []
        sources: list[str] = []
        keys: list[str] = []
        metas: list[str | None] = []
        regions: list[str | None] = []
        markers = []
        voids = []
        others = []
        board = self._board
        for r in records:
            if isinstance(r, ScoreRecord):
                e = r.event
                seqs.append(r.seq)
                members.append(e.member)
                values.append(e.value)
                occurred.append(e.occurred_at)
                received.append(r.received_at)
                sources.append(r.source)
                keys.append(e.idempotency_key)
                metas.append(e.meta)
                regions.append(e.region)
            elif isinstance(r, CloseRecord):
                markers.append((board, *marker_row(self._spec, r)))
            elif isinstance(r, BoardRecord):
                others.append((board, r.seq, r.kind, r.body))
            else:
                voids.append((board, r.seq, r.target_seq, r.idempotency_key, r.reason, r.admin, r.voided_at))
        return [seqs, members, values, occurred, received, sources, keys, metas, regions], markers, voids, others

    async def committed_seq(self) -> int:
        """Read from the store. When the store cannot be reached: if no append is unsettled, the
        answer is `last_seq` (this journal is the board's only writer, and its last failed write
        sent nothing or was refused); else wait for the store, up to `SETTLE_SECONDS`, then raise
        JournalError. Raises JournalCorrupt when the store answers with an error."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            try:
                async with self._store.connection() as conn:
                    seq = int(await conn.fetchval(self._store.sql(_committed(self._store.version)), self._board))
            except (*STORE_ERRORS, JournalUnavailable) as exc:
                if not isinstance(exc, JournalUnavailable) and not connection_broke(exc):
                    raise JournalCorrupt(self._store.redact(f"{self.path}: cannot read: {exc}")) from exc
                if not self._unsettled:
                    return self.last_seq
                if time.monotonic() > deadline:
                    raise JournalError(self._store.redact(f"{self.path}: cannot settle a write of unknown outcome: {exc}")) from exc
                log.warning("%s: a write of unknown outcome waits for PostgreSQL to settle it: %s", self.path, self._store.redact(str(exc)))
                await asyncio.sleep(RETRY_MAX_SECONDS)
                continue
            self._unsettled = False
            return seq

    async def scan(
        self,
        upto_seq: int | None = None,
        min_occurred_at: int | None = None,
        before_occurred_at: int | None = None,
        min_seq: int | None = None,
    ) -> AsyncIterator[list[ScoreRow]]:
        sql = "SELECT seq, member, value, occurred_at, idempotency_key, region FROM {s}.score_event WHERE board = $1 AND seq <= $2"
        params: list[object] = [self._board, self._upto(upto_seq)]
        if min_seq is not None:
            params.append(min_seq)
            sql += f" AND seq >= ${len(params)}"
        if min_occurred_at is not None:
            params.append(min_occurred_at)
            sql += f" AND occurred_at >= ${len(params)}"
        if before_occurred_at is not None:
            params.append(before_occurred_at)
            sql += f" AND occurred_at < ${len(params)}"
        async for rows in self._stream(sql + " ORDER BY seq", params):
            yield rows

    async def next_instant(self, at: int, before: int | None) -> int | None:
        sql = "SELECT min(occurred_at) FROM {s}.score_event WHERE board = $1 AND occurred_at >= $2"
        params: list[object] = [at]
        if before is not None:
            sql += " AND occurred_at < $3"
            params.append(before)
        value = (await self._fetch(sql, *params))[0][0]
        return None if value is None else int(value)

    async def fold(self, start: int, end: int | None, below_seq: int, upto_seq: int) -> AsyncIterator[list[FoldRow]]:
        kind = fold_kind(self._spec)
        rows = (
            "{s}.score_event e WHERE board = $1 AND occurred_at >= $2 AND seq < $3 AND seq <= $4 AND NOT EXISTS"
            " (SELECT FROM {s}.score_void v WHERE v.board = e.board AND v.target_seq = e.seq AND v.seq <= $4)"
        )
        params: list[object] = [self._board, start, below_seq, upto_seq]
        if end is not None:
            params.append(end)
            rows += " AND occurred_at < $5"
        async for chunk in self._stream(_FOLDS[kind].replace("{rows}", rows) + fold_order(self._spec), params):
            if kind == "sum":  # numeric comes back as Decimal
                yield [(member, int(score), reached_at, "", events) for member, score, reached_at, _, events in chunk]
            else:
                yield [tuple(row) for row in chunk]

    async def _stream(self, template: str, params: list[object]) -> AsyncIterator[list[asyncpg.Record]]:
        """The rows of one read of this board (``$1`` is the board), through a server-side cursor:
        in chunks, never whole in memory. Raises `PostgresStore.failure`'s error."""
        try:
            async with self._store.connection() as conn, conn.transaction(readonly=True):
                cursor = await conn.cursor(self._store.sql(template), *params)
                while rows := await cursor.fetch(_SCAN_CHUNK):
                    yield rows
        except (*STORE_ERRORS, JournalUnavailable, UnicodeError) as exc:
            raise self._store.failure(self.path, exc, "journal unreadable") from exc

    async def records(self, upto_seq: int | None = None) -> AsyncIterator[list[Record]]:
        upto = self._upto(upto_seq)
        others: list[CloseRecord | VoidRecord | BoardRecord] = [
            *await self.close_markers(upto), *(void for void, _ in await self.voids(upto)), *await self.board_records(upto)]
        async for chunk in merged_records(self._board, self._events(upto), others):
            yield chunk

    async def _events(self, upto: int) -> AsyncIterator[list[EventRow]]:
        store = self._store
        try:
            async with store.connection() as conn, conn.transaction(readonly=True):
                sql = store.sql(f"SELECT {EVENT_COLUMNS} FROM {{s}}.score_event WHERE board = $1 AND seq <= $2 ORDER BY seq")
                cursor = await conn.cursor(sql, self._board, upto)
                while rows := await cursor.fetch(_SCAN_CHUNK):
                    yield [tuple(row) for row in rows]
        except (*STORE_ERRORS, JournalUnavailable, UnicodeError) as exc:
            raise store.failure(self.path, exc, "journal unreadable") from exc

    async def close_markers(self, upto_seq: int | None = None) -> list[CloseRecord]:
        rows = await self._fetch(
            "SELECT period, period_id, period_start, period_end, closed_at, closed_seq FROM {s}.board_period"
            " WHERE board = $1 AND closed_seq <= $2 ORDER BY closed_seq",
            self._upto(upto_seq),
        )
        return [close_record(row) for row in rows]

    async def voids(self, upto_seq: int | None = None) -> list[tuple[VoidRecord, int]]:
        rows = await self._fetch(
            "SELECT v.seq, v.target_seq, v.idempotency_key, v.reason, v.admin, v.voided_at, e.occurred_at"
            " FROM {s}.score_void v JOIN {s}.score_event e ON e.board = v.board AND e.seq = v.target_seq"
            " WHERE v.board = $1 AND v.seq <= $2 ORDER BY v.seq",
            self._upto(upto_seq),
        )
        return [(VoidRecord(*row[:6]), row[6]) for row in rows]

    async def board_records(self, upto_seq: int | None = None) -> list[BoardRecord]:
        if self._store.version < BOARD_RECORDS_VERSION:
            return []
        rows = await self._fetch("SELECT seq, kind, body FROM {s}.board_record WHERE board = $1 AND seq <= $2 ORDER BY seq",
                                 self._upto(upto_seq))
        return [BoardRecord(*row) for row in rows]

    async def event_by_key(self, key: str) -> StoredEvent | None:
        rows = await self._fetch(_STORED + " AND e.idempotency_key = $2", key)
        return stored_event(rows[0]) if rows else None

    async def member_events(self, member: str, limit: int | None = None, before_seq: int | None = None) -> list[StoredEvent]:
        sql = _STORED + " AND e.member = $2"
        params: list[object] = [member]
        if before_seq is not None:
            params.append(before_seq)
            sql += f" AND e.seq < ${len(params) + 1}"
        sql += " ORDER BY e.seq DESC"
        if limit is not None:
            params.append(limit)
            sql += f" LIMIT ${len(params) + 1}"
        return [stored_event(row) for row in await self._fetch(sql, *params)]

    async def checked(self) -> None:
        pass  # no check at an open: the server looks after its own pages

    async def close(self) -> None:
        pass  # the connections are the backend's, shared by every board: `PostgresBackend.close`

    def _upto(self, upto_seq: int | None) -> int:
        return upto_seq if upto_seq is not None else self.last_seq

    async def _fetch(self, template: str, *params: object, what: str = "") -> list[asyncpg.Record]:
        """Rows of one statement about this board (``$1`` is the board). Raises JournalError
        saying ``what`` failed when it is given (a key lookup: the batch is answered
        `unavailable`), else `PostgresStore.failure`'s error."""
        try:
            async with self._store.connection() as conn:
                return list(await conn.fetch(self._store.sql(template), self._board, *params))
        except (*STORE_ERRORS, JournalUnavailable, UnicodeError) as exc:
            if what:
                raise JournalError(self._store.redact(f"{self.path}: {what}: {exc}")) from exc
            raise self._store.failure(self.path, exc, "journal unreadable") from exc


class PostgresBackend:
    """The journals in PostgreSQL, as ``[journal]`` says: the tables in ``schema`` (created when
    missing), one pool for every board, ``durability`` as ``synchronous_commit`` (full = on).

    A writable open is fenced: its appends commit only while the board's owner row holds the
    epoch of its `Fence`. Given none, the open grants this process the board under a new epoch
    itself (`grant`: a sole writer, whoever held it). A server grants through the cluster's
    rules instead (`arena.cluster.grants`), and opens with the fence they granted."""

    def __init__(self, settings: JournalSettings, durability: str = "full", node_id: str | None = None) -> None:
        self.node_id = node_id or socket.gethostname()
        self.store = PostgresStore(settings, durability, f"arena {self.node_id}")
        self.instance = uuid.uuid4().hex
        """This process: a node started again under the same id is another instance."""

    def where(self, board: str) -> str:
        return f"{self.store.where}, board {board}"

    async def open(self, spec: BoardSpec, *, readonly: bool = False, fence: Fence | None = None) -> PostgresJournal:
        store = self.store
        path = self.where(spec.name)
        if not await store.prepare(readonly):
            raise JournalCorrupt(f"board {spec.name}: no journal at {path}")
        try:
            async with store.connection() as conn, conn.transaction(readonly=readonly):
                stored = await conn.fetchval(store.sql("SELECT definition FROM {s}.board WHERE name = $1"), spec.name)
                if readonly and stored is None:
                    raise JournalCorrupt(f"board {spec.name}: no journal at {path}")
                has_records = bool(await conn.fetchval(store.sql(_HAS_RECORDS), spec.name))
                wanted = check_definition(spec, stored, has_records, path)
                if wanted is not None and not readonly:
                    await conn.execute(
                        store.sql("INSERT INTO {s}.board VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET definition = $2"),
                        spec.name, wanted,
                    )
                if not readonly and fence is None:
                    fence = Fence(spec.name, await self.grant(conn, spec.name))
                last_seq = int(await conn.fetchval(store.sql(_committed(store.version)), spec.name))
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(path, exc, "not a readable Arena journal") from exc
        return PostgresJournal(store, spec, path, last_seq, None if readonly else fence)

    async def grant(self, conn: asyncpg.Connection, board: str) -> int:
        """Inside the caller's transaction: grant ``board`` to this process under a new epoch
        (`_GRANT`), and that epoch. Raises what asyncpg raises."""
        return int(await conn.fetchval(self.store.sql(_GRANT), board, self.node_id, self.instance))

    def watch(self, registry: CollectorRegistry, boards: Iterable[str]) -> None:
        pass  # the ownership metrics are the cluster's grants' (`arena.cluster.grants`)

    async def close(self) -> None:
        """Close the connections; the backend may open journals again afterwards."""
        await self.store.close()
