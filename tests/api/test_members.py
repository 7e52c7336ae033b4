"""Friends: `POST /v1/boards/{board}/{period}/members` and the WS op `members` answer the entries
of a set of members in rank order with their global ranks, and the others as `missing`."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.server import Client, InProcessServer, event, make_config, token_for

BOARDS = {"b": {"aggregation": "best", "periods": ["alltime", "daily"]}}
NOW = 1_799_020_800_000  # pinned: 2027-01-04T00:00:00Z


@dataclass
class Rig:
    server: InProcessServer
    http: httpx.AsyncClient
    ws: Client

    async def post(self, body: Any, period: str = "alltime", **params: Any) -> httpx.Response:
        return await self.http.post(f"/v1/boards/b/{period}/members", json=body, params=params)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with InProcessServer(make_config(tmp_path, BOARDS)) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.post("/v1/_test/clock", json={"now_ms": NOW + 3_600_000})).status_code == 200
        ws = await Client.connect(server.ws_url, token_for("gs"))
        try:
            yield Rig(server, http, ws)
        finally:
            await ws.close()


async def scores(rig: Rig, values: dict[str, int]) -> None:
    events = [event("b", m, v, NOW + i, f"k-{m}") for i, (m, v) in enumerate(values.items())]
    assert {r["status"] for r in await rig.ws.submit(events)} == {"accepted"}


async def test_members_in_the_table_come_in_rank_order_with_global_ranks(rig: Rig) -> None:
    await scores(rig, {"ann": 50, "bob": 40, "cid": 30, "dee": 20, "eve": 10})
    answer = await rig.post({"members": ["eve", "zed", "bob", "eve", "yan", "zed"]})
    assert answer.status_code == 200
    body = answer.json()
    assert [(e["rank"], e["member"], e["score"]) for e in body["entries"]] == [(2, "bob", 40), (5, "eve", 10)]
    assert body["missing"] == ["zed", "yan"]  # first occurrences, request order
    assert (body["board"], body["period"], body["period_id"], body["size"], body["closed"]) == ("b", "alltime", "alltime", 5, False)
    assert body["entries"][0]["reached_at"] == "2027-01-04T00:00:00.001Z"


async def test_the_ws_op_answers_the_same_body(rig: Rig) -> None:
    await scores(rig, {"ann": 5, "bob": 7})
    http_body = (await rig.post({"members": ["ann", "nobody", "bob"]}, "daily")).json()
    answer = await rig.ws.request({"op": "members", "id": "f1", "board": "b", "period": "daily", "members": ["ann", "nobody", "bob"]})
    assert answer.pop("op") == "result" and answer.pop("id") == "f1"
    assert answer == http_body
    assert [e["member"] for e in answer["entries"]] == ["bob", "ann"]


async def test_members_agree_with_the_top_of_the_table_for_a_random_set(rig: Rig) -> None:
    rng = random.Random(22)
    values = {f"m{i:03d}": rng.randrange(50) for i in range(300)}  # many ties
    await scores(rig, values)
    top = (await rig.http.get("/v1/boards/b/alltime/top", params={"limit": 1000})).json()["entries"]
    for _ in range(5):
        asked = [f"m{rng.randrange(400):03d}" for _ in range(rng.randrange(1, 200))]
        body = (await rig.post({"members": asked})).json()
        assert body["entries"] == [e for e in top if e["member"] in asked]
        assert body["missing"] == list(dict.fromkeys(m for m in asked if m not in values))


async def test_a_past_table_is_chosen_by_period_id(rig: Rig) -> None:
    await scores(rig, {"ann": 5})
    await rig.http.post("/v1/_test/clock", json={"now_ms": NOW + 86_400_000 + 3_600_000})
    assert (await rig.post({"members": ["ann"]}, "daily")).json()["missing"] == ["ann"]  # a new day
    past = (await rig.post({"members": ["ann"]}, "daily", period_id="2027-01-04")).json()
    assert past["closed"] is True and [e["member"] for e in past["entries"]] == ["ann"]


@pytest.mark.parametrize("body", [
    [],
    "ann",
    {},
    {"members": "ann"},
    {"members": []},
    {"members": ["ann", 1]},
    {"members": [None]},
    {"members": [f"m{i}" for i in range(1001)]},
])
async def test_a_bad_body_is_invalid_request_on_both_transports(rig: Rig, body: Any) -> None:
    answer = await rig.post(body)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request", answer.text
    if isinstance(body, dict):
        frame = {"op": "members", "board": "b", "period": "alltime", **body}
        assert (await rig.ws.request(frame))["code"] == "invalid_request"


async def test_a_body_that_is_not_json_is_invalid_request(rig: Rig) -> None:
    answer = await rig.http.post("/v1/boards/b/alltime/members", content=b"{members")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"


async def test_a_thousand_members_are_taken(rig: Rig) -> None:
    body = (await rig.post({"members": [f"m{i}" for i in range(1000)]})).json()
    assert body["entries"] == [] and len(body["missing"]) == 1000


async def test_unknown_board_and_period_answer_as_the_other_queries(rig: Rig) -> None:
    assert (await rig.http.post("/v1/boards/nope/alltime/members", json={"members": ["a"]})).json()["error"]["code"] == "unknown_board"
    assert (await rig.post({"members": ["a"]}, "hourly")).json()["error"]["code"] == "unknown_period"
    frame = {"op": "members", "board": "nope", "period": "alltime", "members": ["a"]}
    assert (await rig.ws.request(frame))["code"] == "unknown_board"


async def test_the_route_only_answers_post(rig: Rig) -> None:
    answer = await rig.http.get("/v1/boards/b/alltime/members")
    assert answer.status_code == 405 and answer.headers["allow"] == "POST, OPTIONS"
    assert answer.json()["error"]["code"] == "method_not_allowed"


async def test_a_body_over_max_frame_bytes_is_invalid_request(rig: Rig) -> None:
    limit = rig.server.config.server.max_frame_bytes
    answer = await rig.post({"members": ["x" * limit]})
    assert answer.status_code == 400 and "max_frame_bytes" in answer.json()["error"]["message"]
