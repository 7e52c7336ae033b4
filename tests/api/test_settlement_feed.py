"""The settlement log through real servers on both journal backends: every revision a board
journals (revision 0 at a close, the next after a void) reaches the log after its commit, in its
board's journal order; what is missing from the log (a crash between the commit and the append)
is appended by the board's next load."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import httpx

from arena.client import ArenaClient, ScoreEvent
from arena.config import JournalSettings
from arena.engine.settlement import LogItem, log_item
from arena.journal.sqlite_settlement_log import LOG_FILE
from support.postgres import fetchval
from support.server import ADMIN_TOKEN, InProcessServer, make_config, token_for, until

MIN = 60_000
DAY = 24 * 60 * MIN
W1 = 1_799_020_800_000  # 2027-01-04T00:00:00Z, a Monday: 2027-W01 (after the wall clock)
BOARDS = {
    "hs": {"aggregation": "best", "periods": ["alltime", "weekly"], "prizes": {"weekly": [{"reward": "gold", "ranks": [1, 2]}]}},
    "low": {"aggregation": "sum", "order": "asc", "periods": ["daily"], "prizes": {"daily": [{"reward": "frugal", "ranks": [1, 1]}]}},
}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def logged(server: InProcessServer) -> list[LogItem]:
    assert server.arena is not None
    return await server.arena.settlement_log.after(0, 1000, lambda _board: True)


def journaled(server: InProcessServer) -> list[LogItem]:
    """Every revision its boards' engines hold, as log items (no cursor), each board's in seq order."""
    assert server.arena is not None
    items = []
    for name, handle in sorted(server.arena.boards.items()):
        assert handle.engine is not None
        revisions = sorted((r for rs in handle.engine.settlements.values() for r in rs), key=lambda r: r.seq)
        items += [log_item(name, r) for r in revisions]
    return items


def by_board(items: list[LogItem]) -> list[LogItem]:
    """``items`` without cursors, each board's in their order (the boards' appends interleave)."""
    return sorted((replace(i, cursor=0) for i in items), key=lambda i: i.board)


async def until_logged(server: InProcessServer, hs_revisions: int) -> list[LogItem]:
    """The log once it holds ``hs_revisions`` revisions of board hs and every journaled revision."""
    async def there() -> bool:
        items = await logged(server)
        return sum(i.board == "hs" for i in items) == hs_revisions and by_board(items) == by_board(journaled(server))

    await until(there, f"{hs_revisions} revisions of hs and every other journaled one in the settlement log")
    return await logged(server)


async def forget(journal: JournalSettings, data_dir: Path, revision: int) -> None:
    """Take the items of ``revision`` out of the log, as if their appends had never happened."""
    if journal.backend == "sqlite":
        with sqlite3.connect(data_dir / LOG_FILE) as db:
            db.execute("DELETE FROM settlement_log WHERE revision = ?", (revision,))
        return
    assert journal.url is not None
    await fetchval(journal.url, f"DELETE FROM {journal.schema}.settlement_log WHERE revision = $1", revision)


async def test_every_journaled_revision_reaches_the_log_and_a_load_appends_what_is_missing(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    config = make_config(tmp_path / "data", BOARDS, journal=served_journal)
    server = InProcessServer(config, now_ms=W1 + DAY)
    await server.start()
    try:
        async with ArenaClient(server.url, token_for("gs")) as client:
            results = await client.submit_many(
                [ScoreEvent("hs", f"m{i}", 10 * i, W1 + i, idempotency_key=f"hs{i}") for i in range(5)]
                + [ScoreEvent("low", f"m{i}", i, W1 + i) for i in range(3)])
            assert all(r.recorded for r in results)
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert (await http.post("/v1/_test/clock", json={"now_ms": W1 + 8 * DAY})).status_code == 200
            items = await until_logged(server, 1)
            assert (await http.post("/v1/boards/hs/void", json={"idempotency_key": "hs4", "reason": "cheat"},
                                    headers=ADMIN)).status_code == 200
            items = await until_logged(server, 2)
        assert [i.cursor for i in items] == sorted({i.cursor for i in items}) and any(i.board == "low" for i in items)
        week = [i for i in items if i.board == "hs"]
        assert [(i.period, i.period_id, i.revision, i.awards) for i in week] == [("weekly", "2027-W01", 0, 2), ("weekly", "2027-W01", 1, 2)]
        assert week[0].seq < week[1].seq
        everything = journaled(server)
    finally:
        await server.stop()

    # a crash between the commits of the revisions 1 and their appends: the next start appends
    # them (the boards are not even loaded: they are activated on demand)
    await forget(served_journal, config.server.data_dir, 1)
    server = InProcessServer(config, now_ms=W1 + 8 * DAY)
    await server.start()
    try:
        again = await logged(server)
        assert again[:-1] == [i for i in items if i.revision == 0]
        assert replace(again[-1], cursor=0) == [i for i in everything if i.revision == 1][0]
        assert again[-1].cursor > items[-1].cursor
    finally:
        await server.stop()
    # and when the boards load at the start (no activation on demand), each one's load does
    await forget(served_journal, config.server.data_dir, 1)
    server = InProcessServer(replace(config, server=replace(config.server, idle_unload_seconds=0)), now_ms=W1 + 8 * DAY)
    await server.start()
    try:
        async def refilled() -> bool:
            return len(await logged(server)) == len(items)

        await until(refilled, "the revision 1 to be appended again")
        assert replace((await logged(server))[-1], cursor=0) == [i for i in everything if i.revision == 1][0]
    finally:
        await server.stop()
