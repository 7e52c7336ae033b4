"""The settlement log (`arena.journal.settlement_log`) on sqlite: one file in ``data_dir``, written
by the one server that holds the data_dir."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from arena.engine.settlement import LogItem
from arena.errors import JournalCorrupt, JournalError

LOG_FILE = "settlements.sqlite"
"""The log's file in ``data_dir``: no board's journal can have this name."""
READ_ROWS = 1000
"""Rows read at a time while looking for the items of the boards a reader may see."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS settlement_log (
    cursor INTEGER PRIMARY KEY AUTOINCREMENT,
    board TEXT NOT NULL,
    period TEXT NOT NULL,
    period_id TEXT NOT NULL,
    partition TEXT NOT NULL,
    revision INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    awards INTEGER NOT NULL,
    UNIQUE (board, period, period_id, partition, revision)
);
"""
_HEADER = "board, period, period_id, partition, revision, seq, sha256, awards"


class SqliteSettlementLog:
    """The log in ``data_dir/settlements.sqlite``. One connection, taken by one statement or
    transaction at a time: a read never sees an append before its COMMIT."""

    def __init__(self, data_dir: Path, durability: str = "full", readonly: bool = False) -> None:
        self.path = data_dir / LOG_FILE
        self.durability = durability
        self.readonly = readonly
        self._db: aiosqlite.Connection | None = None
        self._turn = asyncio.Lock()

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
                    await self._db.execute(f"PRAGMA synchronous={'FULL' if self.durability == 'full' else 'NORMAL'}")
                    await self._db.executescript(_SCHEMA)
            except sqlite3.Error as exc:
                raise JournalCorrupt(f"{self.path}: cannot open the settlement log: {exc}") from exc
        return self._db

    async def append(self, items: Sequence[LogItem]) -> None:
        if not items:
            return
        rows = [(i.board, i.period, i.period_id, i.partition or "*", i.revision, i.seq, i.sha256, i.awards) for i in items]
        async with self._turn:
            db = await self._conn()
            assert db is not None, "a writable log"
            try:
                # most appends of a load find every item there already: they write nothing
                rows = [row for row in rows if not list(await db.execute_fetchall(
                    "SELECT 1 FROM settlement_log WHERE board = ? AND period = ? AND period_id = ? AND partition = ?"
                    " AND revision = ?", row[:5]))]
                if not rows:
                    return
                await db.execute("BEGIN IMMEDIATE")
                try:
                    await db.executemany(f"INSERT OR IGNORE INTO settlement_log ({_HEADER})"
                                         " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
                    await db.execute("COMMIT")
                except BaseException:
                    await db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise JournalError(f"{self.path}: settlement log write failed: {exc}") from exc

    async def after(self, cursor: int, limit: int, boards: Callable[[str], bool]) -> list[LogItem]:
        items: list[LogItem] = []
        async with self._turn:
            db = await self._conn()
            if db is None:
                return items
            while len(items) < limit:
                try:
                    rows = list(await db.execute_fetchall(
                        f"SELECT cursor, {_HEADER} FROM settlement_log WHERE cursor > ? ORDER BY cursor LIMIT ?", (cursor, READ_ROWS)))
                except sqlite3.Error as exc:
                    raise JournalCorrupt(f"{self.path}: settlement log unreadable: {exc}") from exc
                items += [item for item in map(_item, rows) if boards(item.board)]
                if len(rows) < READ_ROWS:
                    break
                cursor = rows[-1][0]
        return items[:limit]

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()


def _item(row: Any) -> LogItem:  # sqlite rows: untyped
    cursor, board, period, period_id, partition, revision, seq, sha256, awards = row
    return LogItem(cursor, board, period, period_id, None if partition == "*" else partition, revision, seq, sha256, awards)
