"""Admin audit and disputes against an oracle: voids by key and by member recompute every table
the event was applied to (open or closed) exactly as a rebuild would; metrics count them; a
restart and `arena rebuild` reproduce the same standings and digests. On both journal backends."""

from __future__ import annotations

import random
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

import support.server
from arena.client import ArenaClient, ScoreEvent
from arena.config import JournalSettings
from arena.engine.times import parse_rfc3339_ms
from loadtest.config_toml import write_config
from support.arena_cli import arena, rebuild_digests
from support.documented import assert_documented
from support.server import ADMIN_TOKEN, InProcessServer, make_config, token_for, until

MIN = 60_000
HOUR = 60 * MIN
H0 = 1_799_020_800_000  # 2027-01-04T00:00:00Z (after the wall clock: the test clock leads)
PERIODS = ["hourly", "alltime"]
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
Row = tuple[int, str, int, int]


@dataclass(frozen=True)
class Ev:
    key: str
    member: str
    value: int
    at: int


def oracle(aggregation: str, events: list[Ev], start: int | None, end: int | None) -> list[Row]:
    """Standings (desc, tie earliest) of the events in [start, end), from the contract's words."""
    members: dict[str, list[Ev]] = {}
    for e in events:
        if start is None or end is None or start <= e.at < end:
            members.setdefault(e.member, []).append(e)
    rows = []
    for member, evs in members.items():
        if aggregation == "best":
            score = max(e.value for e in evs)
            reached = min(e.at for e in evs if e.value == score)
        elif aggregation == "sum":
            score = sum(e.value for e in evs)
            reached = max(e.at for e in evs)
        else:
            last = max(evs, key=lambda e: (e.at, e.key))
            score, reached = last.value, last.at
        rows.append(((-score, reached, member), member, score, reached))
    rows.sort()
    return [(i + 1, m, s, r) for i, (_k, m, s, r) in enumerate(rows)]


def rows(body: dict[str, Any]) -> list[Row]:
    return [(e["rank"], e["member"], e["score"], parse_rfc3339_ms(e["reached_at"])) for e in body["entries"]]


def disputes_metric(text: str) -> dict[tuple[str, str], float]:
    found = {}
    for board, period, value in re.findall(r'^arena_disputes_total\{board="([^"]+)",period="([^"]+)"\} (\S+)$', text, re.M):
        found[(board, period)] = float(value)
    return found


class Rig(support.server.Rig):
    async def void(self, key: str, board: str = "b", headers: dict[str, str] = ADMIN) -> httpx.Response:
        return await self.http.post(f"/v1/boards/{board}/void", json={"idempotency_key": key, "reason": "dispute"},
                                    headers=headers)

    async def void_member(self, member: str, board: str = "b") -> httpx.Response:
        return await self.http.post(f"/v1/boards/{board}/members/{quote(member, safe='')}/void",
                                    json={"reason": "ban"}, headers=ADMIN)

    async def table(self, period: str, period_id: str | None = None, board: str = "b") -> list[Row]:
        params: dict[str, Any] = {"limit": 1000}
        if period_id:
            params["period_id"] = period_id
        answer = await self.http.get(f"/v1/boards/{board}/{period}/top", params=params)
        assert answer.status_code == 200, answer.text
        return rows(answer.json())


@pytest.fixture
async def rig(tmp_path: Path, request: pytest.FixtureRequest, served_journal: JournalSettings) -> AsyncIterator[Rig]:
    aggregation = getattr(request, "param", "best")
    # loaded at start: an actor's runs count its restarts only (test_an_unknown_key_is_404…)
    config = make_config(tmp_path, {"b": {"aggregation": aggregation, "periods": PERIODS}}, journal=served_journal,
                         idle_unload_seconds=0)
    async with support.server.rig(Rig, config) as r:
        yield r


