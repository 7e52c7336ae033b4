"""The webhooks' outbox (`arena.delivery.outbox`) on sqlite: one file in ``data_dir``, written by
the one server that holds the data_dir."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson

from arena.delivery.outbox import COLUMNS, Delivery, Listing, State, from_row, listed, stored
from arena.journal.sqlite_file import SqliteFile

OUTBOX_FILE = "webhooks.sqlite"
"""The outbox's file in ``data_dir``: no board's journal can have this name."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS webhook_delivery (
    place INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook TEXT NOT NULL,
    delivery TEXT NOT NULL,
    board TEXT NOT NULL,
    period TEXT NOT NULL,
    period_id TEXT NOT NULL,
    partition TEXT NOT NULL,
    revision INTEGER NOT NULL,
    page INTEGER,
    created_at INTEGER NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_at INTEGER NOT NULL,
    last_error TEXT,
    delivered_at INTEGER,
    since_at INTEGER NOT NULL,
    UNIQUE (webhook, delivery)
);
CREATE INDEX IF NOT EXISTS webhook_delivery_due ON webhook_delivery (state, next_at);
CREATE INDEX IF NOT EXISTS webhook_delivery_table ON webhook_delivery (webhook, board, period, period_id, partition, revision);
CREATE TABLE IF NOT EXISTS webhook_cursor (webhook TEXT PRIMARY KEY, cursor INTEGER NOT NULL);
"""
_INSERT = ("INSERT OR IGNORE INTO webhook_delivery (webhook, board, period, period_id, partition, revision, page, created_at,"
           " state, attempts, next_at, last_error, delivered_at, since_at, delivery)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_DUE = f"""SELECT {COLUMNS} FROM webhook_delivery d WHERE d.state = 'pending' AND d.next_at <= ?
    AND d.board IN (SELECT value FROM json_each(?)) AND NOT EXISTS (
    SELECT 1 FROM webhook_delivery e WHERE e.webhook = d.webhook AND e.board = d.board AND e.period = d.period
    AND e.period_id = d.period_id AND e.partition = d.partition AND e.state = 'pending'
    AND (e.revision < d.revision OR (e.revision = d.revision AND coalesce(e.page, 0) < coalesce(d.page, 0))))
    ORDER BY d.place LIMIT ?"""

_LISTING = f"SELECT {COLUMNS} FROM webhook_delivery WHERE webhook = ? AND place > ? AND {listed(lambda _: '?')} ORDER BY place LIMIT ?"


class SqliteOutbox:
    """The outbox in ``data_dir/webhooks.sqlite``."""

    def __init__(self, data_dir: Path, durability: str = "full") -> None:
        self.file = SqliteFile(data_dir / OUTBOX_FILE, _SCHEMA, "webhooks' outbox", durability)

    async def cursors(self) -> dict[str, int]:
        return {webhook: cursor for webhook, cursor in await self.file.read("SELECT webhook, cursor FROM webhook_cursor")}

    async def start(self, webhook: str, cursor: int) -> int:
        await self.file.write([("INSERT OR IGNORE INTO webhook_cursor VALUES (?, ?)", (webhook, cursor))])
        rows = await self.file.read("SELECT cursor FROM webhook_cursor WHERE webhook = ?", webhook)
        return int(rows[0][0])

    async def add(self, webhook: str, made: Sequence[Delivery], cursor: int) -> None:
        await self.file.write([(_INSERT, stored(d)) for d in made] + [
            ("UPDATE webhook_cursor SET cursor = max(cursor, ?) WHERE webhook = ?", (cursor, webhook))])

    async def due(self, now: int, limit: int, boards: Sequence[str]) -> list[Delivery]:
        return [from_row(row) for row in await self.file.read(_DUE, now, orjson.dumps(list(boards)).decode(), limit)]

    async def save(self, delivery: Delivery) -> None:
        d = delivery
        await self.file.write([("UPDATE webhook_delivery SET state = ?, attempts = ?, next_at = ?, last_error = ?,"
                            " delivered_at = ?, since_at = ? WHERE webhook = ? AND delivery = ?",
                            (str(d.state), d.attempts, d.next_at, d.last_error, d.delivered_at, d.since_at, d.webhook, d.id))])

    async def get(self, webhook: str, delivery: str) -> Delivery | None:
        rows = await self.file.read(f"SELECT {COLUMNS} FROM webhook_delivery WHERE webhook = ? AND delivery = ?", webhook, delivery)
        return from_row(rows[0]) if rows else None

    async def listing(self, webhook: str, which: Listing, after: int, limit: int) -> list[Delivery]:
        rows = await self.file.read(_LISTING, webhook, after, *which.params(), limit)
        return [from_row(row) for row in rows]

    async def counts(self) -> dict[str, dict[State, int]]:
        counts: dict[str, dict[State, int]] = {}
        for webhook, state, count in await self.file.read("SELECT webhook, state, count(*) FROM webhook_delivery GROUP BY webhook, state"):
            counts.setdefault(webhook, {})[State(state)] = int(count)
        return counts

    async def pending(self) -> dict[str, tuple[int, int]]:
        rows = await self.file.read("SELECT webhook, count(*), min(created_at) FROM webhook_delivery WHERE state = 'pending'"
                                " GROUP BY webhook")
        return {webhook: (int(count), int(oldest)) for webhook, count, oldest in rows}

    async def close(self) -> None:
        await self.file.close()
