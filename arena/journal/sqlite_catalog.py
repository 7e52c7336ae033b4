"""The catalog of API boards (`arena.journal.catalog`) on sqlite: one small file in ``data_dir``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite

from arena.errors import JournalCorrupt, JournalError
from arena.journal.catalog import CatalogEntry, board_exists, too_many_boards

CATALOG_FILE = "boards.sqlite"
"""The catalog's file in ``data_dir``: no board's journal can have this name."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS board_catalog (
    name TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    version INTEGER NOT NULL,
    retired INTEGER NOT NULL DEFAULT 0
);
"""


class SqliteCatalog:
    """The catalog in ``data_dir/boards.sqlite`` (one server holds a data_dir: no other writer)."""

    def __init__(self, data_dir: Path, readonly: bool = False) -> None:
        self.path = data_dir / CATALOG_FILE
        self.readonly = readonly
        self._db: aiosqlite.Connection | None = None

    async def _conn(self) -> aiosqlite.Connection | None:
        if self._db is None:
            if self.readonly and not self.path.exists():
                return None
            try:
                if self.readonly:
                    self._db = await aiosqlite.connect(f"{self.path.absolute().as_uri()}?mode=ro", uri=True)
                else:
                    self._db = await aiosqlite.connect(str(self.path), isolation_level=None)
                    await self._db.execute("PRAGMA journal_mode=WAL")
                    await self._db.execute("PRAGMA synchronous=FULL")
                    await self._db.executescript(_SCHEMA)
            except sqlite3.Error as exc:
                raise JournalCorrupt(f"{self.path}: cannot open the board catalog: {exc}") from exc
        return self._db

    async def entries(self) -> list[CatalogEntry]:
        db = await self._conn()
        if db is None:
            return []
        try:
            rows = await db.execute_fetchall("SELECT name, definition, version, retired FROM board_catalog ORDER BY name")
        except sqlite3.Error as exc:
            raise JournalCorrupt(f"{self.path}: board catalog unreadable: {exc}") from exc
        return [CatalogEntry(name, definition, version, bool(retired)) for name, definition, version, retired in rows]

    async def generation(self) -> int:
        return sum(entry.version for entry in await self.entries())

    async def create(self, name: str, definition: str, room: int, limit: int) -> CatalogEntry:
        db = await self._conn()
        assert db is not None
        try:
            await db.execute("BEGIN IMMEDIATE")
            try:
                live = list(await db.execute_fetchall("SELECT count(*) FROM board_catalog WHERE NOT retired"))[0][0]
                if live >= room:
                    raise too_many_boards(limit)
                cursor = await db.execute("INSERT OR IGNORE INTO board_catalog VALUES (?, ?, 1, 0)", (name, definition))
                if cursor.rowcount != 1:
                    raise board_exists(name)
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise JournalError(f"{self.path}: board catalog write failed: {exc}") from exc
        return CatalogEntry(name, definition, 1)

    async def update(self, name: str, definition: str, version: int, retired: bool = False) -> CatalogEntry | None:
        db = await self._conn()
        assert db is not None
        try:
            cursor = await db.execute(
                "UPDATE board_catalog SET definition = ?, version = version + 1, retired = ? WHERE name = ? AND version = ?",
                (definition, int(retired), name, version),
            )
        except sqlite3.Error as exc:
            raise JournalError(f"{self.path}: board catalog write failed: {exc}") from exc
        return CatalogEntry(name, definition, version + 1, retired) if cursor.rowcount == 1 else None

    async def restore(self, entry: CatalogEntry) -> bool:
        db = await self._conn()
        assert db is not None
        try:
            cursor = await db.execute("INSERT OR IGNORE INTO board_catalog VALUES (?, ?, ?, ?)",
                                      (entry.name, entry.definition, entry.version, int(entry.retired)))
        except sqlite3.Error as exc:
            raise JournalError(f"{self.path}: board catalog write failed: {exc}") from exc
        return cursor.rowcount == 1

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()
