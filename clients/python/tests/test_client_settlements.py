"""The settlement feed through the client, against real servers on both journal backends:
`settlements()` yields typed items, each revision once in log order, and remembers its cursor, so
a feed started again from the stored cursor gives what came after, and nothing twice; the
blocking iterator of `connect_sync` gives the same; a node that cannot be reached is left for
the next; a refused token raises `AuthenticationError`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from arena.config import JournalSettings
from arena_client import ArenaClient, AuthenticationError, ScoreEvent, SettlementFeed, SettlementItem, connect_sync
from loadtest.process import free_socket
from support.server import ADMIN_TOKEN, InProcessServer, make_config, token_for

MIN = 60_000
DAY = 24 * 60 * MIN
W1 = 1_799_020_800_000  # 2027-01-04T00:00:00Z (after the wall clock)
BOARDS = {"d": {"aggregation": "best", "periods": ["daily"], "prizes": {"daily": [{"reward": "gold", "ranks": [1, 1]}]}}}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def next_item(feed: SettlementFeed) -> SettlementItem:
    return await asyncio.wait_for(anext(feed), 30)


async def void(http: httpx.AsyncClient, key: str) -> None:
    answer = await http.post("/v1/boards/d/void", json={"idempotency_key": key, "reason": "cheat"}, headers=ADMIN)
    assert answer.status_code == 200, answer.text


async def test_settlements_yields_each_revision_once_and_resumes_from_its_cursor(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    config = make_config(tmp_path / "data", BOARDS, journal=served_journal)
    async with InProcessServer(config, now_ms=W1 + 60 * MIN) as server, httpx.AsyncClient(base_url=server.url) as http:
        with free_socket() as dead:  # a node that answers nothing: the feed goes on to the next
            dead_url = f"http://127.0.0.1:{dead.getsockname()[1]}"
        async with ArenaClient([dead_url, server.url], token_for("gs")) as client:
            results = await client.submit_many([ScoreEvent("d", f"m{i}", i, W1 + i, idempotency_key=f"k{i}") for i in range(3)])
            assert all(r.recorded for r in results)
            assert (await http.post("/v1/_test/clock", json={"now_ms": W1 + DAY + MIN})).status_code == 200
            feed = client.settlements(poll_seconds=0.02)
            assert feed.cursor == 0
            first = await next_item(feed)
            assert isinstance(first, SettlementItem)
            assert (first.board, first.period, first.period_id, first.partition, first.revision, first.awards) == (
                "d", "daily", "2027-01-04", None, 0, 1)
            assert feed.cursor == first.cursor
            stored = feed.cursor
            await void(http, "k2")
            second = await next_item(feed)
            assert (second.period_id, second.revision) == ("2027-01-04", 1) and second.cursor > stored
            settlement = (await http.get("/v1/boards/d/daily/settlement", params={"period_id": "2027-01-04"})).json()
            assert (second.sha256, second.awards) == (settlement["sha256"], settlement["awards_total"])
            # a backend restarting from the cursor it stored after the first item gets the second, then the next
            again = client.settlements(after=stored, poll_seconds=0.02)
            assert await next_item(again) == second
            await void(http, "k1")
            third = await next_item(again)
            assert (third.revision, third.cursor > second.cursor) == (2, True)
            assert await next_item(feed) == third
            assert feed.cursor == again.cursor == third.cursor


async def test_the_blocking_client_reads_the_same_feed(tmp_path: Path) -> None:
    config = make_config(tmp_path / "data", BOARDS)
    async with InProcessServer(config, now_ms=W1 + 60 * MIN) as server, httpx.AsyncClient(base_url=server.url) as http:
        async with ArenaClient(server.url, token_for("gs")) as client:
            assert all(r.recorded for r in await client.submit_many([ScoreEvent("d", "m", 1, W1)]))
            assert (await http.post("/v1/_test/clock", json={"now_ms": W1 + DAY + MIN})).status_code == 200
            expected = await next_item(client.settlements(poll_seconds=0.02))

        def read() -> tuple[SettlementItem, int]:
            with connect_sync(server.url, token_for("gs")) as sync:
                feed = sync.settlements(poll_seconds=0.02)
                item = next(iter(feed))
                return item, feed.cursor

        assert await asyncio.to_thread(read) == (expected, expected.cursor)


async def test_a_refused_token_raises_and_bad_arguments_are_refused(tmp_path: Path) -> None:
    async with InProcessServer(make_config(tmp_path / "data", BOARDS)) as server:
        async with ArenaClient(server.url, token_for("gs")) as client:
            with pytest.raises(ValueError):
                client.settlements(limit=0)
            with pytest.raises(ValueError):
                client.settlements(poll_seconds=-1)
        stranger = ArenaClient(server.url, "not-a-token")  # no connection needed: the feed is HTTP
        with pytest.raises(AuthenticationError) as refused:
            await next_item(stranger.settlements())
        assert refused.value.status == 401
