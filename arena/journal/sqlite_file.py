"""One small sqlite file in ``data_dir`` beside the boards' journals (the board catalog, the
settlement log, the webhooks' outbox), written by the one server that holds the data_dir."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from arena.errors import JournalCorrupt, JournalError

Statement = tuple[str, Sequence[object]]


class SqliteFile:
    """``path`` on one connection, taken by one statement or transaction at a time: a read never
    sees a write before its COMMIT. ``name`` says what the file holds in errors ("settlement log").
    A readonly file is opened when first read; one that does not exist yet reads as empty."""

    def __init__(self, path: Path, schema: str, name: str, durability: str = "full", readonly: bool = False) -> None:
        self.path = path
        self.schema = schema
        self.name = name
        self.durability = durability
        self.readonly = readonly
        self._db: aiosqlite.Connection | None = None
        self._turn = asyncio.Lock()

    async def _conn(self) -> aiosqlite.Connection | None:
        if self._db is None:
            if self.readonly and not self.path.exists():
                return None
            db: aiosqlite.Connection | None = None
            try:
                if self.readonly:
                    db = await aiosqlite.connect(f"{self.path.absolute().as_uri()}?mode=ro", uri=True)
                else:
                    db = await aiosqlite.connect(str(self.path), isolation_level=None)
                    await db.execute("PRAGMA journal_mode=WAL")
                    await db.execute(f"PRAGMA synchronous={'FULL' if self.durability == 'full' else 'NORMAL'}")
                    # The write lock taken first: a deferred schema transaction that finds another
                    # connection writing gets SQLITE_BUSY at once, without the busy timeout.
                    await db.executescript(f"BEGIN IMMEDIATE;\n{self.schema}\nCOMMIT;")
            except sqlite3.Error as exc:
                if db is not None:
                    await db.close()
                raise JournalCorrupt(f"{self.path}: cannot open the {self.name}: {exc}") from exc
            self._db = db
        return self._db

    async def read(self, sql: str, *args: object) -> list[Any]:  # sqlite rows: untyped
        """The rows of one query. Raises JournalCorrupt (unreadable)."""
        async with self._turn:
            db = await self._conn()
            if db is None:
                return []
            try:
                return list(await db.execute_fetchall(sql, args))
            except sqlite3.Error as exc:
                raise JournalCorrupt(f"{self.path}: {self.name} unreadable: {exc}") from exc

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """The connection inside BEGIN IMMEDIATE, committed when the block ends, rolled back when
        it raises. Raises JournalError when sqlite fails."""
        async with self._turn:
            db = await self._conn()
            assert db is not None, f"a writable {self.name}"
            try:
                await db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                    await db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        await db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise JournalError(f"{self.path}: {self.name} write failed: {exc}") from exc

    async def write(self, statements: Sequence[Statement]) -> list[int]:
        """Run ``statements`` in one transaction: the rows each changed."""
        async with self.transaction() as db:
            return [(await db.execute(sql, args)).rowcount for sql, args in statements]

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()
