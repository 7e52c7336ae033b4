"""A webhook receiver for tests: a small HTTP/1.1 server on a free port of 127.0.0.1 that records
every POST it reads (headers, body) and answers as told: 200, 500, never (a hang, until the
client gives up), or not at all (stopped: connections refused, then started again on its port)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from arena_client import verify_signature


@dataclass(frozen=True)
class Received:
    delivery: str
    headers: dict[str, str]
    body: bytes
    status: int
    """What the receiver answered (0: nothing, it hung)."""


@dataclass
class Receiver:
    answer: int = 200
    """The status to answer; 0: hang."""
    fail_first: int = 0
    """Answer 500 to this many requests before following ``answer``."""
    received: list[Received] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None
    _hanging: set[asyncio.Task[None]] = field(default_factory=set)
    _release: asyncio.Event = field(default_factory=asyncio.Event)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/arena"

    async def start(self) -> Receiver:
        self._release = asyncio.Event()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Down: stop listening and drop every connection (a hung request too)."""
        self._release.set()
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):  # kept-alive connections too
                writer.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                status = 500 if self.fail_first > 0 else self.answer
                self.fail_first = max(0, self.fail_first - 1)
                self.received.append(Received(headers.get("arena-delivery", ""), headers, body, status))
                if status == 0:
                    await self._release.wait()
                    return
                writer.write(f"HTTP/1.1 {status} X\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nno".encode()
                             if status >= 300 else f"HTTP/1.1 {status} OK\r\ncontent-length: 0\r\n\r\n".encode())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    def delivered(self) -> dict[str, list[Received]]:
        """The requests answered 2xx, by delivery id."""
        out: dict[str, list[Received]] = {}
        for r in self.received:
            if 200 <= r.status < 300:
                out.setdefault(r.delivery, []).append(r)
        return out

    def check(self, secrets: str | list[str]) -> None:
        """Every request carries a valid signature, and one delivery id always the same body."""
        bodies: dict[str, bytes] = {}
        for r in self.received:
            assert verify_signature(secrets, r.headers, r.body), f"bad signature on {r.delivery}"
            assert bodies.setdefault(r.delivery, r.body) == r.body, f"two bodies for {r.delivery}"
