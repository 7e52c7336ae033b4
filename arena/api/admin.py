"""Admin routes (audit, disputes, whoami); they need the bearer token of an `[[admins]]` entry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from arena.api.forward import QUERY_SECONDS, Forwarding, forward_request, forwarded, refused
from arena.api.http import error_response, int_param, json_object, json_response
from arena.api.queries import MAX_AUDIT_LIMIT
from arena.api.routing import Local, answering, where
from arena.api.service import Arena
from arena.api.wire import Body
from arena.board.commands import VoidEvent, VoidMember, VoidOutcome
from arena.cluster.peer.protocol import HttpAnswer
from arena.config import Admin
from arena.engine.records import StoredEvent
from arena.engine.times import format_ms
from arena.errors import JournalError, QueryError, invalid_request, unavailable

AdminAnswer = Callable[[Arena, Admin, Request], Awaitable[Body | Response]]

UNAUTHORIZED = QueryError("unauthorized", "an admin bearer token is required", 401)


def admin_route(path: str, answer: AdminAnswer, method: str) -> Route:
    """A route of an admin's about one board (``{board}``): 401 without an admin token;
    forwarded to the board's owner when it is served elsewhere."""
    async def endpoint(request: Request) -> Response:
        arena: Arena = request.app.state.arena
        admin = arena.admin(request.headers.get("authorization"))
        if admin is None:
            return error_response(UNAUTHORIZED)
        forwarding: Forwarding = request.app.state.forwarding
        board = request.path_params["board"]
        if not forwarded(request.scope) and not isinstance(where(arena, board), Local):
            relayed = await _relay(forwarding, board, request)
            if relayed is not None:
                return relayed
        try:
            answered = await answer(arena, admin, request)
            return answered if isinstance(answered, Response) else json_response(answered)
        except QueryError as exc:
            return error_response(exc)
        except JournalError:
            return error_response(unavailable(request.path_params["board"]))

    return Route(path, endpoint, methods=[method])


async def _relay(forwarding: Forwarding, board: str, request: Request) -> Response | None:
    """The owner's answer to an admin request for a board served elsewhere; None when it turned
    out to be served here."""
    forwarding.count("admin")
    try:
        answer = await forwarding.ask(forward_request(board, request.scope, await request.body()))
        if answer is not None and not isinstance(answer, HttpAnswer):
            raise refused(answer)
    except QueryError as exc:
        return error_response(exc)
    if answer is None:
        return None
    response = Response(answer.body, answer.status)
    for name, value in answer.headers:
        response.headers[name] = value
    return response


def _event(e: StoredEvent) -> Body:
    body: Body = {
        "seq": e.seq,
        "member": e.member,
        "value": e.value,
        "occurred_at": format_ms(e.occurred_at),
        "received_at": format_ms(e.received_at),
        "source": e.source,
        "idempotency_key": e.idempotency_key,
        "meta": orjson.Fragment(e.meta) if e.meta is not None else None,  # the stored text, exactly
        "voided": None if e.voided is None else {
            "seq": e.voided.seq, "reason": e.voided.reason, "admin": e.voided.admin, "at": format_ms(e.voided.at)},
    }
    if e.region is not None:
        body["region"] = e.region
    return body


async def _json_object(request: Request) -> dict[str, Any]:
    return json_object(await request.body())


def _reason(body: dict[str, Any]) -> str:
    reason = body.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise invalid_request("reason must be a non-empty string")
    return reason


async def _audit(arena: Arena, admin: Admin, request: Request) -> Body:
    board = request.path_params["board"]
    handle = arena.board(board)
    member = request.query_params.get("member")
    if not member:
        raise invalid_request("member is required")
    limit = int_param(request.query_params.get("limit"), "limit", 100)
    before = int_param(request.query_params.get("before_seq"), "before_seq")
    assert limit is not None
    if not 1 <= limit <= MAX_AUDIT_LIMIT:
        raise invalid_request(f"limit must be between 1 and {MAX_AUDIT_LIMIT}")
    await answering(arena, board, QUERY_SECONDS)
    if handle.journal is None:
        raise unavailable(board)
    events = await handle.journal.member_events(member, limit, before)
    return {"board": board, "member": member, "events": [_event(e) for e in events]}


async def _void_event(arena: Arena, admin: Admin, request: Request) -> Body:
    board = request.path_params["board"]
    handle = arena.board(board)
    body = await _json_object(request)
    key = body.get("idempotency_key")
    if not isinstance(key, str) or not key:
        raise invalid_request("idempotency_key must be a non-empty string")
    outcome = await handle.command(VoidEvent(key, _reason(body), admin.id))
    assert isinstance(outcome, VoidOutcome)
    return {"board": board, "idempotency_key": key, "voided": outcome.voided, "already_voided": outcome.already_voided}


async def _void_member(arena: Arena, admin: Admin, request: Request) -> Body:
    board = request.path_params["board"]
    handle = arena.board(board)
    member = request.path_params["member"]
    outcome = await handle.command(VoidMember(member, _reason(await _json_object(request)), admin.id))
    assert isinstance(outcome, VoidOutcome)
    return {"board": board, "member": member, "voided": outcome.voided}


async def whoami(request: Request) -> Response:
    """`GET /v1/admin/whoami`: which admin a token is (the console checks a token as it is typed in)."""
    arena: Arena = request.app.state.arena
    admin = arena.admin(request.headers.get("authorization"))
    return error_response(UNAUTHORIZED) if admin is None else json_response({"admin": admin.id})


routes = [
    Route("/v1/admin/whoami", whoami, methods=["GET"]),
    admin_route("/v1/boards/{board}/events", _audit, "GET"),
    admin_route("/v1/boards/{board}/void", _void_event, "POST"),
    admin_route("/v1/boards/{board}/members/{member:path}/void", _void_member, "POST"),
]
