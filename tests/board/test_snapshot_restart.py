"""Through a real server: a graceful restart starts from the snapshot written at the stop (the
log line and `arena_start_snapshot_seq` say so) with equal digests; records journaled after the
newest snapshot (here by a server with snapshots off, standing in for a crash) are all a start
replays. The SIGKILL case is measured by `python -m loadtest start`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.server import Client, InProcessServer, event, make_config, now_ms, token_for

PERIODS = ["alltime", "daily", "hourly"]
BOARDS = {"b": {"aggregation": "sum", "periods": PERIODS}}


async def digests(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url) as http:
        return {p: (await http.get(f"/v1/boards/b/{p}/digest")).json() for p in PERIODS}


async def submit(url: str, frames: Sequence[int], now: int) -> None:
    client = await Client.connect(url, token_for("gs"))
    for frame in frames:
        await client.submit([event("b", f"m{i % 23}", i % 7, now - i, f"k{frame}-{i}") for i in range(40)])
    await client.close()


async def test_a_graceful_restart_starts_from_the_snapshot_with_equal_digests(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "arena")
    config = make_config(tmp_path, BOARDS, snapshot_every_events=1_000_000)
    now = now_ms()
    async with InProcessServer(config) as server:
        await submit(server.ws_url, range(10), now)
        before = await digests(server.url)
    assert (tmp_path / "b.snapshot").exists()
    async with InProcessServer(config) as server:
        assert await digests(server.url) == before
        assert server.arena is not None
        assert server.arena.metrics.snapshot_start.labels("b")._value.get() == before["alltime"]["seq"]
    assert f"started from the snapshot at seq {before['alltime']['seq']} and 0 records after it" in caplog.text


async def test_after_a_periodic_snapshot_a_start_replays_only_the_tail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "arena")
    config = make_config(tmp_path, BOARDS, snapshot_every_events=200)
    now = now_ms()
    async with InProcessServer(config) as server:
        await submit(server.ws_url, range(6), now)
        before = await digests(server.url)
    written = [r.getMessage() for r in caplog.records if "snapshot at seq" in r.getMessage() and "written" in r.getMessage()]
    assert len(written) >= 2  # periodic ones, and the one at the stop
    off = make_config(tmp_path, BOARDS, snapshot_every_events=0)
    async with InProcessServer(off) as server:  # snapshots off: it neither reads nor writes one
        await submit(server.ws_url, range(6, 8), now)  # a tail the snapshot does not hold
        after_tail = await digests(server.url)
    caplog.clear()
    async with InProcessServer(config) as server:
        assert await digests(server.url) == after_tail != before
    assert f"started from the snapshot at seq {before['alltime']['seq']} and 80 records after it" in caplog.text
