"""The HTTP "ceiling" peer: a bare ASGI app that answers every GET with one fixed
JSON body, served by uvicorn exactly as Arena is (1 process, uvloop, httptools,
no access log). Whatever Arena does above that — routing, the actor round
trip, serialising a real answer — shows as the gap to this app's req/s.

Run as ``python -m uvicorn loadtest.ceiling:app``; ``LOADTEST_CEILING_BYTES``
sets the body size (default: the size of a typical ``members/{member}`` answer).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import orjson

from loadtest.process import Child, http_ok

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]

DEFAULT_BODY_BYTES = 330


def make_body(size: int) -> bytes:
    """A JSON body shaped like a rank answer, padded to ``size`` bytes."""
    doc: dict[str, Any] = {
        "board": "bench", "period": "alltime", "period_id": "alltime", "start": None, "end": None,
        "closed": False, "size": 1000000,
        "entry": {"rank": 123456, "member": "p0123456", "score": 876543210,
                  "reached_at": "2026-12-02T13:00:00.000Z"},
        "pad": "",
    }
    base = len(orjson.dumps(doc))
    doc["pad"] = "x" * max(0, size - base)
    return orjson.dumps(doc)


BODY = make_body(int(os.environ.get("LOADTEST_CEILING_BYTES", DEFAULT_BODY_BYTES)))
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
_START = {"type": "http.response.start", "status": 200, "headers": _HEADERS}
_BODY = {"type": "http.response.body", "body": BODY}


async def app(scope: Scope, receive: Callable[[], Awaitable[Message]],
              send: Callable[[Message], Awaitable[None]]) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    await send(_START)
    await send(_BODY)


class CeilingServer(Child):
    """The ceiling app in its own uvicorn process on a free loopback port."""

    def __init__(self, body_bytes: int = DEFAULT_BODY_BYTES) -> None:
        super().__init__("the ceiling app")
        self.body_bytes = body_bytes
        self._tmp = tempfile.TemporaryDirectory(prefix="arena-ceiling-")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> str:
        """Start it and wait until it answers; returns its base URL. Raises ServerFailed."""
        root = str(Path(__file__).resolve().parent.parent)
        env = {"LOADTEST_CEILING_BYTES": str(self.body_bytes),
               "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}

        def spawn(port: int) -> None:
            argv = [sys.executable, "-m", "uvicorn", "loadtest.ceiling:app", "--host", "127.0.0.1",
                    "--port", str(port), "--loop", "uvloop", "--http", "httptools",
                    "--no-access-log", "--log-level", "warning", "--lifespan", "off"]
            self._spawn(argv, Path(self._tmp.name) / "ceiling.log", lambda: http_ok(self.base_url + "/"),
                        timeout=timeout, env=env)

        self._spawn_on(None, spawn)
        return self.base_url

    def cleanup(self) -> None:
        self.stop(15)
        self._tmp.cleanup()
