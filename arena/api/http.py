"""HTTP query routes: parse, ask `arena.api.queries`, serialise. No credentials (standings are public).

The public routes (`QUERY_ROUTES`: the GET queries, `POST …/members` and the OpenAPI document)
are served by `QueryRoutes`, a small ASGI dispatcher in front of the starlette app: on these
routes, which dominate traffic, starlette's router, middleware and Request/Response objects cost
more than the query itself (measured: about 2x the time of a bare ASGI app). It also gives them
their CORS headers (`arena.api.cors`). Everything else (admin, health, metrics, WebSocket) is
plain starlette, without CORS.

`QueryRoutes.answer_here` is the part of a request that needs no wait (the route, the answer of
a board loaded here, its headers): the dispatcher asks it first, and so does the HTTP protocol
(`arena.api.transport.HttpProtocol`), which writes a GET's answer without an ASGI task.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any
from urllib.parse import unquote_plus, urlencode

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from arena.api import live, openapi, queries, stats, wire
from arena.api.cors import Cors, Headers, Refusals, refused_answer, refused_origin
from arena.api.forward import QUERY_SECONDS, Forwarding, forward_request, forwarded, refused
from arena.api.routing import Local, Place, answering, waits, where
from arena.api.service import Arena
from arena.api.transport import Reply
from arena.api.wire import RETRY_AFTER, Body
from arena.cluster.peer.protocol import HttpAnswer
from arena.errors import QueryError, invalid_request, not_found

JSON = "application/json"


def json_response(body: Body, status: int = 200) -> Response:
    return Response(wire.dumps(body), status, media_type=JSON)


def error_response(exc: QueryError) -> Response:
    response = json_response(wire.error(exc), exc.status)
    if exc.status == 503:
        response.headers["retry-after"] = RETRY_AFTER
    return response


def int_param(raw: str | None, name: str, default: int | None = None) -> int | None:
    """A query parameter as an int (``default`` when absent). Raises QueryError invalid_request."""
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise invalid_request(f"{name} must be an integer") from None


def flag_param(raw: str | None, name: str) -> bool:
    """A query parameter ``true`` or ``false`` (absent: false). Raises QueryError invalid_request."""
    if raw is None or raw == "false":
        return False
    if raw == "true":
        return True
    raise invalid_request(f"{name} must be true or false")


def percent_param(raw: str | None, name: str) -> Fraction:
    """A percentage parameter as an exact Fraction. Raises QueryError invalid_request."""
    if raw is None:
        raise invalid_request(f"{name} is required")
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise invalid_request(f"{name} must be a number") from None
    if not value.is_finite():
        raise invalid_request(f"{name} must be a number")
    # Fraction(Decimal) costs about 10**|exponent| ("1e-9999999" took seconds of the event loop,
    # "1e99999999" forever): clamp first, which changes no answer. Outside (0, 100] stays outside
    # (the range check is the query's), and below 1e-30 every table (< 10**28 entries) gives rank 1.
    value = min(max(value, _PERCENT_FLOOR), _PERCENT_CEILING)
    if 0 < value < _PERCENT_TINY:
        value = _PERCENT_TINY
    return Fraction(value)


_PERCENT_FLOOR, _PERCENT_CEILING, _PERCENT_TINY = Decimal(-1), Decimal(101), Decimal("1e-30")


def json_object(body: bytes) -> dict[str, Any]:
    """A request body that must be a JSON object. Raises QueryError invalid_request."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise invalid_request("body must be a JSON object") from None
    if not isinstance(value, dict):
        raise invalid_request("body must be a JSON object")
    return value


def _unquote(text: str) -> str:
    return unquote_plus(text, encoding="utf-8", errors="replace") if "%" in text or "+" in text else text


