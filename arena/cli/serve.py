"""Running Arena under uvicorn, with a shutdown that acks what it took before closing.

On SIGTERM/SIGINT: first /readyz answers 503 `draining` for `[server] drain_seconds` while
everything is still served, so a load balancer moves new work away; then, in a cluster, every
board is handed off to its next owner (connections still read, and forward); then connections
stop reading, finish and ack their in-flight frames, close with 1012; then uvicorn stops, the
actors drain their mailboxes and the journals close. A second signal forces the exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator, Sequence
from types import FrameType

import uvicorn
from starlette.routing import BaseRoute

from arena.api.app import create_app
from arena.api.http import QueryRoutes
from arena.api.service import Arena
from arena.api.transport import HttpProtocol, WebSocketProtocol

log = logging.getLogger("arena.server")

DRAIN_TIMEOUT_SECONDS = 15.0


def uvicorn_config(arena: Arena, host: str, port: int, access_log: bool = False,
                   extra_routes: Sequence[BaseRoute] = ()) -> uvicorn.Config:
    s = arena.settings
    return uvicorn.Config(
        create_app(arena, extra_routes),
        host=host,
        port=port,
        http=HttpProtocol,  # httptools, one write per connection and turn of the loop
        ws=WebSocketProtocol,  # websockets' sans-I/O protocol, abortable
        ws_max_size=s.max_frame_bytes,
        ws_per_message_deflate=False,  # loopback/LAN game servers: compression costs more CPU than it saves
        ws_ping_interval=s.ping_interval_seconds,
        ws_ping_timeout=s.ping_timeout_seconds,
        lifespan="off",
        log_config=None,
        access_log=access_log,
        timeout_graceful_shutdown=int(DRAIN_TIMEOUT_SECONDS),
    )


class ArenaServer(uvicorn.Server):
    """uvicorn.Server whose exit first drains Arena's connections."""

    def __init__(self, arena: Arena, config: uvicorn.Config, *, install_signal_handlers: bool = True) -> None:
        super().__init__(config)
        self.arena = arena
        self.install_signal_handlers = install_signal_handlers
        self._draining: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if not self.install_signal_handlers:
            yield
            return
        with super().capture_signals():
            yield

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        for sock in sockets or ():
            # asyncio sets TCP_NODELAY only on sockets made with proto IPPROTO_TCP; one made with
            # proto 0 would hold a live update behind the `subscribed` frame until the peer's
            # delayed ACK (40 ms). Accepted connections inherit the option from the listener.
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await super().serve(sockets)
        finally:
            app = self.config.app
            if isinstance(app, QueryRoutes):  # its connections to other nodes, once no request needs them
                await app.close()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Called from a signal handler: hop onto the loop; never re-raise the signal afterwards.
        if self._draining is not None or self._loop is None:
            self.force_exit = True
            self.should_exit = True
            return
        log.info("signal %d: draining connections", sig)
        self._loop.call_soon_threadsafe(self.begin_shutdown)

    def begin_shutdown(self) -> None:
        if self._draining is None:
            self._draining = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        self.arena.leaving = True
        drain_seconds = self.arena.settings.drain_seconds
        if drain_seconds:
            log.info("/readyz answers 503 draining for %gs before the node stops", drain_seconds)
            await asyncio.sleep(drain_seconds)  # a load balancer's health checks see it meanwhile
        await self.arena.drain()
        try:
            async with asyncio.timeout(DRAIN_TIMEOUT_SECONDS):
                while self.arena.connections:
                    await asyncio.sleep(0.02)
        except TimeoutError:
            log.warning("%d connections still open after %.0fs; closing them", self.arena.connections, DRAIN_TIMEOUT_SECONDS)
        self.should_exit = True

    async def shutdown_gracefully(self) -> None:
        """The signal path, for callers in the same loop (tests)."""
        self.begin_shutdown()
        assert self._draining is not None
        await self._draining


async def serve(arena: Arena, host: str, port: int, *, sock: socket.socket | None = None,
                access_log: bool = False, extra_routes: Sequence[BaseRoute] = ()) -> None:
    """Start the boards, serve until a signal, then stop everything in order. ``extra_routes``:
    see `create_app`."""
    await arena.start()
    server = ArenaServer(arena, uvicorn_config(arena, host, port, access_log, extra_routes))
    try:
        await server.serve(sockets=[sock] if sock else None)
    finally:
        await arena.stop()
        log.info("arena stopped")
