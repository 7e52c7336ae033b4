"""One small sqlite file in data_dir (`arena.journal.sqlite_file`), on real files: a transaction
commits when its block ends and rolls back when it raises; `write` answers the rows each
statement changed; a readonly file that does not exist reads as empty and is not made; a file
that is not sqlite raises JournalCorrupt, naming it and what it holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.errors import JournalCorrupt
from arena.journal.sqlite_file import SqliteFile

SCHEMA = "CREATE TABLE IF NOT EXISTS note (name TEXT PRIMARY KEY, body TEXT NOT NULL);"


async def test_a_transaction_commits_at_its_end_and_rolls_back_when_it_raises(tmp_path: Path) -> None:
    file = SqliteFile(tmp_path / "notes.sqlite", SCHEMA, "notes")
    try:
        assert await file.write([("INSERT OR IGNORE INTO note VALUES (?, ?)", ("a", "kept")),
                                 ("INSERT OR IGNORE INTO note VALUES (?, ?)", ("a", "ignored"))]) == [1, 0]
        with pytest.raises(LookupError):
            async with file.transaction() as db:
                await db.execute("INSERT INTO note VALUES (?, ?)", ("b", "rolled back"))
                raise LookupError("the caller's rule refused it")
        assert await file.read("SELECT name, body FROM note ORDER BY name") == [("a", "kept")]
    finally:
        await file.close()
    reopened = SqliteFile(tmp_path / "notes.sqlite", SCHEMA, "notes", readonly=True)
    try:
        assert await reopened.read("SELECT name FROM note") == [("a",)]
    finally:
        await reopened.close()


async def test_a_missing_readonly_file_reads_as_empty_and_is_not_made(tmp_path: Path) -> None:
    file = SqliteFile(tmp_path / "notes.sqlite", SCHEMA, "notes", readonly=True)
    assert await file.read("SELECT name FROM note") == []
    await file.close()
    assert not (tmp_path / "notes.sqlite").exists()


async def test_a_file_that_is_not_sqlite_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"not a database, whatever its name says" * 100)
    file = SqliteFile(path, SCHEMA, "notes")
    try:
        with pytest.raises(JournalCorrupt, match="cannot open the notes"):
            await file.read("SELECT name FROM note")
    finally:
        await file.close()
