"""HTTP query routes: parse, ask `arena.api.queries`, serialise. No credentials (standings are public).

The public GET routes are served by `QueryRoutes`, a small ASGI dispatcher in front of the
starlette app: on these routes, which dominate traffic, starlette's router, middleware and
Request/Response objects cost more than the query itself (measured: about 2x the time of a
bare ASGI app). Everything else (admin, health, metrics, WebSocket) is plain starlette.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any
from urllib.parse import unquote_plus

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from arena.api import live, queries, wire
from arena.api.wire import Body
from arena.errors import QueryError, invalid_request
from arena.service import Arena

JSON = "application/json"


def json_response(body: Body, status: int = 200) -> Response:
    return Response(wire.dumps(body), status, media_type=JSON)


def error_response(exc: QueryError) -> Response:
    return json_response(wire.error(exc), exc.status)


def int_param(raw: str | None, name: str, default: int | None = None) -> int | None:
    """A query parameter as an int (``default`` when absent). Raises QueryError invalid_request."""
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise invalid_request(f"{name} must be an integer") from None


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


def _unquote(text: str) -> str:
    return unquote_plus(text, encoding="utf-8", errors="replace") if "%" in text or "+" in text else text


class Params:
    """A query route's path parts and query string, parsed once."""

    __slots__ = ("board", "period", "member", "_query")

    def __init__(self, board: str, period: str, member: str | None, query_string: bytes) -> None:
        self.board = board
        self.period = period
        self.member = member
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
    def table(self) -> tuple[str, str, str | None]:
        return self.board, self.period, self._query.get("period_id")

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


def _digest(arena: Arena, p: Params) -> Awaitable[Body]:
    return queries.digest(arena, *p.table)


def _periods(arena: Arena, p: Params) -> Body:
    return queries.periods(arena, p.board, p.period)


Answer = Callable[[Arena, Params], Body | Awaitable[Body]]  # awaitable: the O(n) digest

# /v1/boards/{board}/{period}/{action}[/{member}]: action -> (metric route name, answer, member?)
# member: True = required, None = optional, False = none.
_ACTIONS: dict[str, tuple[str, Answer, bool | None]] = {
    "top": ("top", _top, False),
    "members": ("member", _member, True),
    "around": ("around", _around, None),
    "percentile": ("percentile", _percentile, True),
    "score_at_percentile": ("score_at_percentile", _score_at_percentile, False),
    "digest": ("digest", _digest, False),
    "periods": ("periods", _periods, False),
}

_JSON_HEADERS = [(b"content-type", b"application/json")]
_ALLOW_HEADERS = [*_JSON_HEADERS, (b"allow", b"GET, HEAD")]
_NOT_ALLOWED = wire.dumps({"error": {"code": "method_not_allowed", "message": "query routes only answer GET"}})


def match(path: str) -> tuple[str, Answer, str, str, str | None] | None:
    """(route name, answer, board, period, member) for a query route path, else None. O(len(path))."""
    if path == "/v1/boards":
        return ("boards", _boards, "", "", None)
    if not path.startswith("/v1/boards/"):
        return None
    parts = path[11:].split("/", 3)
    if len(parts) < 3 or parts[1] == "members":  # /v1/boards/{board}/members/{member}/void is admin's
        return None
    action = _ACTIONS.get(parts[2])
    if action is None:
        return None
    name, answer, takes_member = action
    member = parts[3] if len(parts) == 4 else None
    if (takes_member is True and member is None) or (takes_member is False and member is not None):
        return None
    return (name, answer, parts[0], parts[1], member)


class QueryRoutes:
    """The public GET routes as a bare ASGI app; any other request goes to ``app``."""

    def __init__(self, arena: Arena, app: ASGIApp) -> None:
        self.arena = arena
        self.app = app
        names = ["boards", *(name for name, _answer, _member in _ACTIONS.values())]
        self._latency = {name: arena.metrics.queries.labels(name) for name in names}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = match(scope["path"])
        if route is None:
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        if method not in ("GET", "HEAD"):
            await _send(send, 405, _NOT_ALLOWED, _ALLOW_HEADERS, method)
            return
        name, answer, board, period, member = route
        started = time.perf_counter()
        params = Params(board, period, member, scope["query_string"])
        if name in _VIEWS and _wants_events(scope):
            await self._events(name, answer, params, receive, send, method)
            return
        try:
            answered = answer(self.arena, params)
            if not isinstance(answered, dict):
                answered = await answered
            body, status = wire.dumps(answered), 200
        except QueryError as exc:
            body, status = wire.dumps(wire.error(exc)), exc.status
        self._latency[name].observe(time.perf_counter() - started)
        await _send(send, status, body, _JSON_HEADERS, method)


    async def _events(self, name: str, answer: Answer, params: Params, receive: Receive, send: Send, method: str) -> None:
        """A query route asked for ``text/event-stream``: a view the query refuses is answered as
        the plain GET answers it; any other is streamed (not_ready, unavailable and an absent
        member are states of the stream)."""
        try:
            answer(self.arena, params)
            view = _VIEWS[name](params)
        except QueryError as exc:
            if exc.code in live.REFUSED:
                await _send(send, exc.status, wire.dumps(wire.error(exc)), _JSON_HEADERS, method)
                return
            view = _VIEWS[name](params)
        await live.event_stream(self.arena, receive, send, view)


def _wants_events(scope: Scope) -> bool:
    return any(k == b"accept" and b"text/event-stream" in v for k, v in scope["headers"])


def _view(op: str, params: Params, **fields: Any) -> dict[str, Any]:
    view = {"op": op, "board": params.board, "period": params.period, **fields}
    period_id = params.get("period_id")
    return view if period_id is None else {**view, "period_id": period_id}


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
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [*headers, (b"content-length", str(len(body)).encode())],
    })
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


def _boards(arena: Arena, p: Params) -> Body:
    return queries.boards(arena)


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


async def readyz(request: Request) -> Response:
    arena: Arena = request.app.state.arena
    boards = {name: h.state.value for name, h in arena.boards.items()}
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
