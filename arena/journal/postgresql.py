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
import urllib.parse
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry, Counter, Gauge

from arena.config import JournalSettings
from arena.engine.events import Fingerprint
from arena.engine.records import CloseRecord, Record, ScoreRecord, StoredEvent, VoidRecord
from arena.engine.scoring import FoldRow
from arena.engine.spec import BoardSpec
from arena.errors import JournalCorrupt, JournalError, JournalUnavailable, JournalWriteFailed, OwnedElsewhere, OwnershipLost
from arena.journal.interface import (
    EVENT_COLUMNS,
    EventRow,
    ScoreRow,
    check_definition,
    close_record,
    fold_kind,
    fold_order,
    marker_row,
    merged_records,
    stored_event,
)

log = logging.getLogger("arena.journal")

SCHEMA_VERSION = 4
"""The version of the tables below; a schema of a greater version belongs to a newer Arena."""
_UPGRADES = {
    1: "ALTER TABLE {s}.node_lease ADD COLUMN url text COLLATE \"C\" NOT NULL DEFAULT ''",
    2: "CREATE TABLE {s}.board_snapshot (board text COLLATE \"C\" PRIMARY KEY, seq bigint NOT NULL, data bytea NOT NULL)",
    3: "ALTER TABLE {s}.node_lease ADD COLUMN state text COLLATE \"C\" NOT NULL DEFAULT 'serving'",
}
"""The statement that takes tables of version N to N + 1, run by a writable start."""

