"""Percentile queries against an oracle: HTTP `.../percentile/{member}` and
`.../score_at_percentile?p=P`, and the WS ops of the same names, on random tables.

Oracle (DESIGN.md): top_percent = 100 * rank / size; score_at_percentile is the entry at rank
ceil(P / 100 * size). Each example gets a fresh table: the test clock moves one hour on and the
board's current hourly table is empty again.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedList

from arena.engine.table import RankedTable
from arena.engine.times import parse_rfc3339_ms
from support.server import Client, InProcessServer, event, make_config, token_for

HOUR = 3_600_000
BASE = 1_798_761_600_000  # 2027-01-01T00:00:00Z, after the wall clock: the test clock leads
BOARDS = {
    "best_desc": {"aggregation": "best", "order": "desc", "tie": "earliest", "periods": ["hourly"], "min_value": -1000},
    "sum_asc": {"aggregation": "sum", "order": "asc", "tie": "latest", "periods": ["hourly"], "min_value": -1000},
}
Row = tuple[int, str, int, int]  # rank, member, score, reached_at_ms


def oracle(board: str, events: list[tuple[str, int, int]]) -> list[Row]:
    """The contract's standings, read literally: events are (member, value, occurred_at)."""
    members: dict[str, list[tuple[int, int]]] = {}
    for member, value, at in events:
        members.setdefault(member, []).append((value, at))
    standings = []
    for member, evs in members.items():
        if board == "best_desc":
            score = max(v for v, _ in evs)
            reached = min(at for v, at in evs if v == score)
            key = (-score, reached, member)  # desc, earliest first
        else:
            score = sum(v for v, _ in evs)
            reached = max(at for _, at in evs)
            key = (score, -reached, member)  # asc, latest first
        standings.append((key, member, score, reached))
    standings.sort()
    return [(i + 1, member, score, reached) for i, (_key, member, score, reached) in enumerate(standings)]


def row(entry: dict[str, Any]) -> Row:
    return (entry["rank"], entry["member"], entry["score"], parse_rfc3339_ms(entry["reached_at"]))


@dataclass
class Rig:
    server: InProcessServer
    http: httpx.AsyncClient
    ws: Client
    hours: itertools.count[int]

    async def fresh_hour(self) -> int:
        start = BASE + next(self.hours) * HOUR
        now = start + HOUR // 2
        assert (await self.http.post("/v1/_test/clock", json={"now_ms": now})).status_code == 200
        return start


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with InProcessServer(make_config(tmp_path, BOARDS)) as server, httpx.AsyncClient(base_url=server.url) as http:
        ws = await Client.connect(server.ws_url, token_for("gs"))
        yield Rig(server, http, ws, itertools.count())
        await ws.close()


members = st.text(alphabet="ab/%é Z", min_size=1, max_size=4)
tables = st.lists(st.tuples(members, st.integers(-3, 3), st.integers(0, 5)), max_size=40)
percents = st.integers(1, 100_000).map(lambda n: Decimal(n) / 1000)  # 0.001 .. 100.000


async def _ws(rig: Rig, frame: dict[str, Any]) -> dict[str, Any]:
    answer = await rig.ws.request(frame)
    assert answer["op"] in ("result", "error"), answer
    return {k: v for k, v in answer.items() if k not in ("op", "id")}


