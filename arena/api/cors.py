"""CORS for the public routes (`[server] cors_origins`): which headers an answer or a preflight
carries for the request's `Origin`. Never `Access-Control-Allow-Credentials`: the public routes
take no credentials. Admin routes, `/v1/cluster` and `/v1/ws` never ask this module; `/v1/live`
and the event streams ask it whose `Origin` may open one (`live_allowed`)."""

from __future__ import annotations

from starlette.types import Scope

Headers = list[tuple[bytes, bytes]]

_ALLOW_ORIGIN = b"access-control-allow-origin"
_VARY = (b"vary", b"Origin")
_PREFLIGHT = [(b"access-control-allow-methods", b"GET, POST"), (b"access-control-allow-headers", b"Content-Type")]


class Cors:
    """The CORS headers of one server's configured origins. Build with `Cors.of`: none at all
    when ``cors_origins`` is empty, so that the routes pay nothing then."""

    __slots__ = ("_any", "_origins")

    def __init__(self, origins: tuple[str, ...]) -> None:
        self._any = origins == ("*",)
        self._origins = frozenset(origin.encode("latin-1") for origin in origins)

    @classmethod
    def of(cls, origins: tuple[str, ...]) -> Cors | None:
        return cls(origins) if origins else None

    def allows(self, origin: bytes) -> bool:
        return self._any or origin in self._origins

    def headers(self, scope: Scope) -> Headers:
        """For an answer: ``*``, or the request's `Origin` if listed. With a list, every answer
        says `Vary: Origin`, so that a cache keeps the answers of two origins apart. O(headers)."""
        if self._any:
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


def live_allowed(cors: Cors | None, scope: Scope) -> bool:
    """Whether a `/v1/live` handshake or an event stream may open: no `Origin` (not a browser),
    the server's own host and port (the console), or an allowed origin. O(headers)."""
    origin = _origin(scope)
    if origin is None:
        return True
    host = next((bytes(v) for k, v in scope["headers"] if k == b"host"), None)
    if host is not None and origin.partition(b"://")[2] == host:
        return True
    return cors is not None and cors.allows(origin)


def _origin(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"origin":
            return bytes(value)
    return None
