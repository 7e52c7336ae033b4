"""The settlement log (`arena.journal.settlement_log`) on sqlite: one file in ``data_dir``, written
by the one server that holds the data_dir."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from arena.engine.settlement import LogItem
from arena.journal.sqlite_file import SqliteFile

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
    """The log in ``data_dir/settlements.sqlite``: a read never sees an append before its COMMIT."""

    def __init__(self, data_dir: Path, durability: str = "full", readonly: bool = False) -> None:
        self.file = SqliteFile(data_dir / LOG_FILE, _SCHEMA, "settlement log", durability, readonly)

    async def append(self, items: Sequence[LogItem]) -> None:
        rows = [(i.board, i.period, i.period_id, i.partition or "*", i.revision, i.seq, i.sha256, i.awards) for i in items]
        # most appends of a load find every item there already: they write nothing
        rows = [row for row in rows if not await self.file.read(
            "SELECT 1 FROM settlement_log WHERE board = ? AND period = ? AND period_id = ? AND partition = ?"
            " AND revision = ?", *row[:5])]
        if not rows:
            return
        async with self.file.transaction() as db:
            await db.executemany(f"INSERT OR IGNORE INTO settlement_log ({_HEADER}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)

    async def after(self, cursor: int, limit: int, boards: Callable[[str], bool]) -> list[LogItem]:
        items: list[LogItem] = []
        while len(items) < limit:
            rows = await self.file.read(
                f"SELECT cursor, {_HEADER} FROM settlement_log WHERE cursor > ? ORDER BY cursor LIMIT ?", cursor, READ_ROWS)
            items += [item for item in map(_item, rows) if boards(item.board)]
            if len(rows) < READ_ROWS:
                break
            cursor = rows[-1][0]
        return items[:limit]

    async def restore(self, items: Sequence[LogItem]) -> bool:
        rows = [(i.cursor, i.board, i.period, i.period_id, i.partition or "*", i.revision, i.seq, i.sha256, i.awards) for i in items]
        async with self.file.transaction() as db:
            if list(await db.execute_fetchall("SELECT 1 FROM settlement_log LIMIT 1")):
                return False
            await db.executemany(f"INSERT INTO settlement_log (cursor, {_HEADER}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return True

    async def close(self) -> None:
        await self.file.close()


def _item(row: Any) -> LogItem:  # sqlite rows: untyped
    cursor, board, period, period_id, partition, revision, seq, sha256, awards = row
    return LogItem(cursor, board, period, period_id, None if partition == "*" else partition, revision, seq, sha256, awards)