class Params:
    """A query route's path parts, query string and body (empty but on POST), parsed once."""

    __slots__ = ("board", "period", "member", "body", "_query")

    def __init__(self, board: str, period: str, member: str | None, query_string: bytes, body: bytes = b"") -> None:
        self.board = board
        self.period = period
        self.member = member
        self.body = body
        self._query: dict[str, str] = {}
        if query_string:
            for pair in query_string.decode("latin-1").split("&"):
                name, _, value = pair.partition("=")
                self._query[_unquote(name)] = _unquote(value)  # the last one wins, as in starlette

    def get(self, name: str) -> str | None:
        return self._query.get(name)

    def int(self, name: str, default: int | None = None) -> int | None:
        return int_param(self._query.get(name), name, default)

    @property
    def table(self) -> tuple[str, str, str | None, str | None]:
        """(board, period, period_id, partition): the table a query route names."""
        return self.board, self.period, self._query.get("period_id"), self._query.get("partition")

    def required_member(self) -> str:
        assert self.member is not None  # the dispatcher only routes here with a member
        return self.member


def _top(arena: Arena, p: Params) -> Body:
    limit, offset = p.int("limit", 10), p.int("offset", 0)
    assert limit is not None and offset is not None
    return queries.top(arena, *p.table, limit, offset)


def _member(arena: Arena, p: Params) -> Body:
    return queries.member(arena, *p.table, p.required_member())


def _around(arena: Arena, p: Params) -> Body:
    radius = p.int("radius", 5)
    assert radius is not None
    if p.member is not None:
        return queries.around(arena, *p.table, p.member, None, radius)
    rank = p.int("rank")
    if rank is None:
        raise invalid_request("rank is required (or use /around/{member})")
    return queries.around(arena, *p.table, None, rank, radius)


def _percentile(arena: Arena, p: Params) -> Body:
    return queries.percentile(arena, *p.table, p.required_member())


def _score_at_percentile(arena: Arena, p: Params) -> Body:
    return queries.score_at_percentile(arena, *p.table, percent_param(p.get("p"), "p"))


def _search(arena: Arena, p: Params) -> Body:
    limit = p.int("limit", 20)
    assert limit is not None
    return queries.search(arena, *p.table, p.get("prefix"), limit)


def _digest(arena: Arena, p: Params) -> Awaitable[Body]:
    return queries.digest(arena, *p.table)


def _settlement(arena: Arena, p: Params) -> Body | Awaitable[Body]:
    limit, offset = p.int("limit", queries.MAX_LIMIT), p.int("offset", 0)
    assert limit is not None and offset is not None
    if p.member is not None:  # …/settlement/members/{member}
        member = p.member.removeprefix("members/")
        if member == p.member or not member:
            raise not_found("not_found", "no such route: a member's award is …/settlement/members/{member}")
        return queries.settlement_member(arena, *p.table, member)
    return queries.settlement(arena, *p.table, flag_param(p.get("preview"), "preview"), p.int("revision"), limit, offset)


def _partitions(arena: Arena, p: Params) -> Body:
    limit = p.int("limit", queries.MAX_PARTITIONS_LIMIT)
    assert limit is not None
    board, period, period_id, _partition = p.table
    return queries.partitions(arena, board, period, period_id, limit, p.get("after"))


def _periods(arena: Arena, p: Params) -> Body:
    return queries.periods(arena, p.board, p.period)


def _members(arena: Arena, p: Params) -> Body:
    return queries.members(arena, *p.table, json_object(p.body).get("members"))


def _boards(arena: Arena, p: Params) -> Body:
    limit = p.int("limit", queries.MAX_BOARDS_LIMIT)
    assert limit is not None
    return queries.boards(arena, limit, p.get("after"), p.get("category"))


def _page(p: Params) -> str:
    """The query string of the `/v1/boards` page ``p`` names, as the owners of its boards are asked it."""
    return urlencode({name: value for name in ("limit", "after", "category") if (value := p.get(name)) is not None})


def _openapi(arena: Arena, p: Params) -> Body:
    return openapi.DOCUMENT


