"""`GET /v1/peer`: another node's multiplexed connection, authenticated with the cluster secret.

It forwards what its own clients asked of the boards this node serves (the requests and answers
are `arena.cluster.peer.protocol`'s). A request for a board this node does not serve (any more)
is answered `Elsewhere`, so that the forwarder asks its directory again; that answer never
reaches a client. A request that cannot be read is answered `invalid_request` when its id can
be, and otherwise the connection is closed (1003): it is not a peer's.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.responses import Response
from starlette.types import Message, Scope
from starlette.websockets import WebSocket, WebSocketDisconnect

from arena.api import wire
from arena.api.forward import FORWARDED, QUERY_SECONDS
from arena.api.live import view_spec
from arena.api.routing import Local, answering, moved, settled, where
from arena.api.service import Arena
from arena.api.wire import Body
from arena.api.ws import QUERY_OPS
from arena.board.actor import BoardHandle
from arena.cluster.peer.protocol import (
    Answer,
    Answered,
    Ask,
    Elsewhere,
    Ended,
    Http,
    HttpAnswer,
    ProtocolError,
    Refused,
    Reply,
    Submit,
    Submitted,
    Unwatch,
    Watch,
    Watching,
    parse_request,
    secret_matches,
    serialise,
    update_frame,
)
from arena.errors import QueryError
from arena.live.outbox import Bounds, Framing, Outbox
from arena.live.views import Subscription

log = logging.getLogger("arena.cluster")

MAX_REQUESTS = 1024
"""Requests of one peer connection served at once; past that the connection is not read."""

FAILED = Refused("unavailable", "the owner failed to answer", 503)


async def serve(websocket: WebSocket) -> None:
    arena: Arena = websocket.app.state.arena
    secret = arena.config.cluster.secret if arena.config.cluster else ""
    if not secret_matches(secret, websocket.headers.get("authorization")):
        log.warning("peer connection refused: missing or wrong cluster secret from %s", websocket.client)
        body = wire.dumps({"error": {"code": "unauthorized", "message": "peer routes need the cluster secret"}})
        await websocket.send_denial_response(Response(body, 401, media_type="application/json"))
        return
    await websocket.accept()
    log.info("peer connected from %s", websocket.client)
    slots = asyncio.Semaphore(MAX_REQUESTS)
    tasks: set[asyncio.Task[None]] = set()
    watches = Watches(arena, websocket)

    async def reply(request_id: int, answer: Answer) -> None:
        try:
            await websocket.send_bytes(serialise(Reply(request_id, answer)))
        except Exception:  # the peer went away; what it asked is answered or journaled already
            pass

    async def answer(request_id: int, request: Submit | Ask | Http) -> None:
        try:
            outcome = await _answer(websocket, arena, request)
        except Exception:  # a bug must not hang the forwarder: it gets an error, never a trace
            log.exception("peer request %s failed", type(request).__name__)
            outcome = FAILED
        try:
            await reply(request_id, outcome)
        finally:
            slots.release()

    try:
        while True:
            await slots.acquire()
            try:
                message = parse_request(await websocket.receive_text())
            except ProtocolError as exc:
                if exc.id is None:
                    raise
                await reply(exc.id, Refused("invalid_request", str(exc), 400))
                slots.release()
                continue
            if isinstance(message, Unwatch):
                watches.unwatch(message)
                slots.release()
                continue
            request = message.request
            if isinstance(request, Watch):
                watches.watch(message.id, request)
                slots.release()
                continue
            handle = arena.boards.get(request.board) if isinstance(request, Submit) else None
            if handle is not None and not handle.mailbox.has_room():
                await handle.mailbox.wait_room()  # backpressure: read nothing more from this peer meanwhile
            task = asyncio.create_task(answer(message.id, request))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    except (WebSocketDisconnect, RuntimeError):
        pass
    except (ProtocolError, KeyError) as exc:  # binary, not JSON text, not an object, no id: another program
        log.warning("peer connection from %s closed: a message that is not a peer request (%s)", websocket.client,
                    exc if isinstance(exc, ProtocolError) else "binary")
        await websocket.close(1003)
    finally:
        watches.close()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def _peer_update(sub: str, seq: int, body: bytes) -> bytes:
    return update_frame(int(sub), seq, body)


def _peer_ended(sub: str, code: str, message: str) -> bytes:
    return serialise(Ended(int(sub), code, message))


PEER = Framing(_peer_update, _peer_ended)
"""A watch's stream on a peer connection; a watch's id is its ``sub``."""


class Watches:
    """A peer connection's watches: each one a subscription of this node's live views, written
    through one outbox (so `Watching` comes before the first update, as ``subscribed`` does)."""

    def __init__(self, arena: Arena, websocket: WebSocket) -> None:
        self.arena = arena
        self.websocket = websocket
        self._outbox: Outbox | None = None
        self._subscriptions: dict[str, Subscription] = {}

    def watch(self, request_id: int, request: Watch) -> None:
        outbox = self.outbox()
        place = where(self.arena, request.board)
        if not isinstance(place, Local) or place.handle is None:
            outbox.owe(serialise(Reply(request_id, Elsewhere())))
            return
        outbox.owe(serialise(Reply(request_id, Watching())))
        assert self.arena.live is not None
        watch = str(request_id)
        self._subscriptions[watch] = self.arena.live.subscribe(watch, outbox, view_spec(request.view))

    def unwatch(self, request: Unwatch) -> None:
        subscription = self._subscriptions.pop(str(request.watch), None)
        if subscription is not None and self.arena.live is not None:
            self.arena.live.unsubscribe(subscription)

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


async def _answer(websocket: WebSocket, arena: Arena, request: Submit | Ask | Http) -> Answer:
    if isinstance(request, Http) and not request.board:  # about this node, not a board
        return await _http(websocket, request)
    if isinstance(request, Submit):
        place = where(arena, request.board)
    elif isinstance(request, Http):  # its route here waits for the board it is about (`answering`)
        place = await settled(arena, request.board, QUERY_SECONDS)
    else:
        try:
            place = await answering(arena, request.board, QUERY_SECONDS)
        except QueryError as exc:
            return Refused(exc.code, exc.message, exc.status)
    if not isinstance(place, Local) or place.handle is None:
        return Elsewhere()
    if isinstance(request, Submit):
        return await _submit(arena, place.handle, request)
    if isinstance(request, Ask):
        return _ask(arena, request.frame)
    return await _http(websocket, request)


async def _submit(arena: Arena, handle: BoardHandle, request: Submit) -> Submitted:
    results = await handle.submit(request.events, request.received_at, request.source)
    return Submitted(tuple(results), moved(arena, request.board, results))


def _ask(arena: Arena, frame: Body) -> Answered | Refused:
    try:
        return Answered(QUERY_OPS[frame["op"]](arena, frame))
    except QueryError as exc:
        return Refused(exc.code, exc.message, exc.status)


async def _http(websocket: WebSocket, request: Http) -> HttpAnswer:
    """Run a forwarded HTTP request through this node's own routes (marked `FORWARDED`)."""
    path = request.path
    scope: Scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "http",
        "method": request.method, "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": request.query.encode("latin-1"),
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in request.headers],
        "client": websocket.scope.get("client"), "server": websocket.scope.get("server"),
        FORWARDED: True,
    }
    body = request.body
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def send(m: Message) -> None:
        nonlocal status, headers
        if m["type"] == "http.response.start":
            status = m["status"]
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in m.get("headers", ())
                       if k.lower() != b"content-length"]
        elif m["type"] == "http.response.body":
            chunks.append(m.get("body", b""))

    await websocket.app.state.routes(scope, receive, send)
    return HttpAnswer(status, tuple(headers), b"".join(chunks))
