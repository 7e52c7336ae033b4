"""Live views through the client against a real server: `subscribe` yields the dataclasses the
queries return, a member not in the table is a state (``entry`` None), the sync client iterates
the same updates, a client without a token reads the public /v1/live, and a view is followed
again after the server restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from arena_client import (
    ArenaClient,
    AroundView,
    Members,
    MembersView,
    Percentile,
    PercentileView,
    RankView,
    ScoreAtPercentile,
    ScoreAtPercentileView,
    ScoreEvent,
    Standing,
    Table,
    TopView,
    connect_sync,
)
from support.server import InProcessServer, make_config, token_for

BOARDS = {"b": {"aggregation": "best", "periods": ["alltime", "daily"]}}
PUSH_MS = 50

pytestmark = pytest.mark.server(BOARDS, push_interval_ms=PUSH_MS)


async def test_every_view_yields_its_querys_dataclass_and_an_absent_member_is_a_state(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs")) as client:
        await client.submit("b", "ann", 50)
        rank = client.subscribe(RankView("b", "daily", "bob"))
        share = client.subscribe(PercentileView("b", "daily", "bob"))
        near = client.subscribe(AroundView("b", "daily", member="bob", radius=1))
        cut = client.subscribe(ScoreAtPercentileView("b", "daily", 100))
        top = client.subscribe(TopView("b", "daily", limit=2))
        crowd = client.subscribe(MembersView("b", "daily", ("ann", "bob")))
        first = (await anext(rank), await anext(share), await anext(near), await anext(cut), await anext(top), await anext(crowd))
        assert isinstance(first[0], Standing) and first[0].entry is None and first[0].size == 1
        assert isinstance(first[1], Percentile) and first[1].entry is None and first[1].top_percent is None
        assert isinstance(first[2], Table) and first[2].entries == ()
        assert isinstance(first[3], ScoreAtPercentile) and first[3].entry is not None and first[3].entry.member == "ann"
        assert isinstance(first[4], Table) and [e.member for e in first[4].entries] == ["ann"]
        assert isinstance(first[5], Members) and first[5].missing == ("bob",)
        await client.submit("b", "bob", 70)
        mine = await anext(rank)
        assert mine.entry is not None and (mine.entry.rank, mine.entry.score) == (1, 70) and mine.seq > first[0].seq
        now = await anext(share)
        assert now.entry is not None and now.top_percent == 50.0
        assert [e.member for e in (await anext(near)).entries] == ["bob", "ann"]
        assert [e.member for e in (await anext(top)).entries] == ["bob", "ann"]
        assert (await anext(crowd)).missing == ()
        for updates in (rank, share, near, cut, top, crowd):
            await updates.aclose()
        assert (await client.rank("b", "daily", "bob")).entry == mine.entry  # the query answers as the view


async def test_the_sync_client_iterates_a_view(server: InProcessServer) -> None:
    def script() -> list[list[str]]:
        seen: list[list[str]] = []
        with connect_sync(server.url, token_for("gs")) as client:
            updates = client.subscribe(TopView("b", "alltime", limit=5))
            seen.append([e.member for e in next(updates).entries])
            client.submit("b", "cat", 3)
            for top in updates:
                seen.append([e.member for e in top.entries])
                if seen[-1] == ["cat"]:
                    break  # leaving the loop unsubscribes
            assert client.top("b", "alltime").size == 1  # the client goes on after the iterator ends
        return seen

    seen = await asyncio.wait_for(asyncio.to_thread(script), 60)
    assert seen[0] == [] and seen[-1] == ["cat"]


async def test_without_a_token_the_client_reads_the_public_live_endpoint(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs")) as writer:
        await writer.submit("b", "dee", 9)
        async with ArenaClient(server.url) as reader:
            assert reader.url.endswith("/v1/live")
            assert (await reader.rank("b", "alltime", "dee")).entry is not None
            updates = reader.subscribe(RankView("b", "alltime", "eve"))
            assert (await anext(updates)).entry is None
            await writer.submit("b", "eve", 4)
            eve = await anext(updates)
            assert eve.entry is not None and eve.entry.score == 4
            await updates.aclose()
            with pytest.raises(ValueError, match="token"):
                await reader.submit("b", "mallory", 1)


async def test_a_view_is_followed_again_after_the_server_restarts(tmp_path: Path) -> None:
    server = InProcessServer(make_config(tmp_path / "data", BOARDS, push_interval_ms=PUSH_MS))
    await server.start()
    try:
        async with ArenaClient(server.url, token_for("gs"), give_up_after=None) as client:
            updates = client.subscribe(TopView("b", "alltime", limit=5))
            assert (await anext(updates)).entries == ()
            await client.submit("b", "ann", 5)
            assert (await anext(updates)).entries[0].member == "ann"
            port = server.port
            await server.stop()  # the connection drops; the client reconnects when the server is back
            await server.start(port=port)
            await client.submit("b", "bob", 9)
            answer = await anext(updates)
            while [e.member for e in answer.entries] != ["bob", "ann"]:
                answer = await anext(updates)
            await updates.aclose()
    finally:
        await server.stop()


async def test_an_update_older_than_the_last_one_is_never_yielded(tmp_path: Path) -> None:
    """Two servers with journals of their own stand for nodes whose answers lag: after moving from
    one (seq 5) to the other (seq 0), the view yields nothing until the other's seq has caught up."""
    ahead = InProcessServer(make_config(tmp_path / "ahead", BOARDS, push_interval_ms=PUSH_MS))
    behind = InProcessServer(make_config(tmp_path / "behind", BOARDS, push_interval_ms=PUSH_MS))
    await ahead.start()
    await behind.start()
    try:
        async with ArenaClient([ahead.url, behind.url], token_for("gs"), reconnect_base=0.01) as client:
            await client.submit_many([ScoreEvent("b", f"m{i}", i) for i in range(5)])
            updates = client.subscribe(TopView("b", "alltime", limit=10))
            first = await anext(updates)
            assert first.seq == 5 and first.size == 5
            await ahead.stop()  # the client moves on to `behind`, whose answers start at seq 0
            await client.submit_many([ScoreEvent("b", f"n{i}", i) for i in range(6)])
            async with asyncio.timeout(30):
                later = await anext(updates)
            assert later.seq >= first.seq and {e.member for e in later.entries} >= {f"n{i}" for i in range(5)}
            await updates.aclose()
    finally:
        await behind.stop()
        await ahead.stop()
