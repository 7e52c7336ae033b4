"""A journal that cannot be written (disk full, read-only file): its events are answered
`rejected: unavailable`, never `accepted`; nothing is applied in memory that is not journaled;
queries keep working; the board recovers by itself (no restart) once writes succeed again.

Two ways to make writes fail, because tests run as root (chmod stops nothing):
- the fault-injection route, which makes the board's journal (wrapped by the tests'
  `support.injection.journal.FaultyBackend`) refuse every append as a full disk or a read-only
  file would: nothing written, reads still served; the same on every backend (tests/journal/test_journal.py
  checks sqlite's own answer to a full disk);
- a real full file system: the server runs in a private mount namespace (`unshare --mount`) on a
  small tmpfs that the test fills and frees through /proc/<pid>/root. Skipped where mounting is
  not allowed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.faults import journal_file, journaled, metric, parse_metric, write_config
from support.server import ChildServer, Client, InProcessServer, event, make_config, now_ms, statuses, token_for

BOARDS: dict[str, dict[str, Any]] = {
    "a": {"aggregation": "sum", "periods": ["alltime", "daily"]},
    "b": {"aggregation": "sum", "periods": ["alltime"]},
}



def _big(prefix: str, n: int, board: str = "a") -> list[dict[str, Any]]:
    """Events with a near-maximal meta, so a frame needs new journal pages."""
    now = now_ms()
    return [event(board, f"m{i % 17}", i, now - i, f"{prefix}-{i}", meta={"blob": "x" * 900}) for i in range(n)]


def _sums(events: list[dict[str, Any]]) -> dict[str, int]:
    sums: dict[str, int] = defaultdict(int)
    for e in events:
        sums[e["member"]] += e["value"]
    return dict(sums)


async def _top(http: httpx.AsyncClient, board: str) -> dict[str, int]:
    body = (await http.get(f"/v1/boards/{board}/alltime/top", params={"limit": 1000})).json()
    return {e["member"]: e["score"] for e in body["entries"]}


@pytest.mark.parametrize("fault", ["full", "readonly"])
async def test_unwritable_journal_rejects_unavailable_and_recovers_by_itself(fault: str, tmp_path: Path) -> None:
    config = make_config(tmp_path, BOARDS)
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert server.arena is not None
        client = await Client.connect(server.ws_url, token_for("gs"))
        seed = _big("seed", 20)
        assert statuses(await client.submit(seed)) == ["accepted"] * 20
        before = (await http.get("/v1/boards/a/alltime/digest")).json()

        answer = await http.post("/v1/_test/boards/a/journal", json={"fault": fault})
        assert answer.status_code == 200, answer.text
        refused = _big("refused", 200)
        out_of_range = event("a", "x", -1, now_ms(), "bad-value")
        results = await client.submit([*refused, seed[0], out_of_range])
        assert statuses(results) == ["rejected:unavailable"] * 200 + ["duplicate", "rejected:value_out_of_range"]
        # Nothing of it is journaled or applied; queries keep answering; the other board writes.
        assert set(journaled(tmp_path, "a")) == {e["idempotency_key"] for e in seed}
        during = (await http.get("/v1/boards/a/alltime/digest")).json()
        assert (during["sha256"], during["seq"]) == (before["sha256"], before["seq"])
        assert await _top(http, "a") == _sums(seed)
        assert (await http.get("/readyz")).status_code == 200
        assert statuses(await client.submit([event("b", "m", 1, now_ms(), "b-1")])) == ["accepted"]
        metrics = (await http.get("/metrics")).text
        assert parse_metric(metrics, "arena_journal_write_failures_total", board="a") >= 1

        # Still refused on retry (the actor keeps trying every batch), then healed: the same
        # keys are accepted, without an actor restart.
        assert statuses(await client.submit(refused[:5])) == ["rejected:unavailable"] * 5
        answer = await http.post("/v1/_test/boards/a/journal", json={"fault": None})
        assert answer.status_code == 200
        assert statuses(await client.submit(refused)) == ["accepted"] * 200
        assert await _top(http, "a") == _sums(seed + refused)
        assert set(journaled(tmp_path, "a")) == {e["idempotency_key"] for e in seed + refused}
        assert server.arena.supervisor.runs == {"a": 1, "b": 1}
        await client.close()


async def test_journal_fault_route_exists_only_with_fault_injection(tmp_path: Path) -> None:
    config = make_config(tmp_path, BOARDS)
    async with InProcessServer(config, fault_injection=False) as server, httpx.AsyncClient(base_url=server.url) as http:
        answer = await http.post("/v1/_test/boards/a/journal", json={"fault": "full"})
        assert answer.status_code == 404


def _can_mount_tmpfs(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "-o", "size=1m",
                           "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


def _journaled_inside(inside: Path, board: str, scratch: Path) -> set[str]:
    """The keys journaled in the server's private tmpfs. SQLite resolves the /proc/<pid>/root
    link to our own root, so read a copy (the server is idle: every frame sent was answered)."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    for suffix in ("", "-wal"):
        source = Path(f"{journal_file(inside, board)}{suffix}")
        if source.exists():
            shutil.copyfile(source, Path(f"{journal_file(scratch, board)}{suffix}"))
    return set(journaled(scratch, board))


def _fill(directory: Path) -> Path:
    """Write a file until the file system is full."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:  # unbuffered: nothing left to flush (and fail) at the close
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


async def test_real_full_disk_rejects_unavailable_and_recovers_when_space_returns(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    if not _can_mount_tmpfs(data):
        pytest.skip("cannot mount a tmpfs in a private mount namespace here")
    config = write_config(tmp_path, BOARDS, data_dir=data)
    mount = 'mount -t tmpfs -o size=8m tmpfs "$0" && exec "$@"'
    server = ChildServer(config, prefix=["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, str(data)])
    server.start()
    try:
        inside = Path(f"/proc/{server.pid}/root{data}")  # the server's private tmpfs
        assert journal_file(inside, "a").exists() and not journal_file(data, "a").exists()
        client = await Client.connect(server.ws_url, token_for("gs"))
        seed = _big("seed", 50)
        assert statuses(await client.submit(seed)) == ["accepted"] * 50
        filler = _fill(inside)

        accepted: list[dict[str, Any]] = list(seed)
        refused: list[list[dict[str, Any]]] = []
        for n in range(500):  # the WAL reuses its allocated space for a while, then must grow
            frame = _big(f"f{n}", 100)
            got = set(statuses(await client.submit(frame)))
            assert got in ({"accepted"}, {"rejected:unavailable"}), got
            if got == {"accepted"}:
                accepted += frame
            else:
                refused.append(frame)
                if len(refused) == 3:
                    break
        assert refused, "the file system never filled up"
        assert _journaled_inside(inside, "a", tmp_path / "copy") == {e["idempotency_key"] for e in accepted}
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert await _top(http, "a") == _sums(accepted)
            assert (await http.get("/readyz")).status_code == 200
        assert metric(server.url, "arena_journal_write_failures_total", board="a") >= len(refused)

        os.remove(filler)  # space returns: the same frames now go in, no restart needed
        for frame in refused:
            assert statuses(await client.submit(frame)) == ["accepted"] * 100
            accepted += frame
        assert _journaled_inside(inside, "a", tmp_path / "copy") == {e["idempotency_key"] for e in accepted}
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert await _top(http, "a") == _sums(accepted)
        assert metric(server.url, "arena_actor_restarts_total") == 0
        await client.close()
        server.signal(signal.SIGTERM)
        assert server.wait() == 0, server.log()
    finally:
        server.kill()
