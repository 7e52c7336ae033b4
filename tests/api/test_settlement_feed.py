"""The settlement log and its feed through real servers on both journal backends: every revision
a board journals (revision 0 at a close, the next after a void) reaches the log after its commit,
in its board's journal order; what is missing from the log (a crash between the commit and the
append) is appended by the next start. `GET /v1/settlements` answers the log after a cursor to a
game server (the boards it may write, patterns matched at each request) or an admin (every board),
401 to anyone else, pages by `limit` with `next`, and refuses bad parameters."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from arena.client import ArenaClient, ScoreEvent
from arena.config import JournalSettings
from arena.engine.settlement import LogItem, log_item
from arena.journal.sqlite_settlement_log import LOG_FILE
from support.documented import assert_documented
from support.postgres import fetchval
from support.prized import DAY, W1
from support.server import ADMIN_TOKEN, InProcessServer, make_config, token_for, until

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
            return any(i.revision == 1 for i in await logged(server))

        await until(refilled, "the revision 1 to be appended again")
        hs = [i for i in await logged(server) if i.board == "hs"]  # (the boards' appends interleave)
        assert hs[0] == week[0] and replace(hs[1], cursor=0) == [i for i in everything if i.revision == 1][0]
    finally:
        await server.stop()


FEED = "/v1/settlements"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def feed(http: httpx.AsyncClient, token: str, status: int = 200, **params: int) -> dict[str, Any]:
    answer = await http.get(FEED, params=params, headers=bearer(token))
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert_documented(FEED, "GET", body, status)
    return body


async def read_all(http: httpx.AsyncClient, token: str, limit: int) -> list[dict[str, Any]]:
    """Every item the token may see, page by page from cursor 0."""
    items: list[dict[str, Any]] = []
    cursor = 0
    for _ in range(1000):
        page = await feed(http, token, after=cursor, limit=limit)
        assert len(page["items"]) <= limit
        if not page["items"]:
            assert page["next"] == cursor
            return items
        items += page["items"]
        cursor = page["next"]
        assert cursor == page["items"][-1]["cursor"]
    raise AssertionError("the feed did not end within 1000 pages")


async def test_the_feed_answers_each_caller_the_boards_it_may_write_in_log_order(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    servers = {"gs": ["*"], "hs-only": ["hs"], "cups": ["cup-*"]}
    config = make_config(tmp_path / "data", BOARDS, servers, journal=served_journal)
    async with InProcessServer(config, now_ms=W1 + DAY) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert (await feed(http, token_for("cups")))["items"] == []
        async with ArenaClient(server.url, token_for("gs")) as client:
            assert all(r.recorded for r in await client.submit_many(
                [ScoreEvent("hs", f"m{i}", 10 * i, W1 + i) for i in range(5)] + [ScoreEvent("low", "m", 1, W1)]))
        assert (await http.post("/v1/_test/clock", json={"now_ms": W1 + 8 * DAY})).status_code == 200
        await until_logged(server, 1)
        # a board created later that a pattern matches: its revisions are seen without a restart
        cup = {"aggregation": "sum", "periods": ["daily"], "prizes": {"daily": [{"reward": "cup", "ranks": [1, 1]}]}}
        assert (await http.put("/v1/boards/cup-1", json=cup, headers=ADMIN)).status_code == 201
        async with ArenaClient(server.url, token_for("gs")) as client:
            assert all(r.recorded for r in await client.submit_many([ScoreEvent("cup-1", "winner", 3, W1 + 8 * DAY)]))
        assert (await http.post("/v1/_test/clock", json={"now_ms": W1 + 10 * DAY})).status_code == 200

        async def settled() -> bool:  # what the jump closes: cup-1's and low's 2027-01-12 (nothing more until 01-15)
            closed = {i.board for i in await logged(server) if i.period_id == "2027-01-12"}
            return closed == {"cup-1", "low"}

        await until(settled, "cup-1's and low's 2027-01-12 to settle")
        log = await logged(server)
        everything = await read_all(http, ADMIN_TOKEN, 3)
        assert everything == [i.as_json() for i in log]  # the admin: every board, in log order
        assert await read_all(http, token_for("gs"), 1000) == everything
        assert await read_all(http, token_for("hs-only"), 2) == [i for i in everything if i["board"] == "hs"]
        cups = await read_all(http, token_for("cups"), 1)
        assert cups == [i for i in everything if i["board"] == "cup-1"] and cups
        hs = [i for i in everything if i["board"] == "hs"]
        assert {k: hs[0][k] for k in ("board", "period", "period_id", "partition", "revision", "awards")} == {
            "board": "hs", "period": "weekly", "period_id": "2027-W01", "partition": None, "revision": 0, "awards": 2}
        settlement = (await http.get("/v1/boards/hs/weekly/settlement", params={"period_id": "2027-W01"})).json()
        assert (hs[0]["sha256"], hs[0]["awards"]) == (settlement["sha256"], settlement["awards_total"])
        assert hs[0]["seq"] <= settlement["seq"]
        # after a cursor: only what follows it; past the end: nothing, and `next` stays
        middle = everything[len(everything) // 2]["cursor"]
        assert (await feed(http, ADMIN_TOKEN, after=middle))["items"] == [i for i in everything if i["cursor"] > middle]
        end = everything[-1]["cursor"]
        assert await feed(http, ADMIN_TOKEN, after=end + 10) == {"items": [], "next": end + 10}
        # who may not read it, and bad parameters
        for headers in ({}, bearer("not-a-token"), {"Authorization": "Basic x"}):
            answer = await http.get(FEED, headers=headers)
            assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized", answer.text
        for params in ({"after": -1}, {"after": "x"}, {"limit": 0}, {"limit": 1001}, {"limit": "1.5"}):
            answer = await http.get(FEED, params=params, headers=bearer(ADMIN_TOKEN))
            assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request", (params, answer.text)
        assert len((await feed(http, ADMIN_TOKEN, limit=1000))["items"]) == len(everything)
        assert "arena_settlement_feed_items_total" in (await http.get("/metrics")).text
