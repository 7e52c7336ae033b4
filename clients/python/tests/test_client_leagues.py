"""A league board through the client against a real server on both journal backends: `rank()`
(the WS ``members`` op), a `RankView` subscription and `members()` carry each member's
division on the global table; a division's own table, and a board without a league, carry none."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from arena.config import JournalSettings
from arena_client import ArenaClient, RankView, ScoreEvent, connect_sync
from support.server import InProcessServer, make_config, token_for

BOARDS: dict[str, dict[str, Any]] = {
    "l": {"periods": ["daily"], "league": {"size": 2, "tiers": ["bronze", "silver"], "promote": 1, "relegate": 0}},
    "plain": {"periods": ["daily"]},
}


async def test_rank_members_and_a_rank_view_carry_a_league_members_division(tmp_path: Path, served_journal: JournalSettings) -> None:
    config = make_config(tmp_path / "data", BOARDS, journal=served_journal)
    async with InProcessServer(config) as server, ArenaClient(server.url, token_for("gs")) as client:
        # one frame: the divisions fill in its order, two members a division
        results = await client.submit_many([ScoreEvent("l", "ann", 5), ScoreEvent("l", "bob", 9), ScoreEvent("l", "cid", 7),
                                            ScoreEvent("plain", "ann", 5)])
        assert all(r.recorded for r in results)

        cid = await client.rank("l", "daily", "cid")
        assert cid.entry is not None and (cid.entry.rank, cid.division, cid.partition) == (2, "bronze-2", None)
        assert (await client.rank("l", "daily", "nobody")).division is None
        ranked = await client.rank("l", "daily", "ann", partition="bronze-1")
        assert ranked.entry is not None and (ranked.entry.rank, ranked.division) == (2, None)
        assert (await client.rank("plain", "daily", "ann")).division is None

        friends = await client.members("l", "daily", ["cid", "ann", "nobody"])
        assert [e.member for e in friends.entries] == ["cid", "ann"] and friends.missing == ("nobody",)
        assert friends.divisions == {"cid": "bronze-2", "ann": "bronze-1"}
        assert (await client.members("l", "daily", ["ann"], partition="bronze-1")).divisions == {}
        assert (await client.members("plain", "daily", ["ann"])).divisions == {}

        async for standing in client.subscribe(RankView("l", "daily", "bob")):
            assert standing.entry is not None and (standing.entry.rank, standing.division) == (1, "bronze-1")
            break

        def synchronously() -> str | None:
            with connect_sync(server.url) as sync:
                return sync.rank("l", "daily", "bob").division

        assert await asyncio.to_thread(synchronously) == "bronze-1"
