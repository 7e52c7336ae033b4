"""Helpers of the fault-injection tests (tests/faults): config files for child servers
(`support.server.ChildServer`), and read-only looks at what the server journaled and answers
(the journal on either backend, digests, offline rebuild, metrics, memory)."""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import re
import select
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import websockets
from websockets.frames import Frame, Opcode

from arena.config import JournalSettings
from arena.engine.times import parse_rfc3339_ms
from loadtest import config_toml
from support import postgres
from support.arena_cli import arena, rebuild_digests
from support.server import ADMIN_TOKEN, make_config, now_ms, token_for

Fingerprint = tuple[str, int, int]
TableId = tuple[str, str, str]
"""(board, period, period_id)"""


def rounds(default: int) -> int:
    """How many rounds a long fault test runs: ``$ARENA_FAULT_ROUNDS`` or ``default``."""
    return int(os.environ.get("ARENA_FAULT_ROUNDS", default))


def seed() -> int:
    return int(os.environ.get("ARENA_FAULT_SEED", "20261202"))


def write_config(
    directory: Path,
    boards: Mapping[str, Mapping[str, Any]],
    servers: Mapping[str, Sequence[str]] | None = None,
    *,
    data_dir: Path | None = None,
    **settings: Any,
) -> Path:
    """``directory/config.toml`` of `make_config` for a child server: data in ``directory/data``
    unless ``data_dir``; tokens are `token_for(id)` and `ADMIN_TOKEN`."""
    config = make_config(data_dir or directory / "data", boards, servers, **settings)
    return config_toml.write_config(config, directory / "config.toml")


# -- what the journal holds (read-only, like `arena verify`) -------------------------------------


def journal_file(data_dir: Path, board: str) -> Path:
    return data_dir / f"{board}.journal.sqlite"


def open_readonly(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def journaled(data_dir: Path, board: str) -> dict[str, Fingerprint]:
    """idempotency_key -> (member, value, occurred_at) of every score event in a board's journal."""
    db = open_readonly(journal_file(data_dir, board))
    try:
        rows = db.execute("SELECT idempotency_key, member, value, occurred_at FROM score_event").fetchall()
    finally:
        db.close()
    return {key: (member, value, occurred_at) for key, member, value, occurred_at in rows}


async def stored(journal: JournalSettings, data_dir: Path, board: str) -> dict[str, Fingerprint]:
    """`journaled` on either backend: read from the sqlite file in ``data_dir``, or from the
    tables of ``journal``'s schema."""
    if journal.backend == "sqlite":
        return journaled(data_dir, board)
    assert journal.url is not None
    return await postgres.journaled(journal.url, journal.schema, board)


async def audited(url: str, board: str, members: Sequence[str]) -> list[dict[str, Any]]:
    """Every journaled event of ``members`` on ``board``, as the admin audit route lists them
    (page by page, newest first), with ``occurred_at`` as epoch milliseconds."""
    found: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=url, timeout=30, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as http:
        for member in members:
            before: int | None = None
            while True:
                params: dict[str, Any] = {"member": member, "limit": 1000}
                if before is not None:
                    params["before_seq"] = before
                answer = await http.get(f"/v1/boards/{board}/events", params=params)
                assert answer.status_code == 200, answer.text
                page = answer.json()["events"]
                found += [{**e, "occurred_at": parse_rfc3339_ms(e["occurred_at"])} for e in page]
                if len(page) < 1000:
                    break
                before = page[-1]["seq"]
    return found


# -- what the server answers ------------------------------------------------------------------


def server_digests(url: str, boards: Mapping[str, Sequence[str]]) -> dict[TableId, tuple[str, int]]:
    """(board, period, period_id) -> (sha256, size) of every table the server retains."""
    found: dict[TableId, tuple[str, int]] = {}
    with httpx.Client(base_url=url, timeout=30) as http:
        for board, periods in boards.items():
            for period in periods:
                listing = http.get(f"/v1/boards/{board}/{period}/periods")
                assert listing.status_code == 200, listing.text
                for p in listing.json()["periods"]:
                    d = http.get(f"/v1/boards/{board}/{period}/digest", params={"period_id": p["period_id"]}).json()
                    found[(board, period, p["period_id"])] = (d["sha256"], d["size"])
    return found


def assert_standings_match_rebuild(url: str, config_path: Path, boards: Mapping[str, Sequence[str]]) -> None:
    """Every table the server serves equals the offline rebuild of its journal (and vice versa for
    tables with entries)."""
    served = server_digests(url, boards)
    run = arena("rebuild", "--config", config_path)
    assert run.returncode == 0, run.stderr
    rebuilt = {table: (t.sha256, t.members) for table, t in rebuild_digests(run.stdout).items()}
    for table, (digest, size) in served.items():
        if size:
            assert rebuilt.get(table) == (digest, size), f"{table}: server {digest}/{size}, rebuild {rebuilt.get(table)}"
    for table, (digest, size) in rebuilt.items():
        if size:
            assert served.get(table) == (digest, size), f"{table}: rebuild {digest}/{size}, server {served.get(table)}"


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metric(url: str, name: str, **labels: str) -> float:
    """`parse_metric` of a child server's /metrics (blocking: not for an InProcessServer)."""
    return parse_metric(httpx.get(url + "/metrics", timeout=30).text, name, **labels)


def parse_metric(text: str, name: str, **labels: str) -> float:
    """The sum of a Prometheus sample over the series whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None or m.group(1) != name:
            continue
        have = dict(_LABEL.findall(m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in KiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


# -- clients that never read -----------------------------------------------------------------------


def never_reading_websocket(port: int, path: str, headers: str = "") -> socket.socket:
    """A WebSocket on ``path`` (extra ``headers`` lines) that reads nothing after the handshake,
    non-blocking."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{headers}\r\n".encode())
    assert sock.recv(4096).startswith(b"HTTP/1.1 101")
    sock.setblocking(False)
    return sock


