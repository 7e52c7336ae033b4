"""The catalog of API boards (`arena.journal.catalog`) on sqlite: one small file in ``data_dir``."""

from __future__ import annotations

from pathlib import Path

from arena.journal.catalog import CatalogEntry, board_exists, too_many_boards
from arena.journal.sqlite_file import SqliteFile

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
        self.file = SqliteFile(data_dir / CATALOG_FILE, _SCHEMA, "board catalog", readonly=readonly)

    async def entries(self) -> list[CatalogEntry]:
        rows = await self.file.read("SELECT name, definition, version, retired FROM board_catalog ORDER BY name")
        return [CatalogEntry(name, definition, version, bool(retired)) for name, definition, version, retired in rows]

    async def generation(self) -> int:
        return sum(entry.version for entry in await self.entries())

    async def create(self, name: str, definition: str, room: int, limit: int) -> CatalogEntry:
        async with self.file.transaction() as db:
            live = list(await db.execute_fetchall("SELECT count(*) FROM board_catalog WHERE NOT retired"))[0][0]
            if live >= room:
                raise too_many_boards(limit)
            cursor = await db.execute("INSERT OR IGNORE INTO board_catalog VALUES (?, ?, 1, 0)", (name, definition))
            if cursor.rowcount != 1:
                raise board_exists(name)
        return CatalogEntry(name, definition, 1)

    async def update(self, name: str, definition: str, version: int, retired: bool = False) -> CatalogEntry | None:
        [changed] = await self.file.write([(
            "UPDATE board_catalog SET definition = ?, version = version + 1, retired = ? WHERE name = ? AND version = ?",
            (definition, int(retired), name, version))])
        return CatalogEntry(name, definition, version + 1, retired) if changed == 1 else None

    async def restore(self, entry: CatalogEntry) -> bool:
        [added] = await self.file.write([("INSERT OR IGNORE INTO board_catalog VALUES (?, ?, ?, ?)",
                                          (entry.name, entry.definition, entry.version, int(entry.retired)))])
        return added == 1

    async def close(self) -> None:
        await self.file.close()
