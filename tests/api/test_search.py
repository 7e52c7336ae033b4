"""`GET /v1/boards/{board}/{period}/search?prefix=P&limit=N`: the members starting with a prefix,
in code point order, each with its rank, through a real server; held against a sorted list."""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest

from support.documented import assert_documented
from support.server import Client, InProcessServer, event, token_for

NOW = 1_799_020_800_000  # 2027-01-04T00:00:00Z
BOARDS = {"b": {"periods": ["alltime", "daily"]}}
SEARCH = "/v1/boards/{board}/{period}/search"

pytestmark = pytest.mark.server(BOARDS, now_ms=NOW + 3_600_000)


async def submit(server: InProcessServer, scores: dict[str, int], day: int = NOW) -> None:
    client = await Client.connect(server.ws_url, token_for("gs"))
    try:
        results = await client.submit([event("b", m, v, day + i, f"{day}-{m}") for i, (m, v) in enumerate(scores.items())])
    finally:
        await client.close()
    assert {r["status"] for r in results} == {"accepted"}


async def search(http: httpx.AsyncClient, prefix: str, status: int = 200, **params: Any) -> dict[str, Any]:
    answer = await http.get("/v1/boards/b/alltime/search", params={"prefix": prefix, **params})
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert_documented(SEARCH, "GET", body, status)
    return body


async def test_a_prefix_lists_matching_members_in_code_point_order_with_their_ranks(server: InProcessServer,
                                                                                    http: httpx.AsyncClient) -> None:
    await submit(server, {"anna": 10, "Anna": 50, "ann": 30, "annie": 40, "bob": 20, "an/na%": 5, "anné": 1})
    body = await search(http, "an")
    assert [(e["member"], e["rank"], e["score"]) for e in body["entries"]] == [
        ("an/na%", 6, 5), ("ann", 3, 30), ("anna", 5, 10), ("annie", 2, 40), ("anné", 7, 1)]
    assert (body["board"], body["period"], body["period_id"], body["size"]) == ("b", "alltime", "alltime", 7)
    assert body["seq"] == (await http.get("/v1/boards/b/alltime/top")).json()["seq"] >= 7
    assert [e["member"] for e in (await search(http, "A"))["entries"]] == ["Anna"]  # case-sensitive
    assert [e["member"] for e in (await search(http, "an", limit=2))["entries"]] == ["an/na%", "ann"]
    assert [e["member"] for e in (await search(http, "an/"))["entries"]] == ["an/na%"]
    assert (await search(http, "zed"))["entries"] == []


async def test_a_past_table_is_searched_by_period_id(server: InProcessServer, http: httpx.AsyncClient) -> None:
    await submit(server, {"ann": 1, "bob": 2})
    assert (await http.post("/v1/_test/clock", json={"now_ms": NOW + 86_400_000 + 3_600_000})).status_code == 200
    await submit(server, {"annie": 3}, NOW + 86_400_000)
    answer = await http.get("/v1/boards/b/daily/search", params={"prefix": "ann", "period_id": "2027-01-04"})
    assert answer.status_code == 200
    assert [(e["member"], e["rank"]) for e in answer.json()["entries"]] == [("ann", 2)]


async def test_the_answer_equals_filtering_the_sorted_members(server: InProcessServer, http: httpx.AsyncClient) -> None:
    rnd = random.Random(38)
    names = {"".join(rnd.choice("abAB/é😀") for _ in range(rnd.randint(1, 4))) for _ in range(300)}
    await submit(server, {name: rnd.randint(0, 50) for name in names})
    top = (await http.get("/v1/boards/b/alltime/top", params={"limit": 1000})).json()["entries"]
    for prefix in ["a", "ab", "B", "é", "😀", "/", "ba/", *rnd.sample(sorted(names), 10)]:
        limit = rnd.randint(1, 100)
        expected = sorted((e for e in top if e["member"].startswith(prefix)), key=lambda e: e["member"])[:limit]
        assert (await search(http, prefix, limit=limit))["entries"] == expected, prefix


@pytest.mark.parametrize(("params", "status", "code"), [
    ({}, 400, "invalid_request"),
    ({"prefix": ""}, 400, "invalid_request"),
    ({"prefix": "x" * 129}, 400, "invalid_request"),
    ({"prefix": "a", "limit": 0}, 400, "invalid_request"),
    ({"prefix": "a", "limit": 101}, 400, "invalid_request"),
    ({"prefix": "a", "limit": "many"}, 400, "invalid_request"),
], ids=["no_prefix", "empty", "too_long", "limit_0", "limit_101", "limit_text"])
async def test_bad_parameters_are_400(http: httpx.AsyncClient, params: dict[str, Any], status: int, code: str) -> None:
    answer = await http.get("/v1/boards/b/alltime/search", params=params)
    assert answer.status_code == status and answer.json()["error"]["code"] == code
    assert_documented(SEARCH, "GET", answer.json(), status)


async def test_an_unknown_board_or_period_is_404(http: httpx.AsyncClient) -> None:
    for path, code in [("/v1/boards/nope/alltime/search", "unknown_board"), ("/v1/boards/b/hourly/search", "unknown_period")]:
        answer = await http.get(path, params={"prefix": "a"})
        assert answer.status_code == 404 and answer.json()["error"]["code"] == code