async def two_closed_hours(rig: Rig, seed: int) -> list[Ev]:
    """Random events in hours 0 and 1, each sent while its hour is open; hour 2 is current."""
    rng = random.Random(seed)
    events: list[Ev] = []
    for hour in range(2):
        await rig.clock(H0 + hour * HOUR + 59 * MIN)
        batch = [Ev(f"h{hour}-{i}", f"m{rng.randrange(6)}", rng.randrange(0, 40), H0 + hour * HOUR + rng.randrange(59) * MIN)
                 for i in range(40)]
        assert all(r.status.value == "accepted" for r in await rig.client.submit_many(
            ScoreEvent("b", e.member, e.value, e.at, e.key) for e in batch))
        events += batch
    await rig.clock(H0 + 2 * HOUR + 10 * MIN)  # hours 0 and 1 are closed now
    return events


async def assert_tables(rig: Rig, aggregation: str, live: list[Ev]) -> None:
    for hour in range(2):
        start = H0 + hour * HOUR
        assert await rig.table("hourly", f"2027-01-04T0{hour}") == oracle(aggregation, live, start, start + HOUR), hour
    assert await rig.table("alltime") == oracle(aggregation, live, None, None)


@pytest.mark.parametrize("rig", ["best", "sum", "latest"], indirect=True)
@pytest.mark.parametrize("seed", [1, 2])
async def test_voids_recompute_open_and_closed_tables_like_the_oracle(rig: Rig, request: pytest.FixtureRequest,
                                                                      seed: int) -> None:
    aggregation = request.node.callspec.params["rig"]
    events = await two_closed_hours(rig, seed)
    await assert_tables(rig, aggregation, events)
    rng = random.Random(seed * 7)
    voided: set[str] = set()
    for e in rng.sample(events, 25):
        answer = await rig.void(e.key)
        assert answer.status_code == 200 and answer.json()["voided"] == 1
        voided.add(e.key)
        if len(voided) % 5 == 0:
            await assert_tables(rig, aggregation, [x for x in events if x.key not in voided])
    banned = "m3"
    answer = await rig.void_member(banned)
    count = sum(1 for e in events if e.member == banned and e.key not in voided)
    assert answer.status_code == 200 and answer.json()["voided"] == count
    live = [e for e in events if e.key not in voided and e.member != banned]
    await assert_tables(rig, aggregation, live)


async def test_a_voided_best_score_falls_back_to_the_members_next_best(rig: Rig) -> None:
    await rig.clock(H0 + 30 * MIN)
    at = H0 + MIN
    await rig.client.submit_many([
        ScoreEvent("b", "A", 50, at, "a50"),
        ScoreEvent("b", "A", 40, at + 2 * MIN, "a40-late"),
        ScoreEvent("b", "A", 40, at + MIN, "a40-early"),
        ScoreEvent("b", "B", 45, at, "b45"),
    ])
    assert [(r[1], r[2]) for r in await rig.table("hourly")] == [("A", 50), ("B", 45)]
    assert (await rig.void("a50")).status_code == 200
    assert await rig.table("hourly") == [(1, "B", 45, at), (2, "A", 40, at + MIN)]
    assert await rig.table("alltime") == [(1, "B", 45, at), (2, "A", 40, at + MIN)]
    assert (await rig.void("a40-early")).status_code == 200
    assert await rig.table("hourly") == [(1, "B", 45, at), (2, "A", 40, at + 2 * MIN)]


async def test_a_void_in_a_closed_table_changes_that_closed_table(rig: Rig) -> None:
    await rig.clock(H0 + 30 * MIN)
    await rig.client.submit_many([ScoreEvent("b", "A", 10, H0 + MIN, "a"), ScoreEvent("b", "B", 5, H0 + MIN, "b")])
    await rig.clock(H0 + 3 * HOUR)

    async def marked_closed() -> bool:
        # a table's own "closed" turns true with its close marker, journaled by the actor's next tick
        return bool((await rig.http.get("/v1/boards/b/hourly/top", params={"period_id": "2027-01-04T00"})).json()["closed"])

    await until(marked_closed, "the close marker")
    before = (await rig.http.get("/v1/boards/b/hourly/top", params={"period_id": "2027-01-04T00"})).json()
    assert [e["member"] for e in before["entries"]] == ["A", "B"]
    assert (await rig.void("a")).status_code == 200
    after = (await rig.http.get("/v1/boards/b/hourly/top", params={"period_id": "2027-01-04T00"})).json()
    assert after["closed"] is True and [e["member"] for e in after["entries"]] == ["B"]


