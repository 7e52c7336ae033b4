"""`GET /v1/peer`: another node's multiplexed connection, authenticated with the cluster secret.

It forwards what its own clients asked of the boards this node serves (the requests and answers
are described in `arena.cluster.peers`). A request for a board this node does not serve (any
more) is answered ``not_here``, so that the forwarder asks its directory again; that code never
reaches a client.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
from starlette.responses import Response
from starlette.types import Message, Scope
from starlette.websockets import WebSocket, WebSocketDisconnect

from arena.api import wire
from arena.api.forward import FORWARDED
from arena.api.live import view_spec
from arena.api.service import Arena
from arena.api.ws import QUERY_OPS
from arena.cluster import peers
from arena.engine.events import Reason
from arena.errors import QueryError
from arena.live.outbox import Bounds, Framing, Outbox
from arena.live.views import Subscription

log = logging.getLogger("arena.cluster")

MAX_REQUESTS = 1024
"""Requests of one peer connection served at once; past that the connection is not read."""

NOT_HERE: dict[str, Any] = {"not_here": True}


async def serve(websocket: WebSocket) -> None:
    arena: Arena = websocket.app.state.arena
    secret = arena.config.cluster.secret if arena.config.cluster else ""
    if not peers.secret_matches(secret, websocket.headers.get("authorization")):
        log.warning("peer connection refused: missing or wrong cluster secret from %s", websocket.client)
        body = wire.dumps({"error": {"code": "unauthorized", "message": "peer routes need the cluster secret"}})
        await websocket.send_denial_response(Response(body, 401, media_type="application/json"))
        return
    await websocket.accept()
    log.info("peer connected from %s", websocket.client)
    slots = asyncio.Semaphore(MAX_REQUESTS)
    tasks: set[asyncio.Task[None]] = set()
    watches = Watches(arena, websocket)

    async def answer(message: dict[str, Any]) -> None:
        try:
            reply = await _answer(websocket, arena, message)
        except Exception:  # a bug must not hang the forwarder: it gets an error, never a trace
            log.exception("peer request %s failed", message.get("op"))
            reply = {"error": {"code": "unavailable", "message": "the owner failed to answer", "status": 503}}
        try:
            await websocket.send_bytes(peers.dumps({**reply, "id": message.get("id")}))
        except Exception:  # the peer went away; what it asked is answered or journaled already
            pass
        finally:
            slots.release()

    try:
        while True:
            await slots.acquire()
            message = peers.loads(await websocket.receive_text())
            if watches.take(message):
                slots.release()
                continue
            board = message.get("board")
            handle = arena.boards.get(board) if message.get("op") == "submit" and isinstance(board, str) else None
            if handle is not None and not handle.mailbox.has_room():
                await handle.mailbox.wait_room()  # backpressure: read nothing more from this peer meanwhile
            task = asyncio.create_task(answer(message))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    except (WebSocketDisconnect, RuntimeError):
        pass
    except (ValueError, KeyError, AttributeError, TypeError) as exc:  # not JSON text, not an object: another program
        log.warning("peer connection from %s closed: a message that is not a peer request (%s)", websocket.client,
                    type(exc).__name__)
        await websocket.close(1003)
    finally:
        watches.close()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def _peer_update(sub: str, seq: int, body: bytes) -> bytes:
    return b'{"watch":%b,"seq":%d,"body":%b}' % (sub.encode(), seq, body)


def _peer_ended(sub: str, code: str, message: str) -> bytes:
    return orjson.dumps({"watch": int(sub), "ended": code, "message": message})


PEER = Framing(_peer_update, _peer_ended)
"""A watch's stream on a peer connection (`arena.cluster.peers`); a watch's id is its ``sub``."""


class Watches:
    """A peer connection's watches: each one a subscription of this node's live views, written
    through one outbox (so ``watching`` comes before the first update, as ``subscribed`` does)."""

    def __init__(self, arena: Arena, websocket: WebSocket) -> None:
        self.arena = arena
        self.websocket = websocket
        self._outbox: Outbox | None = None
        self._subscriptions: dict[str, Subscription] = {}

    def take(self, message: dict[str, Any]) -> bool:
        """Serve a watch or unwatch request; False for any other request."""
        op = message.get("op")
        if op == "watch":
            board, watch = message.get("board"), str(message.get("id"))
            outbox = self.outbox()
            if not isinstance(board, str) or board not in self.arena.boards or not self.arena.directory.local(board):
                outbox.owe(peers.dumps({**NOT_HERE, "id": message.get("id")}))
                return True
            outbox.owe(peers.dumps({"watching": True, "id": message.get("id")}))
            assert self.arena.live is not None
            self._subscriptions[watch] = self.arena.live.subscribe(watch, outbox, view_spec(message["view"]))
            return True
        if op == "unwatch":
            subscription = self._subscriptions.pop(str(message.get("watch")), None)
            if subscription is not None and self.arena.live is not None:
                self.arena.live.unsubscribe(subscription)
            return True
        return False

    def outbox(self) -> Outbox:
        if self._outbox is None:
            self._outbox = Outbox(self._send, Bounds.of(self.arena.settings), PEER, on_stall=self.close)
        return self._outbox

    async def _send(self, payload: bytes) -> None:
        await self.websocket.send({"type": "websocket.send", "bytes": payload})

    def close(self) -> None:
        if self.arena.live is not None:
            for subscription in self._subscriptions.values():
                self.arena.live.unsubscribe(subscription)
        self._subscriptions.clear()
        if self._outbox is not None:
            self._outbox.close()


async def _answer(websocket: WebSocket, arena: Arena, message: dict[str, Any]) -> dict[str, Any]:
    board = message.get("board")
    if not isinstance(board, str) or board not in arena.boards or not arena.directory.local(board):
        return NOT_HERE
    op = message.get("op")
    if op == "submit":
        return await _submit(arena, board, message)
    if op == "ask":
        return _ask(arena, message["frame"])
    if op == "http":
        return await _http(websocket, message)
    return {"error": {"code": "invalid_request", "message": f"unknown peer op {op!r}", "status": 400}}


async def _submit(arena: Arena, board: str, message: dict[str, Any]) -> dict[str, Any]:
    events = [peers.event_of(board, fields) for fields in message["events"]]
    results = await arena.boards[board].submit(events, message["received_at"], message["source"])
    answer: dict[str, Any] = {"results": [peers.result_fields(r) for r in results]}
    if not arena.directory.local(board) and any(r.reason is Reason.UNAVAILABLE for r in results):
        answer["moved"] = True  # lost while they waited: the forwarder sends those on to the next owner
    return answer


def _ask(arena: Arena, frame: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"body": QUERY_OPS[frame["op"]](arena, frame)}
    except QueryError as exc:
        return {"error": {"code": exc.code, "message": exc.message, "status": exc.status}}


async def _http(websocket: WebSocket, message: dict[str, Any]) -> dict[str, Any]:
    """Run a forwarded HTTP request through this node's own routes (marked `FORWARDED`)."""
    path: str = message["path"]
    scope: Scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "http",
        "method": message["method"], "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": message["query"].encode("latin-1"),
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in message["headers"]],
        "client": websocket.scope.get("client"), "server": websocket.scope.get("server"),
        FORWARDED: True,
    }
    body = peers.body_of(message)
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    status = 500
    headers: list[list[str]] = []
    chunks: list[bytes] = []

    async def send(m: Message) -> None:
        nonlocal status, headers
        if m["type"] == "http.response.start":
            status = m["status"]
            headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in m.get("headers", ())
                       if k.lower() != b"content-length"]
        elif m["type"] == "http.response.body":
            chunks.append(m.get("body", b""))

    await websocket.app.state.routes(scope, receive, send)
    return {"status": status, "headers": headers, **peers.body_fields(b"".join(chunks))}
