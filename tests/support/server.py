"""Real Arena servers for tests: in-process (uvicorn on a free port, same event loop) or as a
child process (`arena serve`, for signals); both with the fault injection of `support.injection`
unless told otherwise. Plus a small WebSocket client, and the deadlines that keep a test from
hanging the run: `until` and `loop_turns_within`."""

from __future__ import annotations

import asyncio
import faulthandler
import hashlib
import inspect
import itertools
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

import httpx
import orjson
import websockets
from websockets.asyncio.client import ClientConnection

from arena.api.service import Arena
from arena.board.clock import Clock
from arena.cli.serve import ArenaServer, uvicorn_config
from arena.client import ArenaClient
from arena.config import Admin, ClusterSettings, Config, GameServer, JournalSettings, ServerSettings, Webhook, parse_board
from arena.engine.spec import BoardSpec
from arena.journal.datadir import DataDirLock
from loadtest.process import ArenaServe, free_socket
from support.injection import serve as injected
from support.injection.journal import FaultyBackend
from support.injection.routes import routes as fault_routes

ADMIN_TOKEN = "admin-token"


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_for(server_id: str) -> str:
    return f"token-{server_id}"


def make_config(
    data_dir: Path,
    boards: Mapping[str, BoardSpec | Mapping[str, Any]],
    servers: Mapping[str, Sequence[str]] | None = None,
    *,
    journal: JournalSettings | None = None,
    cluster: ClusterSettings | None = None,
    drain_seconds: float = 0.0,
    webhooks: Sequence[Webhook] = (),
    **settings: Any,
) -> Config:
    """A config with one token per server (`token_for(id)`) and one admin (`ADMIN_TOKEN`), its
    journals as ``journal`` says (sqlite in ``data_dir`` by default). A stopping server drains
    for ``drain_seconds`` (0: at once, but in the tests of draining)."""
    specs = {name: b if isinstance(b, BoardSpec) else parse_board(name, dict(b)) for name, b in boards.items()}
    game_servers = tuple(
        GameServer(sid, sha(token_for(sid)), tuple(scope)) for sid, scope in (servers or {"gs": ["*"]}).items()
    )
    return Config(
        server=ServerSettings(data_dir=data_dir, port=0, drain_seconds=drain_seconds, **settings),
        servers=game_servers,
        admins=(Admin("ops", sha(ADMIN_TOKEN)),),
        boards=specs,
        journal=journal or JournalSettings(),
        cluster=cluster,
        webhooks=tuple(webhooks),
    )


class InProcessServer:
    """`async with InProcessServer(config) as server:` — uvicorn serving Arena in this loop."""

    def __init__(self, config: Config, *, fault_injection: bool = True, wait_ready: bool = True,
                 now_ms: int | None = None) -> None:
        """``now_ms``: the server's clock is pinned there from its start (else it follows the
        wall clock until the clock route pins it)."""
        self.config = config
        self.now_ms = now_ms
        self.fault_injection = fault_injection
        self.wait_ready = wait_ready
        self.arena: Arena | None = None
        self._server: ArenaServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = DataDirLock(config.server.data_dir)  # as `arena serve`: creates the directory

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self, port: int = 0) -> None:
        """Start on a free port, or on ``port`` (a restart on the same address)."""
        sock = free_socket(port)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/v1/ws"
        self._lock.acquire()
        clock = Clock()
        if self.now_ms is not None:
            clock.set(self.now_ms)
        self.arena = Arena(self.config, clock=clock, wrap_backend=FaultyBackend if self.fault_injection else None)
        try:
            await self.arena.start()
        except BaseException:
            self._lock.release()
            raise
        extra_routes = fault_routes if self.fault_injection else ()
        self._server = ArenaServer(self.arena, uvicorn_config(self.arena, "127.0.0.1", self.port, extra_routes=extra_routes),
                                   install_signal_handlers=False)
        server, task = self._server, asyncio.create_task(self._server.serve(sockets=[sock]))
        self._task = task
        await until(lambda: server.started or task.done(), "uvicorn to start")
        if not server.started:
            raise AssertionError("uvicorn ended before it started") from task.exception()
        if self.wait_ready:
            await self.until_ready()

    @property
    def listeners(self) -> list[socket.socket]:
        """The sockets it listens on."""
        return [sock for server in (self._server.servers if self._server else []) for sock in server.sockets]

    async def until_ready(self, timeout: float = 30.0) -> None:
        arena = self.arena
        assert arena is not None
        await until(lambda: arena.ready, "the server to be ready", timeout)

    async def stop(self) -> None:
        """The SIGTERM path: drain connections, stop uvicorn, stop the actors."""
        if self._server is None or self._task is None:
            return
        await self._server.shutdown_gracefully()
        await self._task
        assert self.arena is not None
        await self.arena.stop()
        self._lock.release()
        self._server = None


