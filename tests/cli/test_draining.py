"""Draining (`[server] drain_seconds`): on SIGTERM a node first answers `/readyz` with 503
`draining` while it keeps serving queries and ingest, so a load balancer that health-checks
`/readyz` moves new work away before any connection is refused; then it stops as before."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx

from support.documented import assert_documented
from support.faults import write_config
from support.server import ChildServer, Client, event, now_ms, statuses, token_for, until

BOARDS = {"b": {"periods": ["alltime"]}}
DRAIN_SECONDS = 5
"""Long enough for the test's requests during the drain; the test waits for it, never times it."""


async def test_a_sigtermed_node_answers_readyz_draining_while_it_keeps_serving_then_exits_0(tmp_path: Path) -> None:
    server = ChildServer(write_config(tmp_path, BOARDS, drain_seconds=DRAIN_SECONDS), fault_injection=False)
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert (await http.get("/readyz")).status_code == 200
            server.signal(signal.SIGTERM)
            readyz: list[httpx.Response] = []

            async def draining() -> bool:
                readyz[:] = [await http.get("/readyz")]
                return readyz[0].status_code == 503

            await until(draining, "/readyz to answer 503 after SIGTERM")
            assert readyz[0].json()["error"]["code"] == "draining"
            assert_documented("/readyz", "get", readyz[0].json(), 503)
            assert readyz[0].headers["retry-after"] == "1"

            client = await Client.connect(server.ws_url, token_for("gs"))  # a new connection is still let in
            assert statuses(await client.submit([event("b", "m", 7, now_ms(), "k1")])) == ["accepted"]
            await client.close()
            top = await http.get("/v1/boards/b/alltime/top")
            assert top.status_code == 200 and [e["member"] for e in top.json()["entries"]] == ["m"]
            assert (await http.get("/healthz")).status_code == 200
        assert await asyncio.to_thread(server.wait, DRAIN_SECONDS + 30) == 0
    finally:
        server.kill()
    assert "/readyz answers 503 draining for 5s" in server.log()
