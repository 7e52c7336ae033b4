"""One write per connection and turn of the event loop.

uvicorn writes an HTTP response in two `transport.write` calls (the head, then the body), and
uvloop sends each at once: two `send` syscalls a response, each with its wakeup of the reader on
loopback. That pair was about half the CPU of an HTTP rank request (docs/performance.md).
`CoalescingTransport` keeps a connection's writes until the end of the current turn of the loop
and sends them as one; a WebSocket connection whose acks of several frames are answered in one
turn gets one write for them too. `HttpProtocol` is uvicorn's httptools protocol on it, and sends
what it writes while it handles received bytes when it is done with them (no turn of the loop).

A GET its app can answer at once (`AnswersHere`: `arena.api.http.QueryRoutes.answer_here`, a
query of a board loaded here) is answered by `HttpProtocol` itself, in one write, where the
request is complete: no `RequestResponseCycle`, no ASGI task, no `send` messages (uvicorn's
Python around them was about a third of the server's CPU of an HTTP rank request,
docs/performance.md). The answer's bytes are those uvicorn writes for the same status, body and
headers (its `date` and `server` headers, `connection: close` when the connection is not kept
alive), and the response's end is uvicorn's (`on_response_complete`: the request counted, the
keep-alive timer, the next pipelined request; its timer is armed once per idle spell rather than
per response). Every other request is
uvicorn's: a request while another is in flight on the connection (pipelining), with a body or
`Expect`, an upgrade, past `limit_concurrency`, from a proxy (`X-Forwarded-For`) when there is an
access log (which logs the client it names), or while the peer does not read (flow control
paused writing: the ASGI path waits for it).

Both protocols (`HttpProtocol`, `WebSocketProtocol`) put `abort` in their requests' scope: a
connection whose peer reads nothing is dropped at once with what it still holds; a close would
keep the socket, and the kernel's send queue, until the peer reads.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from typing import Any, Protocol, cast, runtime_checkable

import httptools
from starlette.types import Scope
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

log = logging.getLogger("arena.http")

ABORT = "arena.abort"
"""The scope extension whose ``abort`` drops the request's connection."""


def abort(scope: Scope) -> None:
    """Drop the connection of the request ``scope`` at once, unsent bytes and all (RST, no FIN
    handshake): its socket is released now, not when the peer reads. Nothing under a server
    without `ABORT`."""
    extension = scope.get("extensions", {}).get(ABORT)
    if extension is not None:
        extension["abort"]()


class CoalescingTransport:
    """A transport whose writes within one turn of the event loop go out as one write, at the
    start of the next turn (`loop.call_soon`), or, between `hold` and `release` (a protocol's
    handling of the bytes it received), at `release`. Everything else is the wrapped transport's;
    `close` and `write_eof` send what is kept first, `abort` drops it. O(bytes) a turn."""

    __slots__ = ("_transport", "_loop", "_kept", "_holding")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._kept: list[bytes] | None = None
        self._holding = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        chunk = data if type(data) is bytes else bytes(data)  # the caller may reuse its buffer
        kept = self._kept
        if kept is None:
            self._kept = [chunk]
            if not self._holding:
                self._loop.call_soon(self._flush)
        else:
            kept.append(chunk)

    def hold(self) -> None:
        """Keep the writes until `release` (no turn of the loop for them)."""
        self._holding = True

    def release(self) -> None:
        """Send the writes kept since `hold` (and before it, in this turn) now."""
        self._holding = False
        self._flush()

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def _flush(self) -> None:
        kept = self._kept
        if kept is None:
            return
        self._kept = None
        if not self._transport.is_closing():
            self._transport.write(kept[0] if len(kept) == 1 else b"".join(kept))

    def get_write_buffer_size(self) -> int:
        kept = self._kept
        return self._transport.get_write_buffer_size() + (sum(map(len, kept)) if kept else 0)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._kept = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


Reply = tuple[int, bytes, list[tuple[bytes, bytes]]]
"""A response's status, body and headers but its content-length (the writer adds it)."""


@runtime_checkable
class AnswersHere(Protocol):
    def answer_here(self, scope: Scope) -> Reply | None:
        """The answer of the request ``scope`` if it needs no wait, else None (the ASGI path)."""


