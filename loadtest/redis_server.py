"""A private redis-server for the Redis peer: loopback, a free port, its own temp dir, AOF with
``appendfsync always`` (a reply only after its write is fsynced, like Arena's durability
``full``)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from loadtest.arena_client import free_port

REDIS_SERVER = "/usr/bin/redis-server"
INSTALL_HINT = "install it with: sudo apt-get install redis-server"


def redis_binary() -> str | None:
    path = REDIS_SERVER if os.path.exists(REDIS_SERVER) else shutil.which("redis-server")
    return path


class RedisServer:
    """A private redis-server: free loopback port, temp dir, AOF fsync always."""

    def __init__(self, binary: str, workdir: Path | None = None) -> None:
        self.binary = binary
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="arena-redis-peer-")
            workdir = Path(self._tmp.name)
        self.dir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.dir / "redis.log"

    def start(self, timeout: float = 20.0) -> None:
        cmd = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
               "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no",
               "--protected-mode", "yes", "--logfile", str(self.log_path)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                log = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
                raise RuntimeError(f"redis-server exited ({self.proc.returncode}): {err}{log[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"*1\r\n$4\r\nPING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer PING in time")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            if proc.stderr:
                proc.stderr.close()

    def cleanup(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