async def test_voiding_twice_is_a_no_op_200(rig: Rig) -> None:
    await rig.clock(H0 + 30 * MIN)
    await rig.client.submit_many([ScoreEvent("b", "A", 10, H0 + MIN, "a"), ScoreEvent("b", "A", 7, H0 + MIN, "a7")])
    first = await rig.void("a")
    metrics = disputes_metric((await rig.http.get("/metrics")).text)
    standings = await rig.table("hourly")
    second = await rig.void("a")
    assert first.status_code == 200 and first.json() == {"board": "b", "voided": 1, "already_voided": False, "idempotency_key": "a"}
    assert second.status_code == 200 and second.json() == {"board": "b", "voided": 0, "already_voided": True, "idempotency_key": "a"}
    for answer in (first, second):
        assert_documented("/v1/boards/{board}/void", "POST", answer.json())
    assert await rig.table("hourly") == standings == [(1, "A", 7, H0 + MIN)]
    assert disputes_metric((await rig.http.get("/metrics")).text) == metrics
    again, twice = await rig.void_member("A"), await rig.void_member("A")
    assert again.json() == {"board": "b", "member": "A", "voided": 1} and twice.json() == {"board": "b", "member": "A", "voided": 0}
    for answer in (again, twice):
        assert_documented("/v1/boards/{board}/members/{member}/void", "POST", answer.json())


async def test_a_member_named_like_a_query_route_can_be_banned(rig: Rig) -> None:
    await rig.clock(H0 + 30 * MIN)
    for i, member in enumerate(["around/x", "percentile/p", "top"]):
        await rig.client.submit("b", member, 5, occurred_at=H0, idempotency_key=f"k{i}")
        answer = await rig.void_member(member)
        assert answer.status_code == 200 and answer.json()["voided"] == 1, (member, answer.text)
    assert await rig.table("hourly") == []


async def test_an_unknown_key_is_404_unknown_event_and_no_crash(rig: Rig) -> None:
    assert rig.server.arena is not None
    runs = dict(rig.server.arena.supervisor.runs)
    for _ in range(10):  # past the restart intensity, were each one a crash
        answer = await rig.void("never-sent")
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_event"
    assert rig.server.arena.supervisor.runs == runs
    assert (await rig.http.get("/readyz")).status_code == 200
    answer = await rig.void("x", board="nope")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_board"


@pytest.mark.parametrize("headers", [{}, {"Authorization": f"Bearer {token_for('gs')}"}, {"Authorization": "Bearer nope"},
                                     {"Authorization": ADMIN_TOKEN}])
async def test_admin_routes_need_an_admin_token(rig: Rig, headers: dict[str, str]) -> None:
    await rig.clock(H0 + 30 * MIN)
    await rig.client.submit("b", "A", 1, occurred_at=H0, idempotency_key="a")
    answers = [
        await rig.http.post("/v1/boards/b/void", json={"idempotency_key": "a", "reason": "x"}, headers=headers),
        await rig.http.post("/v1/boards/b/members/A/void", json={"reason": "x"}, headers=headers),
        await rig.http.get("/v1/boards/b/events", params={"member": "A"}, headers=headers),
    ]
    for answer in answers:
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"
    assert len(await rig.table("hourly")) == 1


async def test_a_bad_void_request_is_400(rig: Rig) -> None:
    for body in ({"idempotency_key": "a"}, {"reason": "x"}, {"idempotency_key": "", "reason": "x"}, [1]):
        answer = await rig.http.post("/v1/boards/b/void", json=body, headers=ADMIN)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request", body
    answer = await rig.http.post("/v1/boards/b/void", content=b"not json", headers=ADMIN)
    assert answer.status_code == 400