class ChildServer(ArenaServe):
    """`arena serve` in a child process, with fault injection (`support.injection.serve`) unless
    ``fault_injection`` is False, for signals, restarts and faults; see `loadtest.process.ArenaServe`."""

    def __init__(self, config_path: Path, *, fault_injection: bool = True, env: Mapping[str, str] | None = None,
                 **options: Any) -> None:
        # the server imports arena_client.backoff: this tree's, as pytest's pythonpath gives the tests
        path = [str(injected.TESTS)] if fault_injection else []
        path += [os.environ.get("PYTHONPATH", ""), str(injected.TESTS.parent / "clients" / "python")]
        env = {**(env or {}), "PYTHONPATH": os.pathsep.join(filter(None, path))}
        if fault_injection:
            options["command"] = injected.SERVE
        super().__init__(config_path, env=env, **options)


def established(port: int) -> int:
    """How many ESTABLISHED TCP sockets have the local port ``port``: a server's side of its
    connections (from /proc/net/tcp and tcp6, so any process's)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            local, _, state = line.split()[1:4]
            count += state == "01" and int(local.rpartition(":")[2], 16) == port
    return count


async def until(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Poll ``condition`` (a function, or a coroutine function: then each poll is awaited) until
    it holds; fail the test after ``timeout`` seconds instead of hanging it."""
    deadline = time.monotonic() + timeout
    while True:
        holds = condition()
        if inspect.isawaitable(holds):
            holds = await holds
        if holds:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.005)


class LoopFrozen(BaseException):
    """Raised by `loop_turns_within` into the code that holds a frozen event loop. Not an
    Exception, so that no ``except Exception`` of the code under test takes it for its own error:
    it ends the task that froze the loop."""


@contextmanager
def loop_turns_within(seconds: float, what: str) -> Iterator[None]:
    """Inside the block, fail the test when the event loop stops turning for ``seconds`` (code
    that never awaits: no other task and no timeout runs, and the whole run would hang).

    The loop keeps a heartbeat; once a second a timer signal looks at it, and when it is stale
    dumps every thread's stack to stderr and raises `LoopFrozen` into the code that holds the
    loop. That task ends, the loop turns again, and the block fails with an AssertionError: this
    test fails, the run goes on. For a coroutine on the main thread (the signal is SIGALRM)."""
    loop = asyncio.get_running_loop()
    last_turn = time.monotonic()
    fired = False
    beat: asyncio.TimerHandle

    def turned() -> None:
        nonlocal last_turn, beat
        last_turn = time.monotonic()
        beat = loop.call_later(0.1, turned)

    def check(signum: int, frame: object) -> None:
        nonlocal fired
        if time.monotonic() - last_turn > seconds:
            if not fired:
                faulthandler.dump_traceback(all_threads=True)
            fired = True
            raise LoopFrozen(what)

    beat = loop.call_later(0.1, turned)
    previous = signal.signal(signal.SIGALRM, check)
    signal.setitimer(signal.ITIMER_REAL, 1.0, 1.0)
    failure: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        if not fired:
            raise
        failure = exc  # what the frozen task's end led to
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        beat.cancel()
    if fired:
        raise AssertionError(f"the event loop did not turn for {seconds:g}s: {what} (stacks on stderr)") from failure


