"""The snapshot stores beside the journals (`arena.journal.snapshots`), on both backends: a board
keeps its newest snapshot, boards keep theirs apart, and a board without one has none."""

from __future__ import annotations

import os

from arena.journal.snapshots import SqliteSnapshots, snapshot_store
from support.journals import SPEC, Store


async def test_a_board_keeps_its_newest_snapshot(store: Store) -> None:
    backend = store.backend()
    await (await backend.open(SPEC)).close()  # the tables (PostgreSQL) are made by a start
    snapshots = snapshot_store(backend)
    assert await snapshots.load("b") is None
    data = os.urandom(3_000_000) + b"\0\xff"
    await snapshots.save("b", 10, [b"older"])
    await snapshots.save("b", 20, [data[:1000], data[1000:]])
    await snapshots.save("c", 5, [b"another board's"])
    assert await snapshots.load("b") == data
    assert await snapshots.load("c") == b"another board's"
    assert "b" in snapshots.where("b")


async def test_a_sqlite_snapshot_sits_beside_the_journal_and_leaves_no_temporary_file(store: Store) -> None:
    snapshots = snapshot_store(store.backend())
    if not isinstance(snapshots, SqliteSnapshots):
        return
    await snapshots.save("b", 1, [b"x"])
    assert sorted(p.name for p in snapshots.data_dir.iterdir() if "snapshot" in p.name) == ["b.snapshot"]
