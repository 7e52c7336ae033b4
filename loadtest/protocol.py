"""``python -m loadtest.protocol``: the Python CPU of an HTTP rank request without the kernel.

uvicorn's HTTP protocol (Arena's `HttpProtocol`, and uvicorn's own for the ceiling app of
`loadtest.ceiling`) driven in this process by raw request bytes on a fake transport, one
request at a time: the main thread's CPU a request, with no socket, no load generator and no
other process in the figure. ``--fixed`` replaces Arena's query by the ceiling's fixed answer:
what the protocol itself costs. Sides run in turns (``--rounds``) so that they see the same
machine; the load average is printed with each round.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from arena.api.http import QueryRoutes
from arena.api.service import Arena
from arena.api.transport import HttpProtocol
from arena.cli.main import GC_THRESHOLDS
from arena.cli.serve import uvicorn_config
from arena.engine.events import Event
from loadtest import ceiling
from loadtest.arena_client import bench_config

BOARD = "bench"


class Transport:
    """What uvicorn's HTTP protocol needs of a socket's transport: what it was given to write,
    kept (``written``), and whether it was closed."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)


def requests(members: int, count: int) -> list[bytes]:
    return [f"GET /v1/boards/{BOARD}/alltime/members/m{i % members} HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n\r\n".encode()
            for i in range(count)]


async def drive(protocol: HttpToolsProtocol, transport: Transport, sent: list[bytes]) -> float:
    """CPU seconds of the main thread to answer ``sent`` one at a time."""
    started = time.thread_time()
    for request in sent:
        transport.written.clear()
        protocol.data_received(request)
        while not transport.written:
            await asyncio.sleep(0)
    return time.thread_time() - started


def connected(protocol_class: type[HttpToolsProtocol], config: uvicorn.Config) -> tuple[HttpToolsProtocol, Transport]:
    if not config.loaded:
        config.load()
    state = ServerState()
    state.default_headers = [(b"date", b"Sun, 06 Dec 2026 19:00:00 GMT"), (b"server", b"uvicorn")]
    protocol = protocol_class(config=config, server_state=state, app_state={})
    transport = Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport


async def arena_side(members: int, count: int, fixed: bool) -> float:
    """µs of CPU a rank request answered by Arena's protocol, over a board of ``members``."""
    gc.set_threshold(*GC_THRESHOLDS)  # as in `arena serve`
    with tempfile.TemporaryDirectory(prefix="arena-protocol-") as tmp:
        arena = Arena(bench_config(Path(tmp), "token", durability="none"))
        await arena.start()
        try:
            now = arena.clock.now()
            handle = arena.boards[BOARD]
            await arena.activated(BOARD)
            for start in range(0, members, 1000):
                events = [Event(BOARD, f"m{i}", i, now, f"k{i}") for i in range(start, min(start + 1000, members))]
                await handle.submit(events, now, "loadtest")
            config = uvicorn_config(arena, "127.0.0.1", 0)
            app = config.app
            assert isinstance(app, QueryRoutes)
            if fixed:
                answer = (200, ceiling.BODY, [(b"content-type", b"application/json")])
                app.answer_here = lambda scope: answer  # type: ignore[method-assign]
            protocol, transport = connected(HttpProtocol, config)
            await drive(protocol, transport, requests(members, 2000))  # warm up
            seconds = await drive(protocol, transport, requests(members, count))
            assert transport.written.startswith(b"HTTP/1.1 200 OK\r\n")
            await app.close()
            return 1e6 * seconds / count
        finally:
            await arena.stop()


async def ceiling_side(count: int) -> float:
    """µs of CPU a request answered by the ceiling app on uvicorn's own protocol."""
    config = uvicorn.Config(ceiling.app, http="httptools", lifespan="off", log_config=None, access_log=False)
    protocol, transport = connected(HttpToolsProtocol, config)
    await drive(protocol, transport, requests(1, 2000))
    seconds = await drive(protocol, transport, requests(1, count))
    return 1e6 * seconds / count


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m loadtest.protocol", description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=20_000)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fixed", action="store_true", help="Arena's protocol with the ceiling's fixed answer")
    args = parser.parse_args()
    for round_ in range(1, args.rounds + 1):
        load = os.getloadavg()[0]
        arena_us = uvloop.run(arena_side(args.members, args.requests, args.fixed))
        ceiling_us = uvloop.run(ceiling_side(args.requests))
        print(f"round {round_} (load {load:.2f}): Arena{' (fixed answer)' if args.fixed else ''} {arena_us:.1f} µs"
              f" vs the ceiling {ceiling_us:.1f} µs a request = {arena_us / ceiling_us:.2f}", flush=True)


if __name__ == "__main__":
    main()
