"""The client given several node URLs: it uses one at a time, skips a node that cannot be
reached, and moves on to the next when its node goes away, losing and doubling nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from arena_client import ArenaClient, SubmitStatus
from loadtest.process import free_port
from support.server import InProcessServer, make_config, token_for

BOARDS = {"b": {"aggregation": "sum"}}


async def test_a_node_that_cannot_be_reached_is_skipped(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    async with InProcessServer(make_config(tmp_path, BOARDS)) as server:
        async with ArenaClient([nowhere, server.url], token_for("gs"), reconnect_base=0.01) as client:
            assert client.url == f"{server.url.replace('http', 'ws', 1)}/v1/ws"
            assert (await client.submit("b", "m", 1, idempotency_key="k")).status is SubmitStatus.ACCEPTED


async def test_the_client_moves_on_when_its_node_goes_away(tmp_path: Path) -> None:
    a = InProcessServer(make_config(tmp_path / "a", BOARDS))
    b = InProcessServer(make_config(tmp_path / "b", BOARDS))
    await a.start()
    await b.start()
    try:
        async with ArenaClient([a.url, b.url], token_for("gs"), reconnect_base=0.01, give_up_after=30) as client:
            assert (await client.submit("b", "m", 1, idempotency_key="on-a")).status is SubmitStatus.ACCEPTED
            await a.stop()
            results = await asyncio.gather(*(client.submit("b", "m", 1, idempotency_key=f"on-b-{i}") for i in range(20)))
            assert {r.status for r in results} == {SubmitStatus.ACCEPTED}
            assert client.url.endswith(f":{b.url.rsplit(':', 1)[1]}/v1/ws")
            standing = await client.rank("b", "alltime", "m")
            assert standing.entry is not None and standing.entry.score == 20
    finally:
        await b.stop()
