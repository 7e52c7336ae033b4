"""Subscriptions on a WebSocket: `subscribe` / `unsubscribe` frames, and what a view's answer is.

A view is one of the table query ops with its fields; its answer is the query's answer, except
that a member not (yet) in the table is a state (`entry: null`, `entries: []`), never an error.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Hashable
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from arena.actor import BoardState
from arena.api import queries, wire
from arena.api.forward import Forwarding
from arena.api.upstream import Upstreams
from arena.api.wire import Body
from arena.errors import QueryError, invalid_request
from arena.live.outbox import EVENT_STREAM, Outbox
from arena.live.views import LiveViews, Subscription
from arena.service import Arena

log = logging.getLogger("arena.live")

VIEW_OPS = ("top", "rank", "around", "percentile", "score_at_percentile", "members")
REFUSED = {"invalid_request", "unknown_board", "unknown_period", "period_not_retained"}
"""What a query refuses for what it asks: a view that gets one of these is not subscribed."""

Answer = Callable[[Arena, dict[str, Any]], Body]


class QuerySource:
    """The live registry's `Source`: a view's answer is its query op's answer, here or (for a
    board served elsewhere) at the board's owner."""

    def __init__(self, arena: Arena, ops: dict[str, Answer], forwarding: Forwarding) -> None:
        self.arena = arena
        self.ops = ops
        self.forwarding = forwarding
        self.upstreams = Upstreams(forwarding)
        self.clustered = forwarding.clustered

    def version(self, view: dict[str, Any]) -> Hashable | None:
        if self.clustered:
            if not self.forwarding.local(view["board"]):
                return self.upstreams.of(view).version()
            if self.upstreams:
                self.upstreams.release(view)  # served here now
        handle = self.arena.boards[view["board"]]
        engine = handle.engine
        if handle.state is not BoardState.READY or engine is None:
            return None
        current = None
        if view.get("period_id") is None:  # a view of the current window follows the period
            current = engine.calendar.window_at(queries.period_kind(view["period"]), self.arena.clock.now()).period_id
        return (id(engine), engine.last_seq, current)

    def evaluate(self, view: dict[str, Any]) -> tuple[int, bytes] | str:
        upstream = self.upstreams.get(view)
        if upstream is not None:
            assert upstream.answer is not None  # its version was not None
            return upstream.answer
        try:
            body = self.ops[view["op"]](self.arena, view)
        except QueryError as exc:
            if exc.code != "member_not_found":
                return exc.code
            body = absent(self.arena, view)
        seq = body.pop("seq")  # an update carries it beside the answer, and updates compare without it
        return seq, orjson.dumps(body)


    def released(self, view: dict[str, Any]) -> None:
        self.upstreams.release(view)

    def close(self) -> None:
        self.upstreams.close()


def absent(arena: Arena, view: dict[str, Any]) -> Body:
    """The answer of a member view while the member has no entry: a state, not an error."""
    _, body = queries.view(arena, view["board"], view["period"], view.get("period_id"))
    if view["op"] == "around":
        body["entries"] = []
    else:
        body["entry"] = None
        if view["op"] == "percentile":
            body["top_percent"] = None
    return body


def live_views(arena: Arena, ops: dict[str, Answer], forwarding: Forwarding) -> LiveViews:
    return LiveViews(QuerySource(arena, ops, forwarding), arena.settings.push_interval_ms / 1000)


class Subscriptions:
    """One connection's subscriptions. Frames are answered through its `Outbox`, so that
    `subscribed` comes before the first update and no update follows `unsubscribed`."""

    def __init__(self, arena: Arena, views: LiveViews, outbox: Outbox) -> None:
        self.arena = arena
        self.views = views
        self.outbox = outbox
        self._ids = itertools.count(1)
        self._subs: dict[str, Subscription] = {}

    def subscribe(self, frame_id: object, frame: dict[str, Any], ops: dict[str, Answer]) -> bytes | None:
        """Subscribe to the frame's view: None when answered through the outbox, else the error
        frame's bytes. Raises QueryError for a view the query refuses."""
        view = frame.get("view")
        if not isinstance(view, dict) or view.get("op") not in VIEW_OPS:
            raise invalid_request(f"view must be an object whose op is one of {', '.join(VIEW_OPS)}")
        fields = {k: v for k, v in view.items() if k != "id"}
        if len(self._subs) >= self.arena.settings.max_subscriptions:
            return wire.dumps({"op": "error", "id": frame_id, "code": "too_many_subscriptions",
                           "message": f"at most {self.arena.settings.max_subscriptions} subscriptions per connection"})
        try:
            ops[fields["op"]](self.arena, fields)  # what the query refuses, the subscription refuses
        except QueryError as exc:
            if exc.code in REFUSED:
                raise
        sub = str(next(self._ids))
        self.outbox.control(wire.dumps({"op": "subscribed", "id": frame_id, "sub": sub}))
        self._subs[sub] = self.views.subscribe(sub, self.outbox, fields)
        return None

    def unsubscribe(self, frame_id: object, frame: dict[str, Any]) -> None:
        sub = frame.get("sub")
        subscription = self._subs.pop(sub, None) if isinstance(sub, str) else None
        if subscription is not None:
            self.views.unsubscribe(subscription)
        self.outbox.control(wire.dumps({"op": "unsubscribed", "id": frame_id, "sub": sub}))

    def close(self) -> None:
        """The connection ended: so do its subscriptions."""
        for subscription in self._subs.values():
            self.views.unsubscribe(subscription)
        self._subs.clear()
        self.outbox.close()
PING_SECONDS = 15.0
"""A comment line this often keeps proxies from closing an idle event stream."""


async def event_stream(
    arena: Arena, scope: Scope, receive: Receive, send: Send, view: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    """Serve a view as server-sent events until the client goes away: the first update as soon
    as the board is ready, then one on each change, and a ``: ping`` comment every 15 s. The
    caller has checked that the query does not refuse the view; ``headers`` go on the answer
    (CORS). A client that reads nothing for `ping_timeout_seconds` is let go; a shutdown ends
    the stream."""
    assert arena.live is not None
    if arena.draining or arena.live_connections >= arena.settings.max_live_connections:
        body = wire.dumps({"error": {"code": "unavailable", "message": "too many live connections, retry later"}})
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)), *headers]})
        await send({"type": "http.response.body", "body": body})
        return
    arena.live_connections += 1
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), *headers]})

    async def chunk(data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    stalled = asyncio.Event()
    stall_seconds = arena.settings.ping_timeout_seconds
    outbox = Outbox(chunk, EVENT_STREAM, stall_seconds=stall_seconds, on_stall=stalled.set)
    subscription = arena.live.subscribe("1", outbox, view)
    watch = asyncio.create_task(disconnected())
    arena.add_reader(watch)  # a shutdown cancels it: the stream ends
    ends: list[asyncio.Task[Any]] = [watch, asyncio.create_task(stalled.wait())]
    try:
        while not (await asyncio.wait(ends, timeout=PING_SECONDS, return_when=asyncio.FIRST_COMPLETED))[0]:
            outbox.control(b": ping\n\n")
        if stalled.is_set():
            log.info("event stream to %s closed: a write was pending for %g s (ping_timeout_seconds), the client reads nothing",
                     scope.get("client"), stall_seconds)
        elif arena.draining:  # the server is stopping: end the response (an EventSource reconnects by itself)
            outbox.close()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        for task in ends:
            task.cancel()
        arena.live.unsubscribe(subscription)
        outbox.close()
        arena.live_connections -= 1