def flood(sock: socket.socket, text: bytes, budget: int, timeout: float = 120.0) -> int:
    """Send the text frame ``text`` over and over on ``sock`` (`never_reading_websocket`) until
    the server has stopped reading it for 3 s, or ``budget`` bytes went: the bytes sent."""
    wire = Frame(Opcode.TEXT, text).serialize(mask=True)
    sent = 0
    stalled_since: float | None = None
    buffered = wire
    deadline = time.monotonic() + timeout
    while sent < budget:
        assert time.monotonic() < deadline, f"the server still reads after {timeout:g} s ({sent / 1e6:.1f} MB)"
        try:
            n = sock.send(buffered)
            sent += n
            buffered = buffered[n:] or wire
            stalled_since = None
        except BlockingIOError:
            if stalled_since is None:
                stalled_since = time.monotonic()
            elif time.monotonic() - stalled_since > 3:
                break  # the server has stopped reading us
            select.select([], [sock], [], 0.01)  # until there is room, 10 ms at most
    return sent


# -- steady ingest that remembers what was acked --------------------------------------------------


class Ledger:
    """Every submit frame a test sent, and the ack of those that got one."""

    def __init__(self) -> None:
        self.acked: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
        self.unacked: list[list[dict[str, Any]]] = []


def random_frames(rng: random.Random, prefix: str, boards: Sequence[str], members: Sequence[str]) -> Iterator[list[dict[str, Any]]]:
    """Endless submit frames of 1..40 fresh, valid events (values 0..1000, occurred up to 5 s
    ago) over ``boards``; keys are ``prefix-frame-index``."""
    for n in itertools.count():
        now = now_ms()
        yield [
            {
                "board": rng.choice(boards),
                "member": rng.choice(members),
                "value": rng.randrange(0, 1001),
                "occurred_at": now - rng.randrange(0, 5000),
                "idempotency_key": f"{prefix}-{n}-{i}",
            }
            for i in range(rng.randrange(1, 41))
        ]


def random_writers(ws_url: str, rng: random.Random, prefix: str, boards: Sequence[str], members: Sequence[str],
                   ledger: Ledger, stop: asyncio.Event, *, writers: int, in_flight: int) -> list[asyncio.Task[None]]:
    """``writers`` connections, each a `pipelined_writer` of its own `random_frames` (keys
    ``prefix`` + writer + frame), streaming into ``ledger`` until ``stop`` is set."""
    return [
        asyncio.create_task(pipelined_writer(
            ws_url, token_for("gs"), random_frames(random.Random(rng.random()), f"{prefix}w{w}", boards, members), ledger,
            in_flight=in_flight, stop=stop,
        ))
        for w in range(writers)
    ]


async def pipelined_writer(
    ws_url: str,
    token: str,
    frames: Iterator[list[dict[str, Any]]],
    ledger: Ledger,
    *,
    in_flight: int,
    stop: asyncio.Event,
    on_ack: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None] | None = None,
) -> None:
    """Send the frames of ``frames`` (lists of events) on one connection, keeping up to
    ``in_flight`` unanswered, until ``stop`` is set, ``frames`` ends or the connection dies; then
    wait for the outstanding acks (unless the connection died). Frames left without an ack go to
    ``ledger.unacked``. ``on_ack(events, results)`` runs the moment an ack is read."""
    try:
        ws = await websockets.connect(ws_url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None)
    except (OSError, websockets.InvalidHandshake, TimeoutError):
        return
    slots = asyncio.Semaphore(in_flight)
    closed = asyncio.Event()
    pending: dict[int, list[dict[str, Any]]] = {}

    async def read() -> None:
        try:
            async for message in ws:
                answer = orjson.loads(message)
                assert answer["op"] == "ack", answer
                events = pending.pop(answer["id"])
                if on_ack is not None:
                    on_ack(events, answer["results"])
                ledger.acked.append((events, answer["results"]))
                slots.release()
        except websockets.ConnectionClosed:
            pass
        finally:
            closed.set()
            for _ in range(in_flight):
                slots.release()

    reader = asyncio.create_task(read())
    try:
        for frame_id, events in enumerate(frames, 1):
            await slots.acquire()
            if closed.is_set() or stop.is_set():
                slots.release()
                break
            pending[frame_id] = events
            try:
                await ws.send(orjson.dumps({"op": "submit", "id": frame_id, "events": events}).decode())
            except websockets.ConnectionClosed:
                break
        for _ in range(in_flight):  # every slot back: every ack read, or the connection is gone
            await slots.acquire()
    finally:
        await ws.close()
        await reader
        ledger.unacked += pending.values()
