"""Talking to Arena: the benchmark server (`bench_config` served by a child `arena serve`), and a
WebSocket client that pipelines submit frames and query ops (DESIGN.md "WebSocket ingest").
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from arena.config import Config, GameServer, JournalSettings, ServerSettings, parse_board
from loadtest.config_toml import write_config
from loadtest.ingest import AckError
from loadtest.process import ArenaServe, ServerFailed
from loadtest.workload import Event

PERIODS = ("alltime", "weekly", "daily")


@dataclass(frozen=True, slots=True)
class ArenaTarget:
    """Where the load goes. ``pid`` is known only for a server we started."""

    base_url: str  # http://127.0.0.1:PORT
    token: str
    board: str = "bench"
    max_batch: int = 1000
    min_value: int = 0
    max_value: int = 1_000_000_000
    pid: int | None = None
    store_pid: int | None = None
    """The journal's PostgreSQL server (its postmaster), when the benchmark started it: the CPU
    of its processes is counted as the store's."""

    @property
    def ws_url(self) -> str:
        return "ws" + self.base_url[4:] + "/v1/ws"


def bench_config(data_dir: Path, token: str, *, durability: str = "full", max_batch: int = 1000,
                 board: str = "bench", journal: JournalSettings | None = None) -> Config:
    """The load test's server: one game server (``token``, every board) and the benchmark board
    of the issue: best, desc, earliest, alltime+weekly+daily, UTC, values 0..1e9. No load
    balancer watches it: it stops without announcing a drain (drain_seconds 0)."""
    return Config(
        server=ServerSettings(host="127.0.0.1", data_dir=data_dir, durability=durability, max_batch=max_batch,
                              drain_seconds=0),
        servers=(GameServer("loadtest", hashlib.sha256(token.encode()).hexdigest(), ("*",)),),
        admins=(),
        boards={board: parse_board(board, {"aggregation": "best", "order": "desc", "tie": "earliest",
                                           "periods": list(PERIODS), "timezone": "UTC", "min_value": 0,
                                           "max_value": 1_000_000_000})},
        journal=journal or JournalSettings(),
    )


class ArenaServer:
    """``arena serve`` of `bench_config` in a child process, on a temp dir (kept with ``keep``);
    its journals in ``journal`` (default: sqlite in the temp dir), whose PostgreSQL server is
    ``store_pid`` when the benchmark started it."""

    def __init__(self, workdir: Path | None = None, *, durability: str = "full",
                 max_batch: int = 1000, board: str = "bench", keep: bool = False,
                 journal: JournalSettings | None = None, store_pid: int | None = None) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None and keep:
            workdir = Path(tempfile.mkdtemp(prefix="arena-loadtest-"))  # outlives this process
        elif workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="arena-loadtest-")
            workdir = Path(self._tmp.name)
        self.workdir = workdir
        self.keep = keep
        self.max_batch = max_batch
        self.board = board
        self.token = secrets.token_urlsafe(24)
        self.config = bench_config(workdir / "data", self.token, durability=durability, max_batch=max_batch,
                                   board=board, journal=journal)
        self.store_pid = store_pid
        self.config_path = workdir / "config.toml"
        self.child = ArenaServe(self.config_path)

    def write_config(self) -> Path:
        return write_config(self.config, self.config_path)

    def start(self, timeout: float = 120.0) -> ArenaTarget:
        """Start ``arena serve`` and wait for ``GET /readyz`` 200. Raises ServerFailed with the
        server's log if it exits or is not ready within ``timeout`` seconds."""
        if not self.config_path.exists():
            self.write_config()
        self.child.start(timeout)
        return ArenaTarget(base_url=self.child.url, token=self.token, board=self.board, max_batch=self.max_batch,
                           pid=self.child.pid, store_pid=self.store_pid)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait; SIGKILL after ``timeout``. Returns the exit code."""
        return self.child.stop(timeout)

    def cleanup(self) -> None:
        self.stop()
        if self._tmp is not None and not self.keep:
            self._tmp.cleanup()


def http_get_json(url: str, timeout: float = 10.0) -> tuple[int, Any]:
    """Blocking GET for setup and checks (not for load)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, orjson.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, orjson.loads(body)
        except orjson.JSONDecodeError:
            return exc.code, body.decode(errors="replace")


