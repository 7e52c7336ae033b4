"""Subscriptions on a WebSocket: `subscribe` / `unsubscribe` frames, and what a view's answer is.

A view is one of the table query ops with exactly its fields (`view_spec`: the one place where a
view's identity is computed); its answer is the query's answer, except that a member not (yet) in
the table is a state (`entry: null`, `entries: []`), never an error. What one connection's views
may ask is bounded (`max_subscriptions`, `max_view_entries`, `max_view_members`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Hashable
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from arena.api import queries, wire
from arena.api.forward import Forwarding
from arena.api.routing import Local, where
from arena.api.service import Arena
from arena.api.transport import abort
from arena.api.upstream import Upstreams
from arena.api.wire import Body
from arena.board.state import BoardState
from arena.engine.events import MAX_MEMBER_CHARS
from arena.errors import QueryError, invalid_request
from arena.live.outbox import EVENT_STREAM, Bounds, Outbox
from arena.live.views import LiveViews, Subscription, ViewSpec

log = logging.getLogger("arena.live")

TABLE_FIELDS = ("board", "period", "period_id", "partition")
"""The fields of every view: the table it asks about."""
VIEW_FIELDS: dict[str, dict[str, int | None]] = {
    "top": {"limit": 10, "offset": 0},
    "rank": {"member": None},
    "around": {"member": None, "rank": None, "radius": 5},
    "percentile": {"member": None},
    "score_at_percentile": {"p": None},
    "members": {"members": None},
}
"""Each view op's own fields and their defaults (None: no default): the query ops read their
defaults here too (`arena.api.ws.QUERY_OPS`)."""
VIEW_OPS = tuple(VIEW_FIELDS)
REFUSED = {"invalid_request", "unknown_board", "unknown_period", "period_not_retained", "unknown_partition"}
"""What a query refuses for what it asks: a view that gets one of these is not subscribed."""

Answer = Callable[[Arena, dict[str, Any]], Body]


def view_spec(view: object) -> ViewSpec:
    """A view's fields as its query op reads them, with defaults filled in, so that two views that
    ask the same thing are one view. Raises invalid_request for anything but an object with a
    view op and only that op's fields, or a member named longer than a member can be (such a
    view could only ever answer "absent", and would hold its text as long as it lives).
    O(size of the view)."""
    if not isinstance(view, dict) or view.get("op") not in VIEW_FIELDS:
        raise invalid_request(f"view must be an object whose op is one of {', '.join(VIEW_OPS)}")
    own = VIEW_FIELDS[view["op"]]
    unknown = [name for name in view if name != "op" and name not in TABLE_FIELDS and name not in own]
    if unknown:
        raise invalid_request(f"a {view['op']} view has no field {str(unknown[0])[:64]!r}"
                              f" (its fields: op, {', '.join(TABLE_FIELDS)}, {', '.join(own)})")
    fields = {name: value for name, value in ({**own, **view}).items() if value is not None or own.get(name) is not None}
    named = fields.get("members") if view["op"] == "members" else [fields.get("member")]
    if isinstance(named, list) and any(isinstance(m, str) and len(m) > MAX_MEMBER_CHARS for m in named):
        raise invalid_request(f"a member has at most {MAX_MEMBER_CHARS} code points")
    return ViewSpec(fields)


class QuerySource:
    """The live registry's `Source`: a view's answer is its query op's answer, here or (for a
    board served elsewhere) at the board's owner."""

    def __init__(self, arena: Arena, ops: dict[str, Answer], forwarding: Forwarding) -> None:
        self.arena = arena
        self.ops = ops
        self.forwarding = forwarding
        self.upstreams = Upstreams(forwarding)

    def version(self, spec: ViewSpec) -> Hashable | None:
        view = spec.fields
        place = where(self.arena, view["board"])
        if not isinstance(place, Local):
            return self.upstreams.of(spec).version()
        if self.upstreams:
            self.upstreams.release(spec)  # served here now
        handle = place.handle
        engine = handle.engine if handle is not None else None
        if handle is not None and handle.demand is not None:
            handle.demand(handle.name)  # a subscription keeps its board active, and activates it
        if handle is None or handle.state is not BoardState.SERVING or engine is None:
            return None
        current = None
        if view.get("period_id") is None:  # a view of the current window follows the period
            current = engine.schedule.current(queries.period_kind(handle.spec, view["period"]), self.arena.clock.now()).period_id
        return (id(engine), engine.last_seq, current)

    def evaluate(self, spec: ViewSpec) -> tuple[int, bytes] | str | None:
        view = spec.fields
        upstream = self.upstreams.get(spec)
        if upstream is not None:
            assert upstream.answer is not None  # its version was not None
            return upstream.answer
        try:
            body = self.ops[view["op"]](self.arena, view)
        except QueryError as exc:
            if exc.code in REFUSED:  # its table left retention: the subscription ends
                return exc.code
            if exc.code != "member_not_found":
                return None  # not_ready, unavailable: the board hid its tables since `version`
            body = absent(self.arena, view)
        seq = body.pop("seq")  # an update carries it beside the answer, and updates compare without it
        return seq, orjson.dumps(body)

    def released(self, spec: ViewSpec) -> None:
        self.upstreams.release(spec)

    def close(self) -> None:
        self.upstreams.close()