async def _cluster(arena: Arena, p: Params) -> Body:
    return await arena.cluster()


def _stats(arena: Arena, p: Params) -> Body:
    return arena.metrics.stats.answer()


Answer = Callable[[Arena, Params], Body | Awaitable[Body]]  # awaitable: the O(n) digest and settlement
InCluster = Callable[[Forwarding, Body, Params], Awaitable[Body]]


@dataclass(frozen=True, slots=True)
class QueryRoute:
    """A public route served by `QueryRoutes`. A GET route answers HEAD too, and OPTIONS. ``name``
    labels its latency metric. ``cors`` False: never a CORS header, a preflight included (the
    contract's list of routes a browser page of another origin may read leaves it out).
    ``in_cluster``: in a cluster, what makes this node's answer the cluster's (never for a
    request a peer forwarded: that one asks about this node). ``at_once`` False: ``answer`` may
    return an awaitable (`QueryRoutes.answer_here` leaves the route to the async path)."""

    path: str
    method: str
    name: str
    answer: Answer
    cors: bool = True
    in_cluster: InCluster | None = None
    at_once: bool = True


_TABLE = openapi.TABLE + "/"

QUERY_ROUTES = (
    QueryRoute("/v1/boards", "GET", "boards", _boards, in_cluster=lambda forwarding, body, p: forwarding.boards(body, _page(p))),
    QueryRoute(openapi.PATH, "GET", "openapi", _openapi),
    QueryRoute("/v1/cluster", "GET", "cluster", _cluster, cors=False, at_once=False),
    QueryRoute(stats.PATH, "GET", "stats", _stats,
               in_cluster=lambda forwarding, body, p: stats.cluster_stats(forwarding, body, p.get("node"))),
    QueryRoute(_TABLE + "top", "GET", "top", _top),
    QueryRoute(_TABLE + "members/{member}", "GET", "member", _member),
    QueryRoute(_TABLE + "members", "POST", "members", _members),
    QueryRoute(_TABLE + "around/{member}", "GET", "around", _around),
    QueryRoute(_TABLE + "around", "GET", "around", _around),
    QueryRoute(_TABLE + "percentile/{member}", "GET", "percentile", _percentile),
    QueryRoute(_TABLE + "score_at_percentile", "GET", "score_at_percentile", _score_at_percentile),
    QueryRoute(_TABLE + "search", "GET", "search", _search),
    QueryRoute(_TABLE + "digest", "GET", "digest", _digest, at_once=False),
    QueryRoute(_TABLE + "periods", "GET", "periods", _periods),
    QueryRoute(_TABLE + "partitions", "GET", "partitions", _partitions),
    QueryRoute(_TABLE + "settlement", "GET", "settlement", _settlement, at_once=False),
    QueryRoute(_TABLE + "settlement/members/{member}", "GET", "settlement_member", _settlement, at_once=False),
)
"""The dispatcher's table: `match` reads it, and `QueryRoutes.routes` lists it."""



def _action(route: QueryRoute) -> tuple[str, bool]:
    """(action, with a member?): ("around", True) for /v1/boards/{board}/{period}/around/{member}."""
    action, _, member = route.path.removeprefix(_TABLE).partition("/")
    return action, member != ""


_EXACT = {r.path: r for r in QUERY_ROUTES if not r.path.startswith(_TABLE)}
_ACTIONS = {_action(r): r for r in QUERY_ROUTES if r.path.startswith(_TABLE)}

_JSON_HEADERS: Headers = [(b"content-type", b"application/json")]
_RETRY = (b"retry-after", RETRY_AFTER.encode())
_NOT_ALLOWED = {
    method: (wire.dumps({"error": {"code": "method_not_allowed", "message": message}}), [*_JSON_HEADERS, (b"allow", allow)])
    for method, message, allow in [
        ("GET", "query routes only answer GET", b"GET, HEAD, OPTIONS"),
        ("POST", "this route only answers POST", b"POST, OPTIONS"),
    ]
}


