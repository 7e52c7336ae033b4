"""A private redis-server for the Redis peer: loopback, a free port, its own temp dir, AOF with
``appendfsync always`` (a reply only after its write is fsynced, like Arena's durability
``full``)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

from loadtest.process import Child

REDIS_SERVER = "/usr/bin/redis-server"
INSTALL_HINT = "install it with: sudo apt-get install redis-server"


def redis_binary() -> str | None:
    """The redis-server to run, or None when it is not installed."""
    return REDIS_SERVER if os.path.exists(REDIS_SERVER) else shutil.which("redis-server")


def answers_ping(port: int) -> bool:
    """True when the Redis on ``port`` answers PING with PONG."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer(Child):
    """redis-server in a child process; its log is ``redis.log`` in its directory."""

    def __init__(self, binary: str, workdir: Path | None = None) -> None:
        super().__init__("redis-server")
        self.binary = binary
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="arena-redis-peer-")
            workdir = Path(self._tmp.name)
        self.dir = workdir

    def start(self, timeout: float = 20.0) -> None:
        """Start it and wait until it answers PING. Raises ServerFailed."""
        def spawn(port: int) -> None:
            argv = [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                    "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no",
                    "--protected-mode", "yes"]
            self._spawn(argv, self.dir / "redis.log", lambda: answers_ping(port), timeout=timeout)

        self._spawn_on(None, spawn)

    def cleanup(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
