"""Journaled settlements through real servers on both journal backends: a table of a kind with
prizes settles at its close (revision 0, the oracle's awards of its final standings, `sha256`),
an empty one with no awards; `…/settlement` pages and names revisions, `…/settlement/members/{m}`
answers "what did I win"; a restart (a full replay, then a start from a snapshot) serves the same
revisions; a void that changes an award journals revision 1 with its `changes`, one that changes
none journals nothing; retiring a board settles its open tables; an inactive board is activated
to settle; a table closed and not settled before a stop settles at the next start; in a cluster
the owner settles and either node answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from arena.client import ArenaClient, ScoreEvent
from arena.config import Config, JournalSettings
from arena.engine.events import Event
from arena.engine.periods import PeriodKind, Window
from arena.engine.records import CloseRecord, ScoreRecord
from arena.engine.times import format_ms
from arena.journal import journal_backend
from support import prize_oracle
from support.cluster import NodeFactory, owner_urls, start_cluster
from support.documented import assert_documented
from support.prized import BOARDS, DAY, HS_TIERS, LOW_TIERS, MIN, SETTLEMENT, W1, journaled_settlement
from support.server import ADMIN_TOKEN, InProcessServer, make_config, now_ms, token_for, until

MEMBER = "/v1/boards/{board}/{period}/settlement/members/{member}"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@asynccontextmanager
async def serving(config: Config, now: int) -> AsyncIterator[httpx.AsyncClient]:
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.post("/v1/_test/clock", json={"now_ms": now})).status_code == 200
        yield http


async def get(http: httpx.AsyncClient, path: str, status: int = 200, **params: Any) -> dict[str, Any]:
    answer = await http.get(path, params=params)
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def settled(http: httpx.AsyncClient, board: str, period: str, period_id: str, revision: int = 0,
                  base: str = "") -> dict[str, Any]:
    """The table's settlement once its revision ``revision`` is journaled, from the server at
    ``base`` (default: http's)."""
    body = await journaled_settlement(http, base + SETTLEMENT.format(board=board, period=period), period_id, revision)
    assert_documented(SETTLEMENT, "GET", body)
    return body


async def standings(http: httpx.AsyncClient, board: str, period: str, period_id: str) -> list[tuple[str, int]]:
    top = await get(http, f"/v1/boards/{board}/{period}/top", limit=1000, period_id=period_id)
    assert top["size"] == len(top["entries"])
    return [(e["member"], e["score"]) for e in top["entries"]]


async def submit(url: str, events: list[ScoreEvent]) -> None:
    async with ArenaClient(url, token_for("gs")) as client:
        assert all(r.recorded for r in await client.submit_many(events))


async def test_a_closed_table_settles_as_the_oracle_says_and_keeps_its_revisions(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    config = make_config(tmp_path, BOARDS, journal=served_journal, snapshot_every_events=1_000_000)
    closed = W1 + 7 * DAY + 2 * MIN
    async with serving(config, W1 + 2 * DAY) as http:
        url = str(http.base_url)
        # 41 members with ties: 12.5 % of 41 is 5.125 ranks, so ranks 2..6 win silver
        await submit(url, [ScoreEvent("hs", f"p{i:02d}", 700 + (i * 37) % 260, W1 + DAY + i * MIN, idempotency_key=f"hs{i}")
                           for i in range(41)] + [ScoreEvent("hs", "p40", 1, W1 + DAY, idempotency_key="worse")])
        await submit(url, [ScoreEvent("low", f"p{i:02d}", (i * 7) % 20, W1 + 2 * DAY - i * MIN - 1) for i in range(12)])
        path = SETTLEMENT.format(board="hs", period="weekly")
        assert (await get(http, path, 404, period_id="2027-W01"))["error"]["code"] == "not_settled"
        low_rows = await standings(http, "low", "daily", "2027-01-05")
        assert (await http.post("/v1/_test/clock", json={"now_ms": closed})).status_code == 200
        body = await settled(http, "hs", "weekly", "2027-W01")
        rows = await standings(http, "hs", "weekly", "2027-W01")
        awards = prize_oracle.awards(rows, "desc", HS_TIERS)
        assert (body["revision"], body["closed"], body["size"], body["tiers"]) == (0, True, 41, HS_TIERS)
        assert body["awards"] == awards and body["sha256"] == prize_oracle.sha256(awards)
        assert "changes" not in body and "preview" not in body
        weeks = await get(http, "/v1/boards/hs/weekly/periods")
        assert_documented("/v1/boards/{board}/{period}/periods", "GET", weeks)
        revisions = {p["period_id"]: p["revision"] for p in weeks["periods"]}
        assert (revisions["2027-W01"], revisions["2027-W02"]) == (0, None)  # settled; open
        page = await get(http, path, period_id="2027-W01", limit=3, offset=2)
        assert page["awards"] == awards[2:5] and page["awards_total"] == len(awards)
        assert await get(http, path, period_id="2027-W01", preview="true") == body  # a closed table: its settlement
        assert (await get(http, path, 400, period_id="2027-W01", revision=1))["error"]["code"] == "invalid_request"
        gold = await get(http, MEMBER.format(board="hs", period="weekly", member=awards[0]["member"]), period_id="2027-W01")
        assert (gold["award"], gold["revision"], gold["sha256"]) == (awards[0], 0, body["sha256"])
        assert_documented(MEMBER, "GET", gold)
        loser = rows[-1][0]
        assert (await get(http, MEMBER.format(board="hs", period="weekly", member=loser), period_id="2027-W01"))["award"] is None
        # a daily table of `low` that no event reached settles too, with no award
        empty = await settled(http, "low", "daily", "2027-01-06")  # the day the clock stood on
        assert (empty["size"], empty["awards"], empty["sha256"]) == (0, [], prize_oracle.sha256([]))
        # past the retention (keep_closed 3 of 5 days), its settlement stays readable
        low = await settled(http, "low", "daily", "2027-01-05")
        assert low["awards"] == prize_oracle.awards(low_rows, "asc", LOW_TIERS) and low["size"] == 12
        metrics = (await http.get("/metrics")).text
        assert "arena_settlements_total" in metrics
    # a start from the snapshot written at the stop, then a full replay: the same revisions
    async with serving(config, closed) as http:
        assert await get(http, path, period_id="2027-W01") == body
    off = make_config(tmp_path, BOARDS, journal=served_journal, snapshot_every_events=0)
    async with serving(off, closed) as http:
        assert await get(http, path, period_id="2027-W01") == body
        # a void that changes no award (an event below its member's best): no revision
        voided = await http.post("/v1/boards/hs/void", json={"idempotency_key": "worse", "reason": "test"}, headers=ADMIN)
        assert voided.status_code == 200, voided.text
        same = await get(http, path, period_id="2027-W01")
        assert (same["revision"], same["awards"]) == (0, awards) and same["seq"] > body["seq"]
        # a void of the gold winner: revision 1, the oracle's awards of the table without it
        winner = int(awards[0]["member"][1:])
        voided = await http.post("/v1/boards/hs/void", json={"idempotency_key": f"hs{winner}", "reason": "cheat"}, headers=ADMIN)
        assert voided.status_code == 200, voided.text
        revised = await settled(http, "hs", "weekly", "2027-W01", revision=1)
        after = prize_oracle.awards(await standings(http, "hs", "weekly", "2027-W01"), "desc", HS_TIERS)
        assert revised["revision"] == 1 and revised["awards"] == after and revised["tiers"] == HS_TIERS
        before_reward = {a["member"]: a["reward"] for a in awards}
        after_reward = {a["member"]: a["reward"] for a in after}
        assert revised["changes"] == [
            {"member": m, "before": before_reward.get(m), "after": after_reward.get(m)}
            for m in sorted(before_reward.keys() | after_reward.keys()) if before_reward.get(m) != after_reward.get(m)
        ]
        assert await get(http, path, period_id="2027-W01", revision=0) == {**body, "seq": revised["seq"], "size": 40}  # the table now
        lost = await get(http, MEMBER.format(board="hs", period="weekly", member=awards[0]["member"]), period_id="2027-W01")
        assert (lost["award"], lost["revision"]) == (None, 1)
        weeks = await get(http, "/v1/boards/hs/weekly/periods")
        assert {p["period_id"]: p["revision"] for p in weeks["periods"]}["2027-W01"] == 1
    async with serving(off, closed) as http:  # a full replay serves both revisions
        assert await get(http, path, period_id="2027-W01") == revised


async def test_retiring_a_board_settles_its_open_tables(tmp_path: Path, served_journal: JournalSettings) -> None:
    config = make_config(tmp_path, {}, {"gs": ["*"]}, journal=served_journal)
    cup = {"aggregation": "sum", "periods": ["weekly"], "prizes": {"weekly": [{"reward": "cup", "ranks": [1, 2]}]}}
    async with serving(config, W1 + DAY) as http:
        assert (await http.put("/v1/boards/cup", json=cup, headers=ADMIN)).status_code == 201
        await submit(str(http.base_url), [ScoreEvent("cup", f"m{i}", i, W1 + i) for i in range(5)])
        path = SETTLEMENT.format(board="cup", period="weekly")
        assert (await get(http, path, 404))["error"]["code"] == "not_settled"
        assert (await http.delete("/v1/boards/cup", headers=ADMIN)).status_code == 200
        body = await settled(http, "cup", "weekly", "2027-W01")
        assert [(a["member"], a["reward"]) for a in body["awards"]] == [("m4", "cup"), ("m3", "cup")]
        assert body["closed"] is True


async def test_an_inactive_board_is_activated_to_settle_and_unloaded_again(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    day = W1 + 12 * 60 * MIN  # 2027-01-04T12:00Z
    boards = {"p": {"aggregation": "sum", "periods": ["daily"], "prizes": {"daily": [{"reward": "win", "ranks": [1, 1]}]}}}
    config = make_config(tmp_path, boards, journal=served_journal, idle_unload_seconds=0.3)
    async with serving(config, day) as http:
        await submit(str(http.base_url), [ScoreEvent("p", "ann", 5, day), ScoreEvent("p", "bob", 3, day)])

        async def inactive() -> bool:
            [row] = (await get(http, "/v1/boards"))["boards"]
            return not row["active"]

        async def settlements() -> bool:
            return "arena_settlements_total 1.0" in (await http.get("/metrics")).text

        await until(inactive, "board p to be unloaded")
        assert (await http.post("/v1/_test/clock", json={"now_ms": W1 + DAY + MIN})).status_code == 200
        await until(settlements, "the inactive board's daily table to settle")
        await until(inactive, "board p to be unloaded again")
        body = await settled(http, "p", "daily", "2027-01-04")
        assert [(a["member"], a["reward"]) for a in body["awards"]] == [("ann", "win")]


async def test_a_table_closed_before_a_stop_and_not_settled_settles_at_the_next_start(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    """As after a crash between the close marker and the settlement: the journal holds the
    marker only; the next start settles the table (still retained) from the journal."""
    config = make_config(tmp_path, BOARDS, journal=served_journal)
    config.server.data_dir.mkdir(parents=True, exist_ok=True)
    week = Window(PeriodKind.WEEKLY, "2027-W01", W1, W1 + 7 * DAY)
    backend = journal_backend(config)
    try:
        journal = await backend.open(config.boards["hs"])
        await journal.append([
            *(ScoreRecord(i + 1, Event("hs", f"m{i}", 900 + i, W1 + i, f"k{i}"), W1 + i, "gs") for i in range(10)),
            CloseRecord(11, week, W1 + 7 * DAY + MIN),
        ])
        await journal.close()
    finally:
        await backend.close()
    async with serving(config, W1 + 7 * DAY + 2 * MIN) as http:
        body = await settled(http, "hs", "weekly", "2027-W01")
        expected = prize_oracle.awards([(f"m{i}", 900 + i) for i in reversed(range(10))], "desc", HS_TIERS)
        assert (body["revision"], body["awards"], body["sha256"]) == (0, expected, prize_oracle.sha256(expected))
        assert body["seq"] >= 12


async def test_in_a_cluster_the_owner_settles_and_either_node_answers(cluster_nodes: NodeFactory) -> None:
    """A tournament ending 20 s from now (no grace; enough for two nodes to start and take its
    events on a loaded machine): its owner settles it on the wall clock, and the other node
    forwards both settlement routes to it."""
    start = now_ms()
    end = start - start % 1000 + 20_000
    boards = {"cup": {"aggregation": "best", "periods": [], "close_grace_seconds": 0,
                      "custom_periods": {"finals": {"start": format_ms(start - DAY), "end": format_ms(end)}},
                      "prizes": {"finals": [{"reward": "cup", "ranks": [1, 1]}, {"reward": "pin", "top_percent": 50}]}}}
    nodes = await start_cluster(cluster_nodes, ["a", "b"], boards)
    async with httpx.AsyncClient() as http:
        owner = (await owner_urls(http, nodes))["cup"]
        await submit(owner, [ScoreEvent("cup", f"m{i}", i, start - i) for i in range(6)])
        period_id = (await get(http, f"{owner}/v1/boards/cup/finals/top"))["period_id"]
        answers = []
        for node in nodes:
            answers.append(await settled(http, "cup", "finals", period_id, base=node.url))
            mine = await get(http, f"{node.url}{MEMBER.format(board='cup', period='finals', member='m5')}", period_id=period_id)
            assert mine["award"] == {"rank": 1, "member": "m5", "score": 5, "reward": "cup"}
        expected = prize_oracle.awards([(f"m{i}", i) for i in reversed(range(6))], "desc",
                                       boards["cup"]["prizes"]["finals"])  # type: ignore[index]
        assert all((a["awards"], a["revision"]) == (expected, 0) for a in answers)
        assert answers[0]["sha256"] == answers[1]["sha256"]