_BODY = frozenset({b"content-length", b"transfer-encoding"})
_BODY_OR_PROXIED = _BODY | {b"x-forwarded-for"}
"""With an access log: a proxy's request is logged with the client its proxy headers name
(uvicorn's middleware sets it on the ASGI path)."""


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol writing through a `CoalescingTransport` (a WebSocket upgraded
    from it keeps that transport), which answers a GET its app answers at once itself."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        app = self.config.app
        self._here = app if isinstance(app, AnswersHere) else None
        self._answered: tuple[Reply, bool] | None = None  # (the reply, keep-alive): written when the request is complete
        self._idle_since: float | None = None  # the loop's time at the last response's end; None: a request came since

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._coalescing = CoalescingTransport(transport, self.loop)
        super().connection_made(self._coalescing)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        """uvicorn's; what it writes meanwhile (answers at once) leaves as one write at the end."""
        transport = self._coalescing
        transport.hold()
        try:
            super().data_received(data)
        finally:
            transport.release()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        # uvicorn cancels the timer through `_unset_keepalive_if_required`, which here only marks
        # the connection busy (below): the timer is cancelled here, whatever ``exc``.
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope.setdefault("extensions", {})[ABORT] = {"abort": self.transport.abort}

    def on_headers_complete(self) -> None:
        """uvicorn's, which builds the request's `RequestResponseCycle` and starts its ASGI task,
        unless the app answers the request at once (`_answer_here`): then no cycle, no task."""
        if self._here is None or not self._at_once():
            super().on_headers_complete()
            return
        reply = self._answer_here(self._here)
        if reply is None:
            super().on_headers_complete()
            return
        self._answered = reply, self.parser.get_http_version() != "1.0" and self.parser.should_keep_alive()

    def _at_once(self) -> bool:
        """Whether the request whose headers are complete may be answered by the protocol: a GET
        without a body, `Expect` or upgrade, no other request in flight on the connection, the
        peer reading, under `limit_concurrency`."""
        cycle = self.cycle
        if (self.parser.get_method() != b"GET" or not (cycle is None or cycle.response_complete)
                or self.expect_100_continue or self.flow.write_paused or self.parser.should_upgrade()):
            return False
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            return False  # uvicorn's 503
        refused = _BODY_OR_PROXIED if self.access_log else _BODY
        return not any(name in refused for name, _ in self.headers)

    def _answer_here(self, here: AnswersHere) -> Reply | None:
        """The app's answer at once of the request, its scope completed as uvicorn's
        `on_headers_complete` completes it (which then does it again for a request left to the
        ASGI path)."""
        scope = cast(Scope, self.scope)
        scope["method"] = "GET"
        http_version = self.parser.get_http_version()
        if http_version != "1.1":
            scope["http_version"] = http_version
        parsed_url = httptools.parse_url(self.url)
        raw_path = parsed_url.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        scope["path"] = self.root_path + path
        scope["raw_path"] = self.root_path.encode("ascii") + raw_path
        scope["query_string"] = parsed_url.query or b""
        try:
            return here.answer_here(scope)
        except Exception:  # the ASGI path answers it again: a 500, and uvicorn logs why
            log.exception("answering %s at once failed", scope["path"])
            return None

    def on_message_complete(self) -> None:
        answered = self._answered
        if answered is None:
            super().on_message_complete()
            return
        self._answered = None
        (status, body, headers), keep_alive = answered
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content += (name, b": ", value, b"\r\n")
        for name, value in headers:
            content += (name, b": ", value, b"\r\n")
        content += (b"content-length: ", str(len(body)).encode(), b"\r\n")
        if not keep_alive:
            content.append(b"connection: close\r\n")
        content += (b"\r\n", body)
        if self.access_log:  # uvicorn's line
            scope = self.scope
            self.access_logger.info('%s - "%s %s HTTP/%s" %d', get_client_addr(scope), scope["method"],
                                    get_path_with_query_string(scope), scope["http_version"], status)
        self.transport.write(b"".join(content))
        if not keep_alive:
            self.transport.close()
        self.on_response_complete()

    # The keep-alive timer is uvicorn's (the connection closed once idle `timeout_keep_alive`
    # seconds after a response's end), armed once and pushed back when it fires early instead of
    # armed at each response's end and cancelled by the next request (1.3 µs a request).

    def on_response_complete(self) -> None:
        """uvicorn's, but the keep-alive timer: the idle time starts; the timer is armed unless it is."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._unset_keepalive_if_required()  # a pipelined request starts: not idle
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self._idle_since = self.loop.time()
        if self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def _unset_keepalive_if_required(self) -> None:
        """Data came: the connection is not idle (the timer finds it so)."""
        self._idle_since = None

    def timeout_keep_alive_handler(self) -> None:
        """Close the connection idle `timeout_keep_alive` seconds since the last response's end;
        armed again for what is left of them, or, after a request came, at its response's end."""
        self.timeout_keep_alive_task = None
        idle_since = self._idle_since
        if idle_since is None:
            return
        left = idle_since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self.timeout_keep_alive_task = self.loop.call_later(left, self.timeout_keep_alive_handler)
        else:
            super().timeout_keep_alive_handler()


class WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol with `ABORT` in its scope."""

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)  # the app's task starts on a later turn of the loop
        if self.handshake_initiated and self.response.status_code == 101:
            self.scope["extensions"][ABORT] = {"abort": self.transport.abort}
