"""`GET /v1/settlements`: the settlement feed, the settlement log (`Arena.settlement_log`) read
by a game backend with its last cursor (DESIGN.md "The settlement feed"). A game server sees the
boards it may write, matched now (boards created later match too), an admin every board. The
log is shared by a cluster: any node answers, nothing is forwarded."""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from arena.api.http import error_response, int_param, json_response
from arena.api.queries import FEED_LIMIT, MAX_FEED_LIMIT, check_range
from arena.api.service import Arena
from arena.errors import JournalError, QueryError

log = logging.getLogger("arena")

PATH = "/v1/settlements"
UNAUTHORIZED = QueryError("unauthorized", "a game server's or an admin's bearer token is required", 401)
UNAVAILABLE = QueryError("unavailable", "the settlement log cannot be read now; try again", 503)


def _readable(arena: Arena, authorization: str | None) -> Callable[[str], bool] | None:
    """Which boards' items the bearer of ``authorization`` may read; None: no valid token."""
    server = arena.game_server(authorization)
    if server is not None:
        return server.may_write
    return None if arena.admin(authorization) is None else (lambda _board: True)


async def settlements(request: Request) -> Response:
    arena: Arena = request.app.state.arena
    boards = _readable(arena, request.headers.get("authorization"))
    if boards is None:
        return error_response(UNAUTHORIZED)
    params = request.query_params
    try:
        after = int_param(params.get("after"), "after", 0)
        limit = int_param(params.get("limit"), "limit", FEED_LIMIT)
        assert after is not None and limit is not None  # they have defaults
        check_range("after", after, 0)
        check_range("limit", limit, 1, MAX_FEED_LIMIT)
        items = await arena.settlement_log.after(after, limit, boards)
    except QueryError as exc:
        return error_response(exc)
    except JournalError as exc:
        log.warning("GET %s: %s", PATH, exc)
        return error_response(UNAVAILABLE)
    arena.metrics.feed_items.inc(len(items))
    return json_response({"items": [item.as_json() for item in items], "next": items[-1].cursor if items else after})


routes = [Route(PATH, settlements, methods=["GET"])]
