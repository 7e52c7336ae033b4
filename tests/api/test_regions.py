"""Regions through real servers on both journal backends: an event's `region` counts in its
window's global table and in its region's, and every table route answers a region's table with
`?partition=` as the oracle ranks it; the partitions route lists them; voids, a start from a
snapshot and a full replay give the same partitions. WS query ops and live views take
`"partition"` too."""

from __future__ import annotations

import asyncio
import random
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import httpx

from arena.api.live import REFUSED
from arena.cli.rebuild import rebuild_board, table_name, table_rows
from arena.config import Config, JournalSettings
from arena.engine.times import format_ms
from arena_client import ArenaClient, ScoreEvent, TopView
from support import arena_cli, prize_oracle
from support.cluster import NodeFactory, owner_urls, start_cluster
from support.documented import assert_documented
from support.faults import write_config
from support.oracle import OBoard, OEvent, Row, digest, rank
from support.server import (
    ADMIN_TOKEN,
    ChildServer,
    Client,
    InProcessServer,
    event,
    make_config,
    now_ms,
    statuses,
    token_for,
    until,
)

NOW = 1_799_020_800_000  # 2027-01-04T00:00:00Z
DAY_ID = "2027-01-04"
REGIONS = ["eu", "na", "asia"]
BOARDS: dict[str, dict[str, Any]] = {
    "r": {"aggregation": "sum", "periods": ["alltime", "daily"], "regions": REGIONS, "min_value": -100},
    "plain": {"periods": ["alltime"]},
}
ORACLE_BOARD = OBoard(aggregation="sum", periods=("alltime", "daily"), min_value=-100)
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MEMBERS = [f"m{i}" for i in range(9)] + ["a/b%c"]


def events(seed: int, count: int) -> list[OEvent]:
    rnd = random.Random(seed)
    return [OEvent(rnd.choice(MEMBERS), rnd.randint(-5, 20), NOW + rnd.randint(0, 50) * 60_000, f"k{seed}-{i}",
                   rnd.choice([None, *REGIONS])) for i in range(count)]


def expected(sent: list[OEvent], region: str | None) -> list[Row]:
    return rank(ORACLE_BOARD, [e for e in sent if region is None or e.region == region])


@asynccontextmanager
async def serving(config: Config) -> Any:
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.post("/v1/_test/clock", json={"now_ms": NOW + 3_600_000})).status_code == 200
        await until(lambda: server.arena is not None and server.arena.ready, "the server to be ready")
        yield server, http