_TABLES = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE {s}.schema_version (version integer NOT NULL);
CREATE TABLE {s}.board (name text COLLATE "C" PRIMARY KEY, definition text NOT NULL);
CREATE TABLE {s}.score_event (
    board text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    member text COLLATE "C" NOT NULL,
    value bigint NOT NULL,
    occurred_at bigint NOT NULL,
    received_at bigint NOT NULL,
    source text COLLATE "C" NOT NULL,
    idempotency_key bytea NOT NULL,
    meta text COLLATE "C",
    PRIMARY KEY (board, seq),
    UNIQUE (board, idempotency_key)
);
CREATE INDEX score_event_occurred_at ON {s}.score_event (board, occurred_at);
CREATE TABLE {s}.board_period (
    board text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    period text COLLATE "C" NOT NULL,
    period_id text COLLATE "C" NOT NULL,
    period_start bigint,
    period_end bigint,
    aggregation text COLLATE "C" NOT NULL,
    tie_rule text COLLATE "C" NOT NULL,
    closed_at bigint NOT NULL,
    closed_seq bigint NOT NULL,
    PRIMARY KEY (board, id),
    UNIQUE (board, closed_seq)
);
CREATE TABLE {s}.node_lease (
    node_id text COLLATE "C" PRIMARY KEY,
    instance text COLLATE "C" NOT NULL,
    expires_at timestamptz NOT NULL,
    url text COLLATE "C" NOT NULL DEFAULT '',
    state text COLLATE "C" NOT NULL DEFAULT 'serving'
);
CREATE TABLE {s}.board_owner (
    board text COLLATE "C" PRIMARY KEY,
    node_id text COLLATE "C" NOT NULL,
    instance text COLLATE "C" NOT NULL,
    epoch bigint NOT NULL
);
CREATE TABLE {s}.score_void (
    board text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    target_seq bigint NOT NULL,
    idempotency_key bytea NOT NULL,
    reason bytea NOT NULL,
    admin text COLLATE "C" NOT NULL,
    voided_at bigint NOT NULL,
    PRIMARY KEY (board, seq),
    UNIQUE (board, target_seq),
    FOREIGN KEY (board, target_seq) REFERENCES {s}.score_event (board, seq)
);
CREATE TABLE {s}.board_snapshot (board text COLLATE "C" PRIMARY KEY, seq bigint NOT NULL, data bytea NOT NULL);
"""

# The batch as one array per column, unnested by the server: one statement, one round trip.
# Measured against executemany (loadtest/bench_pg_insert.py, in the commit that chose it).
_INSERT_EVENTS = (
    "INSERT INTO {s}.score_event SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[],"
    " $5::bigint[], $6::bigint[], $7::text[], $8::bytea[], $9::text[])"
)
# Fencing: an append commits only while the board's owner row still holds the epoch this
# journal was granted (a conditional UPDATE that must touch one row, in the same transaction).
_FENCE = "UPDATE {s}.board_owner SET epoch = epoch WHERE board = $1 AND epoch = $2"
_INSERT_EVENTS_FENCED = (
    "WITH fence AS (UPDATE {s}.board_owner SET epoch = epoch WHERE board = $1 AND epoch = $10 RETURNING 1) "
    + _INSERT_EVENTS + " WHERE EXISTS (SELECT FROM fence)"
)
_GRANT = (
    "INSERT INTO {s}.board_owner AS o VALUES ($1, $2, $3, 1) ON CONFLICT (board) DO UPDATE"
    " SET node_id = EXCLUDED.node_id, instance = EXCLUDED.instance, epoch = o.epoch + 1 RETURNING epoch"
)
_CLAIM = (
    "INSERT INTO {s}.board_owner AS o SELECT $1, $2, $3, 1 WHERE EXISTS (SELECT FROM {s}.node_lease"
    " WHERE node_id = $2 AND instance = $3 AND expires_at > now()) ON CONFLICT (board) DO UPDATE"
    " SET node_id = EXCLUDED.node_id, instance = EXCLUDED.instance, epoch = o.epoch + 1"
    " WHERE o.instance = EXCLUDED.instance OR NOT EXISTS (SELECT FROM {s}.node_lease l"
    " WHERE l.node_id = o.node_id AND l.instance = o.instance AND l.expires_at > now()) RETURNING epoch"
)
"""A cluster node's grant (`_GRANT` is a single node's): a new epoch only while this process
holds a live lease and the board's owner row names no other process holding one (a released row
names none: its instance is empty). No row comes back otherwise: a board never has two live
owners, whatever each node believes of the others."""
_RELEASE = "UPDATE {s}.board_owner SET instance = '' WHERE board = $1 AND instance = $2 AND epoch = $3"
"""A graceful hand-off: the board keeps its epoch (the next grant grows it) and names no live
owner, so that the next node in its placement grants it at once (`OWNERSHIP_CHANNEL` hints it)."""
OWNERSHIP_CHANNEL = "arena_ownership"
"""Notified (payload: the schema) when a board is released or a node joins: the nodes listening
beat at once instead of at their next beat. A hint only: a node that missed it beats anyway."""
HINT = "SELECT pg_notify($1, $2)"
LEASE_LOCK = "SELECT pg_advisory_xact_lock(hashtext('arena-lease:' || $1))"
"""Taken by every transaction that reads or moves leases and ownership of a schema, so that two
nodes never both find the schema free."""
_OTHER_HOLDER = (
    "SELECT node_id, extract(epoch FROM expires_at - now())::float8 FROM {s}.node_lease"
    " WHERE instance <> $1 AND ($2::text IS NULL OR node_id = $2) AND expires_at > now() ORDER BY expires_at DESC LIMIT 1"
)
"""The node holding a live lease on the schema other than process ``$1`` (of node id ``$2``, unless
NULL), and its seconds left."""
_INSERT_MARKERS = "INSERT INTO {s}.board_period VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
_INSERT_VOIDS = "INSERT INTO {s}.score_void VALUES ($1, $2, $3, $4, $5, $6, $7)"
_LOOKUP = (
    "SELECT idempotency_key, member, value, occurred_at FROM {s}.score_event"
    " WHERE board = $1 AND idempotency_key = ANY($2::bytea[])"
)
_COMMITTED = (
    "SELECT coalesce(greatest((SELECT max(seq) FROM {s}.score_event WHERE board = $1),"
    " (SELECT max(closed_seq) FROM {s}.board_period WHERE board = $1),"
    " (SELECT max(seq) FROM {s}.score_void WHERE board = $1)), 0)"
)
_HAS_RECORDS = (
    "SELECT EXISTS (SELECT 1 FROM {s}.score_event WHERE board = $1)"
    " OR EXISTS (SELECT 1 FROM {s}.board_period WHERE board = $1)"
)
_STORED = (
    "SELECT e.seq, e.member, e.value, e.occurred_at, e.received_at, e.source, e.idempotency_key, e.meta,"
    " v.seq IS NOT NULL FROM {s}.score_event e LEFT JOIN {s}.score_void v ON v.board = e.board AND v.target_seq = e.seq"
    " WHERE e.board = $1"
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
POOL_SIZE = 10
"""Connections per process: each board's actor uses at most two at once (a key lookup beside
the append in flight), and a board's commits are serial, so a few serve many boards."""
CONNECT_TIMEOUT_SECONDS = 10.0
COMMAND_TIMEOUT_SECONDS = 60.0
"""A statement longer than this (a hung server or network) fails; a write's outcome is then unknown."""
RETRY_FIRST_SECONDS = 0.1
RETRY_MAX_SECONDS = 2.0
"""After a failed connection the next attempt waits, from the first to the max delay, doubling."""
SETTLE_SECONDS = 30.0
"""How long `committed_seq` waits for the server to settle a write of unknown outcome. Past it
the actor crashes, and the supervisor opens the journal again once the server is back."""

