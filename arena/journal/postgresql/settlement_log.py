"""The settlement log (`arena.journal.settlement_log`) as the table ``settlement_log`` of the
schema, shared by every node of a cluster. An append locks the one row of ``settlement_log_head``
(the last cursor given) until its COMMIT: appends take their cursors one transaction after the
other, and PostgreSQL makes a commit visible before it releases its locks, so the items a reader
sees are always every item up to some cursor."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import asyncpg

from arena.engine.settlement import LogItem
from arena.errors import JournalUnavailable
from arena.journal.postgresql.store import STORE_ERRORS, PostgresStore

READ_ROWS = 1000
"""Rows read at a time while looking for the items of the boards a reader may see."""
_HEADER = "board, period, period_id, partition, revision, seq, sha256, awards"


class PostgresSettlementLog:
    def __init__(self, store: PostgresStore, readonly: bool = False) -> None:
        self.store = store
        self.readonly = readonly

    async def append(self, items: Sequence[LogItem]) -> None:
        store = self.store
        if not items:
            return
        rows = [(i.board, i.period, i.period_id, i.partition or "*", i.revision, i.seq, i.sha256, i.awards) for i in items]
        try:
            await store.prepare(False)
            async with store.connection() as conn:
                # most appends of a load find every item there already: they take no lock
                rows = [row for row, held in zip(rows, await self._held(conn, rows), strict=True) if not held]
                if not rows:
                    return
                async with conn.transaction():
                    head = await conn.fetchval(store.sql("SELECT cursor FROM {s}.settlement_log_head FOR UPDATE"))
                    for row in rows:
                        added = await conn.fetchval(store.sql(
                            f"INSERT INTO {{s}}.settlement_log (cursor, {_HEADER}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                            " ON CONFLICT DO NOTHING RETURNING cursor"), head + 1, *row)
                        if added is not None:
                            head = added
                    await conn.execute(store.sql("UPDATE {s}.settlement_log_head SET cursor = $1"), head)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(f"{store.where}, settlement log", exc, "write failed") from exc

    async def _held(self, conn: asyncpg.Connection, rows: Sequence[tuple[object, ...]]) -> list[bool]:
        """Which of ``rows`` the log holds already (by their key). One read."""
        keys = [row[:5] for row in rows]
        held = await conn.fetch(self.store.sql(
            "SELECT k.i FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[]) WITH ORDINALITY"
            " AS k(board, period, period_id, partition, revision, i)"
            " WHERE EXISTS (SELECT FROM {s}.settlement_log l WHERE (l.board, l.period, l.period_id, l.partition, l.revision)"
            " = (k.board, k.period, k.period_id, k.partition, k.revision))"), *map(list, zip(*keys, strict=True)))
        found = {int(r["i"]) for r in held}
        return [i + 1 in found for i in range(len(rows))]

    async def after(self, cursor: int, limit: int, boards: Callable[[str], bool]) -> list[LogItem]:
        store = self.store
        items: list[LogItem] = []
        try:
            if not await store.prepare(self.readonly):
                return items
            async with store.connection() as conn:
                while len(items) < limit:
                    rows = await conn.fetch(store.sql(
                        f"SELECT cursor, {_HEADER} FROM {{s}}.settlement_log WHERE cursor > $1 ORDER BY cursor LIMIT $2"),
                        cursor, READ_ROWS)
                    items += [item for item in map(_item, rows) if boards(item.board)]
                    if len(rows) < READ_ROWS:
                        break
                    cursor = int(rows[-1]["cursor"])
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(f"{store.where}, settlement log", exc, "unreadable") from exc
        return items[:limit]

    async def close(self) -> None:
        pass  # the store's connections are the backend's


def _item(row: asyncpg.Record) -> LogItem:
    partition = row["partition"]
    return LogItem(int(row["cursor"]), row["board"], row["period"], row["period_id"], None if partition == "*" else partition,
                   int(row["revision"]), int(row["seq"]), row["sha256"], int(row["awards"]))
