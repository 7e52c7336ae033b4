"""One write per connection and turn of the event loop.

uvicorn writes an HTTP response in two `transport.write` calls (the head, then the body), and
uvloop sends each at once: two `send` syscalls a response, each with its wakeup of the reader on
loopback. That pair was about half the CPU of an HTTP rank request (docs/performance.md).
`CoalescingTransport` keeps a connection's writes until the end of the current turn of the loop
and sends them as one; a WebSocket connection whose acks of several frames are answered in one
turn gets one write for them too. `HttpProtocol` is uvicorn's httptools protocol on it.

Both protocols (`HttpProtocol`, `WebSocketProtocol`) put `abort` in their requests' scope: a
connection whose peer reads nothing is dropped at once with what it still holds; a close would
keep the socket, and the kernel's send queue, until the peer reads.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import Scope
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

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
    start of the next turn (`loop.call_soon`). Everything else is the wrapped transport's; `close`
    and `write_eof` send what is kept first, `abort` drops it. O(bytes) a turn."""

    __slots__ = ("_transport", "_loop", "_kept")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._kept: list[bytes] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        chunk = data if type(data) is bytes else bytes(data)  # the caller may reuse its buffer
        kept = self._kept
        if kept is None:
            self._kept = [chunk]
            self._loop.call_soon(self._flush)
        else:
            kept.append(chunk)

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


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol writing through a `CoalescingTransport` (a WebSocket upgraded
    from it keeps that transport)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope.setdefault("extensions", {})[ABORT] = {"abort": self.transport.abort}


class WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol with `ABORT` in its scope."""

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)  # the app's task starts on a later turn of the loop
        if self.handshake_initiated and self.response.status_code == 101:
            self.scope["extensions"][ABORT] = {"abort": self.transport.abort}
