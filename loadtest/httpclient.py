"""A tiny HTTP/1.1 keep-alive client on a raw asyncio Protocol.

One request at a time per connection (no pipelining): write ``GET``, read the
status line, headers and a ``Content-Length`` body. About 10x cheaper per
request than httpx, which matters because the load generator shares the two
cores with the server. Chunked bodies are not supported (neither Starlette's
JSON responses nor the ceiling app send them); a ``Connection: close`` answer
makes the next request reconnect.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit


class HttpError(Exception):
    """A response this client cannot read, or a connection that went away."""


class _HttpProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.need = -1  # total bytes of the response being read, once the head is parsed
        self.head_end = -1
        self.status = 0
        self.close_after = False
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or HttpError("connection closed by server")
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(HttpError(f"connection lost: {self.lost!r}"))

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        if self.waiter is None:
            return
        if self.need < 0:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buf[:end]).lower()
            try:
                self.status = int(head[9:12])
                i = head.find(b"\r\ncontent-length:")
                if i < 0:
                    raise HttpError(f"no content-length in response head: {head[:200]!r}")
                j = head.find(b"\r\n", i + 2)
                length = int(head[i + 17 : j if j >= 0 else len(head)])
            except (ValueError, HttpError) as exc:
                self.waiter.set_exception(HttpError(str(exc)))
                self.waiter = None
                if self.transport is not None:
                    self.transport.close()
                return
            self.close_after = b"\r\nconnection: close" in head
            self.head_end = end + 4
            self.need = end + 4 + length
        if len(buf) >= self.need:
            body = bytes(buf[self.head_end : self.need])
            del buf[: self.need]
            self.need = -1
            waiter, self.waiter = self.waiter, None
            waiter.set_result((self.status, body))


class HttpConnection:
    """One keep-alive connection to ``base_url`` (``http://host:port``)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"only http://host:port URLs are supported, not {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.host_header = f"{self.host}:{self.port}".encode()
        self._proto: _HttpProtocol | None = None

    async def _connect(self) -> _HttpProtocol:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(_HttpProtocol, self.host, self.port)
        self._proto = proto
        return proto

    def request_bytes(self, path: str | bytes) -> bytes:
        """The full request for ``path`` (already percent-encoded); precompute it
        once per target to keep the hot loop free of formatting."""
        p = path.encode() if isinstance(path, str) else path
        return b"GET " + p + b" HTTP/1.1\r\nHost: " + self.host_header + b"\r\n\r\n"

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Send a request made by ``request_bytes``; returns (status, body)."""
        proto = self._proto
        if proto is None or proto.lost is not None or proto.close_after:
            if proto is not None and proto.transport is not None:
                proto.transport.close()
            proto = await self._connect()
        assert proto.transport is not None
        waiter: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        proto.waiter = waiter
        proto.transport.write(request)
        return await waiter

    async def get(self, path: str) -> tuple[int, bytes]:
        return await self.send(self.request_bytes(path))

    def close(self) -> None:
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()
        self._proto = None