class ArenaWs:
    """One authenticated WebSocket connection with many frames in flight.

    ``submit`` sends a submit frame and returns a future of the per-event
    statuses; the reader checks that the ack has the frame's id, one result per
    event and the events' idempotency keys in order, or fails the future with
    AckError. ``request`` sends a query op and returns its answer frame.
    Compression is off by default: both ends would pay deflate on every frame.
    """

    def __init__(self, ws: ClientConnection, board: str) -> None:
        self.ws = ws
        self.board = board
        self._next_id = 0
        self._pending: dict[int, tuple[asyncio.Future[Any], list[Event] | None]] = {}
        self.stray: list[str] = []  # frames that matched nothing we sent
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, target: ArenaTarget, *, compression: bool = False) -> ArenaWs:
        """Connect and authenticate. Raises ServerFailed when the handshake is refused."""
        try:
            ws = await cls._connect(target, compression)
        except InvalidStatus as exc:
            raise ServerFailed(f"WebSocket handshake to {target.ws_url} refused: HTTP "
                               f"{exc.response.status_code} (wrong --token?)") from exc
        return cls(ws, target.board)

    @staticmethod
    async def _connect(target: ArenaTarget, compression: bool) -> ClientConnection:
        return await connect(
            target.ws_url,
            additional_headers={"Authorization": f"Bearer {target.token}"},
            compression="deflate" if compression else None,
            max_size=64 * 1024 * 1024,
            ping_interval=None,  # a busy server answering late must not look dead
            open_timeout=30,
            close_timeout=5,
            max_queue=256,
        )

    async def submit(self, events: list[Event]) -> asyncio.Future[list[str]]:
        self._next_id += 1
        frame_id = self._next_id
        board = self.board
        frame = orjson.dumps({
            "op": "submit",
            "id": frame_id,
            "events": [
                {"board": board, "member": m, "value": v, "occurred_at": t, "idempotency_key": k}
                for k, m, v, t in events
            ],
        })
        fut: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        self._pending[frame_id] = (fut, events)
        try:
            await self.ws.send(frame, text=True)
        except BaseException:  # not sent: nobody will wait for its ack
            self._pending.pop(frame_id, None)
            fut.cancel()
            raise
        return fut

    async def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send a query op (its ``id`` is set here) and wait for the answer frame."""
        self._next_id += 1
        frame_id = self._next_id
        frame["id"] = frame_id
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[frame_id] = (fut, None)
        await self.ws.send(orjson.dumps(frame), text=True)
        return await fut

    async def _read(self) -> None:
        exc: BaseException = ConnectionError("websocket closed")
        try:
            while True:
                raw = await self.ws.recv(decode=False)
                msg = orjson.loads(raw)
                frame_id = msg.get("id") if isinstance(msg, dict) else None
                entry = self._pending.pop(frame_id, None) if isinstance(frame_id, int) else None
                if entry is None:
                    if len(self.stray) < 20:
                        self.stray.append(raw[:300].decode(errors="replace"))
                    continue
                fut, events = entry
                if fut.done():
                    continue
                if events is None:
                    fut.set_result(msg)
                    continue
                try:
                    fut.set_result(self._check_ack(msg, events))
                except AckError as err:
                    fut.set_exception(err)
        except ConnectionClosed as closed:
            exc = ConnectionError(f"websocket closed: code={closed.rcvd.code if closed.rcvd else None} "
                                  f"reason={closed.rcvd.reason if closed.rcvd else ''}")
        except Exception as err:  # noqa: BLE001 - a bad frame from the server: fail everything in flight
            exc = err
        finally:
            for fut, _ in self._pending.values():
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, Exception) else ConnectionError(str(exc)))
            self._pending.clear()

    @staticmethod
    def _check_ack(msg: dict[str, Any], events: list[Event]) -> list[str]:
        if msg.get("op") != "ack":
            raise AckError(f"frame {msg.get('id')}: expected an ack, got op={msg.get('op')!r} "
                           f"code={msg.get('code')!r} message={msg.get('message')!r}")
        results = msg.get("results")
        if not isinstance(results, list) or len(results) != len(events):
            got = len(results) if isinstance(results, list) else type(results).__name__
            raise AckError(f"frame {msg.get('id')}: {len(events)} events but {got} results")
        keys = [r.get("idempotency_key") for r in results]
        if keys != [e[0] for e in events]:
            i = next(i for i, (r, e) in enumerate(zip(keys, events, strict=True)) if r != e[0])
            raise AckError(f"frame {msg.get('id')}: result {i} echoes key {keys[i]!r}, sent {events[i][0]!r}")
        return [s if (s := r["status"]) != "rejected" else f"rejected:{r.get('reason')}" for r in results]

    async def close(self) -> None:
        try:
            await self.ws.close()
        finally:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):  # noqa: BLE001, S110 - closing anyway
                pass
