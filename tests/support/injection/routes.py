"""Fault-injection routes, served beside Arena's own by the tests' servers (`support.server`,
`support.injection.serve`): pin the clock, crash a board's actor, make a board's journal writes
fail. The last two need the server's journals opened through `FaultyBackend`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from arena.api.admin import _json_object
from arena.api.http import error_response, json_response
from arena.api.service import Arena
from arena.board.commands import Barrier
from arena.board.state import BoardState
from arena.errors import QueryError, invalid_request, unavailable
from support.injection.journal import FAULTS, FaultyBackend


async def set_clock(request: Request) -> Response:
    """Pin the server clock: {"now_ms": int} or {"now_ms": null} to follow the wall clock. The
    answer waits until every ready board has closed what the new time makes due, so that the
    test's next request sees it (not only one that happens to arrive later)."""
    arena: Arena = request.app.state.arena
    try:
        now = (await _json_object(request)).get("now_ms")
        if now is not None and type(now) is not int:
            raise invalid_request("now_ms must be an integer or null")
    except QueryError as exc:
        return error_response(exc)
    arena.clock.set(now)
    for handle in arena.boards.values():
        if handle.state is BoardState.SERVING:
            await handle.command(Barrier())
    return json_response({"now_ms": arena.clock.now()})


def _faults(arena: Arena) -> FaultyBackend:
    assert isinstance(arena.backend, FaultyBackend), "a server with these routes opens its journals through FaultyBackend"
    return arena.backend


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
    _faults(arena).crash(handle.name, times)
    handle.mailbox.poke()
    return json_response({"board": handle.name, "crashes_pending": times})


async def journal_fault(request: Request) -> Response:
    """Make a board's journal writes fail like a full disk or a read-only file, or heal it:
    {"fault": "full" | "readonly" | null}. Reads and queries keep working."""
    arena: Arena = request.app.state.arena
    try:
        handle = arena.board(request.path_params["board"])
        fault = (await _json_object(request)).get("fault")
        if fault not in (*FAULTS, None):
            raise invalid_request('fault must be "full", "readonly" or null')
        if not _faults(arena).inject(handle.name, fault):
            raise unavailable(handle.name)
    except QueryError as exc:
        return error_response(exc)
    return json_response({"board": handle.name, "fault": fault})


async def hold_opens(request: Request) -> Response:
    """Make the writable opens of a board's journal wait, or release them: {"held": bool}."""
    arena: Arena = request.app.state.arena
    try:
        handle = arena.board(request.path_params["board"])
        held = (await _json_object(request)).get("held")
        if not isinstance(held, bool):
            raise invalid_request("held must be true or false")
    except QueryError as exc:
        return error_response(exc)
    _faults(arena).hold(handle.name, held)
    return json_response({"board": handle.name, "held": held})


routes = [
    Route("/v1/_test/clock", set_clock, methods=["POST"]),
    Route("/v1/_test/boards/{board}/crash", crash_board, methods=["POST"]),
    Route("/v1/_test/boards/{board}/journal", journal_fault, methods=["POST"]),
    Route("/v1/_test/boards/{board}/open", hold_opens, methods=["POST"]),
]
