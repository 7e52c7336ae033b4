"""Fault-injection routes, mounted only with `arena serve --fault-injection` (tests)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from arena.api.admin import _json_object
from arena.api.http import error_response, json_response
from arena.errors import QueryError, invalid_request
from arena.service import Arena


async def set_clock(request: Request) -> Response:
    """Pin the server clock: {"now_ms": int} or {"now_ms": null} to follow the wall clock."""
    arena: Arena = request.app.state.arena
    try:
        now = (await _json_object(request)).get("now_ms")
        if now is not None and type(now) is not int:
            raise invalid_request("now_ms must be an integer or null")
    except QueryError as exc:
        return error_response(exc)
    arena.clock.set(now)
    return json_response({"now_ms": arena.clock.now()})


async def crash_board(request: Request) -> Response:
    """Make a board's actor raise in its next ``times`` batches: {"times": int}."""
    arena: Arena = request.app.state.arena
    try:
        handle = arena.board(request.path_params["board"])
        times = (await _json_object(request)).get("times", 1)
        if type(times) is not int or times < 0:
            raise invalid_request("times must be a non-negative integer")
    except QueryError as exc:
        return error_response(exc)
    handle.crashes_pending = times
    handle.mailbox.poke()
    return json_response({"board": handle.name, "crashes_pending": times})


routes = [
    Route("/v1/_test/clock", set_clock, methods=["POST"]),
    Route("/v1/_test/boards/{board}/crash", crash_board, methods=["POST"]),
]
