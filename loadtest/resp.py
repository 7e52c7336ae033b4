"""A small RESP2 client on an asyncio Protocol (no redis-py in the hot path): any number of
commands in flight per connection, replies matched to them in order."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any


class RedisError(Exception):
    """An error reply (``-ERR ...``)."""


class _Incomplete(Exception):
    pass


def _parse(buf: bytearray, pos: int) -> tuple[Any, int]:
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise _Incomplete
    kind = buf[pos]
    if kind == 36:  # $ bulk string
        n = int(buf[pos + 1 : end])
        if n < 0:
            return None, end + 2
        stop = end + 2 + n
        if len(buf) < stop + 2:
            raise _Incomplete
        return bytes(buf[end + 2 : stop]), stop + 2
    if kind == 58:  # : integer
        return int(buf[pos + 1 : end]), end + 2
    if kind == 43:  # + simple string
        return bytes(buf[pos + 1 : end]), end + 2
    if kind == 45:  # - error
        return RedisError(buf[pos + 1 : end].decode(errors="replace")), end + 2
    if kind == 42:  # * array
        n = int(buf[pos + 1 : end])
        if n < 0:
            return None, end + 2
        items = []
        p = end + 2
        for _ in range(n):
            item, p = _parse(buf, p)
            items.append(item)
        return items, p
    raise RedisError(f"unexpected RESP type byte {kind!r}")


def encode_command(args: tuple[bytes | str | int, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n" % len(b))
        parts.append(b)
        parts.append(b"\r\n")
    return b"".join(parts)


Transform = Callable[[Any], Any] | None


class _RespProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiters: deque[tuple[asyncio.Future[Any], Transform]] = deque()
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = ConnectionError(f"redis connection lost: {exc!r}")
        while self.waiters:
            fut, _ = self.waiters.popleft()
            if not fut.done():
                fut.set_exception(self.lost)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        waiters = self.waiters
        while waiters:
            try:
                value, pos2 = _parse(buf, pos)
            except _Incomplete:
                break
            pos = pos2
            fut, transform = waiters.popleft()
            if fut.done():
                continue
            if isinstance(value, RedisError):
                fut.set_exception(value)
            elif transform is None:
                fut.set_result(value)
            else:
                try:
                    fut.set_result(transform(value))
                except Exception as exc:  # noqa: BLE001 - handed to the waiter
                    fut.set_exception(exc)
        if pos:
            del buf[:pos]


class RespConnection:
    """One Redis connection with any number of commands in flight."""

    def __init__(self, proto: _RespProtocol) -> None:
        self._proto = proto
        self._loop = asyncio.get_running_loop()

    @classmethod
    async def open(cls, port: int, host: str = "127.0.0.1") -> RespConnection:
        _, proto = await asyncio.get_running_loop().create_connection(_RespProtocol, host, port)
        return cls(proto)

    def command(self, *args: bytes | str | int, transform: Transform = None) -> asyncio.Future[Any]:
        """Write one command now; the future gets its (transformed) reply."""
        return self.pipeline([args], [transform])[0]

    def pipeline(self, commands: list[tuple[bytes | str | int, ...]],
                 transforms: list[Transform] | None = None) -> list[asyncio.Future[Any]]:
        """Write several commands in one write; one future per reply."""
        proto = self._proto
        if proto.lost is not None or proto.transport is None:
            raise proto.lost or ConnectionError("not connected")
        futs: list[asyncio.Future[Any]] = []
        for i, _ in enumerate(commands):
            fut: asyncio.Future[Any] = self._loop.create_future()
            proto.waiters.append((fut, transforms[i] if transforms else None))
            futs.append(fut)
        proto.transport.write(b"".join(encode_command(c) for c in commands))
        return futs

    async def call(self, *args: bytes | str | int) -> Any:
        return await self.command(*args)

    def close(self) -> None:
        if self._proto.transport is not None:
            self._proto.transport.close()
