"""Where a board's snapshot is kept: next to its journal, in the same backend. A snapshot is a
cache (`arena.engine.snapshot`): a store keeps each board's newest one, and losing it costs a full replay.

- sqlite: ``<board>.snapshot`` beside ``<board>.journal.sqlite`` in `data_dir`, written to a
  temporary file, fsynced and renamed over the old one, so a crash leaves the old or the new;
- PostgreSQL: a row of ``board_snapshot`` in the journal's schema, replaced in one statement.
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from arena.errors import JournalError
from arena.journal.interface import JournalBackend
from arena.journal.sqlite import SqliteBackend


class SnapshotStore(Protocol):
    def where(self, board: str) -> str:
        """Names a board's snapshot in messages."""

    async def save(self, board: str, seq: int, pieces: Sequence[bytes]) -> None:
        """Keep ``pieces`` (one after another) as ``board``'s newest snapshot, in place of the
        one before. Raises JournalError (the old one is then still there)."""

    async def load(self, board: str) -> bytes | None:
        """``board``'s newest snapshot, or None. Raises JournalError when it cannot be read."""


class SqliteSnapshots:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def path(self, board: str) -> Path:
        return self.data_dir / f"{board}.snapshot"

    def where(self, board: str) -> str:
        return str(self.path(board))

    async def save(self, board: str, seq: int, pieces: Sequence[bytes]) -> None:
        try:
            await asyncio.to_thread(_replace, self.path(board), pieces)
        except OSError as exc:
            raise JournalError(f"{self.where(board)}: cannot write snapshot: {exc}") from exc

    async def load(self, board: str) -> bytes | None:
        try:
            return await asyncio.to_thread(self.path(board).read_bytes)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise JournalError(f"{self.where(board)}: cannot read snapshot: {exc}") from exc


def _replace(path: Path, pieces: Sequence[bytes]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as f:
        for piece in pieces:  # each write releases the GIL; one join of the whole would not
            f.write(piece)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a power cut
    finally:
        os.close(directory)


class PostgresSnapshots:
    """Snapshots as ``bytea`` rows, sent and read as base64 text: the connections' ``bytea``
    codec turns values into ``str`` (the journal's keys), which a snapshot is not.

    A snapshot is sent in chunks of about `CHUNK` bytes, appended to a large object in one
    transaction and copied into the row from there: asyncpg builds each statement on the event
    loop, and a statement carrying the whole snapshot (about 100 MB at 10**6 members in three
    tables) would stop the loop for as long as its copy and its base64 take."""

    CHUNK = 1 << 20

    def __init__(self, backend: JournalBackend) -> None:
        from arena.journal.postgresql import STORE_ERRORS, PostgresBackend

        assert isinstance(backend, PostgresBackend)
        self._backend = backend
        self._errors = STORE_ERRORS

    def where(self, board: str) -> str:
        return f"{self._backend.store.where}, board {board}'s snapshot"

    async def save(self, board: str, seq: int, pieces: Sequence[bytes]) -> None:
        store = self._backend.store
        try:
            await store.prepare(readonly=False)
            async with store.connection() as conn, conn.transaction():
                large = await conn.fetchval("SELECT lo_create(0)")
                at = 0
                for chunk in _chunks(pieces, self.CHUNK):
                    await conn.execute("SELECT lo_put($1, $2, decode($3, 'base64'))", large, at, base64.b64encode(chunk).decode())
                    at += len(chunk)
                await conn.execute(
                    store.sql("INSERT INTO {s}.board_snapshot VALUES ($1, $2, lo_get($3))"
                              " ON CONFLICT (board) DO UPDATE SET seq = EXCLUDED.seq, data = EXCLUDED.data"),
                    board, seq, large,
                )
                await conn.execute("SELECT lo_unlink($1)", large)
        except (*self._errors, JournalError) as exc:
            raise JournalError(store.redact(f"{self.where(board)}: cannot write snapshot: {exc}")) from exc

    async def load(self, board: str) -> bytes | None:
        store = self._backend.store
        try:
            if not await store.prepare(readonly=True):
                return None
            async with store.connection() as conn:
                text = await conn.fetchval(
                    store.sql("SELECT encode(data, 'base64') FROM {s}.board_snapshot WHERE board = $1"), board)
        except (*self._errors, JournalError) as exc:
            raise JournalError(store.redact(f"{self.where(board)}: cannot read snapshot: {exc}")) from exc
        return None if text is None else await asyncio.to_thread(base64.b64decode, text)


def _chunks(pieces: Sequence[bytes], size: int) -> Iterator[bytes]:
    """``pieces`` regrouped into chunks of at least ``size`` bytes (the last one less)."""
    group: list[bytes] = []
    held = 0
    for piece in pieces:
        group.append(piece)
        held += len(piece)
        if held >= size:
            yield b"".join(group)
            group, held = [], 0
    if group:
        yield b"".join(group)


def snapshot_store(backend: JournalBackend) -> SnapshotStore:
    """The store beside ``backend``'s journals."""
    if isinstance(backend, SqliteBackend):
        return SqliteSnapshots(backend.data_dir)
    return PostgresSnapshots(backend)