STORE_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError)
"""What a statement may raise when the server or the connection fails (OSError: TimeoutError too;
InternalClientError: a connection left mid-operation by a server that shut it down)."""


def _lost(exc: BaseException) -> bool:
    """True when the connection failed rather than the statement (an error of class 08,
    connection exception, or 57, operator intervention: a shutdown, a cancel, a timeout): a write
    may then have committed. A statement the server refused (constraint, disk full) did not."""
    if isinstance(exc, asyncpg.PostgresError):
        return str(exc.sqlstate or "")[:2] in ("08", "57")
    return isinstance(exc, STORE_ERRORS)


class PostgresStore:
    """A backend's connections: one asyncpg pool, created at the first open and shared by every
    board's journal, and the tables, created when missing. After a failed connection attempt
    the next one waits (`RETRY_FIRST_SECONDS`, doubling to `RETRY_MAX_SECONDS`): a stopped server
    is not asked again by every batch of every board."""

    def __init__(self, settings: JournalSettings, durability: str, application_name: str = "arena") -> None:
        assert settings.url is not None
        self.url = settings.url
        self.application_name = application_name
        """What `pg_stat_activity` shows of its sessions: which node they belong to."""
        self.schema = settings.schema
        self.durability = durability
        self.where, self._secrets = _describe(settings.url, settings.schema)
        self._pool: asyncpg.Pool | None = None
        self._ready = False  # the tables are there, of a version this Arena knows
        self._lock = asyncio.Lock()
        self._retry_at = 0.0
        self._delay = RETRY_FIRST_SECONDS

    def sql(self, template: str) -> str:
        return template.format(s=self.schema)

    def redact(self, message: str) -> str:
        """``message`` without the password (asyncpg's errors may quote connection parameters)."""
        for secret in self._secrets:
            message = message.replace(secret, "***")
        return message

    async def prepare(self, readonly: bool) -> bool:
        """Create the pool (once), and the tables when missing (not when ``readonly``); False when
        there are no tables (read-only). Raises JournalUnavailable (unreachable, refused, a newer
        schema), JournalCorrupt (the store answers with an error)."""
        async with self._lock:
            if self._ready:
                return True
            if self._pool is None:
                try:
                    self._pool = await asyncpg.create_pool(
                        self.url,
                        min_size=1,
                        max_size=POOL_SIZE,
                        timeout=CONNECT_TIMEOUT_SECONDS,
                        command_timeout=COMMAND_TIMEOUT_SECONDS,
                        init=_init_connection,
                        server_settings={
                            "application_name": self.application_name,
                            "synchronous_commit": "on" if self.durability == "full" else "off",
                        },
                    )
                except (*STORE_ERRORS, ValueError) as exc:  # ValueError: a malformed URL
                    raise JournalUnavailable(self.redact(f"cannot connect to PostgreSQL at {self.where}: {exc}")) from exc
            try:
                async with self.connection() as conn, conn.transaction(readonly=readonly):
                    version = await self._tables(conn, readonly)
            except (*STORE_ERRORS, JournalUnavailable) as exc:
                raise self.failure(self.where, exc, "not a readable Arena journal") from exc
            if version > SCHEMA_VERSION:
                raise JournalUnavailable(
                    f"{self.where}: the journal tables are of schema version {version}, newer than this Arena knows"
                    f" ({SCHEMA_VERSION}): run a newer Arena, or use another [journal] schema"
                )
            self._ready = version > 0
            return self._ready

    async def _tables(self, conn: asyncpg.Connection, readonly: bool) -> int:
        """The tables' schema version, after creating them when missing (0: missing, read-only)."""
        if not readonly:  # two servers starting at once: one creates, the other finds
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"arena:{self.schema}")
        if await conn.fetchval("SELECT to_regclass($1)", f"{self.schema}.schema_version") is None:
            if readonly:
                return 0
            await conn.execute(self.sql(_TABLES))
            await conn.execute(self.sql("INSERT INTO {s}.schema_version VALUES ($1)"), SCHEMA_VERSION)
            log.info("created the journal tables at %s (schema version %d)", self.where, SCHEMA_VERSION)
            return SCHEMA_VERSION
        version = await conn.fetchval(self.sql("SELECT max(version) FROM {s}.schema_version"))
        if version is None:
            raise JournalCorrupt(f"{self.where}: not a readable Arena journal: no schema version")
        while not readonly and version in _UPGRADES:
            await conn.execute(self.sql(_UPGRADES[version]))
            version += 1
            await conn.execute(self.sql("INSERT INTO {s}.schema_version VALUES ($1)"), version)
            log.info("upgraded the journal tables at %s to schema version %d", self.where, version)
        return int(version)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection, for one statement or transaction. Raises JournalUnavailable when
        none can be had now (then nothing was sent; the message does not say where: the caller
        does); errors of the body go through as they are."""
        pool = self._pool
        assert pool is not None, "prepare() first"
        wait = self._retry_at - time.monotonic()
        if wait > 0:
            raise JournalUnavailable(f"PostgreSQL is unreachable; next attempt in {wait:.1f}s")
        try:
            conn = await pool.acquire()
        except STORE_ERRORS as exc:
            self._failed()
            raise JournalUnavailable(self.redact(f"cannot connect to PostgreSQL: {exc}")) from exc
        try:
            yield conn
        except STORE_ERRORS as exc:
            if _lost(exc):
                self._failed()
                conn.terminate()  # its state is unknown: the pool opens a new one
            raise
        finally:
            try:
                await pool.release(conn)
            except STORE_ERRORS:
                pass  # the pool has closed it; what the statement did stands
        self._delay = RETRY_FIRST_SECONDS

    def failure(self, place: str, exc: BaseException, what: str) -> JournalError:
        """The error for a statement about ``place`` that raised ``exc``: JournalUnavailable when
        the store could not be reached or the connection broke (a board then retries, or a start
        stops), else JournalCorrupt, saying ``what``."""
        if isinstance(exc, JournalUnavailable) or _lost(exc):
            return JournalUnavailable(self.redact(f"{place}: {exc}"))
        return JournalCorrupt(self.redact(f"{place}: {what}: {exc}"))

    def _failed(self) -> None:
        self._retry_at = time.monotonic() + self._delay
        self._delay = min(self._delay * 2, RETRY_MAX_SECONDS)

    async def listen(self, channel: str, hint: Callable[[], None]) -> asyncpg.Connection:
        """A connection of its own (not pooled) calling ``hint`` on each notification on
        ``channel`` carrying this schema's name; the caller closes it. Notifications are lost
        while it is away: they may only hint. Raises JournalUnavailable."""
        def notified(conn: object, pid: int, channel: str, payload: str) -> None:
            if payload == self.schema:
                hint()
        try:
            conn = await asyncpg.connect(self.url, timeout=CONNECT_TIMEOUT_SECONDS,
                                         server_settings={"application_name": self.application_name})
            await conn.add_listener(channel, notified)
        except (*STORE_ERRORS, ValueError) as exc:
            raise JournalUnavailable(self.redact(f"cannot listen at {self.where}: {exc}")) from exc
        return conn

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            self._ready = False
            try:
                await asyncio.wait_for(pool.close(), CONNECT_TIMEOUT_SECONDS)
            except (*STORE_ERRORS, TimeoutError):
                pool.terminate()


async def _init_connection(conn: asyncpg.Connection) -> None:
    # bytea <-> str: a key or a reason is stored as its UTF-8, which holds U+0000 as any other
    await conn.set_type_codec("bytea", schema="pg_catalog", encoder=str.encode, decoder=_utf8, format="binary")


def _utf8(data: bytes) -> str:
    return bytes(data).decode()


def _describe(url: str, schema: str) -> tuple[str, list[str]]:
    """The journal's place for messages: the URL with neither password nor query (but a socket
    ``host``), and the schema; and the secrets that `PostgresStore.redact` takes out of error text."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    secrets = [s for raw in (password, *query.get("password", ())) if raw for s in {raw, urllib.parse.unquote(raw)}]
    unix_socket = f"?host={query['host'][0]}" if "host" in query else ""
    shown = f"{parts.scheme}://{user + '@' if user else ''}{hosts}{parts.path}{unix_socket}"
    return f"{shown} schema {schema}", sorted(secrets, key=len, reverse=True)


