"""A GET of a board loaded here is answered by the HTTP protocol itself (`HttpProtocol`, issue 39),
through a real server on both journal backends, over raw sockets: the answer is byte for byte the
ASGI path's (apart from `date`), keep-alive and `Connection: close` are uvicorn's, pipelined
requests are answered in order, CORS headers are there, a board activated on demand is answered
through the ASGI path first (its use counted), then at once, and a GET while the peer does not
read (flow control) waits on the ASGI path. Which path answered is read from a count of the ASGI
dispatcher's calls."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.types import Receive, Scope, Send
from uvicorn.server import ServerState

from arena.api.http import QueryRoutes, match
from arena.api.transport import HttpProtocol
from arena.cli.serve import uvicorn_config
from arena.config import JournalSettings
from loadtest.protocol import Transport
from support.faults import parse_metric
from support.server import Client, InProcessServer, event, make_config, now_ms, token_for, until

BOARDS = {"b": {"aggregation": "best", "periods": ["alltime"]}}
GAME = "https://game.example"
MEMBER = "/v1/boards/b/alltime/members/m1"
SECONDS = 10.0


class Dispatched:
    """The paths of the requests on query routes that reach `QueryRoutes.__call__` (the ASGI path)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        called = QueryRoutes.__call__

        async def counted(routes: QueryRoutes, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and match(scope["path"]) is not None:
                self.paths.append(scope["path"])
            await called(routes, scope, receive, send)

        monkeypatch.setattr(QueryRoutes, "__call__", counted)


@pytest.fixture
async def served(tmp_path: Path, served_journal: JournalSettings, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[
        tuple[InProcessServer, Dispatched]]:
    config = make_config(tmp_path, BOARDS, journal=served_journal, cors_origins=(GAME,), idle_unload_seconds=0)
    async with InProcessServer(config, fault_injection=False) as server:
        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            now = now_ms()
            await client.submit([event("b", f"m{i}", 10 * i, now, f"k{i}") for i in range(1, 6)])
        finally:
            await client.close()
        yield server, Dispatched(monkeypatch)


async def connect(server: InProcessServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.port)


def request(path: str, method: str = "GET", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: arena", *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def response(reader: asyncio.StreamReader, head_only: bool = False) -> bytes:
    """One response as it came, its body read by its content-length (none for a HEAD)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), SECONDS)
    if head_only:
        return head
    found = re.search(rb"\r\ncontent-length: (\d+)\r\n", head)
    assert found is not None, head
    return head + await asyncio.wait_for(reader.readexactly(int(found.group(1))), SECONDS)


def undated(answer: bytes) -> bytes:
    return re.sub(rb"\r\ndate: [^\r]*", b"", answer)


def body(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[2]


async def test_an_answer_at_once_is_the_asgi_paths_byte_for_byte(served: tuple[InProcessServer, Dispatched]) -> None:
    """The same requests, answered at once and (with a `Content-Length: 0`, which the protocol
    leaves to the ASGI path) by the dispatcher: the same bytes but the date, errors and CORS
    headers included."""
    server, dispatched = served
    reader, writer = await connect(server)
    try:
        for path, headers in [(MEMBER, {}), (MEMBER, {"Origin": GAME}), (MEMBER, {"Origin": "https://evil.example"}),
                              ("/v1/boards/b/alltime/members/nobody", {}), ("/v1/boards/b/alltime/top?limit=0", {}),
                              ("/v1/boards/b/alltime/around/m3?radius=1", {"Origin": GAME}),
                              ("/v1/boards/nope/alltime/top", {}), ("/v1/boards", {}), ("/v1/openapi.json", {})]:
            writer.write(request(path, **headers))
            at_once = await response(reader)
            assert dispatched.paths == [], path
            writer.write(request(path, **headers, Content_Length="0"))
            dispatcher = await response(reader)
            assert dispatched.paths == [path.partition("?")[0]]
            dispatched.paths.clear()
            assert undated(at_once) == undated(dispatcher), path
            assert b"\r\ndate: " in at_once and b"\r\nserver: uvicorn\r\n" in at_once
    finally:
        writer.close()


async def test_cors_headers_on_an_answer_at_once(served: tuple[InProcessServer, Dispatched]) -> None:
    server, dispatched = served
    async with httpx.AsyncClient(base_url=server.url) as http:
        allowed = await http.get(MEMBER, headers={"Origin": GAME})
        refused = await http.get(MEMBER, headers={"Origin": "https://evil.example"})
    assert dispatched.paths == []
    assert allowed.status_code == 200 and allowed.json()["entry"]["member"] == "m1"
    assert allowed.headers["access-control-allow-origin"] == GAME and allowed.headers["vary"] == "Origin"
    assert "access-control-allow-origin" not in refused.headers and refused.headers["vary"] == "Origin"


async def test_keep_alive_over_many_requests_then_connection_close(served: tuple[InProcessServer, Dispatched]) -> None:
    server, dispatched = served
    reader, writer = await connect(server)
    try:
        for i in range(200):
            writer.write(request(f"/v1/boards/b/alltime/members/m{i % 5 + 1}"))
            answer = await response(reader)
            assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"connection: close" not in answer
            assert f'"member":"m{i % 5 + 1}"'.encode() in body(answer)
        writer.write(request(MEMBER, Connection="close"))
        last = await response(reader)
        assert b"\r\nconnection: close\r\n" in last and last.startswith(b"HTTP/1.1 200 OK\r\n")
        assert await asyncio.wait_for(reader.read(), SECONDS) == b""  # closed by the server
        assert dispatched.paths == []
    finally:
        writer.close()

    reader, writer = await connect(server)
    try:
        writer.write(f"GET {MEMBER} HTTP/1.0\r\nHost: arena\r\n\r\n".encode())
        answer = await response(reader)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"\r\nconnection: close\r\n" in answer
        assert await asyncio.wait_for(reader.read(), SECONDS) == b""
    finally:
        writer.close()


async def test_pipelined_requests_are_answered_in_order(served: tuple[InProcessServer, Dispatched]) -> None:
    """Requests sent in one write, some answered at once, some by the ASGI path (a digest awaits,
    a HEAD, an OPTIONS, a body, one behind another in flight): their answers in the order asked."""
    server, _dispatched = served
    asked: list[tuple[bytes, bool, bytes]] = []  # (request, HEAD, what its body holds)
    for i in range(40):
        member = f"m{i % 5 + 1}"
        asked.append((request(f"/v1/boards/b/alltime/members/{member}"), False, f'"member":"{member}"'.encode()))
        if i % 10 == 0:
            asked.append((request("/v1/boards/b/alltime/digest"), False, b'"sha256"'))
            asked.append((request(f"/v1/boards/b/alltime/members/{member}", "HEAD"), True, b""))
            asked.append((request("/v1/boards/b/alltime/top", "OPTIONS", Origin=GAME), True, b""))
            asked.append((request("/v1/boards/b/alltime/top?limit=1", Content_Length="0"), False, b'"m5"'))
    reader, writer = await connect(server)
    try:
        writer.write(b"".join(raw for raw, _, _ in asked))
        for raw, head_only, holds in asked:
            answer = await response(reader, head_only)
            assert holds in body(answer), (raw, answer)
    finally:
        writer.close()


async def test_an_unloaded_board_is_activated_through_the_asgi_path_then_answered_at_once(
        tmp_path: Path, served_journal: JournalSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past max_active_boards (2) the least recently used board is unloaded: b's next query waits
    for its activation on the ASGI path; the one after is answered at once, and an answer at
    once counts as a use (d's, which keeps d and makes b the one to go)."""
    boards = {name: BOARDS["b"] for name in ("b", "c", "d")}
    config = make_config(tmp_path, boards, journal=served_journal, idle_unload_seconds=600, max_active_boards=2)
    async with InProcessServer(config, fault_injection=False) as server, httpx.AsyncClient(base_url=server.url) as http:
        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            await client.submit([event("b", "m1", 10, now_ms(), "k1")])
        finally:
            await client.close()

        async def active(expected: dict[str, bool]) -> bool:
            return {row["board"]: row["active"] for row in (await http.get("/v1/boards")).json()["boards"]} == expected

        async def metric(name: str, **labels: str) -> float:
            return parse_metric((await http.get("/metrics")).text, name, **labels)

        for board in ("c", "d"):
            assert (await http.get(f"/v1/boards/{board}/alltime/top")).status_code == 200
        await until(lambda: active({"b": False, "c": True, "d": True}), "board b to be unloaded")
        activations = await metric("arena_board_activations_total")
        answered = await metric("arena_query_seconds_count", route="member")

        dispatched = Dispatched(monkeypatch)
        first = await http.get(MEMBER)
        assert first.status_code == 200 and first.json()["entry"]["score"] == 10
        assert dispatched.paths == [MEMBER]  # it waited for b's activation
        assert await metric("arena_board_activations_total") == activations + 1
        await until(lambda: active({"b": True, "c": False, "d": True}), "board c to be unloaded")
        second = await http.get(MEMBER)
        assert second.json() == first.json() and dispatched.paths == [MEMBER]
        assert await metric("arena_query_seconds_count", route="member") == answered + 2  # both observed

        assert (await http.get("/v1/boards/d/alltime/top")).status_code == 200 and dispatched.paths == [MEMBER]
        assert (await http.get("/v1/boards/c/alltime/top")).status_code == 200
        await until(lambda: active({"b": False, "c": True, "d": True}), "board b, used before d, to be unloaded")


async def test_while_the_peer_does_not_read_a_get_waits_on_the_asgi_path(served: tuple[InProcessServer, Dispatched]) -> None:
    """Flow control paused writing (the peer reads nothing): the GET is left to the ASGI path,
    whose answer waits until writing resumes; the same request then is answered at once, the
    same bytes."""
    server, dispatched = served
    protocol, transport, _ = _protocol(server)
    try:
        protocol.pause_writing()
        protocol.data_received(request(MEMBER))
        await until(lambda: dispatched.paths == [MEMBER], "the request to reach the ASGI path")
        assert transport.written == b""  # its answer waits for writing to resume
        protocol.resume_writing()
        await until(lambda: transport.written.endswith(b"}"), "the answer once writing resumed")
        waited = bytes(transport.written)
        transport.written.clear()
        protocol.data_received(request(MEMBER))
        await until(lambda: transport.written.endswith(b"}"), "the answer at once")
        assert bytes(transport.written) == waited and dispatched.paths == [MEMBER]
        assert waited.startswith(b"HTTP/1.1 200 OK\r\nserver: uvicorn\r\ncontent-type: application/json\r\n")
    finally:
        protocol.connection_lost(None)
        assert isinstance(protocol.config.app, QueryRoutes)
        await protocol.config.app.close()


def _protocol(server: InProcessServer, **settings: object) -> tuple[HttpProtocol, Transport, ServerState]:
    """An `HttpProtocol` of ``server``'s app (its uvicorn ``settings`` changed) on a fake transport."""
    assert server.arena is not None
    config = uvicorn_config(server.arena, "127.0.0.1", 0)
    for name, value in settings.items():
        setattr(config, name, value)
    config.load()
    state = ServerState()
    state.default_headers = [(b"server", b"uvicorn")]
    protocol = HttpProtocol(config=config, server_state=state, app_state={})
    transport = Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport, state


async def test_an_answer_at_once_ends_as_uvicorns_response(served: tuple[InProcessServer, Dispatched]) -> None:
    """No request cycle is built for an answer at once; its end is uvicorn's: the request counted
    (`limit_max_requests`), the keep-alive timer armed (once), dropped with the connection."""
    server, dispatched = served
    protocol, transport, state = _protocol(server)
    try:
        timers: list[asyncio.TimerHandle | None] = []
        for count in (1, 2):
            protocol.data_received(request(MEMBER))
            assert protocol.cycle is None and state.total_requests == count  # in the same call: no task
            timers.append(protocol.timeout_keep_alive_task)
            await until(lambda: transport.written.endswith(b"}"), "the answer written")
            assert transport.written.startswith(b"HTTP/1.1 200 OK\r\n")
            transport.written.clear()
        assert timers[0] is not None and timers == [timers[0]] * 2 and dispatched.paths == []
    finally:
        protocol.connection_lost(None)
        assert protocol.timeout_keep_alive_task is None
        assert isinstance(protocol.config.app, QueryRoutes)
        await protocol.config.app.close()


async def test_past_limit_concurrency_a_get_gets_uvicorns_503(served: tuple[InProcessServer, Dispatched]) -> None:
    server, dispatched = served
    protocol, transport, _state = _protocol(server, limit_concurrency=1)  # this connection is the one allowed
    try:
        protocol.data_received(request(MEMBER))
        await until(lambda: transport.written.endswith(b"Service Unavailable"), "uvicorn's 503")
        assert transport.written.startswith(b"HTTP/1.1 503 Service Unavailable\r\n") and dispatched.paths == []
    finally:
        protocol.connection_lost(None)
        assert isinstance(protocol.config.app, QueryRoutes)
        await protocol.config.app.close()


async def test_the_keep_alive_timer_closes_an_idle_connection_only(served: tuple[InProcessServer, Dispatched]) -> None:
    """The timer, armed once, closes the connection `timeout_keep_alive` seconds after the last
    response's end: fired early it waits for the rest; fired while a request is under way it
    leaves the connection open, and that request's end arms it again."""
    server, _dispatched = served
    protocol, transport, _state = _protocol(server, timeout_keep_alive=60)
    try:
        protocol.data_received(request(MEMBER))
        await until(lambda: transport.written.endswith(b"}"), "the answer")
        fire(protocol)  # early: 60 s are not over
        assert not transport.closing and protocol.timeout_keep_alive_task is not None

        protocol.timeout_keep_alive = 1
        protocol.data_received(request(MEMBER)[:20])  # a request under way
        fire(protocol)
        assert not transport.closing and protocol.timeout_keep_alive_task is None
        transport.written.clear()
        protocol.data_received(request(MEMBER)[20:])
        await until(lambda: transport.written.endswith(b"}"), "the answer")
        assert protocol.timeout_keep_alive_task is not None
        await until(lambda: transport.closing, "the idle connection closed")
    finally:
        protocol.connection_lost(None)
        assert isinstance(protocol.config.app, QueryRoutes)
        await protocol.config.app.close()


def fire(protocol: HttpProtocol) -> None:
    """The protocol's keep-alive timer fires now."""
    armed = protocol.timeout_keep_alive_task
    assert armed is not None
    armed.cancel()
    protocol.timeout_keep_alive_handler()
