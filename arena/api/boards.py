"""Admin routes for boards as data: create or change (`PUT /v1/boards/{board}`), read
(`GET /v1/boards/{board}/definition`) and retire (`DELETE /v1/boards/{board}`) a board at runtime.

A route checks the request, then the board's actor journals the change in the board's own
journal (`Redefine`, `Retire`: the owner's, forwarded there in a cluster), then the catalog of
API boards (`Arena.catalog`) records it, and the other nodes read it at their next beat (hinted
at once)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from arena.api.admin import admin_route
from arena.api.http import json_object, json_response
from arena.api.service import Arena
from arena.api.wire import Body
from arena.board.actor import BoardHandle
from arena.board.commands import Redefine, Retire
from arena.config import Admin, check_board_name, parse_board
from arena.errors import ConfigError, QueryError, invalid_request, not_found


def _managed_by_config(name: str) -> QueryError:
    return QueryError("managed_by_config", f"board {name!r} is declared in config.toml: change it there", 409)


def _retired(name: str) -> QueryError:
    return QueryError("board_retired", f"board {name!r} was retired; its name cannot be used again", 409)


def _stale(name: str, version: int) -> QueryError:
    return QueryError("precondition_failed", f"board {name!r} is at version {version}, not the one in If-Match", 412)


def _answer(handle: BoardHandle, managed_by: str) -> Body:
    return {"board": handle.name, "version": handle.version, "managed_by": managed_by, "retired": handle.retired,
            "definition": handle.spec.document()}


def _if_match(request: Request) -> int | None:
    raw = request.headers.get("if-match")
    if raw is None:
        return None
    try:
        return int(raw.strip().removeprefix("W/").strip('"'))
    except ValueError:
        raise invalid_request("If-Match must be a board version (an integer)") from None


async def _put(arena: Arena, admin: Admin, request: Request) -> Body | Response:
    name = request.path_params["board"]
    try:
        check_board_name(name)
        spec = parse_board(name, _definition(json_object(await request.body())))
    except ConfigError as exc:
        raise invalid_request(str(exc)) from None
    if name in arena.config.boards:
        raise _managed_by_config(name)
    expected = _if_match(request)
    await arena.sync_catalog()  # a board created or changed through another node
    handle = arena.boards.get(name)
    if handle is None:
        if expected is not None:
            raise _stale(name, 0)
        settings = arena.settings
        entry = await arena.catalog.create(name, spec.document_text(), settings.max_boards - len(arena.config.boards),
                                           settings.max_boards)
        await arena.serve_entry(entry)
        await arena.catalog_changed()
        return json_response(_answer(arena.boards[name], "api"), 201)
    if handle.retired:
        raise _retired(name)
    if expected is not None and expected != handle.version:
        raise _stale(name, handle.version)
    if spec.document_text() == handle.spec.document_text():
        return _answer(handle, "api")  # identical: nothing journaled
    await handle.command(Redefine(spec))
    changed = await arena.catalog.update(name, spec.document_text(), handle.version)
    if changed is None:
        raise _stale(name, handle.version)
    await arena.serve_entry(changed)
    await arena.catalog_changed()
    return _answer(handle, "api")


def _definition(body: dict[str, Any]) -> dict[str, Any]:
    """The body's definition: the keys of a ``[boards.NAME]`` table (a ``definition`` object
    around them, as `GET .../definition` answers, is taken too)."""
    inner = body.get("definition")
    return inner if isinstance(inner, dict) and set(body) <= {"definition", "board", "version", "managed_by", "retired"} else body


async def _get(arena: Arena, admin: Admin, request: Request) -> Body:
    name = request.path_params["board"]
    handle = arena.board(name)
    return _answer(handle, "config" if name in arena.config.boards else "api")


async def _delete(arena: Arena, admin: Admin, request: Request) -> Body:
    name = request.path_params["board"]
    if name in arena.config.boards:
        raise _managed_by_config(name)
    await arena.sync_catalog()
    handle = arena.boards.get(name)
    if handle is None:
        raise not_found("unknown_board", f"no board named {name!r}")
    if not handle.retired:
        await handle.command(Retire())
        entry = await arena.catalog.update(name, handle.spec.document_text(), handle.version, retired=True)
        if entry is None:
            raise _stale(name, handle.version)
        await arena.serve_entry(entry)
        await arena.catalog_changed()
    return _answer(handle, "api")


routes = [
    admin_route("/v1/boards/{board}", _put, "PUT"),
    admin_route("/v1/boards/{board}", _delete, "DELETE"),
    admin_route("/v1/boards/{board}/definition", _get, "GET"),
]
