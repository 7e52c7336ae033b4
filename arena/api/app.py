"""The starlette application of one Arena process."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, WebSocketRoute

from arena.api import admin, boards, console, http, live, peer, webhooks, ws
from arena.api.cors import Cors, Refusals
from arena.api.forward import Forwarding
from arena.api.http import json_response
from arena.api.service import Arena
from arena.cluster.peer.client import Peers
from arena.cluster.peer.protocol import PATH as PEER_PATH


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 answers in the contract's error shape."""
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    return json_response({"error": {"code": code, "message": str(exc.detail)}}, exc.status_code)


def create_app(arena: Arena, extra_routes: Sequence[BaseRoute] = ()) -> http.QueryRoutes:
    """Routes only; the caller starts and stops ``arena`` around the server (see arena.cli.serve).
    ``extra_routes`` are served beside Arena's own (their handlers find ``arena`` in
    ``request.app.state.arena``). `QueryRoutes.routes` lists every HTTP route it serves."""
    routes: list[BaseRoute] = [*http.routes, *admin.routes, *boards.routes, *webhooks.routes, *console.routes,
                               WebSocketRoute("/v1/ws", ws.ingest), WebSocketRoute("/v1/live", ws.live),
                               WebSocketRoute(PEER_PATH, peer.serve), *extra_routes]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.arena = arena
    app.state.cors = Cors.of(arena.settings.cors_origins)  # once: every request and handshake reads it
    app.state.refusals = Refusals()  # the refused origins logged so far
    cluster = arena.config.cluster
    peers = Peers(cluster.secret, cluster.lease_seconds, arena.settings.max_frame_bytes) if cluster else None
    app.state.forwarding = forwarding = Forwarding(arena, peers)
    arena.live = views = live.live_views(arena, ws.QUERY_OPS, forwarding)
    if arena.supervisor.activations is not None:  # a subscription keeps its board active
        arena.supervisor.activations.subscribed = lambda: {view.spec.fields["board"] for view in views.views.values()}
    app.state.routes = query_routes = http.QueryRoutes(arena, app)  # what a forwarded HTTP request goes through
    return query_routes
