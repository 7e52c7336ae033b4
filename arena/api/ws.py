"""`GET /v1/ws` (authenticated game-server connections streaming submit frames and queries) and
`GET /v1/live` (the public, read-only one): one frame parser, one connection class.

A connection holds at most ``max_in_flight_frames`` frames between reading and answering; every
frame it is owed goes through its one bounded `Outbox`; it reads its next frame only when that
outbox has room and the boards it may write have mailbox room: backpressure, never an early ack,
never a dropped accepted event or answer. A connection stuck on a reader that reads nothing is
aborted, so that its socket goes at once.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
from collections.abc import Awaitable, Callable, Coroutine
from decimal import Decimal
from fractions import Fraction
from typing import Any

import orjson
from starlette.responses import Response
from starlette.websockets import WebSocket

from arena.api import queries, wire
from arena.api.cors import refused_answer, refused_origin
from arena.api.forward import QUERY_SECONDS, Forwarding, refused
from arena.api.live import REFUSED, VIEW_FIELDS, Subscriptions, view_spec
from arena.api.routing import Local, answering, waits, where
from arena.api.service import Arena
from arena.api.transport import abort
from arena.api.wire import Body
from arena.board.actor import BoardHandle
from arena.cluster.peer.protocol import Answered, Ask
from arena.cluster.split import Part, Split, merge, split
from arena.config import GameServer
from arena.engine.events import Event, Result, parse_event
from arena.errors import ConfigError, JournalError, QueryError, invalid_request
from arena.live.outbox import Bounds, Outbox
from arena.live.views import LiveViews

log = logging.getLogger("arena.ws")

SHUTDOWN_CLOSE = 1012


class FrameError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_frame(text: str) -> dict[str, Any]:
    """A frame as a dict; FrameError bad_frame otherwise. orjson reads an integer literal beyond
    64 bits as a float: where that changes an answer (`widened`), the caller asks `exact_frame`."""
    try:
        frame = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            frame = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            raise FrameError("bad_frame", "frame is not valid JSON") from None
    if not isinstance(frame, dict):
        raise FrameError("bad_frame", "frame must be a JSON object")
    return frame


_WIDE = 2.0**63


def widened(value: object) -> bool:
    """Whether orjson may have read this from an integer literal it cannot hold (10**30 must be
    `value_out_of_range`, not a float's `invalid_event`). O(1)."""
    return type(value) is float and abs(value) >= _WIDE


def _widened_inside(value: object) -> bool:
    """Whether a value stored as sent (an event's meta) holds a `widened` number anywhere.
    Iterative: it may nest a thousand levels deep."""
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is list:
            stack.extend(v)
        elif type(v) is dict:
            stack.extend(v.values())
        elif widened(v):
            return True
    return False


def _inexact(raw: Any, parsed: Event | Result) -> bool:
    """Whether orjson's reading of an event may differ from its exact one where that matters: a
    rejected value or occurred_at (10**30 is `value_out_of_range`, not a float's `invalid_event`),
    or meta, which is stored exactly as sent. O(size of meta)."""
    if isinstance(parsed, Event):
        return parsed.meta is not None and _widened_inside(raw["meta"])
    return isinstance(raw, dict) and (widened(raw.get("value")) or widened(raw.get("occurred_at")))


def exact_frame(text: str, frame: dict[str, Any]) -> dict[str, Any]:
    """``frame`` (already parsed by orjson) parsed again with exact integers: slow, so only for
    the rare frame with a `widened` number that matters."""
    try:
        exact = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # deeper than json's recursion limit, or > 4300 digits
        return frame
    return exact if isinstance(exact, dict) else frame


def _str(frame: dict[str, Any], name: str, required: bool = True) -> str | None:
    value = frame.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise invalid_request(f"{name} must be a string")
    return value


def _int(frame: dict[str, Any], name: str, default: int | None) -> int | None:
    value = frame.get(name, default)
    if value is None and default is None:
        return None
    if type(value) is not int:
        raise invalid_request(f"{name} must be an integer")
    return value


def _table_args(frame: dict[str, Any]) -> tuple[str, str, str | None, str | None]:
    board = _str(frame, "board")
    period = _str(frame, "period")
    assert board is not None and period is not None
    return board, period, _str(frame, "period_id", required=False), _str(frame, "partition", required=False)


def _percent(frame: dict[str, Any]) -> Fraction:
    p = frame.get("p")
    if type(p) not in (int, float) or p in (math.inf, -math.inf):  # 1e400 reads as infinity
        raise invalid_request("p must be a number")
    return Fraction(Decimal(repr(p)))


def _top(arena: Arena, f: dict[str, Any]) -> Body:
    limit, offset = _int(f, "limit", VIEW_FIELDS["top"]["limit"]), _int(f, "offset", VIEW_FIELDS["top"]["offset"])
    assert limit is not None and offset is not None
    return queries.top(arena, *_table_args(f), limit, offset)


def _rank(arena: Arena, f: dict[str, Any]) -> Body:
    member = _str(f, "member")
    assert member is not None
    return queries.member(arena, *_table_args(f), member)


def _around(arena: Arena, f: dict[str, Any]) -> Body:
    radius = _int(f, "radius", VIEW_FIELDS["around"]["radius"])
    assert radius is not None
    return queries.around(arena, *_table_args(f), _str(f, "member", required=False), _int(f, "rank", None), radius)


def _percentile(arena: Arena, f: dict[str, Any]) -> Body:
    member = _str(f, "member")
    assert member is not None
    return queries.percentile(arena, *_table_args(f), member)


def _score_at_percentile(arena: Arena, f: dict[str, Any]) -> Body:
    return queries.score_at_percentile(arena, *_table_args(f), _percent(f))


def _members(arena: Arena, f: dict[str, Any]) -> Body:
    return queries.members(arena, *_table_args(f), f.get("members"))


QUERY_OPS: dict[str, Callable[[Arena, dict[str, Any]], Body]] = {
    "top": _top,
    "rank": _rank,
    "around": _around,
    "percentile": _percentile,
    "score_at_percentile": _score_at_percentile,
    "members": _members,
}


MAX_ECHOED_CHARS = 128
"""An `id` or `sub` is echoed in its answer: one longer is `invalid_request`, so that what a
connection is owed is bounded by its outbox's frames."""


def echoed_id(frame: dict[str, Any]) -> str | int | None:
    """The frame's `id`: a string of at most 128 code points or an integer (absent or null: none).
    Raises FrameError invalid_request for anything else; its answer carries `id: null`."""
    value = frame.get("id")
    if value is None or type(value) is int or (type(value) is str and len(value) <= MAX_ECHOED_CHARS):
        return value
    raise FrameError("invalid_request", f"id must be a string of at most {MAX_ECHOED_CHARS} characters or an integer")


def echoed_sub(frame: dict[str, Any]) -> str:
    """An `unsubscribe` frame's `sub`. Raises FrameError invalid_request unless it is a string
    of at most 128 code points."""
    sub = frame.get("sub")
    if type(sub) is not str or len(sub) > MAX_ECHOED_CHARS:
        raise FrameError("invalid_request", f"sub must be a string of at most {MAX_ECHOED_CHARS} characters")
    return sub


def _error(frame_id: object, code: str, message: str) -> bytes:
    return wire.dumps({"op": "error", "id": frame_id, "code": code, "message": message})


class Connection:
    """One WebSocket: a game server's on `/v1/ws`, or a public reader's on `/v1/live`."""

    def __init__(self, arena: Arena, websocket: WebSocket, server: GameServer | None, views: LiveViews) -> None:
        """``server`` None: the public read-only `/v1/live`, where `submit` is forbidden."""
        self.arena = arena
        self.websocket = websocket
        self.server = server
        self.slots = asyncio.Semaphore(arena.settings.max_in_flight_frames)
        self.tasks: set[asyncio.Task[None]] = set()
        self._writable: list[BoardHandle] = []
        self._writable_of = 0  # how many boards there were when `_writable` was made
        self.open = True
        self.views = views
        self.forwarding: Forwarding = websocket.app.state.forwarding
        self.clustered = self.forwarding.clustered
        self.outbox = Outbox(self._send, Bounds.of(arena.settings), on_stall=self._stall)
        self.stalled = False
        self._reader: asyncio.Task[None] | None = None
        self._subscriptions: Subscriptions | None = None
        self._seqs: dict[str, int] = {}
        """Per board, the highest seq of an answer sent on this connection (`_result`)."""

    def writable(self) -> list[BoardHandle]:
        """The boards this connection's server may write, whose full mailboxes stop its reading
        (backpressure). Made again when boards were added since (at runtime: boards only ever
        join ``arena.boards``), so a board created after the connection opened counts too."""
        boards = self.arena.boards
        if len(boards) != self._writable_of:
            server = self.server
            self._writable = [h for name, h in boards.items() if server is not None and server.may_write(name)]
            self._writable_of = len(boards)
        return self._writable

    def subscriptions(self) -> Subscriptions:
        if self._subscriptions is None:
            self._subscriptions = Subscriptions(self.arena, self.views, self.outbox)
        return self._subscriptions

    def _stall(self) -> None:
        """A write stayed pending, or the outbox full, `ping_timeout_seconds`: the peer has
        stopped reading. Abort the connection (a close would wait for the peer to read what is
        sent), so that it holds no socket, subscription, task or frame any more."""
        if self.stalled:
            return
        log.info("websocket from %s aborted: a write was pending or its outbox full for %g s (ping_timeout_seconds), "
                 "the peer reads nothing", self.websocket.client, self.outbox.bounds.stall_seconds)
        self.stalled = True
        self.open = False
        abort(self.websocket.scope)
        if self._reader is not None:
            self._reader.cancel()

    async def _send(self, payload: bytes) -> None:
        if self.open:
            await self.websocket.send({"type": "websocket.send", "text": payload.decode()})

    async def serve(self) -> None:
        reader = self._reader = asyncio.create_task(self._read())
        self.arena.add_reader(reader)
        try:
            await reader
        except asyncio.CancelledError:
            if not (self.arena.draining or self.stalled):
                raise
        finally:
            if self._subscriptions is not None:
                self._subscriptions.close()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)
            await self._flush()
        if self.arena.draining and self.open:
            self.open = False
            try:
                await self.websocket.close(SHUTDOWN_CLOSE)
            except Exception:  # already gone
                pass

    async def _flush(self) -> None:
        """Until the outbox has sent what is owed (the acks of a shutdown), or is closed."""
        outbox = self.outbox
        if self.open:
            await outbox.flushed()
        outbox.close()

    async def _read(self) -> None:
        receive = self.websocket.receive
        clock = self.arena.clock
        outbox = self.outbox
        while True:
            await self.slots.acquire()
            await outbox.room()
            for handle in self.writable():
                if not handle.mailbox.has_room():
                    await handle.mailbox.wait_room()
            message = await receive()
            if message["type"] == "websocket.disconnect":
                self.open = False
                return
            received_at = clock.now()
            text = message.get("text")
            if text is None:
                self._reply(_error(None, "bad_frame", "frames must be JSON text, not binary"))
                continue
            self._frame(text, received_at)

    def _frame(self, text: str, received_at: int) -> None:
        frame_id: object = None
        try:
            frame = parse_frame(text)
            if any(widened(v) for v in frame.values()):  # an integer id or query field beyond 64 bits
                frame = exact_frame(text, frame)
            frame_id = echoed_id(frame)
            op = frame.get("op")
            if op == "submit":
                if self.server is None:
                    raise FrameError("forbidden", "/v1/live is read-only: game servers submit on /v1/ws with their token")
                self._submit(self.server, frame_id, frame, received_at, text)
                return
            if op == "ping":
                self._reply(wire.dumps({"op": "pong", "id": frame_id}))
                return
            if op == "subscribe":
                view = frame.get("view")
                place = where(self.arena, view.get("board") if isinstance(view, dict) else None)
                if not isinstance(place, Local):
                    self._spawn(self._subscribe_elsewhere(frame_id, frame, place.board))
                elif place.handle is not None and waits(self.arena, place.handle):
                    self._spawn(self._subscribe_answering(frame_id, frame, place.handle.name))
                else:
                    self._subscribe(frame_id, frame)
                return
            if op == "unsubscribe":
                self.subscriptions().unsubscribe(frame_id, echoed_sub(frame))
                self.slots.release()
                return
            answer = QUERY_OPS.get(op) if isinstance(op, str) else None
            if answer is None:
                raise FrameError("unknown_op", f"unknown op {op!r}")
            place = where(self.arena, frame.get("board"))
            if not isinstance(place, Local):
                self._spawn(self._forwarded(frame_id, place.board, frame))
                return
            if place.handle is not None:
                if waits(self.arena, place.handle):
                    self._spawn(self._answered_after(frame_id, place.handle.name, answer, frame))
                    return
                self.arena.used(place.handle.name)
            self._reply(self._result(frame_id, answer(self.arena, frame)))
        except FrameError as exc:
            self._reply(_error(frame_id, exc.code, exc.message))
        except QueryError as exc:
            self._reply(_error(frame_id, exc.code, exc.message))

    def _submit(self, server: GameServer, frame_id: object, frame: dict[str, Any], received_at: int, text: str | None,
                asked: bool = False) -> None:
        events = frame.get("events")
        if not isinstance(events, list) or not events:
            raise FrameError("invalid_request", "events must be a non-empty list")
        if len(events) > self.arena.settings.max_batch:
            raise FrameError("batch_too_large", f"at most {self.arena.settings.max_batch} events per frame")
        arena = self.arena
        if not asked and any(_unknown_board(raw, arena) for raw in events):
            # validation rule 1: the store may know a board created through another node
            self._spawn(self._submit_asked(server, frame_id, frame, received_at, text))
            return
        may_write = functools.cache(server.may_write)  # the server's patterns matched once per board of the frame, not per event
        parsed: list[tuple[Event | Result, str | None]] = []
        for raw in events:
            event = parse_event(raw, arena.specs, may_write)
            if text is not None and _inexact(raw, event):
                # nothing is queued or counted yet: start over on the exact parse
                return self._submit(server, frame_id, exact_frame(text, frame), received_at, None, asked)
            if isinstance(event, Result):
                board = raw.get("board") if isinstance(raw, dict) else None
                parsed.append((event, board if isinstance(board, str) and board in arena.boards else None))
            else:
                parsed.append((event, None))
        parts = split(parsed)
        for board, answers in parts.rejected.items():
            arena.metrics.count_results(board, answers)
        forwarding = self.forwarding
        pending: list[tuple[Part, Awaitable[list[Result]]]] = []
        forwarded = False
        for part in parts.parts.values():
            if not self.clustered:
                pending.append((part, arena.boards[part.board].submit(part.events, received_at, server.id)))
            else:  # served here or not, a board may move while its events wait
                pending.append((part, forwarding.submit(part.board, part.events, received_at, server.id)))
                forwarded = forwarded or not isinstance(where(arena, part.board), Local)
        if forwarded:
            forwarding.count("frames")
        self._spawn(self._ack(frame_id, parts, pending))

    async def _submit_asked(self, server: GameServer, frame_id: object, frame: dict[str, Any], received_at: int,
                            text: str | None) -> None:
        """`_submit` once the catalog of API boards was read again (rule 1's store lookup)."""
        try:
            await self.arena.sync_catalog()
        except (JournalError, ConfigError) as exc:
            log.warning("board catalog not read for an unknown board: %s", exc)
        self._submit(server, frame_id, frame, received_at, text, asked=True)

    def _spawn(self, answer: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(answer)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _ack(self, frame_id: object, parts: Split, pending: list[tuple[Part, Awaitable[list[Result]]]]) -> None:
        # futures and forwardings always get results, never errors
        results = merge(parts, [(part, await answer) for part, answer in pending])
        self._reply(wire.dumps({"op": "ack", "id": frame_id, "results": wire.results(results)}))

    def _subscribe(self, frame_id: object, frame: dict[str, Any]) -> None:
        """Raises QueryError for a view the query refuses."""
        refused = self.subscriptions().subscribe(frame_id, frame, QUERY_OPS)
        if refused is not None:
            self._reply(refused)
        else:  # `subscribed` is owed through the outbox already
            self.slots.release()

    async def _subscribe_answering(self, frame_id: object, frame: dict[str, Any], board: str) -> None:
        """A subscription to a view of a board that will answer soon (`answering`: activated on
        demand, or handed off to this node): taken once the board serves, so that its first update
        goes at once (or after the wait, when it then follows the board)."""
        try:
            await answering(self.arena, board, QUERY_SECONDS)
        except QueryError:
            pass  # not loaded yet: a state of the subscription, which resumes once it is
        try:
            self._subscribe(frame_id, frame)
        except QueryError as exc:
            self._reply(_error(frame_id, exc.code, exc.message))

    async def _subscribe_elsewhere(self, frame_id: object, frame: dict[str, Any], board: str) -> None:
        """A subscription to a view of a board served elsewhere: refused if its owner's query
        refuses it (then watched there once for this node, see `arena.api.upstream`)."""
        try:
            spec = view_spec(frame["view"])
            error = await self.forwarding.error(Ask(board, spec.fields))
            if error is not None and error.code in REFUSED:
                raise error
            self._subscribe(frame_id, frame)
        except QueryError as exc:
            self._reply(_error(frame_id, exc.code, exc.message))

    async def _answered_after(self, frame_id: object, board: str, answer: Callable[[Arena, dict[str, Any]], Body],
                              frame: dict[str, Any]) -> None:
        """A query op answered once its board answers (`answering`: a hand-off to this node, an
        activation on demand), or `not_ready`; one whose board went elsewhere meanwhile is
        forwarded to its owner."""
        try:
            if not isinstance(await answering(self.arena, board, QUERY_SECONDS), Local):
                await self._forwarded(frame_id, board, frame)
                return
            self._reply(self._result(frame_id, answer(self.arena, frame)))
        except QueryError as exc:
            self._reply(_error(frame_id, exc.code, exc.message))

    async def _forwarded(self, frame_id: object, board: str, frame: dict[str, Any]) -> None:
        """A query op for a board served elsewhere, answered by its owner. An answer older than
        one this connection was sent (an old owner's, during a move) is asked again once."""
        self.forwarding.count("queries")
        try:
            body = await self._ask(board, frame)
            if body["seq"] < self._seqs.get(board, 0):
                body = await self._ask(board, frame)
            self._reply(self._result(frame_id, body))
        except QueryError as exc:
            self._reply(_error(frame_id, exc.code, exc.message))

    async def _ask(self, board: str, frame: dict[str, Any]) -> Body:
        """A query op's answer from the board's owner (or here, if it is served here now)."""
        answer = await self.forwarding.ask(Ask(board, {k: v for k, v in frame.items() if k != "id"}))
        if answer is None:  # served here after all
            return QUERY_OPS[frame["op"]](self.arena, frame)
        if not isinstance(answer, Answered):
            raise refused(answer)
        return answer.body

    def _result(self, frame_id: object, body: Body) -> bytes:
        """The `result` frame of a query's answer, unless the connection was owed a newer answer
        about its board: answers about one board never go back in seq on one connection (DESIGN.md,
        "Never stale"; the outbox sends owed frames in order). Raises QueryError unavailable instead."""
        board, seq = body["board"], body["seq"]
        if seq < self._seqs.get(board, 0):
            raise QueryError("unavailable", f"board {board!r} answered from an older state than this connection was "
                             "sent (it is moving between nodes); retry", 503)
        self._seqs[board] = seq
        return wire.dumps({"op": "result", "id": frame_id, **body})

    def _reply(self, payload: bytes) -> None:
        """Owe one frame's answer through the outbox and free the frame's in-flight slot."""
        self.outbox.owe(payload)
        self.slots.release()


async def ingest(websocket: WebSocket) -> None:
    """`GET /v1/ws`: a game server's connection (its bearer token names it)."""
    arena: Arena = websocket.app.state.arena
    server = arena.game_server(websocket.headers.get("authorization"))
    if server is None:
        log.info("websocket refused: missing or unknown token from %s", websocket.client)
        await websocket.close()  # before accept: the handshake gets HTTP 403
        return
    await _serve(websocket, arena, server)


async def live(websocket: WebSocket) -> None:
    """`GET /v1/live`: the public, read-only WebSocket (queries and subscriptions, no token)."""
    arena: Arena = websocket.app.state.arena
    refused = refused_origin(websocket.app.state.cors, websocket.scope)
    if refused is not None:
        websocket.app.state.refusals.note(refused, websocket.url.path, "live websocket")
        body, headers = refused_answer(refused)
        await websocket.send_denial_response(Response(body, 403, {k.decode(): v.decode("latin-1") for k, v in headers},
                                                      "application/json"))
        return
    await _serve(websocket, arena, None)


async def _serve(websocket: WebSocket, arena: Arena, server: GameServer | None) -> None:
    """Accept and serve a connection (``server`` None: `/v1/live`), or refuse it with 503 while
    draining or past its limit (`max_connections`, `max_live_connections`)."""
    if server is None:
        full = arena.live_connections >= arena.settings.max_live_connections
    else:
        full = arena.connections >= arena.settings.max_connections
    if arena.draining or full:
        body = wire.dumps({"error": {"code": "unavailable", "message": "too many connections, retry later"}})
        await websocket.send_denial_response(Response(body, 503, {"retry-after": wire.RETRY_AFTER}, "application/json"))
        return
    await websocket.accept()
    counted = arena.metrics.connections if server is not None else None
    if counted is not None:
        arena.connections += 1
        counted.inc()
    else:
        arena.live_connections += 1
    try:
        assert arena.live is not None
        await Connection(arena, websocket, server, arena.live).serve()
    finally:
        if counted is not None:
            arena.connections -= 1
            counted.dec()
        else:
            arena.live_connections -= 1


def _unknown_board(raw: object, arena: Arena) -> bool:
    """Whether an event names a board (a string) this node does not know."""
    board = raw.get("board") if isinstance(raw, dict) else None
    return isinstance(board, str) and board not in arena.boards
