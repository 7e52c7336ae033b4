"""The starlette application of one Arena process."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import BaseRoute, WebSocketRoute

from arena.api import admin, http, testing, ws
from arena.service import Arena


def create_app(arena: Arena) -> Starlette:
    """Routes only; the caller starts and stops ``arena`` around the server (see arena.server)."""
    routes: list[BaseRoute] = [*http.routes, *admin.routes, WebSocketRoute("/v1/ws", ws.ingest)]
    if arena.fault_injection:
        routes += testing.routes
    app = Starlette(routes=routes)
    app.state.arena = arena
    return app