@pytest.mark.parametrize("board", sorted(BOARDS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables, ps=st.lists(percents, min_size=1, max_size=4))
async def test_percentiles_match_the_oracle(rig: Rig, board: str, table: list[tuple[str, int, int]], ps: list[Decimal]) -> None:
    start = await rig.fresh_hour()
    events = [(m, v, start + 60_000 * t) for m, v, t in table]
    if events:
        keys = [f"{start}-{i}" for i in range(len(events))]
        results = await rig.ws.submit([event(board, m, v, at, k) for (m, v, at), k in zip(events, keys, strict=True)])
        assert all(r["status"] == "accepted" for r in results), results
    expected = oracle(board, events)
    size = len(expected)
    base = f"/v1/boards/{board}/hourly"

    for rank, member, _score, _reached in expected:
        http = (await rig.http.get(f"{base}/percentile/{quote(member, safe='')}")).json()
        assert row(http["entry"]) == expected[rank - 1]
        assert http["top_percent"] == 100 * rank / size
        assert http["size"] == size and http["period"] == "hourly"
        ws = await _ws(rig, {"op": "percentile", "board": board, "period": "hourly", "member": member})
        assert ws == http

    for p in ps:
        want = math.ceil(Fraction(p) / 100 * size)
        http = (await rig.http.get(f"{base}/score_at_percentile", params={"p": str(p)})).json()
        if size == 0:
            assert http["entry"] is None and http["size"] == 0
        else:
            assert 1 <= want <= size
            assert row(http["entry"]) == expected[want - 1]
        ws = await _ws(rig, {"op": "score_at_percentile", "board": board, "period": "hourly", "p": float(p)})
        assert ws == http


async def test_percentile_of_a_member_with_no_entry_is_member_not_found(rig: Rig) -> None:
    await rig.fresh_hour()
    answer = await rig.http.get("/v1/boards/best_desc/hourly/percentile/nobody")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "member_not_found"
    ws = await _ws(rig, {"op": "percentile", "board": "best_desc", "period": "hourly", "member": "nobody"})
    assert ws["code"] == "member_not_found"


async def test_top_percent_of_rank_1_of_1000_is_0_1(rig: Rig) -> None:
    start = await rig.fresh_hour()
    await rig.ws.submit([event("best_desc", f"m{i:04}", i, start, f"thousand-{i}") for i in range(1000)])
    body = (await rig.http.get("/v1/boards/best_desc/hourly/percentile/m0999")).json()
    assert body["entry"]["rank"] == 1 and body["top_percent"] == 0.1
    last = (await rig.http.get("/v1/boards/best_desc/hourly/score_at_percentile", params={"p": "100"})).json()
    assert last["entry"]["rank"] == 1000 and last["entry"]["member"] == "m0000"


@pytest.mark.parametrize(
    ("p", "rank"),
    [("100", 10), ("0.001", 1), ("10", 1), ("10.0001", 2), ("1e1", 1), ("1e-9999999", 1), ("99.99", 10), ("50", 5)],
)
async def test_score_at_percentile_takes_any_decimal_p_exactly(rig: Rig, p: str, rank: int) -> None:
    start = await rig.fresh_hour()
    await rig.ws.submit([event("best_desc", f"m{i}", i, start, f"{start}-{i}") for i in range(10)])
    body = (await rig.http.get("/v1/boards/best_desc/hourly/score_at_percentile", params={"p": p})).json()
    assert body["entry"]["rank"] == rank


@pytest.mark.parametrize("p", ["0", "-1", "100.0001", "101", "1e99999999", "abc", "nan", "inf", "", "0x10"])
async def test_score_at_percentile_refuses_p_outside_0_to_100(rig: Rig, p: str) -> None:
    await rig.fresh_hour()
    answer = await rig.http.get("/v1/boards/best_desc/hourly/score_at_percentile", params={"p": p})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"


async def test_score_at_percentile_needs_p(rig: Rig) -> None:
    answer = await rig.http.get("/v1/boards/best_desc/hourly/score_at_percentile")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("p", [0, -5, 100.5, True, "50", None])
async def test_ws_score_at_percentile_refuses_a_bad_p(rig: Rig, p: object) -> None:
    await rig.fresh_hour()
    ws = await _ws(rig, {"op": "score_at_percentile", "board": "best_desc", "period": "hourly", "p": p})
    assert ws["code"] == "invalid_request"


async def test_percentile_queries_are_o_log_n(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """They never walk the table: whole-table iteration is made to fail while they run."""
    start = await rig.fresh_hour()
    for chunk in range(20):
        await rig.ws.submit([event("best_desc", f"m{chunk}-{i}", i, start, f"big-{chunk}-{i}") for i in range(1000)])

    def walked(*args: object, **kwargs: object) -> object:
        raise AssertionError("a percentile query walked the table")

    monkeypatch.setattr(RankedTable, "entries", walked)
    monkeypatch.setattr(RankedTable, "_slice", walked)
    monkeypatch.setattr(SortedList, "__iter__", walked)
    monkeypatch.setattr(SortedList, "index", walked)
    body = (await rig.http.get("/v1/boards/best_desc/hourly/percentile/m7-500")).json()
    assert body["size"] == 20_000 and body["entry"]["score"] == 500
    body = (await rig.http.get("/v1/boards/best_desc/hourly/score_at_percentile", params={"p": "50"})).json()
    assert body["entry"]["rank"] == 10_000
    ws = await _ws(rig, {"op": "score_at_percentile", "board": "best_desc", "period": "hourly", "p": 0.01})
    assert ws["entry"]["rank"] == 2
