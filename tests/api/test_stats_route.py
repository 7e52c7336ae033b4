"""`GET /v1/stats` through a real server: what was just submitted and queried shows in the
current seconds of the series, counted where `/metrics` counts it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from arena.metrics.stats import SECONDS
from support.server import Client, InProcessServer, event, now_ms, token_for

BOARDS = {"b": {"periods": ["alltime"], "max_value": 100}}


pytestmark = pytest.mark.server(BOARDS, fault_injection=False)

async def stats(http: httpx.AsyncClient) -> dict[str, Any]:
    answer = await http.get("/v1/stats")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    body: dict[str, Any] = answer.json()
    return body


async def test_submitted_events_show_by_outcome_in_the_last_seconds(server: InProcessServer) -> None:
    now = now_ms()
    client = await Client.connect(server.ws_url, token_for("gs"))
    try:
        await client.submit([event("b", f"m{i}", i, now, f"k{i}") for i in range(5)])
        await client.submit([event("b", "m0", 0, now, "k0"), event("b", "m9", 101, now, "k9"), event("nope", "m", 1, now, "x")])
    finally:
        await client.close()
    async with httpx.AsyncClient(base_url=server.url) as http:
        await http.get("/v1/boards/b/alltime/top")
        body = await stats(http)
    assert body["seconds"] == SECONDS
    series = body["events"]
    assert all(len(s) == SECONDS for s in (series["accepted"], series["duplicate"], *series["rejected"].values()))
    assert sum(series["accepted"]) == 5 and sum(series["duplicate"]) == 1
    assert {reason: sum(s) for reason, s in series["rejected"].items()} == {"value_out_of_range": 1, "unknown_board": 1}
    assert sum(body["visibility_ms"]["count"]) == 2  # one per batch made visible
    assert sum(body["query_ms"]["count"]) >= 1
    assert max(m for m in body["query_ms"]["max"] if m is not None) > 0


async def test_an_idle_server_answers_zeros_and_nulls(server: InProcessServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        body = await stats(http)
    assert body["events"] == {"accepted": [0] * SECONDS, "duplicate": [0] * SECONDS, "rejected": {}}
    assert body["visibility_ms"]["mean"] == [None] * SECONDS
