"""Every answer about one board carries `seq`, the board's last journal seq it reflects (DESIGN.md,
"HTTP queries"): each HTTP table route, `periods`, the friends route, the WebSocket `result` of
every query op (on /v1/ws and /v1/live) and the Python client's answers."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import websockets

from arena.client import ArenaClient
from support.server import ADMIN_TOKEN, Client, InProcessServer, event, token_for, until

BOARDS = {"b": {"aggregation": "best", "periods": ["alltime", "daily"]}}
NOW = 1_799_020_800_000  # pinned: 2027-01-04T00:00:00Z

HTTP_ROUTES = [
    ("GET", "top?limit=3", None),
    ("GET", "members/ann", None),
    ("POST", "members", {"members": ["ann", "zed"]}),
    ("GET", "around/ann?radius=1", None),
    ("GET", "around?rank=1&radius=1", None),
    ("GET", "percentile/ann", None),
    ("GET", "score_at_percentile?p=50", None),
    ("GET", "digest", None),
    ("GET", "periods", None),
]
WS_OPS: list[dict[str, Any]] = [
    {"op": "top", "limit": 3},
    {"op": "rank", "member": "ann"},
    {"op": "around", "member": "ann", "radius": 1},
    {"op": "around", "rank": 2, "radius": 1},
    {"op": "percentile", "member": "ann"},
    {"op": "score_at_percentile", "p": 50},
    {"op": "members", "members": ["ann", "zed"]},
]


# loaded at start (at the real date, whose daily table pinning the clock then closes): base_seq
pytestmark = pytest.mark.server(BOARDS, now_ms=NOW + 3_600_000, idle_unload_seconds=0)

async def base_seq(server: InProcessServer) -> int:
    """The board's seq before the test's events: the close marker of the daily table the board
    opened at the real date, which pinning the clock closed (once the actor has journaled it)."""
    assert server.arena is not None
    engine = server.arena.boards["b"].engine
    assert engine is not None
    await until(lambda: (engine.next_deadline(NOW + 3_600_000) or NOW * 2) > NOW + 3_600_000 and engine.last_seq,
                "the close marker of the real date's daily table")
    return engine.last_seq


async def http_answers(http: httpx.AsyncClient, period: str) -> list[dict[str, Any]]:
    answers = []
    for method, route, body in HTTP_ROUTES:
        answer = await http.request(method, f"/v1/boards/b/{period}/{route}", json=body)
        assert answer.status_code == 200, (route, answer.text)
        answers.append(answer.json())
    return answers


async def ws_answers(client: Client, period: str) -> list[dict[str, Any]]:
    answers = []
    for op in WS_OPS:
        answer = await client.request({**op, "board": "b", "period": period})
        assert answer["op"] == "result", (op, answer)
        answers.append(answer)
    return answers


async def test_every_http_answer_and_ws_result_carries_the_board_s_last_seq(server: InProcessServer) -> None:
    client = await Client.connect(server.ws_url, token_for("gs"))
    base = await base_seq(server)
    async with httpx.AsyncClient(base_url=server.url) as http:
        events = [event("b", m, v, NOW + i, f"k-{m}") for i, (m, v) in enumerate({"ann": 5, "bob": 9, "cid": 1}.items())]
        assert {r["status"] for r in await client.submit(events)} == {"accepted"}
        for period in ("alltime", "daily"):
            assert [a["seq"] for a in await http_answers(http, period)] == [base + 3] * len(HTTP_ROUTES)
            assert [a["seq"] for a in await ws_answers(client, period)] == [base + 3] * len(WS_OPS)
        # a void is a journal record of the board too: the answers move to its seq
        voided = await http.post("/v1/boards/b/void", json={"idempotency_key": "k-bob", "reason": "cheat"},
                                 headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert voided.status_code == 200, voided.text
        assert [a["seq"] for a in await http_answers(http, "alltime")] == [base + 4] * len(HTTP_ROUTES)
        assert [a["seq"] for a in await ws_answers(client, "alltime")] == [base + 4] * len(WS_OPS)
    await client.close()


async def test_the_public_live_socket_s_results_carry_seq(server: InProcessServer) -> None:
    client = await Client.connect(server.ws_url, token_for("gs"))
    base = await base_seq(server)
    await client.submit([event("b", "ann", 3, NOW, "k-ann")])
    live = Client(await websockets.connect(server.url.replace("http", "ws") + "/v1/live"))
    assert [a["seq"] for a in await ws_answers(live, "alltime")] == [base + 1] * len(WS_OPS)
    await live.close()
    await client.close()


async def test_the_python_client_s_answers_carry_seq(server: InProcessServer) -> None:
    base = await base_seq(server)
    async with ArenaClient(server.url, token_for("gs")) as arena:
        await arena.submit("b", "ann", 3, occurred_at=NOW, idempotency_key="k-ann")
        await arena.submit("b", "bob", 4, occurred_at=NOW, idempotency_key="k-bob")
        answers = [
            await arena.top("b", "alltime"), await arena.rank("b", "alltime", "ann"),
            await arena.around("b", "alltime", member="ann"), await arena.percentile("b", "alltime", "ann"),
            await arena.score_at_percentile("b", "alltime", 50), await arena.members("b", "alltime", ["ann"]),
        ]
    assert [a.seq for a in answers] == [base + 2] * len(answers)