def match(path: str) -> tuple[QueryRoute, str, str, str | None] | None:
    """(route, board, period, member) for a public route's path, else None. O(len(path))."""
    route = _EXACT.get(path)
    if route is not None:
        return (route, "", "", None)
    if not path.startswith("/v1/boards/"):
        return None
    parts = path[11:].split("/", 3)
    if len(parts) < 3 or parts[1] == "members":  # /v1/boards/{board}/members/{member}/void is admin's
        return None
    route = _ACTIONS.get((parts[2], len(parts) == 4))
    if route is None:
        return None
    return (route, parts[0], parts[1], parts[3] if len(parts) == 4 else None)


class QueryRoutes:
    """The public routes as a bare ASGI app, with their CORS headers; any other request goes to
    ``app``. With no `cors_origins` the CORS cost is one look for an `Origin` header per request
    (a refused origin is logged once)."""

    def __init__(self, arena: Arena, app: Starlette) -> None:
        self.arena = arena
        self.app = app
        self.cors: Cors | None = app.state.cors
        self.refusals: Refusals = app.state.refusals
        self._max_body = arena.settings.max_frame_bytes  # a members body is a WebSocket frame's peer
        self._latency = {r.name: arena.metrics.query_latency_of(r.name) for r in QUERY_ROUTES}
        self.forwarding: Forwarding = app.state.forwarding

    async def close(self) -> None:
        """Stop following the boards served elsewhere (once no request needs them)."""
        if self.arena.live is not None and isinstance(self.arena.live.source, live.QuerySource):
            self.arena.live.source.close()
        await self.forwarding.close()

    def routes(self) -> list[tuple[str, str]]:
        """Every HTTP (path template, METHOD) served, these and ``app``'s; HEAD goes with GET."""
        served = [(r.path, r.method) for r in QUERY_ROUTES]
        for route in self.app.routes:
            if isinstance(route, Route):
                path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)  # {member:path} -> {member}
                served += [(path, method) for method in sorted(route.methods or ()) if method != "HEAD"]
        return served

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = match(scope["path"])
        if found is None:
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        reply = self._here(found, scope)
        if reply is not None:
            await _send(send, *reply, method)
            return
        route, board, period, member = found
        relayed = forwarded(scope)
        streams = route.name in _VIEWS and _wants_events(scope)
        allowed = self._cors(route, scope, relayed)
        headers = [*_JSON_HEADERS, *allowed] if allowed else _JSON_HEADERS
        place, refusal = await self._answering(board)
        if not relayed and not isinstance(place, Local) and not streams:
            here = await self._forward(board, scope, receive, send, allowed)
            if here is None:
                return
            receive = here
            place, refusal = await self._answering(board)
        started = time.perf_counter()
        if streams:
            await self._events(route, Params(board, period, member, scope["query_string"]), refusal, scope, receive,
                               send, allowed)
            return
        answered: Body | QueryError
        try:
            sent = await _body(receive, self._max_body) if method == "POST" else b""
            if sent is None:  # the client left
                return
            if refusal is not None:
                raise refusal
            params = Params(board, period, member, scope["query_string"], sent)
            body = route.answer(self.arena, params)
            if not isinstance(body, dict):
                body = await body
            if route.in_cluster is not None and self.forwarding.clustered and not relayed:
                body = await route.in_cluster(self.forwarding, body, params)
            answered = body
        except QueryError as exc:
            answered = exc
        await _send(send, *self._reply(route, answered, headers, started), method)

    def answer_here(self, scope: Scope) -> Reply | None:
        """The answer of an HTTP request (``scope``) that needs no wait, see `_here`; None for any
        other request (not a query route included)."""
        found = match(scope["path"])
        return None if found is None else self._here(found, scope)

    def _here(self, found: tuple[QueryRoute, str, str, str | None], scope: Scope) -> Reply | None:
        """The answer of a request on a query route (``found``: `match`'s) that needs no wait: a
        preflight, a 405, or a GET (HEAD) of a board served here and loaded, or of no board (a
        use of the board, `Arena.used`). None when it takes the async path of `__call__`: a POST,
        an event stream, a board elsewhere or to wait for (`waits`: loading, inactive, handed
        over), an answer that awaits (not `QueryRoute.at_once`) or a cluster's (``in_cluster``)."""
        route, board, period, member = found
        method = scope["method"]
        relayed = forwarded(scope)
        if method != route.method and (method != "HEAD" or route.method != "GET"):
            allowed = self._cors(route, scope, relayed)
            if method == "OPTIONS":
                return 204, b"", [] if self.cors is None or not route.cors else self.cors.preflight(scope)
            body, allow = _NOT_ALLOWED[route.method]
            return 405, body, [*allow, *allowed] if allowed else allow
        if (route.method != "GET" or not route.at_once or (route.name in _VIEWS and _wants_events(scope))
                or (route.in_cluster is not None and self.forwarding.clustered and not relayed)):
            return None
        place = where(self.arena, board)
        if not isinstance(place, Local):
            return None
        if place.handle is not None:
            if waits(self.arena, place.handle):
                return None
            self.arena.used(place.handle.name)
        allowed = self._cors(route, scope, relayed)
        started = time.perf_counter()
        answered: Body | QueryError
        try:
            result = route.answer(self.arena, Params(board, period, member, scope["query_string"]))
            assert isinstance(result, dict)  # an `at_once` route's
            answered = result
        except QueryError as exc:
            answered = exc
        return self._reply(route, answered, [*_JSON_HEADERS, *allowed] if allowed else _JSON_HEADERS, started)

    def _cors(self, route: QueryRoute, scope: Scope, relayed: bool) -> Headers:
        """The CORS headers of an answer on ``route`` (none for a route without CORS); a refused
        origin is logged once (`Refusals`), but for a request a peer forwarded."""
        if not route.cors:
            return []
        if not relayed:
            refused = refused_origin(self.cors, scope)
            if refused is not None:
                self.refusals.note(refused, scope["path"], "event stream" if _wants_events(scope) else "request")
        return [] if self.cors is None else self.cors.headers(scope)

    def _reply(self, route: QueryRoute, answered: Body | QueryError, headers: Headers, started: float) -> Reply:
        """The status, body and headers of ``answered`` (a 503 with `Retry-After`), its latency
        observed since ``started``."""
        if isinstance(answered, QueryError):
            body, status = wire.dumps(wire.error(answered)), answered.status
            if status == 503:
                headers = [*headers, _RETRY]
        else:
            body, status = wire.dumps(answered), 200
        self._latency[route.name](time.perf_counter() - started)
        return status, body, headers

    async def _answering(self, board: str) -> tuple[Place, QueryError | None]:
        """Where a request about ``board`` is answered, once a board served here answers
        (`answering`), and its refusal (answered 503 with `Retry-After`); a board elsewhere is
        waited for by its forwarding."""
        place = where(self.arena, board)
        if not isinstance(place, Local):
            return place, None
        try:
            return await answering(self.arena, board, QUERY_SECONDS), None
        except QueryError as exc:
            return place, exc

    async def _forward(self, board: str, scope: Scope, receive: Receive, send: Send,
                       cors: list[tuple[bytes, bytes]]) -> Receive | None:
        """Answer a request for a board served elsewhere with its owner's answer (and this
        node's CORS headers): None. When the board turned out to be served here, the request's
        `receive` to answer it here (its body replayed)."""
        method = scope["method"]
        try:
            sent = await _body(receive, self._max_body) if method == "POST" else b""
            if sent is None:  # the client left
                return None
            self.forwarding.count("queries")
            answer = await self.forwarding.ask(forward_request(board, scope, sent))
            if answer is None:
                return _replay(sent)
            if not isinstance(answer, HttpAnswer):
                raise refused(answer)
            status, body = answer.status, answer.body
            headers = [*((k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers), *cors]
        except QueryError as exc:
            body, status = wire.dumps(wire.error(exc)), exc.status
            headers = [*_JSON_HEADERS, *cors, _RETRY]  # forwarding fails only with 503 unavailable
        await _send(send, status, body, headers, method)
        return None

    async def _events(
        self, route: QueryRoute, params: Params, refusal: QueryError | None, scope: Scope, receive: Receive, send: Send,
        cors: list[tuple[bytes, bytes]]
    ) -> None:
        """A query route asked for ``text/event-stream`` (``refusal``: what `answering` its board
        raised): a view the query refuses is answered as the plain GET answers it; any other is
        streamed (not_ready, unavailable and an absent member are states of the stream)."""
        refused = refused_origin(self.cors, scope)
        if refused is not None:
            body, headers = refused_answer(refused)
            await _send(send, 403, body, [*_JSON_HEADERS, *headers], "GET")
            return
        if refusal is None and isinstance(where(self.arena, params.board), Local):
            try:
                route.answer(self.arena, params)
            except QueryError as exc:
                refusal = exc
        elif refusal is None:  # what the owner's query refuses
            refusal = await self.forwarding.error(forward_request(params.board, {**scope, "method": "GET"}, b""))
        if refusal is not None and refusal.code in live.REFUSED:
            await _send(send, refusal.status, wire.dumps(wire.error(refusal)), [*_JSON_HEADERS, *cors], "GET")
            return
        await live.event_stream(self.arena, scope, receive, send, _VIEWS[route.name](params), cors)


async def _body(receive: Receive, limit: int) -> bytes | None:
    """A request's body, or None if the client left first. Raises invalid_request past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise invalid_request(f"the body is larger than {limit} bytes (max_frame_bytes)")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    """A `receive` whose request body is ``body`` (already read)."""
    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}
    return receive


def _wants_events(scope: Scope) -> bool:
    return any(k == b"accept" and b"text/event-stream" in v for k, v in scope["headers"])


def _view(op: str, params: Params, **fields: Any) -> dict[str, Any]:
    view = {"op": op, "board": params.board, "period": params.period, **fields}
    for name in ("period_id", "partition"):
        value = params.get(name)
        if value is not None:
            view[name] = value
    return view


def _number(raw: str | None) -> int | float | None:
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return float(raw)


# The query routes that serve a live view as server-sent events, and the view each one asks for.
_VIEWS: dict[str, Callable[[Params], dict[str, Any]]] = {
    "top": lambda p: _view("top", p, limit=p.int("limit", 10), offset=p.int("offset", 0)),
    "member": lambda p: _view("rank", p, member=p.member),
    "around": lambda p: _view(
        "around", p, radius=p.int("radius", 5), **({"member": p.member} if p.member is not None else {"rank": p.int("rank")})
    ),
    "percentile": lambda p: _view("percentile", p, member=p.member),
    "score_at_percentile": lambda p: _view("score_at_percentile", p, p=_number(p.get("p"))),
}


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]], method: str) -> None:
    if status != 204:  # a 204 has no body and no Content-Length
        headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


DRAINING = QueryError("draining", "this node is shutting down: send new work to another node", 503)


async def readyz(request: Request) -> Response:
    arena: Arena = request.app.state.arena
    if arena.leaving:
        return error_response(DRAINING)
    boards = {name: arena.states.shown(name) for name in arena.states}
    body: Body = {"ready": arena.ready, "boards": boards}
    failures = {name: h.failure for name, h in arena.boards.items() if h.failure is not None}
    if failures:  # why a board failed (e.g. which journal file is corrupt), for the operator
        body["failures"] = failures
    return json_response(body, 200 if arena.ready else 503)


async def metrics(request: Request) -> Response:
    arena: Arena = request.app.state.arena
    return Response(arena.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
