"""`GET …/settlement?preview=true` through real servers: an open table's awards if it closed now,
as the contract's oracle (`support.prize_oracle`) makes them from the standings answered at the
same seq; paged, hashed over every award, on both journal backends, from a config.toml read by
`arena serve` and through either node of a cluster. On a closed table it answers the journaled
settlement (tests/api/test_settlement_journaled.py); an open table without preview is `not_settled`; a
kind without prizes is `no_prizes`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import support.server
from arena.client import ArenaClient, ScoreEvent
from arena.config import JournalSettings
from support import prize_oracle
from support.cluster import NodeFactory, owner_urls, settled, start_cluster
from support.documented import assert_documented
from support.faults import write_config
from support.prized import BOARDS, DAY, HS_TIERS, LOW_TIERS, MIN, SETTLEMENT, W1
from support.server import ChildServer, make_config, now_ms, token_for, until


class Rig(support.server.Rig):
    async def get(self, path: str, status: int = 200, **params: Any) -> dict[str, Any]:
        answer = await self.http.get(path, params=params)
        assert answer.status_code == status, answer.text
        body: dict[str, Any] = answer.json()
        return body

    async def preview(self, board: str, period: str, **params: Any) -> dict[str, Any]:
        body = await self.get(f"/v1/boards/{board}/{period}/settlement", preview="true", **params)
        assert_documented(SETTLEMENT, "GET", body)
        return body

    async def error(self, path: str, status: int, **params: Any) -> str:
        body = await self.get(path, status, **params)
        assert_documented(SETTLEMENT, "GET", body, status)
        code: str = body["error"]["code"]
        return code


@pytest.fixture
async def rig(tmp_path: Path, served_journal: JournalSettings) -> AsyncIterator[Rig]:
    async with support.server.rig(Rig, make_config(tmp_path, BOARDS, journal=served_journal)) as r:
        await r.clock(W1 + 2 * DAY)
        yield r


async def expected(rig: Rig, board: str, period: str, tiers: list[dict[str, Any]], order: str) -> tuple[int, list[dict[str, Any]]]:
    """(seq, awards) by the oracle, from the standings the top route answers."""
    top = await rig.get(f"/v1/boards/{board}/{period}/top", limit=1000)
    assert top["size"] == len(top["entries"])
    return top["seq"], prize_oracle.awards([(e["member"], e["score"]) for e in top["entries"]], order, tiers)


async def test_the_preview_is_the_oracles_awards_of_the_open_table_at_its_seq(rig: Rig) -> None:
    # 41 members, scores with many ties: 12.5 % of 41 is 5.125 ranks, so ranks 2..6 win silver
    events = [ScoreEvent("hs", f"p{i:02d}", 700 + (i * 37) % 260, W1 + DAY + i * MIN) for i in range(41)]
    events += [ScoreEvent("low", f"p{i:02d}", (i * 7) % 20, W1 + 2 * DAY - i * MIN) for i in range(12) for _ in range(2)]
    assert all(r.recorded for r in await rig.client.submit_many(events))
    for board, period, tiers, order in [("hs", "weekly", HS_TIERS, "desc"), ("low", "daily", LOW_TIERS, "asc")]:
        seq, awards = await expected(rig, board, period, tiers, order)
        body = await rig.preview(board, period)
        assert body["awards"] == awards and body["awards_total"] == len(awards) > 0
        assert body["sha256"] == prize_oracle.sha256(awards)
        assert (body["seq"], body["preview"], body["revision"], body["closed"], body["tiers"]) == (seq, True, 0, False, tiers)
        assert "changes" not in body
    hs = await rig.preview("hs", "weekly")
    assert [a["reward"] for a in hs["awards"][:7]] == ["gold"] + ["silver"] * 5 + ["tin"]
    page = await rig.preview("hs", "weekly", limit=3, offset=2)
    assert page["awards"] == hs["awards"][2:5] and page["sha256"] == hs["sha256"] and page["awards_total"] == hs["awards_total"]
    assert (await rig.preview("hs", "weekly", offset=10_000))["awards"] == []
    # a new leader: the preview follows the table
    assert (await rig.client.submit("hs", "zed", 999_999, occurred_at=W1 + 2 * DAY)).recorded
    seq, awards = await expected(rig, "hs", "weekly", HS_TIERS, "desc")
    again = await rig.preview("hs", "weekly", period_id="2027-W01")
    assert again["seq"] == seq > hs["seq"] and again["awards"] == awards and awards[0]["member"] == "zed"


async def test_no_prizes_not_settled_and_bad_parameters(rig: Rig) -> None:
    assert (await rig.client.submit("hs", "ann", 950, occurred_at=W1 + MIN)).recorded
    path = SETTLEMENT.format(board="hs", period="weekly")
    assert await rig.error(SETTLEMENT.format(board="hs", period="daily"), 404, preview="true") == "no_prizes"
    assert await rig.error(SETTLEMENT.format(board="hs", period="alltime"), 404, preview="true") == "no_prizes"
    assert await rig.error(SETTLEMENT.format(board="nope", period="weekly"), 404, preview="true") == "unknown_board"
    assert await rig.error(SETTLEMENT.format(board="hs", period="fortnightly"), 404, preview="true") == "unknown_period"
    assert await rig.error(path, 404, preview="true", period_id="2027-W99") == "unknown_period"
    assert await rig.error(path, 404) == "not_settled"  # open: it settles at its close
    assert await rig.error(path, 404, preview="false") == "not_settled"
    bads: list[dict[str, Any]] = [{"preview": "yes"}, {"preview": "true", "limit": 0}, {"preview": "true", "limit": 1001},
                                  {"preview": "true", "offset": -1}, {"preview": "true", "limit": "ten"}]
    for bad in bads:
        assert await rig.error(path, 400, **bad) == "invalid_request"
    # the week closes at its end plus the grace: from then on the preview answers its settlement
    await rig.clock(W1 + 7 * DAY + MIN)

    async def settled() -> bool:
        return (await rig.http.get(path, params={"preview": "true", "period_id": "2027-W01"})).status_code == 200

    await until(settled, "the week to settle")
    closed = await rig.get(path, period_id="2027-W01")
    assert (closed["revision"], closed["closed"], closed["awards"][0]["member"]) == (0, True, "ann")
    assert "preview" not in closed
    empty = await rig.preview("hs", "weekly")  # the new week: open and empty
    assert (empty["period_id"], empty["size"], empty["awards"], empty["awards_total"]) == ("2027-W02", 0, [], 0)
    assert empty["sha256"] == prize_oracle.sha256([])


async def test_config_toml_prizes_reach_a_served_preview(tmp_path: Path) -> None:
    """`arena serve` reads the tiers from config.toml (a decimal top_percent, exact)."""
    tiers = [{"reward": "top", "top_percent": 0.9}, {"reward": "rest", "top_percent": 100}]
    boards = {"hs": {"aggregation": "best", "periods": ["alltime", "weekly"], "prizes": {"weekly": tiers}}}
    server = ChildServer(write_config(tmp_path, boards))
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert (await http.post("/v1/_test/clock", json={"now_ms": W1 + DAY})).status_code == 200
            async with ArenaClient(server.url, token_for("gs")) as client:
                events = [ScoreEvent("hs", f"m{i:03d}", i, W1 + i) for i in range(1000)]
                assert all(r.recorded for r in await client.submit_many(events))
            body = (await http.get("/v1/boards/hs/weekly/settlement", params={"preview": "true"})).json()
        # 0.9 % of 1000 is 9 ranks exactly (in doubles, 0.9 / 100 * 1000 is 9.000000000000002: ceil 10)
        assert [a["reward"] for a in body["awards"][:10]] == ["top"] * 9 + ["rest"]
        assert body["awards_total"] == 1000 and body["tiers"] == tiers
    finally:
        server.kill()


async def test_either_node_of_a_cluster_answers_the_owners_preview(cluster_nodes: NodeFactory) -> None:
    nodes = await start_cluster(cluster_nodes, ["a", "b"], BOARDS)
    await settled(nodes, ["a", "b"], BOARDS)
    at = now_ms()
    async with httpx.AsyncClient() as http:
        owner = (await owner_urls(http, nodes))["hs"]
        async with ArenaClient(owner, token_for("gs")) as client:
            events = [ScoreEvent("hs", f"m{i:02d}", 850 + i * 5, at - i) for i in range(30)]
            assert all(r.recorded for r in await client.submit_many(events))
        week = (await http.get(f"{owner}/v1/boards/hs/weekly/top", params={"limit": 1000})).json()
        awards = prize_oracle.awards([(e["member"], e["score"]) for e in week["entries"]], "desc", HS_TIERS)
        assert len(awards) == 20  # the scores of 900 or more (tin); gold and silver go to the best of them
        for node in nodes:  # the non-owner forwards to the owner; only a later close marker may move seq
            answer = await http.get(f"{node.url}/v1/boards/hs/weekly/settlement",
                                    params={"preview": "true", "period_id": week["period_id"]})
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert (body["awards"], body["sha256"], body["size"]) == (awards, prize_oracle.sha256(awards), 30)
