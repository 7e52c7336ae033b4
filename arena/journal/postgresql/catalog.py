"""The catalog of API boards (`arena.journal.catalog`) as the table ``board_catalog`` of the
schema, shared by every node of a cluster."""

from __future__ import annotations

from arena.errors import JournalUnavailable
from arena.journal.catalog import CatalogEntry, board_exists, too_many_boards
from arena.journal.postgresql.store import STORE_ERRORS, PostgresStore

_LOCK = "SELECT pg_advisory_xact_lock(hashtext('arena-catalog:' || $1))"
"""Taken by every creation: two nodes creating boards at once count the live boards one after the other."""


class PostgresCatalog:
    def __init__(self, store: PostgresStore, readonly: bool = False) -> None:
        self.store = store
        self.readonly = readonly

    async def entries(self) -> list[CatalogEntry]:
        store = self.store
        if not await store.prepare(self.readonly):  # its errors say where, as a journal's open does
            return []
        try:
            async with store.connection() as conn:
                rows = await conn.fetch(store.sql("SELECT name, definition, version, retired FROM {s}.board_catalog ORDER BY name"))
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(f"{store.where}, board catalog", exc, "unreadable") from exc
        return [CatalogEntry(r["name"], r["definition"], int(r["version"]), bool(r["retired"])) for r in rows]

    async def generation(self) -> int:
        store = self.store
        if not await store.prepare(self.readonly):
            return 0
        try:
            async with store.connection() as conn:
                value = await conn.fetchval(store.sql("SELECT coalesce(sum(version), 0) FROM {s}.board_catalog"))
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(f"{store.where}, board catalog", exc, "unreadable") from exc
        return int(value)

    async def create(self, name: str, definition: str, room: int, limit: int) -> CatalogEntry:
        store = self.store
        try:
            await store.prepare(False)
            async with store.connection() as conn, conn.transaction():
                await conn.execute(_LOCK, store.schema)
                live = await conn.fetchval(store.sql("SELECT count(*) FROM {s}.board_catalog WHERE NOT retired"))
                if live >= room:
                    raise too_many_boards(limit)
                done = await conn.execute(
                    store.sql("INSERT INTO {s}.board_catalog VALUES ($1, $2, 1, false) ON CONFLICT (name) DO NOTHING"), name, definition)
                if done != "INSERT 0 1":
                    raise board_exists(name)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(f"{store.where}, board catalog", exc, "write failed") from exc
        return CatalogEntry(name, definition, 1)

    async def update(self, name: str, definition: str, version: int, retired: bool = False) -> CatalogEntry | None:
        store = self.store
        try:
            async with store.connection() as conn:
                done = await conn.execute(
                    store.sql("UPDATE {s}.board_catalog SET definition = $2, version = version + 1, retired = $3"
                              " WHERE name = $1 AND version = $4"), name, definition, retired, version)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(f"{store.where}, board catalog", exc, "write failed") from exc
        return CatalogEntry(name, definition, version + 1, retired) if done == "UPDATE 1" else None

    async def restore(self, entry: CatalogEntry) -> bool:
        store = self.store
        try:
            await store.prepare(False)
            async with store.connection() as conn:
                done = await conn.execute(
                    store.sql("INSERT INTO {s}.board_catalog VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING"),
                    entry.name, entry.definition, entry.version, entry.retired)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(f"{store.where}, board catalog", exc, "write failed") from exc
        return bool(done == "INSERT 0 1")

    async def close(self) -> None:
        pass  # the store's connections are the backend's
