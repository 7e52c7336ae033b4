"""HTTP query routes: parse, ask `arena.api.queries`, serialise. No credentials (standings are public)."""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from arena.api import queries, wire
from arena.api.wire import Body
from arena.errors import QueryError, invalid_request
from arena.service import Arena

JSON = "application/json"


def json_response(body: Body, status: int = 200) -> Response:
    return Response(wire.dumps(body), status, media_type=JSON)


def error_response(exc: QueryError) -> Response:
    return json_response(wire.error(exc), exc.status)


def int_param(request: Request, name: str, default: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise invalid_request(f"{name} must be an integer") from None


def percent_param(request: Request, name: str) -> Fraction:
    raw = request.query_params.get(name)
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


def _route(path: str, name: str, answer: Callable[[Arena, Request], Body]) -> Route:
    """A GET route whose body comes from ``answer``; QueryError becomes the error body."""

    async def endpoint(request: Request) -> Response:
        arena: Arena = request.app.state.arena
        started = time.perf_counter()
        try:
            response = json_response(answer(arena, request))
        except QueryError as exc:
            response = error_response(exc)
        arena.metrics.queries.labels(name).observe(time.perf_counter() - started)
        return response

    return Route(path, endpoint, methods=["GET"], name=name)


def _board(request: Request) -> tuple[str, str, str | None]:
    p = request.path_params
    return p["board"], p["period"], request.query_params.get("period_id")


def _top(arena: Arena, request: Request) -> Body:
    limit = int_param(request, "limit", 10)
    offset = int_param(request, "offset", 0)
    assert limit is not None and offset is not None
    return queries.top(arena, *_board(request), limit, offset)


def _member(arena: Arena, request: Request) -> Body:
    return queries.member(arena, *_board(request), request.path_params["member"])


def _around_member(arena: Arena, request: Request) -> Body:
    radius = int_param(request, "radius", 5)
    assert radius is not None
    return queries.around(arena, *_board(request), request.path_params["member"], None, radius)


def _around_rank(arena: Arena, request: Request) -> Body:
    radius = int_param(request, "radius", 5)
    rank = int_param(request, "rank")
    assert radius is not None
    if rank is None:
        raise invalid_request("rank is required (or use /around/{member})")
    return queries.around(arena, *_board(request), None, rank, radius)


def _percentile(arena: Arena, request: Request) -> Body:
    return queries.percentile(arena, *_board(request), request.path_params["member"])


def _score_at_percentile(arena: Arena, request: Request) -> Body:
    return queries.score_at_percentile(arena, *_board(request), percent_param(request, "p"))


def _digest(arena: Arena, request: Request) -> Body:
    return queries.digest(arena, *_board(request))


def _periods(arena: Arena, request: Request) -> Body:
    return queries.periods(arena, request.path_params["board"], request.path_params["period"])


def _boards(arena: Arena, request: Request) -> Body:
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


_TABLE = "/v1/boards/{board}/{period}"

routes = [
    _route("/v1/boards", "boards", _boards),
    _route(_TABLE + "/top", "top", _top),
    _route(_TABLE + "/members/{member:path}", "member", _member),
    _route(_TABLE + "/around/{member:path}", "around_member", _around_member),
    _route(_TABLE + "/around", "around_rank", _around_rank),
    _route(_TABLE + "/percentile/{member:path}", "percentile", _percentile),
    _route(_TABLE + "/score_at_percentile", "score_at_percentile", _score_at_percentile),
    _route(_TABLE + "/digest", "digest", _digest),
    _route(_TABLE + "/periods", "periods", _periods),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
