"""A 3-tier league season through a real server on both journal backends: divisions fill in
journal order, members of a window's grace join at the close before, tiers move at each close
and carry to the next window played, exactly as the oracle (`support.league_oracle`) says; the
partitions route, `?partition=` and `members/{member}`'s `division` answer it; a start from a
snapshot and a full replay give the same divisions. A league's size, promote and relegate changed
mid-season (a `PUT` of an API board's definition) apply from the next window: each window fills
and moves with the parameters in force when its divisions began, also after a snapshot start, a
full replay and `arena rebuild`; its tiers stay fixed (409)."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from arena.cli.rebuild import every_board, rebuild_board, table_name, table_rows
from arena.config import Config, JournalSettings
from arena.engine.league import LeagueSpec
from arena.engine.times import format_ms
from arena_client import ArenaClient, ScoreEvent
from support import prize_oracle
from support.cluster import NodeFactory, owner_urls, start_cluster
from support.documented import assert_documented
from support.league_oracle import BASE, GRACE, HOUR, LeagueOracle
from support.oracle import OEvent, digest
from support.server import ADMIN_TOKEN, Client, InProcessServer, make_config, token_for, until

LEAGUE = LeagueSpec(size=3, tiers=("bronze", "silver", "gold"), promote=1, relegate=1)
PRIZES = [{"reward": "cup", "ranks": [1, 1], "tier": "gold"}, {"reward": "medal", "ranks": [1, 1]},
          {"reward": "ribbon", "ranks": [2, 2], "tier": "bronze"}]
BOARDS: dict[str, dict[str, Any]] = {"l": {
    "periods": [], "custom_periods": {"season": {"every_hours": 1, "anchor": format_ms(BASE)}},
    "close_grace_seconds": GRACE // 1000, "max_future_skew_seconds": 0, "keep_closed": 10,
    "league": {"size": 3, "tiers": list(LEAGUE.tiers), "promote": 1, "relegate": 1},
    "prizes": {"season": PRIZES},
}}
MEMBERS = [f"m{i}" for i in range(9)]
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def period_id(index: int) -> str:
    return time.strftime("%Y-%m-%dT%HZ", time.gmtime((BASE + index * HOUR) / 1000))


class Season:
    """The server and the oracle fed the same frames at the same pinned instants."""

    def __init__(self, server: InProcessServer, http: httpx.AsyncClient) -> None:
        self.server, self.http = server, http
        self.oracle = LeagueOracle(LEAGUE)
        self.keys = 0

    async def at(self, now: int) -> None:
        assert (await self.http.post("/v1/_test/clock", json={"now_ms": now})).status_code == 200
        self.oracle.submit([], now)
        self.now = now

    async def play(self, scores: dict[str, int], occurred_at: int) -> None:
        sent = []
        for member, value in scores.items():
            self.keys += 1
            sent.append(OEvent(member, value, occurred_at, f"k{self.keys}"))
        client = await Client.connect(self.server.ws_url, token_for("gs"))
        try:
            results = await client.submit([e.raw("l") for e in sent])
        finally:
            await client.close()
        assert [r["status"] == "accepted" for r in results] == self.oracle.submit(sent, self.now)


async def get(http: httpx.AsyncClient, path: str, status: int = 200, **params: Any) -> dict[str, Any]:
    answer = await http.get(path, params={k: v for k, v in params.items() if v is not None})
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def division_of(http: httpx.AsyncClient, index: int, member: str) -> str | None:
    body = await get(http, f"/v1/boards/l/season/members/{member}", period_id=period_id(index))
    division: str | None = body["division"]
    return division


async def check_season(http: httpx.AsyncClient, oracle: LeagueOracle, windows: int) -> dict[str, list[Any]]:
    """Every window's divisions (listing, standings, each member's division) as the oracle
    says; the standings by window/division."""
    standings, divisions, _tiers = oracle.season()
    seen = {}
    for index in range(windows):
        listing = await get(http, "/v1/boards/l/season/partitions", period_id=period_id(index))
        assert_documented("/v1/boards/{board}/{period}/partitions", "GET", listing)
        names = sorted(set(divisions[index].values()), key=lambda d: (LEAGUE.tier_index(d), int(d.rsplit("-", 1)[1])))
        sizes = {d: len(rows) for d, rows in standings[index].items()}
        assert listing["partitions"] == [{"partition": d, "size": sizes[d]} for d in names], index
        for d in names:
            top = await get(http, "/v1/boards/l/season/top", period_id=period_id(index), partition=d)
            got = [(e["rank"], e["member"], e["score"], e["reached_at"]) for e in top["entries"]]
            assert got == [(r, m, s, format_ms(t)) for r, m, s, t in standings[index][d]], (index, d)
            seen[f"{index}/{d}"] = got
        for member, division in divisions[index].items():
            body = await get(http, f"/v1/boards/l/season/members/{member}", period_id=period_id(index))
            assert_documented("/v1/boards/{board}/{period}/members/{member}", "GET", body)
            assert body["division"] == division
            ranked = await get(http, f"/v1/boards/l/season/members/{member}", period_id=period_id(index), partition=division)
            assert "division" not in ranked and ranked["partition"] == division
        listed = await http.post("/v1/boards/l/season/members", params={"period_id": period_id(index)}, json={"members": MEMBERS})
        assert_documented("/v1/boards/{board}/{period}/members", "POST", listed.json())
        found = await get(http, "/v1/boards/l/season/search", period_id=period_id(index), prefix="m", limit=100)
        assert_documented("/v1/boards/{board}/{period}/search", "GET", found)
        for body in (listed.json(), found):  # each listed member's division, as `members/{member}` answers it
            assert body["divisions"] == {e["member"]: divisions[index].get(e["member"]) for e in body["entries"]}, index
    return seen


async def check_prizes(http: httpx.AsyncClient, oracle: LeagueOracle, closed: int) -> None:
    """Each division of the closed windows settled on its own under the prize tiers of its
    tier, as the prize oracle awards its standings; the global table has none."""
    standings, _, _ = oracle.season()
    path = "/v1/boards/l/season/settlement"
    for index in range(closed):
        for division, rows in standings[index].items():
            tiers = [t for t in PRIZES if t.get("tier") in (None, division.rsplit("-", 1)[0])]

            params = {"period_id": period_id(index), "partition": division}

            async def settled(params: dict[str, str] = params) -> bool:
                return (await http.get(path, params=params)).status_code == 200

            await until(settled, f"{division} of window {index} to settle")
            body = await get(http, path, period_id=period_id(index), partition=division)
            assert_documented("/v1/boards/{board}/{period}/settlement", "GET", body)
            assert (body["partition"], body["revision"], body["tiers"]) == (division, 0, tiers)
            assert body["awards"] == prize_oracle.awards([(m, score) for _, m, score, _ in rows], "desc", tiers)
        error = await get(http, path, 404, period_id=period_id(index))
        assert error["error"]["code"] == "no_prizes"


@asynccontextmanager
async def serving(config: Config, now: int) -> Any:
    async with InProcessServer(config, now_ms=now) as server, httpx.AsyncClient(base_url=server.url) as http:
        season = Season(server, http)
        await season.at(now)
        yield season


async def test_a_three_tier_season_promotes_and_relegates_as_the_oracle_says(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    config = make_config(tmp_path, BOARDS, journal=served_journal, snapshot_every_events=1_000_000)
    async with serving(config, BASE + 10 * 60_000) as season:
        http = season.http
        await season.play({m: 10 + i for i, m in enumerate(MEMBERS)}, BASE + 5 * 60_000)  # window 0: 3 bronze divisions
        await season.at(BASE + HOUR + 2 * 60_000)  # window 0's grace: a late event, and two members of window 1
        await season.play({"m0": 100}, BASE + HOUR - 60_000)
        await season.play({"m8": 7, "m1": 9}, BASE + HOUR + 60_000)
        assert await division_of(http, 1, "m8") is None  # waits for window 0's close
        await season.at(BASE + HOUR + GRACE + 60_000)

        async def joined() -> bool:
            return await division_of(http, 1, "m8") is not None

        await until(joined, "the members of the grace to join at the close")
        await season.play({m: 30 - i for i, m in enumerate(MEMBERS) if m not in ("m8", "m1")}, BASE + HOUR + GRACE + 30_000)
        for index in (2, 3):
            await season.at(BASE + index * HOUR + GRACE + 60_000)
            await season.play({m: (7 * i + 3 * index) % 11 for i, m in enumerate(MEMBERS)}, BASE + index * HOUR + GRACE)
        _, _, tiers = season.oracle.season()
        assert set(tiers.values()) == {0, 1, 2}  # every tier reached
        seen = await check_season(http, season.oracle, 4)
        await check_prizes(http, season.oracle, 3)
        oracle = season.oracle
    async with serving(config, season.now) as again:  # from the snapshot written at the stop
        assert await check_season(again.http, oracle, 4) == seen
    off = make_config(tmp_path, BOARDS, journal=served_journal, snapshot_every_events=0)
    async with serving(off, season.now) as again:  # a full replay
        assert await check_season(again.http, oracle, 4) == seen
        await check_prizes(again.http, oracle, 3)
        unknown = await get(again.http, "/v1/boards/l/season/top", 404, period_id=period_id(1), partition="gold-9")
        assert unknown["error"]["code"] == "unknown_partition"
    # `arena rebuild` (and verify, migrate) digest every division as the oracle ranks it
    engine, report = await rebuild_board(off, off.boards["l"], now=season.now)
    listed = table_rows(off.boards["l"], engine, report, season.now)
    rebuilt = {table_name(key): table.digest() for key, (table, _, _) in listed.items()}
    standings, _, _ = oracle.season()
    for index in range(4):
        for division, rows in standings[index].items():
            assert rebuilt[("season", f"{period_id(index)}/{division}")] == digest(rows)


async def test_in_a_cluster_either_node_answers_a_division(cluster_nodes: NodeFactory) -> None:
    """The node that does not own a league board forwards its division queries and a member's
    `division` to the owner."""
    league = {"periods": ["daily"], "league": {"size": 2, "tiers": ["bronze", "silver"], "promote": 1, "relegate": 0}}
    nodes = await start_cluster(cluster_nodes, ["a", "b"], {"l": league})
    async with httpx.AsyncClient() as http:
        owner = (await owner_urls(http, nodes))["l"]
        async with ArenaClient(owner, token_for("gs")) as sdk:  # one frame: divisions fill in its order
            assert all(r.recorded for r in await sdk.submit_many(
                [ScoreEvent("l", "ann", 5), ScoreEvent("l", "bob", 9), ScoreEvent("l", "cid", 7)]))
        for node in nodes:
            listing = await get(http, f"{node.url}/v1/boards/l/daily/partitions")
            assert [(p["partition"], p["size"]) for p in listing["partitions"]] == [("bronze-1", 2), ("bronze-2", 1)]
            top = await get(http, f"{node.url}/v1/boards/l/daily/top", partition="bronze-1")
            assert [e["member"] for e in top["entries"]] == ["bob", "ann"]
            assert (await get(http, f"{node.url}/v1/boards/l/daily/members/cid"))["division"] == "bronze-2"


# A league's size, promote and relegate changed mid-season by a `PUT` of an API board's definition.

BOARD = {key: value for key, value in BOARDS["l"].items() if key != "prizes"}
WIDER = LeagueSpec(size=4, tiers=LEAGUE.tiers, promote=2, relegate=1)


async def define(http: httpx.AsyncClient, league: LeagueSpec, status: int = 200) -> dict[str, Any]:
    answer = await http.put("/v1/boards/l", json={**BOARD, "league": league.document()}, headers=ADMIN)
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_a_change_of_size_and_promote_mid_season_applies_from_the_next_window(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    config = make_config(tmp_path, {}, journal=served_journal, snapshot_every_events=1_000_000)
    async with serving(config, BASE + 10 * 60_000) as season:
        http = season.http
        await define(http, LEAGUE, 201)
        await season.play({m: 10 + i for i, m in enumerate(MEMBERS)}, BASE + 5 * 60_000)  # window 0: 3 bronze divisions of 3
        await season.at(BASE + 20 * 60_000)
        await define(http, WIDER)  # from window 1 on
        season.oracle.define(WIDER, season.now)
        retiered = await http.put("/v1/boards/l", json={**BOARD, "league": {**WIDER.document(), "tiers": ["a", "b", "c"]}},
                                  headers=ADMIN)
        assert retiered.status_code == 409 and retiered.json()["error"]["code"] == "definition_conflict"
        await season.play({"n1": 5, "n2": 6, "n3": 7, "n4": 8}, BASE + 20 * 60_000)  # window 0 still fills by 3
        await season.at(BASE + HOUR + GRACE + 60_000)  # window 0 moved by promote 1, relegate 1
        await season.play({m: 30 - i for i, m in enumerate(MEMBERS)}, BASE + HOUR + GRACE + 30_000)  # by 4
        await season.play({"n1": 50, "n2": 1}, BASE + HOUR + GRACE + 30_000)
        for index in (2, 3):
            await season.at(BASE + index * HOUR + GRACE + 60_000)
            await season.play({m: (7 * i + 3 * index) % 11 for i, m in enumerate([*MEMBERS, "n1", "n2", "n3"])},
                              BASE + index * HOUR + GRACE)
            if index == 2:  # window 2 began under WIDER and keeps it; window 3 fills by 3 again
                await define(http, LEAGUE)
                season.oracle.define(LEAGUE, season.now)
        await season.at(BASE + 4 * HOUR + GRACE + 60_000)  # window 3 closes: its moves by LEAGUE
        _, divisions, tiers = season.oracle.season()
        assert "bronze-4" in divisions[0].values() and "bronze-4" not in divisions[1].values()  # by 3, then by 4
        assert set(tiers.values()) == {0, 1, 2}
        seen = await check_season(http, season.oracle, 4)
        oracle = season.oracle
    async with serving(config, season.now) as again:  # from the snapshot written at the stop
        assert await check_season(again.http, oracle, 4) == seen
    off = make_config(tmp_path, {}, journal=served_journal, snapshot_every_events=0)
    async with serving(off, season.now) as again:  # a full replay
        assert await check_season(again.http, oracle, 4) == seen
    # `arena rebuild` digests every division as the oracle ranks it
    spec = next(spec for spec in await every_board(off) if spec.name == "l")
    assert spec.league == LEAGUE
    engine, report = await rebuild_board(off, spec, now=season.now)
    listed = table_rows(spec, engine, report, season.now)
    rebuilt = {table_name(key): table.digest() for key, (table, _, _) in listed.items()}
    standings, _, _ = oracle.season()
    for index in range(4):
        for division, rows in standings[index].items():
            assert rebuilt[("season", f"{period_id(index)}/{division}")] == digest(rows)