def absent(arena: Arena, view: dict[str, Any]) -> Body:
    """The answer of a member view while the member has no entry: a state, not an error."""
    _, body = queries.view(arena, view["board"], view["period"], view.get("period_id"), view.get("partition"))
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
    """One connection's subscriptions. Frames are answered through the connection's `Outbox`,
    so that `subscribed` comes before the first update and no update follows `unsubscribed`."""

    def __init__(self, arena: Arena, views: LiveViews, outbox: Outbox) -> None:
        self.arena = arena
        self.views = views
        self.outbox = outbox
        self._ids = itertools.count(1)
        self._subs: dict[str, Subscription] = {}

    def subscribe(self, frame_id: object, frame: dict[str, Any], ops: dict[str, Answer]) -> bytes | None:
        """Subscribe to the frame's view: None when answered through the outbox, else the error
        frame's bytes (past a limit: `too_many_subscriptions`). Raises QueryError for a view the
        query refuses. O(subscriptions of the connection)."""
        spec = view_spec(frame.get("view"))
        settings = self.arena.settings
        held = [s.view.spec for s in self._active()]
        if len(held) >= settings.max_subscriptions:
            return _too_many(frame_id, f"at most {settings.max_subscriptions} subscriptions per connection")
        try:
            ops[spec.fields["op"]](self.arena, spec.fields)  # what the query refuses, the subscription refuses
        except QueryError as exc:
            if exc.code in REFUSED:
                raise
        if spec.entries + sum(v.entries for v in held) > settings.max_view_entries:
            return _too_many(frame_id, f"the views of a connection ask at most {settings.max_view_entries} entries"
                                       " (max_view_entries; top counts its limit, around 2*radius+1, members its members)")
        if spec.members + sum(v.members for v in held) > settings.max_view_members:
            return _too_many(frame_id, f"the views of a connection name at most {settings.max_view_members} members"
                                       " (max_view_members)")
        sub = str(next(self._ids))
        self.outbox.owe(wire.dumps({"op": "subscribed", "id": frame_id, "sub": sub}))
        self._subs[sub] = self.views.subscribe(sub, self.outbox, spec)
        return None

    def _active(self) -> list[Subscription]:
        """The connection's subscriptions, less those the registry ended (their table left
        retention): what they held is given back."""
        if not all(s.active for s in self._subs.values()):
            self._subs = {sub: s for sub, s in self._subs.items() if s.active}
        return list(self._subs.values())

    def unsubscribe(self, frame_id: object, sub: str) -> None:
        subscription = self._subs.pop(sub, None)
        if subscription is not None:
            self.views.unsubscribe(subscription)
        self.outbox.owe(wire.dumps({"op": "unsubscribed", "id": frame_id, "sub": sub}))

    def close(self) -> None:
        """The connection ended: so do its subscriptions (their unsent updates are dropped)."""
        for subscription in self._subs.values():
            self.views.unsubscribe(subscription)
        self._subs.clear()


def _too_many(frame_id: object, message: str) -> bytes:
    return wire.dumps({"op": "error", "id": frame_id, "code": "too_many_subscriptions", "message": message})


PING_SECONDS = 15.0
"""A comment line this often keeps proxies from closing an idle event stream."""


async def event_stream(
    arena: Arena, scope: Scope, receive: Receive, send: Send, view: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    """Serve a view as server-sent events until the client goes away: the first update as soon
    as the board is ready, then one on each change, and a ``: ping`` comment every 15 s. The
    caller has checked that the query does not refuse the view; ``headers`` go on the answer
    (CORS). A client that reads nothing for `ping_timeout_seconds` is aborted; a shutdown ends
    the stream."""
    assert arena.live is not None
    if arena.draining or arena.live_connections >= arena.settings.max_live_connections:
        body = wire.dumps({"error": {"code": "unavailable", "message": "too many live connections, retry later"}})
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
                                (b"retry-after", wire.RETRY_AFTER.encode()), *headers]})
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
    outbox = Outbox(chunk, Bounds.of(arena.settings), EVENT_STREAM, on_stall=stalled.set)
    subscription = arena.live.subscribe("1", outbox, view_spec(view))
    watch = asyncio.create_task(disconnected())
    arena.add_reader(watch)  # a shutdown cancels it: the stream ends
    ends: list[asyncio.Task[Any]] = [watch, asyncio.create_task(stalled.wait())]
    try:
        while not (await asyncio.wait(ends, timeout=PING_SECONDS, return_when=asyncio.FIRST_COMPLETED))[0]:
            outbox.owe(b": ping\n\n")
        if stalled.is_set():
            log.info("event stream to %s aborted: a write was pending for %g s (ping_timeout_seconds), the client reads nothing",
                     scope.get("client"), outbox.bounds.stall_seconds)
            abort(scope)
            await asyncio.wait([watch])  # the connection is lost on the next turn: the response ends there
        elif arena.draining:  # the server is stopping: end the response (an EventSource reconnects by itself)
            outbox.close()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        for task in ends:
            task.cancel()
        arena.live.unsubscribe(subscription)
        outbox.close()
        arena.live_connections -= 1
