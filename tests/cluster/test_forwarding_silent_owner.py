"""A query forwarded to an owner that does not answer (a cut link: its connection stays open,
nothing comes back) is answered 503 `unavailable` with `Retry-After: 1` instead of waiting for
the link to heal; and one whose board moves while it waits goes on to the new owner. The silent
owner is a peer endpoint that takes every request and never answers. (Under real network cuts:
tests/faults/test_network_faults.py.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.server import Server, ServerConnection, serve

from arena.board.state import BoardEvent
from arena.cluster.directory import Owner
from arena.config import ClusterSettings
from support.server import Client, InProcessServer, event, make_config, token_for, until

SECRET = "a-cluster-secret-for-tests"
BOARDS: dict[str, dict[str, Any]] = {"b1": {"aggregation": "sum"}}


class SilentOwner:
    """A peer endpoint that reads every request and answers none."""

    def __init__(self) -> None:
        self.received = 0
        self.server: Server | None = None

    async def handler(self, connection: ServerConnection) -> None:
        async for _ in connection:
            self.received += 1

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = next(iter(self.server.sockets)).getsockname()[:2]
        return f"http://{host}:{port}"


@pytest.fixture
async def silent() -> AsyncIterator[SilentOwner]:
    owner = SilentOwner()
    async with serve(owner.handler, "127.0.0.1", 0) as server:
        owner.server = server
        yield owner


def node(tmp_path: Path, name: str) -> InProcessServer:
    cluster = ClusterSettings(node_id=name, secret=SECRET, lease_seconds=3600)
    return InProcessServer(make_config(tmp_path / name, BOARDS, cluster=cluster, idle_unload_seconds=0),  # moved boards load
                           wait_ready=False)


async def serves(server: InProcessServer, board: str) -> None:
    assert server.arena is not None
    server.arena.directory.renewed(time.monotonic())
    server.arena.states.move(board, BoardEvent.TAKE)  # as an ownership loop would
    await server.arena.supervisor.serve(board)
    assert await server.arena.supervisor.until_loaded(board)
    server.arena.directory.set(board, Owner("node-b", server.url, 1))


def owned_by(server: InProcessServer, owner: Owner) -> None:
    assert server.arena is not None
    server.arena.directory.renewed(time.monotonic())
    server.arena.directory.set("b1", owner)


async def test_a_query_to_an_owner_that_does_not_answer_is_503_unavailable(tmp_path: Path, silent: SilentOwner) -> None:
    async with node(tmp_path, "node-a") as a:
        owned_by(a, Owner("node-silent", silent.url, 1))
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.get(f"{a.url}/v1/boards/b1/alltime/top")
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "unavailable"
        assert answer.headers["retry-after"] == "1"
        client = Client(await websockets.connect(a.url.replace("http", "ws") + "/v1/live"))
        try:
            frame = await client.request({"op": "top", "board": "b1", "period": "alltime"}, timeout=30)
        finally:
            await client.close()
        assert (frame["op"], frame["code"]) == ("error", "unavailable")
        assert silent.received == 2


async def test_a_query_waiting_on_an_old_owner_goes_on_to_the_new_one(tmp_path: Path, silent: SilentOwner) -> None:
    async with node(tmp_path, "node-a") as a, node(tmp_path, "node-b") as b:
        await serves(b, "b1")
        writer = await Client.connect(b.ws_url, token_for("gs"))
        try:
            assert [r["status"] for r in await writer.submit([event("b1", "m1", 5, int(time.time() * 1000), "k1")])] == ["accepted"]
        finally:
            await writer.close()
        owned_by(a, Owner("node-silent", silent.url, 1))
        async with httpx.AsyncClient(timeout=30) as http:
            asking = asyncio.create_task(http.get(f"{a.url}/v1/boards/b1/alltime/members/m1"))
            await until(lambda: silent.received == 1, "the query to reach the old owner")
            owned_by(a, Owner("node-b", b.url, 2))
            answer = await asking
        assert answer.status_code == 200, answer.text
        assert answer.json()["entry"]["score"] == 5
