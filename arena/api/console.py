"""`GET /console`: the operator's page, static files shipped in the package (`arena/console/`).

The files are read once, at import. Every answer carries a Content-Security-Policy that lets the
page load scripts, styles and images from this server only and talk to nothing else: no inline
script or handler runs, so a member name that slipped into the page as markup could still not
run code (the page renders names as text anyway).
"""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from arena.api.http import json_response

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _load() -> dict[str, tuple[bytes, str]]:
    found: dict[str, tuple[bytes, str]] = {}
    for item in files("arena.console").iterdir():
        suffix = "." + item.name.rpartition(".")[2]
        if item.is_file() and suffix in _TYPES:
            found[item.name] = (item.read_bytes(), _TYPES[suffix])
    return found


FILES = _load()


def _file(name: str) -> Response:
    found = FILES.get(name)
    if found is None:
        return json_response({"error": {"code": "not_found", "message": f"no console file named {name!r}"}}, 404)
    body, media_type = found
    return Response(body, media_type=media_type, headers=_HEADERS)


async def page(request: Request) -> Response:
    return _file("index.html")


async def asset(request: Request) -> Response:
    return _file(request.path_params["name"])


async def home(request: Request) -> Response:
    return RedirectResponse("/console")


routes = [
    Route("/", home, methods=["GET"]),
    Route("/console", page, methods=["GET"]),
    Route("/console/{name}", asset, methods=["GET"]),
]
