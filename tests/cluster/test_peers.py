"""The peer pool alone, against a small fake node (a websockets server): one connection carries
concurrent requests answered in any order; a dropped connection fails what was in flight; the
next request connects again, after a backoff while the node stays away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.server import Server, ServerConnection, serve

from arena.cluster.peer.client import NotHere, PeerGone, Peers
from arena.cluster.peer.protocol import Answer, Answered, Ask, Elsewhere, Numbered, Reply, parse_request, serialise
from support.server import until

SECRET = "s3cret"


class FakeNode:
    """Answers each request with its own op after ``delay`` seconds (the request's), in any order."""

    def __init__(self) -> None:
        self.connections: list[ServerConnection] = []
        self.received: list[Numbered] = []
        self.server: Server | None = None
        self.port = 0

    async def handle(self, connection: ServerConnection) -> None:
        self.connections.append(connection)

        async def answer(numbered: Numbered) -> None:
            assert isinstance(numbered.request, Ask)
            frame = numbered.request.frame
            await asyncio.sleep(frame.get("delay", 0))  # the scenario: a peer slow to answer, out of order
            if frame["op"] == "hang":
                return
            reply: Answer = Elsewhere() if frame["op"] == "elsewhere" else Answered({"echo": frame["n"]})
            await connection.send(serialise(Reply(numbered.id, reply)).decode())

        async with asyncio.TaskGroup() as tasks:
            async for text in connection:
                message = parse_request(text)
                assert isinstance(message, Numbered)
                self.received.append(message)
                tasks.create_task(answer(message))

    async def start(self, port: int = 0) -> None:
        def check(connection: ServerConnection, request: Any) -> Any:
            if request.headers.get("Authorization") != f"Bearer {SECRET}":
                return connection.respond(401, "no")
            return None

        self.server = await serve(self.handle, "127.0.0.1", port, process_request=check)
        self.port = self.server.sockets[0].getsockname()[1] if not port else port

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def ask(op: str, n: int = 0, delay: float = 0) -> Ask:
    return Ask("b", {"op": op, "n": n, "delay": delay})


def echo(answer: Answer) -> Any:
    assert isinstance(answer, Answered)
    return answer.body["echo"]


@pytest.fixture
async def node() -> AsyncIterator[FakeNode]:
    fake = FakeNode()
    await fake.start()
    yield fake
    await fake.stop()


async def test_concurrent_requests_share_one_connection_and_get_their_own_answers(node: FakeNode) -> None:
    pool = Peers(SECRET, 3, 1 << 20)
    try:
        peer = pool.peer("n", node.url)
        answers = await asyncio.wait_for(asyncio.gather(
            *(peer.request(ask("x", n, (20 - n) / 1000)) for n in range(20))), 5)
        assert [echo(a) for a in answers] == list(range(20))
        assert len(node.connections) == 1
        with pytest.raises(NotHere):
            await peer.request(ask("elsewhere"))
    finally:
        await pool.close()


async def test_a_dropped_connection_fails_what_was_in_flight_and_the_next_request_reconnects(node: FakeNode) -> None:
    pool = Peers(SECRET, 3, 1 << 20)
    try:
        peer = pool.peer("n", node.url)
        waiting = asyncio.ensure_future(peer.request(ask("hang", 1)))
        await until(lambda: node.received, "the request to reach the node")
        await node.connections[0].close()
        with pytest.raises(PeerGone) as gone:
            await asyncio.wait_for(waiting, 5)
        assert gone.value.in_flight
        assert echo(await asyncio.wait_for(peer.request(ask("x", 2)), 5)) == 2
        assert len(node.connections) == 2
    finally:
        await pool.close()


async def test_an_unreachable_peer_is_tried_again_after_a_backoff(node: FakeNode) -> None:
    port = node.port
    await node.stop()
    pool = Peers(SECRET, 3, 1 << 20)
    try:
        peer = pool.peer("n", node.url)
        with pytest.raises(PeerGone) as first:
            await peer.request(ask("x", 1))
        assert not first.value.in_flight
        await node.start(port)
        with pytest.raises(PeerGone):  # within the backoff: not even tried
            await peer.request(ask("x", 2))

        async def answered() -> bool:
            try:
                return bool(echo(await peer.request(ask("x", 3))) == 3)
            except PeerGone:
                return False

        await until(answered, "the peer to be tried again after the backoff", 5)
    finally:
        await pool.close()


async def test_a_wrong_secret_is_refused(node: FakeNode) -> None:
    pool = Peers("not-it", 3, 1 << 20)
    try:
        with pytest.raises(PeerGone):
            await pool.peer("n", node.url).request(ask("x", 1))
    finally:
        await pool.close()