async def clear_of_an_hour_boundary(margin_seconds: float = 90.0) -> None:
    """Wait until the wall clock is ``margin_seconds`` away from the turn of an hour on both sides,
    so that a test comparing the current tables across a restart (with events dated up to a minute
    back) sees the same windows before and after. Waits in about 5 % of runs."""
    into = time.time() % 3600
    if into < margin_seconds:
        await asyncio.sleep(margin_seconds - into)
    elif into > 3600 - margin_seconds:
        await asyncio.sleep(3600 - into + margin_seconds)


class Client:
    """A game server's WebSocket connection: numbered frames, answers matched by id."""

    _ids = itertools.count(1)

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._waiting: dict[object, asyncio.Future[dict[str, Any]]] = {}
        self.unmatched: list[dict[str, Any]] = []
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, ws_url: str, token: str, **kwargs: Any) -> Client:
        ws = await websockets.connect(ws_url, additional_headers={"Authorization": f"Bearer {token}"}, **kwargs)
        return cls(ws)

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                frame = orjson.loads(message)
                future = self._waiting.pop(frame.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(frame)
                else:
                    self.unmatched.append(frame)
        except websockets.ConnectionClosed:
            pass
        finally:
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(ConnectionError("connection closed"))

    def send(self, frame: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        """Send a frame (an id is assigned if missing); the future gets its answer."""
        frame = dict(frame)
        frame.setdefault("id", next(self._ids))
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self._reader.done():  # closed: no answer can come any more
            future.set_exception(ConnectionError("connection closed"))
            return future
        self._waiting[frame["id"]] = future
        sending = asyncio.ensure_future(self.ws.send(orjson.dumps(frame).decode()))
        sending.add_done_callback(lambda done: done.cancelled() or done.exception())  # a closed connection fails `future`
        return future

    async def request(self, frame: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        return await asyncio.wait_for(self.send(frame), timeout)

    async def submit(self, events: Sequence[Any], timeout: float = 10.0) -> list[dict[str, Any]]:
        answer = await self.request({"op": "submit", "events": list(events)}, timeout)
        assert answer["op"] == "ack", answer
        results: list[dict[str, Any]] = answer["results"]
        return results

    async def close(self) -> None:
        await self.ws.close()
        await self._reader


async def submit(server: InProcessServer, events: Sequence[Any], sid: str = "gs") -> list[dict[str, Any]]:
    """The results of ``events`` submitted over a WebSocket connection of the game server ``sid``."""
    client = await Client.connect(server.ws_url, token_for(sid))
    try:
        return await client.submit(events)
    finally:
        await client.close()


@dataclass
class Rig:
    """A real server on a pinned clock, with an HTTP client and an SDK client (`rig`)."""

    server: InProcessServer
    http: httpx.AsyncClient
    client: ArenaClient

    async def clock(self, now: int) -> None:
        assert (await self.http.post("/v1/_test/clock", json={"now_ms": now})).status_code == 200


R = TypeVar("R", bound=Rig)


@asynccontextmanager
async def rig(kind: type[R], config: Config) -> AsyncIterator[R]:
    """`async with rig(MyRig, config) as r:` — started, ready, and stopped afterwards."""
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        async with ArenaClient(server.url, token_for("gs")) as client:
            yield kind(server, http, client)


def now_ms() -> int:
    """The wall clock in epoch milliseconds, as a server's unpinned clock reads it."""
    return time.time_ns() // 1_000_000


def event(board: str, member: str, value: int, occurred_at: int | str, key: str, **extra: Any) -> dict[str, Any]:
    return {"board": board, "member": member, "value": value, "occurred_at": occurred_at, "idempotency_key": key, **extra}


def statuses(results: Sequence[Mapping[str, Any]]) -> list[str]:
    return [r["status"] if r["status"] != "rejected" else f"rejected:{r['reason']}" for r in results]

