"""Overload: past max_connections the handshake gets HTTP 503; many pipelining clients against a
small mailbox and in-flight bound get backpressure, bounded memory, and never an early ack (each
accepted ack's events are in the journal file the moment the ack is read)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from support.faults import (
    Ledger,
    journal_file,
    journaled,
    memory_kib,
    open_readonly,
    parse_metric,
    pipelined_writer,
    write_config,
)
from support.server import ChildServer, Client, now_ms, token_for, until

BOARDS: dict[str, dict[str, Any]] = {
    "a": {"aggregation": "sum", "periods": ["alltime", "hourly"]},
    "b": {"aggregation": "best", "periods": ["alltime"]},
}
MAILBOX_EVENTS = 500
MAX_IN_FLIGHT = 4


async def test_past_max_connections_the_handshake_gets_503(tmp_path: Path) -> None:
    server = ChildServer(write_config(tmp_path, BOARDS, max_connections=5))
    await asyncio.to_thread(server.start)
    try:
        clients = [await Client.connect(server.ws_url, token_for("gs")) for _ in range(5)]
        for _ in range(3):
            with pytest.raises(websockets.InvalidStatus) as refused:
                await Client.connect(server.ws_url, token_for("gs"))
            assert refused.value.response.status_code == 503
            assert json.loads(refused.value.response.body)["error"]["code"] == "unavailable"
        for client in clients:  # the admitted ones are unaffected
            assert (await client.request({"op": "ping"}))["op"] == "pong"
        await clients.pop().close()

        async def admitted() -> bool:
            try:
                clients.append(await Client.connect(server.ws_url, token_for("gs")))
            except websockets.InvalidStatus as exc:
                assert exc.response.status_code == 503
                return False
            return True

        await until(admitted, "the freed place to go to the next client (once the server saw the close)")
        assert (await clients[-1].request({"op": "ping"}))["op"] == "pong"
        for client in clients:
            await client.close()
    finally:
        server.kill()


def _frames(writer: int, n_frames: int, size: int) -> Iterator[list[dict[str, Any]]]:
    now = now_ms()
    for f in range(n_frames):
        yield [
            {"board": "a" if (f + i) % 3 else "b", "member": f"p{(writer * 7 + i) % 500}", "value": (f * i) % 1000,
             "occurred_at": now - i, "idempotency_key": f"w{writer}-f{f}-e{i}"}
            for i in range(size)
        ]


class AckAudit:
    """Reads the journal files the moment an ack is read: accepted means already journaled."""

    def __init__(self, data_dir: Path) -> None:
        self.db = {board: open_readonly(journal_file(data_dir, board)) for board in BOARDS}
        self.checked = 0
        self.early: list[str] = []
        self.not_accepted: list[dict[str, Any]] = []

    def __call__(self, events: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
        keys: dict[str, list[str]] = defaultdict(list)
        for e, r in zip(events, results, strict=True):
            if r["status"] == "accepted":
                keys[e["board"]].append(e["idempotency_key"])
            else:
                self.not_accepted.append(r)
        for board, wanted in keys.items():
            marks = ",".join("?" * len(wanted))
            found = {k for (k,) in self.db[board].execute(
                f"SELECT idempotency_key FROM score_event WHERE idempotency_key IN ({marks})", wanted)}
            self.early += [k for k in wanted if k not in found]
            self.checked += len(wanted)

    def close(self) -> None:
        for db in self.db.values():
            db.close()


async def _sample_mailboxes(url: str, stop: asyncio.Event, peaks: dict[str, float]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        while not stop.is_set():
            text = (await http.get("/metrics")).text
            for board in BOARDS:
                peaks[board] = max(peaks.get(board, 0), parse_metric(text, "arena_mailbox_events", board=board))
            await asyncio.sleep(0.02)  # the sampling period, for as long as the load runs


async def _overload(tmp_path: Path, clients: int, n_frames: int, size: int) -> dict[str, Any]:
    config = write_config(tmp_path, BOARDS, mailbox_events=MAILBOX_EVENTS, max_in_flight_frames=MAX_IN_FLIGHT)
    data = tmp_path / "data"
    server = ChildServer(config)
    await asyncio.to_thread(server.start)
    try:
        idle = memory_kib(server.pid)
        audit = AckAudit(data)
        ledger = Ledger()
        stop = asyncio.Event()
        peaks: dict[str, float] = {}
        sampler = asyncio.create_task(_sample_mailboxes(server.url, stop, peaks))
        started = time.monotonic()
        await asyncio.gather(*(
            pipelined_writer(server.ws_url, token_for("gs"), _frames(w, n_frames, size), ledger,
                             in_flight=4 * MAX_IN_FLIGHT, stop=asyncio.Event(), on_ack=audit)
            for w in range(clients)
        ))
        elapsed = time.monotonic() - started
        stop.set()
        await sampler
        audit.close()
        loaded = memory_kib(server.pid)
        total = clients * n_frames * size
        assert not ledger.unacked
        assert audit.early == [], f"{len(audit.early)} events acked before they were journaled"
        assert audit.not_accepted == []
        assert audit.checked == total
        assert sum(len(journaled(data, board)) for board in BOARDS) == total
        # A connection reads its next frame only when its boards' mailboxes have room, so a
        # mailbox exceeds its bound by at most one frame per connection.
        for board, peak in peaks.items():
            assert peak <= MAILBOX_EVENTS + clients * size, (board, peak)
        return {
            "clients": clients, "events": total, "seconds": round(elapsed, 1),
            "events_per_second": round(total / elapsed), "mailbox_peak": peaks,
            "idle_rss_mib": round(idle["VmRSS"] / 1024, 1), "peak_rss_mib": round(loaded["VmHWM"] / 1024, 1),
        }
    finally:
        server.kill()


async def test_pipelining_clients_get_backpressure_and_no_early_ack(tmp_path: Path) -> None:
    report = await _overload(tmp_path, clients=20, n_frames=30, size=50)
    print(f"\noverload: {report}")
    assert report["peak_rss_mib"] < 400


@pytest.mark.slow
async def test_heavy_pipelining_keeps_memory_bounded(tmp_path: Path) -> None:
    clients = int(os.environ.get("ARENA_OVERLOAD_CLIENTS", "100"))
    report = await _overload(tmp_path, clients=clients, n_frames=60, size=100)
    print(f"\noverload (slow): {report}")
    assert report["peak_rss_mib"] < 400

