"""The PostgreSQL store under the journal and the cluster: one asyncpg pool per process, its
sessions (a connection per statement or transaction, a back-off after a failed connection, the
errors that say the connection broke), and a listening connection for notifications."""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import asyncpg

from arena.config import JournalSettings
from arena.errors import JournalCorrupt, JournalError, JournalUnavailable
from arena.journal.postgresql.schema import SCHEMA_VERSION, tables

POOL_SIZE = 10
"""Connections per process: each board's actor uses at most two at once (a key lookup beside
the append in flight), and a board's commits are serial, so a few serve many boards."""
CONNECT_TIMEOUT_SECONDS = 10.0
COMMAND_TIMEOUT_SECONDS = 60.0
"""A statement longer than this (a hung server or network) fails; a write's outcome is then unknown."""
UNACKED_SECONDS = 2.0
"""A TCP connection whose sent bytes the server's side has not acknowledged for this long is
broken (``TCP_USER_TIMEOUT``): a cut link. Without it a statement sent into a cut waits for
`COMMAND_TIMEOUT_SECONDS`, and when the link is back its connection resends only at TCP's next
backed-off retransmission, seconds later; a board's actor and a node's lease wait that long. A
live server's kernel acknowledges within milliseconds, however slow the statement."""
RETRY_FIRST_SECONDS = 0.1
RETRY_MAX_SECONDS = 2.0
"""After a failed connection the next attempt waits, from the first to the max delay, doubling."""

STORE_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError)
"""What a statement may raise when the server or the connection fails (OSError: TimeoutError too;
InternalClientError: a connection left mid-operation by a server that shut it down)."""


def connection_broke(exc: BaseException) -> bool:
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

    version = 0
    """The tables' schema version, once prepared: a read-only start reads older tables as they are."""

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
                    version = await tables(conn, self.schema, self.where, readonly)
            except (*STORE_ERRORS, JournalUnavailable) as exc:
                raise self.failure(self.where, exc, "not a readable Arena journal") from exc
            if version > SCHEMA_VERSION:
                raise JournalUnavailable(
                    f"{self.where}: the journal tables are of schema version {version}, newer than this Arena knows"
                    f" ({SCHEMA_VERSION}): run a newer Arena, or use another [journal] schema"
                )
            self._ready = version > 0
            self.version = version
            return self._ready

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
            if connection_broke(exc):
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
        if isinstance(exc, JournalUnavailable) or connection_broke(exc):
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
            unacked(conn)
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
    unacked(conn)
    # bytea <-> str: a key or a reason is stored as its UTF-8, which holds U+0000 as any other
    await conn.set_type_codec("bytea", schema="pg_catalog", encoder=str.encode, decoder=_utf8, format="binary")


_TCP_USER_TIMEOUT: int | None = getattr(socket, "TCP_USER_TIMEOUT", None)
"""Linux's; elsewhere connections go without it."""


def unacked(conn: asyncpg.Connection) -> None:
    """Give a TCP connection `UNACKED_SECONDS` (asyncpg has no option for it: its socket is set
    directly); a Unix socket needs nothing."""
    sock = conn._transport.get_extra_info("socket")
    if _TCP_USER_TIMEOUT is not None and sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_USER_TIMEOUT, int(UNACKED_SECONDS * 1000))


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