async def submit(server: InProcessServer, raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    client = await Client.connect(server.ws_url, token_for("gs"))
    try:
        return await client.submit(raw)
    finally:
        await client.close()


async def get(http: httpx.AsyncClient, path: str, status: int = 200, **params: Any) -> dict[str, Any]:
    answer = await http.get(path, params={k: v for k, v in params.items() if v is not None})
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    return body


def rows(entries: list[dict[str, Any]]) -> list[tuple[int, str, int, str]]:
    return [(e["rank"], e["member"], e["score"], e["reached_at"]) for e in entries]


async def check_routes(http: httpx.AsyncClient, sent: list[OEvent]) -> dict[tuple[str, str | None], str]:
    """Every table route of every partition (and the global table) against the oracle; the
    digests by (period, partition)."""
    digests = {}
    for period in ("alltime", "daily"):
        base = f"/v1/boards/r/{period}"
        for region in (None, *REGIONS):
            want = [(r, m, s, format_ms(t)) for r, m, s, t in expected(sent, region)]
            top = await get(http, base + "/top", limit=1000, partition=region)
            assert_documented("/v1/boards/{board}/{period}/top", "GET", top)
            assert rows(top["entries"]) == want and top["size"] == len(want), (period, region)
            assert top.get("partition") == region
            body = await get(http, base + "/digest", partition=region)
            assert body["sha256"] == digest(expected(sent, region)), (period, region)
            digests[(period, region)] = body["sha256"]
            if not want:
                continue
            rnk, member, score, _ = want[len(want) // 2]
            entry = (await get(http, f"{base}/members/{member.replace('/', '%2F')}", partition=region))["entry"]
            assert (entry["rank"], entry["score"]) == (rnk, score)
            around = await get(http, f"{base}/around", rank=rnk, radius=1, partition=region)
            assert rows(around["entries"]) == want[max(rnk - 2, 0) : rnk + 1]
            share = await get(http, f"{base}/percentile/{member.replace('/', '%2F')}", partition=region)
            assert share["top_percent"] == 100 * rnk / len(want)
            at = await get(http, f"{base}/score_at_percentile", p=100, partition=region)
            assert at["entry"]["rank"] == len(want)
            found = await get(http, f"{base}/search", prefix="m", partition=region)
            assert [(e["member"], e["rank"]) for e in found["entries"]] == sorted(
                (m, r) for r, m, _, _ in want if m.startswith("m"))[:20]
            friends = await http.post(f"{base}/members", params={"partition": region} if region else {},
                                      json={"members": [member, "nobody"]})
            assert friends.status_code == 200
            assert (rows(friends.json()["entries"]), friends.json()["missing"]) == ([want[rnk - 1]], ["nobody"])
    return digests


async def test_region_tables_answer_every_route_as_the_oracle_ranks_them(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    config = make_config(tmp_path, BOARDS, journal=served_journal, snapshot_every_events=1_000_000)
    sent = events(1, 80)
    async with serving(config) as (server, http):
        results = await submit(server, [e.raw("r") for e in sent])
        assert {r["status"] for r in results} == {"accepted"}
        await check_routes(http, sent)
        # the partitions route: regions in config order, with their sizes, paged
        listing = await get(http, "/v1/boards/r/daily/partitions", period_id=DAY_ID)
        assert_documented("/v1/boards/{board}/{period}/partitions", "GET", listing)
        assert listing["partitions"] == [{"partition": p, "size": len(expected(sent, p))} for p in REGIONS]
        assert (listing["period_id"], listing["next"], listing["size"]) == (DAY_ID, None, len(expected(sent, None)))
        page = await get(http, "/v1/boards/r/daily/partitions", limit=1, after="eu")
        assert ([p["partition"] for p in page["partitions"]], page["next"]) == (["na"], "na")
        assert (await get(http, "/v1/boards/r/daily/partitions", 404, after="mars"))["error"]["code"] == "unknown_partition"
        assert (await get(http, "/v1/boards/r/daily/partitions", 400, limit=0))["error"]["code"] == "invalid_request"
        listed = {b["board"]: b for b in (await get(http, "/v1/boards"))["boards"]}
        assert {p["partitions"] for p in listed["r"]["periods"]} == {3}
        assert all(p["partitions"] == 0 for p in listed["plain"]["periods"])
        for path in ("top", "digest", "search", "members/m1"):
            error = await get(http, f"/v1/boards/r/alltime/{path}", 404, partition="mars", prefix="m")
            assert error["error"]["code"] == "unknown_partition"
        assert (await get(http, "/v1/boards/plain/alltime/top", 404, partition="eu"))["error"]["code"] == "unknown_partition"
        # a void leaves the voided event out of its region's table too
        target = next(e for e in sent if e.region == "na")
        voided = await http.post("/v1/boards/r/void", json={"idempotency_key": target.key, "reason": "test"}, headers=ADMIN)
        assert voided.status_code == 200, voided.text
        sent.remove(target)
        digests = await check_routes(http, sent)
    # a start from the snapshot written at the stop, then a full replay: the same partitions
    async with serving(config) as (server, http):
        assert await check_routes(http, sent) == digests
    off = make_config(tmp_path, BOARDS, journal=served_journal, snapshot_every_events=0)
    async with serving(off) as (server, http):
        assert await check_routes(http, sent) == digests
    # `arena rebuild` (and verify, migrate) digest every partition the same
    engine, report = await rebuild_board(off, off.boards["r"], now=NOW + 3_600_000)
    listed = table_rows(off.boards["r"], engine, report, NOW + 3_600_000)
    rebuilt = {table_name(key): table.digest() for key, (table, _, _) in listed.items()}
    for (period, region), sha in digests.items():
        period_id = "alltime" if period == "alltime" else DAY_ID
        assert rebuilt[(period, period_id if region is None else f"{period_id}/{region}")] == sha


async def test_region_is_validated_and_part_of_the_idempotent_payload(tmp_path: Path, served_journal: JournalSettings) -> None:
    config = make_config(tmp_path, BOARDS, journal=served_journal)
    async with serving(config) as (server, http):
        first = [event("r", "ann", 5, NOW, "e1", region="eu"), event("r", "bob", 5, NOW, "e2"),
                 event("r", "cid", 5, NOW, "e3", region=None), event("plain", "dan", 5, NOW, "p1", region="anything")]
        assert [r["status"] for r in await submit(server, first)] == ["accepted"] * 4
        bad = await submit(server, [event("r", "eve", 1, NOW, "e4", region="mars"), event("r", "eve", 1, NOW, "e5", region=7)])
        assert [(r["status"], r["reason"]) for r in bad] == [("rejected", "invalid_event")] * 2
        assert all(r["message"].startswith("region: must be one of the board's regions (eu, na, asia)") for r in bad)
        again = await submit(server, [
            event("r", "ann", 5, NOW, "e1", region="eu"),  # as sent: duplicate
            event("r", "ann", 5, NOW, "e1"),  # without its region: another payload
            event("r", "bob", 5, NOW, "e2", region="na"),  # with a region it was sent without
            event("r", "cid", 5, NOW, "e3"),  # null is absent
            event("plain", "dan", 5, NOW, "p1", region="other"),  # ignored without regions
        ])
        assert [(r["status"], r.get("reason")) for r in again] == [
            ("duplicate", None), ("rejected", "idempotency_key_reused"), ("rejected", "idempotency_key_reused"),
            ("duplicate", None), ("duplicate", None)]
        eu = await get(http, "/v1/boards/r/alltime/top", partition="eu")
        assert [e["member"] for e in eu["entries"]] == ["ann"]
        assert (await get(http, "/v1/boards/r/alltime/top", partition="asia"))["entries"] == []
        audit = await http.get("/v1/boards/r/events", params={"member": "ann"}, headers=ADMIN)
        assert [e.get("region") for e in audit.json()["events"]] == ["eu"]


async def test_ws_query_ops_and_live_views_take_a_partition(tmp_path: Path, served_journal: JournalSettings) -> None:
    config = make_config(tmp_path, BOARDS, journal=served_journal, push_interval_ms=50)
    assert "unknown_partition" in REFUSED
    async with serving(config) as (server, http):
        await submit(server, [event("r", "ann", 5, NOW, "w1", region="eu"), event("r", "bob", 9, NOW, "w2", region="na")])
        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            top = await client.request({"op": "top", "board": "r", "period": "alltime", "partition": "na"})
            assert top["op"] == "result" and [e["member"] for e in top["entries"]] == ["bob"], top
            refused = await client.request({"op": "rank", "board": "r", "period": "alltime", "member": "bob", "partition": "mars"})
            assert refused["code"] == "unknown_partition", refused
            answer = await client.request({"op": "subscribe", "view": {"op": "top", "board": "r", "period": "alltime",
                                                                       "partition": "eu"}})
            assert answer["op"] == "subscribed", answer
            await submit(server, [event("r", "cid", 7, NOW, "w3", region="eu"), event("r", "dan", 99, NOW, "w4", region="na")])

            def members_seen() -> list[str] | None:
                updates = [f for f in client.unmatched if f.get("op") == "update" and f.get("sub") == answer["sub"]]
                return [e["member"] for e in updates[-1]["entries"]] if updates else None

            await until(lambda: members_seen() == ["cid", "ann"], "the eu view's update")
            assert all(f.get("partition") == "eu" for f in client.unmatched if f.get("op") == "update")
            refused_view = await client.request({"op": "subscribe", "view": {"op": "top", "board": "r", "period": "alltime",
                                                                             "partition": "mars"}})
            assert refused_view["code"] == "unknown_partition"
        finally:
            await client.close()


TIERS: list[dict[str, Any]] = [{"reward": "gold", "ranks": [1, 1]}, {"reward": "silver", "ranks": [2, 3]}]
PRIZE_BOARDS: dict[str, dict[str, Any]] = {
    "cup": {"periods": ["daily"], "regions": ["eu", "na"], "regional_prizes": True, "prizes": {"daily": TIERS}},
    "flat": {"periods": ["daily"], "regions": ["eu", "na"], "prizes": {"daily": TIERS}},
}
SETTLEMENT = "/v1/boards/{board}/daily/settlement"


async def settled(http: httpx.AsyncClient, board: str, partition: str | None, revision: int = 0) -> dict[str, Any]:
    params: dict[str, Any] = {"period_id": DAY_ID, **({"partition": partition} if partition else {})}

    async def ready() -> bool:
        answer = await http.get(SETTLEMENT.format(board=board), params=params)
        return answer.status_code == 200 and answer.json()["revision"] >= revision

    await until(ready, f"{board} {partition} to settle")
    body = await get(http, SETTLEMENT.format(board=board), **params)
    assert_documented("/v1/boards/{board}/{period}/settlement", "GET", body)
    return body


async def test_each_region_settles_on_its_own_with_regional_prizes(tmp_path: Path, served_journal: JournalSettings) -> None:
    config = make_config(tmp_path, PRIZE_BOARDS, journal=served_journal)
    rnd = random.Random(7)
    sent = [OEvent(f"p{i}", rnd.randint(0, 100), NOW + i * 60_000, f"c{i}", rnd.choice([None, "eu", "na"])) for i in range(30)]
    best = OBoard(periods=("daily",))

    def won(region: str | None, without: str | None = None) -> list[dict[str, Any]]:
        table = rank(best, [e for e in sent if (region is None or e.region == region) and e.key != without])
        return prize_oracle.awards([(m, s) for _, m, s, _ in table], "desc", TIERS)

    async with serving(config) as (server, http):
        assert {r["status"] for r in await submit(server, [e.raw("cup") for e in sent] + [e.raw("flat") for e in sent])} == {
            "accepted"}
        preview = await get(http, SETTLEMENT.format(board="cup"), preview="true", partition="na")
        assert (preview["preview"], preview["partition"], preview["awards"]) == (True, "na", won("na"))
        assert (await http.post("/v1/_test/clock", json={"now_ms": NOW + 86_400_000 + 120_000})).status_code == 200
        bodies = {region: await settled(http, "cup", region) for region in (None, "eu", "na")}
        for region, body in bodies.items():
            assert (body["revision"], body["awards"], body["sha256"]) == (0, won(region), prize_oracle.sha256(won(region)))
            assert body.get("partition") == region
        member = bodies["eu"]["awards"][0]["member"]
        mine = await get(http, f"/v1/boards/cup/daily/settlement/members/{member}", period_id=DAY_ID, partition="eu")
        assert mine["award"] == bodies["eu"]["awards"][0] and mine["partition"] == "eu"
        assert (await settled(http, "flat", None))["awards"] == won(None)
        refused = await get(http, SETTLEMENT.format(board="flat"), 404, period_id=DAY_ID, partition="eu")
        assert refused["error"]["code"] == "no_prizes"
        # a void of the eu winner revises the eu table's settlement (and the global one where it changes)
        target = next(e for e in sent if e.region == "eu" and e.member == member)
        voided = await http.post("/v1/boards/cup/void", json={"idempotency_key": target.key, "reason": "test"}, headers=ADMIN)
        assert voided.status_code == 200, voided.text
        eu = await settled(http, "cup", "eu", revision=1)
        assert (eu["revision"], eu["awards"], eu["partition"]) == (1, won("eu", target.key), "eu")
        assert {c["member"] for c in eu["changes"]} >= {member}
        na = await get(http, SETTLEMENT.format(board="cup"), period_id=DAY_ID, partition="na")
        assert {**na, "seq": ANY} == bodies["na"]  # not revised: the void changed none of its awards
        everyone = await get(http, SETTLEMENT.format(board="cup"), period_id=DAY_ID)
    off = make_config(tmp_path, PRIZE_BOARDS, journal=served_journal, snapshot_every_events=0)
    async with serving(off) as (server, http):  # a full replay: the same revisions
        assert (await http.post("/v1/_test/clock", json={"now_ms": NOW + 86_400_000 + 120_000})).status_code == 200
        assert await get(http, SETTLEMENT.format(board="cup"), period_id=DAY_ID, partition="eu") == {**eu, "seq": ANY}
        assert await get(http, SETTLEMENT.format(board="cup"), period_id=DAY_ID) == {**everyone, "seq": ANY}


async def test_arena_rebuild_and_verify_cover_every_partition(tmp_path: Path, served_journal: JournalSettings) -> None:
    config = write_config(tmp_path, {"r": {"periods": ["alltime"], "regions": REGIONS}}, journal=served_journal)
    node = ChildServer(config, fault_injection=False)
    await asyncio.to_thread(node.start)
    try:
        client = await Client.connect(node.ws_url, token_for("gs"))
        at = now_ms()
        sent = [event("r", "ann", 5, at, "v1", region="eu"), event("r", "bob", 7, at, "v2", region="eu"),
                event("r", "cid", 1, at, "v3")]
        assert statuses(await client.submit(sent)) == ["accepted"] * 3
        await client.close()
        rebuilt = await asyncio.to_thread(arena_cli.arena, "rebuild", "--config", config, timeout=60)
        assert rebuilt.returncode == 0, rebuilt.stderr
        digests = arena_cli.rebuild_digests(rebuilt.stdout)
        assert ("r", "alltime", "alltime/eu") in digests, rebuilt.stdout + rebuilt.stderr
        assert (digests[("r", "alltime", "alltime/eu")].events, digests[("r", "alltime", "alltime/eu")].members) == (2, 2)
        assert digests[("r", "alltime", "alltime/na")].members == 0
        async with httpx.AsyncClient(base_url=node.url) as http:
            served = await get(http, "/v1/boards/r/alltime/digest", partition="eu")
        assert digests[("r", "alltime", "alltime/eu")].sha256 == served["sha256"]
        verified = await asyncio.to_thread(arena_cli.arena, "verify", "--config", config, "--url", node.url, timeout=60)
        assert verified.returncode == 0, verified.stderr
        assert "4 tables checked, 0 mismatched" in verified.stderr
        assert "ok\tr/alltime/alltime/eu @ seq" in verified.stdout
    finally:
        node.kill()


async def test_the_python_sdk_writes_regions_and_reads_partitions(tmp_path: Path) -> None:
    config = make_config(tmp_path, BOARDS)
    async with serving(config) as (server, http), ArenaClient(server.url, token_for("gs")) as sdk:
        results = await sdk.submit_many([ScoreEvent("r", "ann", 5, NOW, region="eu"), ScoreEvent("r", "bob", 9, NOW, region="na"),
                                         {"board": "r", "member": "cid", "value": 7, "occurred_at": NOW, "region": "eu"}])
        assert all(r.recorded for r in results)
        eu = await sdk.top("r", "alltime", partition="eu")
        assert ([e.member for e in eu.entries], eu.partition, eu.size) == (["cid", "ann"], "eu", 2)
        assert (await sdk.top("r", "alltime")).partition is None
        assert (await sdk.rank("r", "daily", "bob", partition="na")).entry is not None
        assert (await sdk.rank("r", "daily", "bob", partition="eu")).entry is None
        assert (await sdk.around("r", "alltime", "ann", partition="eu", radius=1)).size == 2
        assert (await sdk.percentile("r", "alltime", "ann", partition="eu")).top_percent == 100.0
        assert (await sdk.score_at_percentile("r", "alltime", 50, partition="eu")).entry is not None
        assert (await sdk.members("r", "alltime", ["ann", "bob"], partition="eu")).missing == ("bob",)
        async for update in sdk.subscribe(TopView("r", "alltime", partition="na")):
            assert update.partition == "na" and [e.member for e in update.entries] == ["bob"]
            break


async def test_in_a_cluster_either_node_answers_a_partition(cluster_nodes: NodeFactory) -> None:
    """The node that does not own the board forwards `?partition=` queries, WS query ops and
    views to the owner."""
    nodes = await start_cluster(cluster_nodes, ["a", "b"], {"r": {"periods": ["alltime"], "regions": REGIONS}})
    async with httpx.AsyncClient() as http:
        owner = (await owner_urls(http, nodes))["r"]
        other = next(node for node in nodes if node.url != owner)
        async with ArenaClient(owner, token_for("gs")) as sdk:
            assert all(r.recorded for r in await sdk.submit_many(
                [ScoreEvent("r", "ann", 5, region="eu"), ScoreEvent("r", "bob", 9, region="na"), ScoreEvent("r", "cid", 7)]))
        for node in nodes:
            eu = await get(http, f"{node.url}/v1/boards/r/alltime/top", partition="eu")
            assert ([e["member"] for e in eu["entries"]], eu["partition"]) == (["ann"], "eu")
            listing = await get(http, f"{node.url}/v1/boards/r/alltime/partitions")
            assert [(p["partition"], p["size"]) for p in listing["partitions"]] == [("eu", 1), ("na", 1), ("asia", 0)]
            assert (await get(http, f"{node.url}/v1/boards/r/alltime/top", 404, partition="mars"))["error"]["code"] == (
                "unknown_partition")
        async with ArenaClient(other.url) as reader:
            na = await reader.top("r", "alltime", partition="na")
            assert [e.member for e in na.entries] == ["bob"]
            async for update in reader.subscribe(TopView("r", "alltime", partition="eu")):
                assert [e.member for e in update.entries] == ["ann"] and update.partition == "eu"
                break


async def test_an_api_board_may_append_regions_never_remove_one(tmp_path: Path, served_journal: JournalSettings) -> None:
    config = make_config(tmp_path, {}, {"gs": ["*"]}, journal=served_journal)
    board = {"periods": ["alltime"], "regions": ["eu", "na"]}
    async with serving(config) as (server, http):
        assert (await http.put("/v1/boards/api-r", json=board, headers=ADMIN)).status_code in (200, 201)
        assert statuses(await submit(server, [event("api-r", "ann", 5, NOW, "a1", region="na")])) == ["accepted"]
        grown = await http.put("/v1/boards/api-r", json={**board, "regions": ["eu", "na", "asia"]}, headers=ADMIN)
        assert grown.status_code == 200, grown.text
        assert statuses(await submit(server, [event("api-r", "bob", 7, NOW, "a2", region="asia")])) == ["accepted"]
        assert [e["member"] for e in (await get(http, "/v1/boards/api-r/alltime/top", partition="asia"))["entries"]] == ["bob"]
        for regions in (["eu"], ["na", "eu", "asia"]):
            refused = await http.put("/v1/boards/api-r", json={**board, "regions": regions}, headers=ADMIN)
            assert refused.status_code == 409 and refused.json()["error"]["code"] == "definition_conflict", refused.text
