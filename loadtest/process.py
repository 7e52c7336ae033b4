"""Servers in child processes on loopback ports, for the load tests and the tests: `arena serve`,
a private redis-server, the bare-uvicorn ceiling app. The one way to start such a child on a free
port, wait (with a deadline) until it answers, keep its output in a log file, signal and stop it.

`Child` is the process; `ArenaServe` runs ``python -m arena serve --config ... --port ...``;
`loadtest.redis_server.RedisServer` and `loadtest.ceiling.CeilingServer` are the other children.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ARENA = (sys.executable, "-m", "arena")
"""The command line of `arena` run by this interpreter."""


def arena_in(tree: Path) -> tuple[tuple[str, ...], dict[str, str]]:
    """The command line and environment that run the `arena` of the source tree ``tree`` (the
    directory holding its ``arena`` package) instead of the one this interpreter imports:
    ``$PYTHONPATH`` names it (and its ``clients/python``, where the server's `arena_client` lives),
    and ``-P`` keeps the working directory's ``arena`` from coming first."""
    return (sys.executable, "-P", "-m", "arena"), {"PYTHONPATH": os.pathsep.join([str(tree), str(tree / "clients" / "python")])}

_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an http_proxy

BIND_ATTEMPTS = 5
"""Free ports a child is started on before its bind failures fail the start (`Child._spawn_on`)."""


class ServerFailed(RuntimeError):
    """A server under test did not start (it exited, or did not answer in time) or refused us;
    the message carries the tail of its log."""


def free_socket(port: int = 0) -> socket.socket:
    """A TCP socket bound to a loopback port (a free one by default), for a server run in this
    process; ``port`` binds that one again (a restart on the same address)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def free_port() -> int:
    """A loopback port that was free a moment ago, for a child to bind."""
    with free_socket() as sock:
        return int(sock.getsockname()[1])


def wait_until(condition: Callable[[], object], what: str, timeout: float, interval: float = 0.05) -> None:
    """Poll ``condition`` every ``interval`` seconds until it holds. Raises TimeoutError after
    ``timeout`` seconds instead of hanging; whatever ``condition`` raises goes through."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def http_ok(url: str) -> bool:
    """True when a GET of ``url`` answers 200 within 2 s; False for another status or no answer."""
    try:
        with _LOOPBACK.open(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:  # refused, reset, timed out, or an HTTP error status
        return False


class Child:
    """A server in a child process, its stdout and stderr in one log file. Subclasses say how to
    start it (`_spawn` with its command line and readiness probe); the rest is the same for all."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    def _spawn(self, argv: Sequence[str], log_path: Path, ready: Callable[[], bool], *, timeout: float,
               env: Mapping[str, str] | None = None) -> None:
        """Run ``argv`` and wait until ``ready()``. Raises ServerFailed (with the log's tail) when
        the child exits first or is not ready after ``timeout`` seconds; then it is killed."""
        self.log_path = log_path
        with open(log_path, "wb") as log:  # the child has its own copy of the descriptor
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, **(env or {})})
        proc = self.proc

        def up() -> bool:
            if proc.poll() is not None:
                raise ServerFailed(f"{self.name} exited with code {proc.returncode} before it was ready.\n"
                                   f"command: {' '.join(argv)}\nlog:\n{self.log_tail()}")
            return ready()

        try:
            wait_until(up, f"{self.name} to answer", timeout)
        except TimeoutError as exc:
            self.kill()
            raise ServerFailed(f"{exc}.\ncommand: {' '.join(argv)}\nlog:\n{self.log_tail()}") from exc

    def _spawn_on(self, port: int | None, spawn: Callable[[int], None]) -> None:
        """``spawn(port)``, or on a free port when ``port`` is None. A free port is only free
        when `free_port` looks: another process (a parallel test run, an outgoing connection) may
        bind it before the child does. So a child that exits because its address is in use is
        started again on another free port, up to `BIND_ATTEMPTS` times. A given ``port`` (a
        restart on the same address) is never moved."""
        for attempt in range(1, BIND_ATTEMPTS + 1):
            self.port = free_port() if port is None else port
            try:
                spawn(self.port)
                return
            except ServerFailed:
                if port is not None or attempt == BIND_ATTEMPTS or "address already in use" not in self.log().lower():
                    raise

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        """Everything the child wrote so far."""
        return self.log_path.read_text(errors="replace") if self.log_path is not None else ""

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log().splitlines()[-lines:]) or "(log empty)"

    def signal(self, sig: int) -> None:
        assert self.proc is not None, "not started"
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 30.0) -> int:
        """The exit code; raises subprocess.TimeoutExpired after ``timeout`` seconds."""
        assert self.proc is not None, "not started"
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait, SIGKILL after ``timeout`` seconds. The exit code (None if never started)."""
        if self.proc is None:
            return None
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                return self.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL, and wait for the exit: nothing is left running."""
        if self.alive():
            self.signal(signal.SIGKILL)
            self.wait()


class ArenaServe(Child):
    """``python -m arena serve --config CONFIG --port PORT`` in a child process. Its log goes to
    ``serve-PORT.log`` beside the config file; ``url`` and ``ws_url`` are set by `start`.

    ``command`` is the program run instead of `arena`, with the same command line (the tests'
    server with fault injection); ``prefix`` runs it under another command (e.g. ``unshare`` for a
    private tmpfs); ``env`` is added to this process's environment."""

    def __init__(self, config_path: Path, *, command: Sequence[str] = ARENA, log_level: str | None = None,
                 serve_args: Sequence[str] = (), prefix: Sequence[str] = (),
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__("arena serve")
        self.config_path = config_path
        self.command = list(command)
        self.log_level = log_level
        self.serve_args = list(serve_args)
        self.prefix = list(prefix)
        self.env = env
        self.url = ""
        self.ws_url = ""

    def start(self, timeout: float = 60.0, port: int | None = None, *, ready: bool = True) -> None:
        """Start on ``port`` (default: a free one; give the old port to restart on the same
        address) and wait until ``/readyz`` answers 200, or only ``/healthz`` when not ``ready``
        (boards may be failed or loading). Raises ServerFailed."""
        self._spawn_on(port, lambda chosen: self._serve_on(chosen, timeout, ready))

    def _serve_on(self, port: int, timeout: float, ready: bool) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.ws_url = f"ws://127.0.0.1:{port}/v1/ws"
        argv = [*self.prefix, *self.command]
        if self.log_level is not None:
            argv += ["--log-level", self.log_level]
        argv += ["serve", "--config", str(self.config_path), "--port", str(port), *self.serve_args]
        probe = f"{self.url}/readyz" if ready else f"{self.url}/healthz"
        self._spawn(argv, self.config_path.parent / f"serve-{port}.log", lambda: http_ok(probe),
                    timeout=timeout, env=self.env)
