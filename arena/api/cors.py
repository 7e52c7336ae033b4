"""CORS for the public routes (`[server] cors_origins`): which headers an answer or a preflight
carries for the request's `Origin`. Never `Access-Control-Allow-Credentials`: the public routes
take no credentials. Admin routes, `/v1/cluster` and `/v1/ws` never ask this module; `/v1/live`
and the event streams ask it whose `Origin` may open one (`refused_origin`).

A refused cross-origin request is hard to diagnose from a browser, which shows a generic error:
the server logs each refused origin once, with the path (`Refusals`), and the 403 of a live
stream lets that origin read why (`refused_answer`)."""

from __future__ import annotations

import logging

from starlette.types import Scope

from arena.api import wire

log = logging.getLogger("arena.cors")

Headers = list[tuple[bytes, bytes]]

_ALLOW_ORIGIN = b"access-control-allow-origin"
_VARY = (b"vary", b"Origin")
_PREFLIGHT = [(b"access-control-allow-methods", b"GET, POST"), (b"access-control-allow-headers", b"Content-Type")]


class Cors:
    """The CORS headers of one server's configured origins. Build with `Cors.of`: none at all
    when ``cors_origins`` is empty, so that the routes pay nothing then."""

    __slots__ = ("any", "_origins")

    def __init__(self, origins: tuple[str, ...]) -> None:
        self.any = origins == ("*",)
        self._origins = frozenset(origin.encode("latin-1") for origin in origins)

    @classmethod
    def of(cls, origins: tuple[str, ...]) -> Cors | None:
        return cls(origins) if origins else None

    def allows(self, origin: bytes) -> bool:
        return self.any or origin in self._origins

    def headers(self, scope: Scope) -> Headers:
        """For an answer: ``*``, or the request's `Origin` if listed. With a list, every answer
        says `Vary: Origin`, so that a cache keeps the answers of two origins apart. O(headers)."""
        if self.any:
            return [(_ALLOW_ORIGIN, b"*")]
        origin = _origin(scope)
        if origin is not None and origin in self._origins:
            return [(_ALLOW_ORIGIN, origin), _VARY]
        return [_VARY]

    def preflight(self, scope: Scope) -> Headers:
        """For an `OPTIONS` preflight: the answer's headers plus the methods and headers allowed,
        or no CORS header at all for an origin that is not allowed."""
        headers = self.headers(scope)
        if headers[0][0] != _ALLOW_ORIGIN:
            return headers
        return [*headers, *_PREFLIGHT]


def refused_origin(cors: Cors | None, scope: Scope) -> bytes | None:
    """The request's `Origin` when the browser that sent it may not read the answer: None for no
    `Origin` (not a browser), the server's own host and port (the console), or an allowed
    origin. A `/v1/live` handshake or an event stream from a refused origin gets 403. O(headers)."""
    if cors is not None and cors.any:
        return None
    origin = _origin(scope)
    if origin is None:
        return None
    host = next((bytes(v) for k, v in scope["headers"] if k == b"host"), None)
    if host is not None and origin.partition(b"://")[2] == host:
        return None
    return None if cors is not None and cors.allows(origin) else origin


def refused_answer(origin: bytes) -> tuple[bytes, Headers]:
    """The JSON body and the CORS headers of a live stream's 403 for ``origin``: the headers let
    that origin read the answer (it holds nothing but why), so that the browser shows the reason."""
    message = f"origin {origin.decode('latin-1')} may not open a live stream: it is not in [server] cors_origins"
    return wire.dumps({"error": {"code": "forbidden", "message": message}}), [(_ALLOW_ORIGIN, origin), _VARY]


class Refusals:
    """Logs each refused origin once (with the first path it asked), up to `MAX_LOGGED`
    origins: a hostile client sending random origins cannot fill the log or the memory."""

    MAX_LOGGED = 100

    __slots__ = ("_logged",)

    def __init__(self) -> None:
        self._logged: set[bytes] = set()

    def note(self, origin: bytes, path: str, what: str) -> None:
        if origin in self._logged or len(self._logged) >= self.MAX_LOGGED:
            return
        self._logged.add(origin)
        more = "" if len(self._logged) < self.MAX_LOGGED else " (no further refused origin is logged)"
        log.warning("cross-origin %s from %s to %s refused: the origin is not in [server] cors_origins%s",
                    what, origin.decode("latin-1"), path, more)


def _origin(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"origin":
            return bytes(value)
    return None