class PostgresJournal:
    """One board's journal in the shared tables of a `PostgresBackend`'s schema."""

    def __init__(self, store: PostgresStore, spec: BoardSpec, path: str, last_seq: int, epoch: int | None,
                 lost: Callable[[str], None] = lambda board: None) -> None:
        self._store = store
        self._lost = lost
        """Told the board's name when an append finds the board granted to another epoch."""
        self._spec = spec
        self._board = spec.name
        self.path = path
        self.last_seq = last_seq
        self._epoch = epoch
        """The ownership epoch its appends commit under; None: opened read-only."""
        self._unsettled = False
        """An append broke off with its outcome unknown, and `committed_seq` has not read it since."""

    async def lookup(self, keys: Sequence[str]) -> dict[str, Fingerprint]:
        if not keys:
            return {}
        rows = await self._fetch(_LOOKUP, list(keys), what="key lookup failed")
        return {key: (member, value, occurred_at) for key, member, value, occurred_at in rows}

    async def append(self, records: Sequence[Record]) -> None:
        if not records:
            return
        epoch = self._writable_epoch()
        store = self._store
        events, markers, voids = self._rows(records)
        async with self._writing(), store.connection() as conn:
            if not markers and not voids:  # the common batch: one statement is one transaction
                owned = await conn.execute(store.sql(_INSERT_EVENTS_FENCED), self._board, *events, epoch) != "INSERT 0 0"
            else:
                async with conn.transaction():
                    owned = await conn.execute(store.sql(_FENCE), self._board, epoch) == "UPDATE 1"
                    if owned:
                        await self._insert(conn, events, markers, voids)
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
        if self._epoch is None:
            raise JournalWriteFailed(f"{self.path}: write failed: the journal is open read-only")
        return self._epoch

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        """Around a write: its failures as JournalWriteFailed, an outcome left unknown (the
        connection broke while the server had it) marked for `committed_seq` to settle."""
        try:
            yield
        except JournalUnavailable as exc:  # no connection: nothing was sent
            raise JournalWriteFailed(f"{self.path}: write failed: {exc}") from exc
        except STORE_ERRORS as exc:
            self._unsettled = _lost(exc)
            raise JournalWriteFailed(self._store.redact(f"{self.path}: write failed: {exc}")) from exc

    def _granted_again(self, epoch: int) -> OwnershipLost:
        """The error of an append refused by its fence; this process no longer owns the board."""
        self._lost(self._board)
        return OwnershipLost(f"{self.path}: write failed: the board was granted again since its epoch {epoch}")

    async def _insert(
        self, conn: asyncpg.Connection, events: list[list[Any]], markers: list[tuple[Any, ...]], voids: list[tuple[Any, ...]]
    ) -> None:
        """Insert rows (`_rows`) inside the caller's transaction."""
        sql = self._store.sql
        if events[0]:
            await conn.execute(sql(_INSERT_EVENTS), self._board, *events)
        if markers:
            await conn.executemany(sql(_INSERT_MARKERS), markers)
        if voids:
            await conn.executemany(sql(_INSERT_VOIDS), voids)

    def _rows(self, records: Sequence[Record]) -> tuple[list[list[Any]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The score events as one list per column (for unnest), the markers and the voids as rows."""
        seqs: list[int] = []
        members: list[str] = []
        values: list[int] = []
        occurred: list[int] = []
        received: list[int] = []
        sources: list[str] = []
        keys: list[str] = []
        metas: list[str | None] = []
        markers = []
        voids = []
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
            elif isinstance(r, CloseRecord):
                markers.append((board, *marker_row(self._spec, r)))
            else:
                voids.append((board, r.seq, r.target_seq, r.idempotency_key, r.reason, r.admin, r.voided_at))
        return [seqs, members, values, occurred, received, sources, keys, metas], markers, voids

    async def committed_seq(self) -> int:
        """Read from the store. When the store cannot be reached: if no append is unsettled, the
        answer is `last_seq` (this journal is the board's only writer, and its last failed write
        sent nothing or was refused); else wait for the store, up to `SETTLE_SECONDS`, then raise
        JournalError. Raises JournalCorrupt when the store answers with an error."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            try:
                async with self._store.connection() as conn:
                    seq = int(await conn.fetchval(self._store.sql(_COMMITTED), self._board))
            except (*STORE_ERRORS, JournalUnavailable) as exc:
                if not isinstance(exc, JournalUnavailable) and not _lost(exc):
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
        sql = "SELECT seq, member, value, occurred_at, idempotency_key FROM {s}.score_event WHERE board = $1 AND seq <= $2"
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
        others: list[CloseRecord | VoidRecord] = [*await self.close_markers(upto), *(void for void, _ in await self.voids(upto))]
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

    A writable open grants this process the board under a new epoch (``board_owner``); the
    journal's appends commit only while that epoch holds. A single node grants in the same
    transaction that finds no other node holding a live lease on the schema
    (`arena.cluster.lease`); a node of a ``clustered`` one grants only a board that no other live
    process owns (`_CLAIM`), else the open raises OwnedElsewhere."""

    def __init__(self, settings: JournalSettings, durability: str = "full", node_id: str | None = None,
                 *, clustered: bool = False) -> None:
        self.node_id = node_id or socket.gethostname()
        self.store = PostgresStore(settings, durability, f"arena {self.node_id}")
        self.clustered = clustered
        self.instance = uuid.uuid4().hex
        """This process: a node started again under the same id is another instance."""
        self.owned: dict[str, int] = {}
        """The boards granted to this process and not found granted again since, with their epochs."""
        self.on_lost: Callable[[str], None] = lambda board: None
        """Told the board's name when one of its appends finds it granted again (to another epoch)."""
        self._changes: Counter | None = None

    def where(self, board: str) -> str:
        return f"{self.store.where}, board {board}"

    async def open(self, spec: BoardSpec, *, readonly: bool = False) -> PostgresJournal:
        store = self.store
        path = self.where(spec.name)
        if not await store.prepare(readonly):
            raise JournalCorrupt(f"board {spec.name}: no journal at {path}")
        epoch: int | None = None
        try:
            async with store.connection() as conn, conn.transaction(readonly=readonly):
                holder = None if readonly or self.clustered else await self.other_holder(conn)
                if holder is None:
                    if self.clustered and not readonly:
                        epoch = await self._claim(conn, spec.name)
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
                    if not readonly and epoch is None:
                        epoch = int(await conn.fetchval(store.sql(_GRANT), spec.name, self.node_id, self.instance))
                    last_seq = int(await conn.fetchval(store.sql(_COMMITTED), spec.name))
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(path, exc, "not a readable Arena journal") from exc
        if holder is not None:
            raise JournalUnavailable(f"{path}: node {holder[0]} holds the schema (its lease is live)")
        if epoch is not None:
            self._owner_changed(spec.name, epoch)
        return PostgresJournal(store, spec, path, last_seq, epoch, self._lost)

    async def _claim(self, conn: asyncpg.Connection, board: str) -> int:
        """Inside the open's transaction: grant ``board`` to this process (`_CLAIM`). Raises
        OwnedElsewhere (the transaction then writes nothing)."""
        await conn.execute(LEASE_LOCK, self.store.schema)
        epoch = await conn.fetchval(self.store.sql(_CLAIM), board, self.node_id, self.instance)
        if epoch is None:
            raise OwnedElsewhere(f"board {board}: another live node owns it (or this node's lease expired)")
        # sent at commit: the other nodes name the new owner in their directories now, not at
        # their next beat (a node handing the board off forwards its frames here meanwhile)
        await conn.execute(HINT, OWNERSHIP_CHANNEL, self.store.schema)
        return int(epoch)

    async def release(self, board: str, epoch: int) -> bool:
        """Give up ``board``, granted to this process under ``epoch``, after its actor stopped (a
        graceful hand-off): its owner row then names no live process, and the next node in its
        placement grants it at once. False when it was not released (granted again meanwhile, or
        the store away). Never raises."""
        if self.owned.pop(board, None) is not None and self._changes is not None:
            self._changes.labels(board).inc()
        try:
            async with self.store.connection() as conn, conn.transaction():
                done: bool = await conn.execute(self.store.sql(_RELEASE), board, self.instance, epoch) == "UPDATE 1"
                await conn.execute(HINT, OWNERSHIP_CHANNEL, self.store.schema)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            log.warning("board %s: not released (it is once this node's lease expires): %s", board, self.store.redact(str(exc)))
            return False
        return done

    def _lost(self, board: str) -> None:
        if board in self.owned:
            self._owner_changed(board, None)
        self.on_lost(board)

    def _owner_changed(self, board: str, epoch: int | None) -> None:
        """``board`` granted to this process under ``epoch``, or found granted again (None)."""
        if epoch is not None:
            self.owned[board] = epoch
        else:
            self.owned.pop(board, None)
        if self._changes is not None:
            self._changes.labels(board).inc()

    async def hint(self) -> None:
        """Notify the listening nodes that ownership may move (`OWNERSHIP_CHANNEL`); a failure is
        ignored: it is only a hint."""
        try:
            async with self.store.connection() as conn:
                await conn.execute(HINT, OWNERSHIP_CHANNEL, self.store.schema)
        except (*STORE_ERRORS, JournalUnavailable):
            pass

    async def other_holder(self, conn: asyncpg.Connection) -> tuple[str, float] | None:
        """Inside a transaction: take the schema's lease lock (until it ends) and name the other
        node holding a live lease, with its seconds left; None when there is none. In a cluster,
        only another process of this node's id counts (nodes of other ids share the schema)."""
        await conn.execute(LEASE_LOCK, self.store.schema)
        row = await conn.fetchrow(self.store.sql(_OTHER_HOLDER), self.instance, self.node_id if self.clustered else None)
        return None if row is None else (str(row[0]), float(row[1]))

    def watch(self, registry: CollectorRegistry, boards: Iterable[str]) -> None:
        Gauge("arena_boards_owned", "Boards this node owns: it alone appends to their journals", registry=registry
              ).set_function(lambda: len(self.owned))
        self._changes = Counter("arena_ownership_changes", "Times this node was granted a board or found it granted"
                                " to another (each grant is a new epoch)", ["board"], registry=registry)
        for board in boards:
            self._changes.labels(board)

    async def close(self) -> None:
        """Close the connections; the backend may open journals again afterwards."""
        await self.store.close()