async def test_audit_lists_a_members_events_newest_first_with_voided(rig: Rig) -> None:
    await rig.clock(H0 + 30 * MIN)
    for i in range(5):
        await rig.client.submit("b", "a/b %", i, occurred_at=H0 + i, idempotency_key=f"k{i}", meta={"i": i})
    await rig.void("k2")
    body = (await rig.http.get("/v1/boards/b/events", params={"member": "a/b %"}, headers=ADMIN)).json()
    events = body["events"]
    assert [e["idempotency_key"] for e in events] == ["k4", "k3", "k2", "k1", "k0"]
    assert [e["voided"] is None for e in events] == [True, True, False, True, True]
    voided = events[2]["voided"]  # the void record: its seq, reason, admin and time
    assert (voided["seq"], voided["reason"], voided["admin"]) == (events[0]["seq"] + 1, "dispute", "ops")
    assert parse_rfc3339_ms(voided["at"]) == H0 + 30 * MIN  # the board's clock
    assert_documented("/v1/boards/{board}/events", "GET", body)
    assert events[0]["source"] == "gs" and events[0]["meta"] == {"i": 4} and events[0]["value"] == 4
    assert set(events[0]) == {"seq", "member", "value", "occurred_at", "received_at", "source", "idempotency_key", "meta", "voided"}
    page = (await rig.http.get("/v1/boards/b/events", params={"member": "a/b %", "limit": 2, "before_seq": events[1]["seq"]},
                               headers=ADMIN)).json()["events"]
    assert [e["idempotency_key"] for e in page] == ["k2", "k1"]


async def test_disputes_metric_counts_each_void_per_table_kind_touched(rig: Rig) -> None:
    await rig.clock(H0 + 30 * MIN)
    await rig.client.submit_many([ScoreEvent("b", "A", i, H0 + i, f"a{i}") for i in range(3)])
    await rig.client.submit("b", "B", 1, occurred_at=H0, idempotency_key="b0")
    await rig.void("a0")
    assert disputes_metric((await rig.http.get("/metrics")).text) == {("b", "hourly"): 1, ("b", "alltime"): 1}
    await rig.void_member("A")  # two more events of A
    assert disputes_metric((await rig.http.get("/metrics")).text) == {("b", "hourly"): 3, ("b", "alltime"): 3}
    listing = (await rig.http.get("/v1/boards/b/hourly/periods")).json()["periods"]
    assert listing[0]["disputes"] == 3


async def test_a_restart_and_arena_rebuild_after_voids_reproduce_standings_and_digests(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    config = make_config(tmp_path / "data", {"b": {"aggregation": "best", "periods": PERIODS}}, journal=served_journal)
    config.server.data_dir.mkdir()
    now = H0 + 2 * HOUR + 10 * MIN

    async def snapshot(rig: Rig) -> dict[tuple[str, str], Any]:
        found = {}
        for period in PERIODS:
            for p in (await rig.http.get(f"/v1/boards/b/{period}/periods")).json()["periods"]:
                pid = p["period_id"]
                digest = (await rig.http.get(f"/v1/boards/b/{period}/digest", params={"period_id": pid})).json()
                found[(period, pid)] = (p["disputes"], p["size"], digest["sha256"], await rig.table(period, pid))
        return found

    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        async with ArenaClient(server.url, token_for("gs")) as client:
            rig = Rig(server, http, client)
            events = await two_closed_hours(rig, 3)
            for e in events[::4]:
                assert (await rig.void(e.key)).status_code == 200
            assert (await rig.void_member("m1")).status_code == 200
            before = await snapshot(rig)
    run = arena("rebuild", "--config", write_config(config, tmp_path / "config.toml"))
    assert run.returncode == 0, run.stderr
    rebuilt = rebuild_digests(run.stdout)
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        async with ArenaClient(server.url, token_for("gs")) as client:
            rig = Rig(server, http, client)
            await rig.clock(now)
            after = await snapshot(rig)
    assert after == before
    assert sum(d for d, *_ in before.values()) > 0
    for (period, pid), (_disputes, size, sha, _rows) in before.items():
        if size:
            assert rebuilt[("b", period, pid)].sha256 == sha, (period, pid)
    live = [e for e in events if e not in events[::4] and e.member != "m1"]
    assert before[("alltime", "alltime")][3] == oracle("best", live, None, None)
