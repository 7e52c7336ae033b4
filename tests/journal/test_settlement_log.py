"""The settlement log on both backends: an append gives cursors in order and is idempotent by
(board, period, period_id, partition or '*', revision); `after` pages in log order and keeps
only the boards asked for; readers polling with their last cursor while many appends commit at
once (on PostgreSQL from two processes' pools) see every item once, in the log's order."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from arena.engine.settlement import LogItem
from arena.journal import SettlementLog
from arena.journal.postgresql import PostgresBackend
from arena.journal.postgresql.settlement_log import PostgresSettlementLog
from arena.journal.sqlite import SqliteBackend
from arena.journal.sqlite_settlement_log import SqliteSettlementLog
from support.journals import Store


def log_of(store: Store) -> SettlementLog:
    """A log of ``store`` through a backend of its own (as another process's would be)."""
    backend = store.backend()
    if isinstance(backend, PostgresBackend):
        return PostgresSettlementLog(backend.store)
    assert isinstance(backend, SqliteBackend)
    return SqliteSettlementLog(backend.data_dir)


@pytest.fixture
async def log(store: Store) -> AsyncIterator[SettlementLog]:
    opened = log_of(store)
    yield opened
    await opened.close()


def item(board: str, period_id: str, revision: int = 0, partition: str | None = None, seq: int = 1) -> LogItem:
    return LogItem(0, board, "daily", period_id, partition, revision, seq, f"sha-{board}-{period_id}-{revision}", revision + 2)


def headers(items: list[LogItem]) -> list[LogItem]:
    """``items`` without their cursors: what was appended."""
    return [replace(i, cursor=0) for i in items]


async def everything(log: SettlementLog) -> list[LogItem]:
    return await log.after(0, 1000, lambda _board: True)


async def test_an_append_gives_cursors_in_order_and_is_idempotent(log: SettlementLog) -> None:
    assert await everything(log) == []
    first = [item("a", "2027-01-04"), item("b", "2027-01-04", partition="eu"), item("a", "2027-01-04", 1, seq=9)]
    await log.append(first)
    await log.append([first[1], item("a", "2027-01-05"), first[0]])  # the known ones are left out
    await log.append([])
    logged = await everything(log)
    assert headers(logged) == [*first, item("a", "2027-01-05")]
    cursors = [i.cursor for i in logged]
    assert cursors == sorted(cursors) and len(set(cursors)) == 4 and cursors[0] > 0
    assert logged[1].partition == "eu" and logged[0].partition is None
    # a partition and the global table are items apart, as are the revisions of one table
    await log.append([item("b", "2027-01-04"), item("b", "2027-01-04", partition="eu", revision=1)])
    assert len(await everything(log)) == 6


async def test_after_pages_in_log_order_and_keeps_the_boards_asked_for(log: SettlementLog) -> None:
    await log.append([item(board, f"2027-01-{day:02d}") for day in range(1, 21) for board in ("a", "b", "c")])
    logged = await everything(log)
    seen: list[LogItem] = []
    cursor = 0
    while page := await log.after(cursor, 7, lambda board: board != "b"):
        assert len(page) <= 7
        seen += page
        cursor = page[-1].cursor
    assert seen == [i for i in logged if i.board != "b"]
    assert await log.after(logged[-1].cursor, 10, lambda _board: True) == []
    assert await log.after(0, 5, lambda board: board == "nothing") == []


async def test_readers_polling_their_last_cursor_see_every_append_once_in_log_order(store: Store) -> None:
    writers = [log_of(store) for _ in range(2)]  # two processes' connections on PostgreSQL
    reader = log_of(store)
    rng = random.Random(35)
    batches = [[item(f"w{w}", f"2027-01-{day:02d}", revision) for revision in range(rng.randint(1, 3))]
               for w in range(2) for day in range(1, 26)]
    done = asyncio.Event()

    async def write(log: SettlementLog, mine: list[list[LogItem]]) -> None:
        for batch in mine:
            await log.append(batch)

    async def poll() -> list[LogItem]:
        seen: list[LogItem] = []
        cursor = 0
        while True:
            finished = done.is_set()
            page = await reader.after(cursor, 5, lambda _board: True)
            seen += page
            if page:
                cursor = page[-1].cursor
            elif finished:
                return seen
            await asyncio.sleep(0)

    try:
        polling = asyncio.create_task(poll())
        await asyncio.wait_for(asyncio.gather(write(writers[0], batches[0::2]), write(writers[1], batches[1::2])), 120)
        done.set()
        seen = await asyncio.wait_for(polling, 120)
        logged = await everything(reader)
        assert seen == logged
        assert sorted(map(str, headers(logged))) == sorted(str(i) for batch in batches for i in batch)
        for batch in batches:  # each append's items stay together and in order: one transaction each
            at = [logged.index(i) for i in logged if i.board == batch[0].board and i.period_id == batch[0].period_id]
            assert at == list(range(at[0], at[0] + len(batch)))
    finally:
        for log in (*writers, reader):
            await log.close()
