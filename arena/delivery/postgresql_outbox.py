"""The webhooks' outbox (`arena.delivery.outbox`) as the tables ``webhook_delivery`` and
``webhook_cursor`` of the schema (version 7), shared by every node of a cluster: any node may
record deliveries (an insert of one already there changes nothing), the owner of a board sends
its deliveries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from arena.delivery.outbox import COLUMNS, Delivery, Listing, State, from_row, listed, stored
from arena.errors import JournalUnavailable
from arena.journal.postgresql.store import STORE_ERRORS, PostgresStore

_INSERT = ("INSERT INTO {s}.webhook_delivery (webhook, board, period, period_id, partition, revision, page, created_at,"
           " state, attempts, next_at, last_error, delivered_at, since_at, delivery)"
           " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT DO NOTHING")
_DUE = f"""SELECT {COLUMNS} FROM {{s}}.webhook_delivery d WHERE d.state = 'pending' AND d.next_at <= $1
    AND d.board = ANY($3::text[]) AND NOT EXISTS (
    SELECT 1 FROM {{s}}.webhook_delivery e WHERE e.webhook = d.webhook AND e.board = d.board AND e.period = d.period
    AND e.period_id = d.period_id AND e.partition = d.partition AND e.state = 'pending'
    AND (e.revision < d.revision OR (e.revision = d.revision AND coalesce(e.page, 0) < coalesce(d.page, 0))))
    ORDER BY d.place LIMIT $2"""

_LISTING = (f"SELECT {COLUMNS} FROM {{s}}.webhook_delivery WHERE webhook = $1 AND place > $2"
            f" AND {listed(lambda i: f'${i + 4}')} ORDER BY place LIMIT $3")


class PostgresOutbox:
    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    async def _fetch(self, sql: str, *args: object) -> list[Any]:
        store = self.store
        try:
            await store.prepare(False)
            async with store.connection() as conn:
                return list(await conn.fetch(store.sql(sql), *args))
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(f"{store.where}, webhooks' outbox", exc, "unreadable") from exc

    async def _write(self, statements: Sequence[tuple[str, Sequence[object]]]) -> None:
        store = self.store
        try:
            await store.prepare(False)
            async with store.connection() as conn, conn.transaction():
                for sql, args in statements:
                    await conn.execute(store.sql(sql), *args)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(f"{store.where}, webhooks' outbox", exc, "write failed") from exc

    async def cursors(self) -> dict[str, int]:
        return {r["webhook"]: int(r["cursor"]) for r in await self._fetch("SELECT webhook, cursor FROM {s}.webhook_cursor")}

    async def start(self, webhook: str, cursor: int) -> int:
        await self._write([("INSERT INTO {s}.webhook_cursor VALUES ($1, $2) ON CONFLICT DO NOTHING", (webhook, cursor))])
        rows = await self._fetch("SELECT cursor FROM {s}.webhook_cursor WHERE webhook = $1", webhook)
        return int(rows[0]["cursor"])

    async def add(self, webhook: str, made: Sequence[Delivery], cursor: int) -> None:
        await self._write([(_INSERT, stored(d)) for d in made] + [
            ("UPDATE {s}.webhook_cursor SET cursor = greatest(cursor, $1) WHERE webhook = $2", (cursor, webhook))])

    async def due(self, now: int, limit: int, boards: Sequence[str]) -> list[Delivery]:
        return [from_row(tuple(r)) for r in await self._fetch(_DUE, now, limit, list(boards))]

    async def save(self, delivery: Delivery) -> None:
        d = delivery
        await self._write([("UPDATE {s}.webhook_delivery SET state = $1, attempts = $2, next_at = $3, last_error = $4,"
                            " delivered_at = $5, since_at = $6 WHERE webhook = $7 AND delivery = $8",
                            (str(d.state), d.attempts, d.next_at, d.last_error, d.delivered_at, d.since_at, d.webhook, d.id))])

    async def get(self, webhook: str, delivery: str) -> Delivery | None:
        rows = await self._fetch(f"SELECT {COLUMNS} FROM {{s}}.webhook_delivery WHERE webhook = $1 AND delivery = $2",
                                 webhook, delivery)
        return from_row(tuple(rows[0])) if rows else None

    async def listing(self, webhook: str, which: Listing, after: int, limit: int) -> list[Delivery]:
        rows = await self._fetch(_LISTING, webhook, after, limit, *which.params())
        return [from_row(tuple(r)) for r in rows]

    async def counts(self) -> dict[str, dict[State, int]]:
        counts: dict[str, dict[State, int]] = {}
        for r in await self._fetch("SELECT webhook, state, count(*) AS n FROM {s}.webhook_delivery GROUP BY webhook, state"):
            counts.setdefault(r["webhook"], {})[State(r["state"])] = int(r["n"])
        return counts

    async def pending(self) -> dict[str, tuple[int, int]]:
        rows = await self._fetch("SELECT webhook, count(*) AS n, min(created_at) AS oldest FROM {s}.webhook_delivery"
                                 " WHERE state = 'pending' GROUP BY webhook")
        return {r["webhook"]: (int(r["n"]), int(r["oldest"])) for r in rows}

    async def close(self) -> None:
        pass  # the store's connections are the backend's
