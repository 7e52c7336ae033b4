"""``python -m loadtest boards``: many boards on one node, activated on demand (DESIGN.md, "Many
boards: activation on demand").

Journals ``boards`` boards of ``members`` members each (one event per member) and one board of
``big_members`` members, in-process through Arena's own engine and journal (`loadtest.start`),
then runs ``arena serve`` with ``idle_unload_seconds`` = ``idle`` and measures:

- the time from spawn to ``/readyz`` 200, and the server's RSS then (no board is loaded);
- the first answer of the unloaded big board: a `top` query timed from send to answer, ``repeats``
  times, each after the board was unloaded again (its log says so);
- the RSS once every small board has been activated by a query and unloaded again (its
  activation left what an idle board keeps: its handle and what it recorded at the unload);
- the same server with one small board: the baseline that the per-board cost is counted from.

RSS per idle board = (RSS with every board idle - baseline RSS) / boards. The boards are config
boards (`[boards.NAME]`); their definitions count in the figure (the baseline has one). The load
average before the run and the CPU split over the main server's run (server, this load generator,
everything else on the machine) are reported with the figures: on a shared machine the times
move with the load, the bytes per board do not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from arena.board.heap import TRIM_AFTER_SECONDS
from arena.config import Config, ServerSettings, parse_board
from loadtest.arena_client import bench_config
from loadtest.config_toml import write_config
from loadtest.process import ArenaServe
from loadtest.start import journal_events
from loadtest.stats import CpuMeter, fmt_int, percentile, progress, rss_bytes

BIG = "big"
JOURNALS_AT_ONCE = 32


def boards_config(data_dir: Path, names: list[str], idle: float) -> Config:
    base = bench_config(data_dir, secrets.token_urlsafe(16), durability="normal")
    board = {"aggregation": "best", "order": "desc", "tie": "earliest", "periods": ["alltime"]}
    server: ServerSettings = dataclasses.replace(base.server, idle_unload_seconds=idle,
                                                 max_boards=max(len(names), base.server.max_boards))
    return dataclasses.replace(base, server=server, boards={name: parse_board(name, board) for name in names})


async def _journal(config: Config, members: dict[str, int], seed: int) -> float:
    started = time.perf_counter()
    names = list(members)
    for begin in range(0, len(names), JOURNALS_AT_ONCE):
        chunk = names[begin:begin + JOURNALS_AT_ONCE]
        await asyncio.gather(*(journal_events(config, members[n], members[n], seed + i, board=n)
                               for i, n in enumerate(chunk)))
        if begin % 1000 == 0:
            progress(f"journaled {begin + len(chunk):,}/{len(names):,} boards")
    return time.perf_counter() - started


class Loads:
    """The server's loads and unloads, counted from its log ("board NAME ready: ...", "board NAME
    unloaded (...)") as it grows: a wait that costs the server nothing. Polling `/metrics` instead
    had the server render a page of every board's series (10,001 boards) every 50 ms."""

    def __init__(self, server: ArenaServe) -> None:
        assert server.log_path is not None
        self._log = server.log_path.open("rb")
        self._rest = b""
        self.ready = self.unloaded = 0

    def read(self) -> None:
        lines = (self._rest + self._log.read()).split(b"\n")
        self._rest = lines.pop()
        for line in lines:
            self.ready += b" ready: " in line
            self.unloaded += b" unloaded (" in line

    async def until_unloaded(self, unloads: int | None, timeout: float) -> None:
        """Until the log shows `unloads` unloads; None: as many as loads (no board is active)."""
        deadline = time.monotonic() + timeout
        while True:
            self.read()
            if self.unloaded == self.ready if unloads is None else self.unloaded >= unloads:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.unloaded} unloads of {self.ready} loads, waiting for {unloads}")
            await asyncio.sleep(0.05)

    def close(self) -> None:
        self._log.close()


async def _first_answers(http: httpx.AsyncClient, loads: Loads, repeats: int, idle: float) -> list[float]:
    """The big board's first answer after each unload, in seconds."""
    seconds = []
    for _ in range(repeats):
        loads.read()
        unloads = loads.unloaded
        started = time.perf_counter()
        answer = await http.get(f"/v1/boards/{BIG}/alltime/top?limit=10")
        seconds.append(time.perf_counter() - started)
        answer.raise_for_status()
        await loads.until_unloaded(unloads + 1, idle * 10 + 30)
    return seconds


async def _activate_all(http: httpx.AsyncClient, names: list[str]) -> None:
    queue = list(names)

    async def worker() -> None:
        while queue:
            (await http.get(f"/v1/boards/{queue.pop()}/alltime/top?limit=1")).raise_for_status()

    await asyncio.gather(*(worker() for _ in range(16)))


def memory_map(pid: int) -> dict[str, float]:
    """Where a process's RSS is, in MB: the brk heap, anonymous mappings (glibc's thread arenas,
    pymalloc's arenas, thread stacks, big blocks), files (code, sqlite's files); and its threads."""
    split = {"heap_mb": 0.0, "anon_mb": 0.0, "file_mb": 0.0}
    kind = "anon_mb"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                name = head[5] if len(head) > 5 else ""
                kind = "heap_mb" if name == "[heap]" else "file_mb" if name.startswith("/") else "anon_mb"
            elif head[0] == "Rss:":
                split[kind] += int(head[1]) / 1024
    out = {k: round(v, 1) for k, v in split.items()}
    with open(f"/proc/{pid}/status") as f:
        out["threads"] = next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
    return out


def _serve(config: Config, path: Path, timeout: float) -> tuple[ArenaServe, float]:
    server = ArenaServe(write_config(config, path))
    started = time.perf_counter()
    server.start(timeout)
    return server, time.perf_counter() - started


async def boards_benchmark(boards: int, members: int, big_members: int, repeats: int, idle: float,
                           timeout: float = 3600.0, seed: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {"command": "boards", "boards": boards, "members": members, "big_members": big_members,
                           "idle_unload_seconds": idle, "repeats": repeats, "cores": os.cpu_count(),
                           "load_average": [round(x, 2) for x in os.getloadavg()]}
    names = [f"b{i:05d}" for i in range(boards)]
    with tempfile.TemporaryDirectory(prefix="arena-boards-") as tmp:
        workdir = Path(tmp)
        (workdir / "data").mkdir()
        config = boards_config(workdir / "data", [*names, BIG], idle)
        progress(f"journaling {boards:,} boards of {members:,} members and one of {big_members:,}")
        out["journal_write_s"] = round(await _journal(config, {**dict.fromkeys(names, members), BIG: big_members}, seed), 1)

        baseline = dataclasses.replace(config, boards={names[0]: config.boards[names[0]]})
        server, _ = _serve(baseline, workdir / "one.toml", timeout)
        out["rss_one_board_mb"] = round((rss_bytes(server.pid) or 0) / 2**20, 1)
        out["map_one_board"] = memory_map(server.pid)
        server.stop(timeout)

        server, ready = _serve(config, workdir / "all.toml", timeout)
        cpu = CpuMeter(server.pid)
        try:
            out["start_s"] = round(ready, 2)
            out["rss_at_start_mb"] = round((rss_bytes(server.pid) or 0) / 2**20, 1)
            out["map_at_start"] = memory_map(server.pid)
            progress(f"ready in {ready:.1f}s; RSS {out['rss_at_start_mb']} MB")
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
                loads = Loads(server)
                first = sorted(await _first_answers(http, loads, repeats, idle))
                out["first_answer_ms"] = {"min": round(first[0] * 1000, 1), "median": round(statistics.median(first) * 1000, 1),
                                          "p99": round(percentile(first, 99) * 1000, 1), "max": round(first[-1] * 1000, 1)}
                progress(f"first answer of the unloaded {big_members:,}-member board: {out['first_answer_ms']} ms")
                started = time.perf_counter()
                await _activate_all(http, names)
                out["activate_all_s"] = round(time.perf_counter() - started, 1)
                await loads.until_unloaded(None, idle * 10 + 120)
                loads.close()
                await asyncio.sleep(TRIM_AFTER_SECONDS + 1)  # the node gives the heap of the last unloads back
                out["rss_idle_mb"] = round((rss_bytes(server.pid) or 0) / 2**20, 1)
                out["map_idle"] = memory_map(server.pid)
                out["cpu"] = cpu.stop()
        finally:
            server.stop(timeout)
    out["rss_per_idle_board_kb"] = round((out["rss_idle_mb"] - out["rss_one_board_mb"]) * 1024 / boards, 2)
    out["rss_per_never_loaded_board_kb"] = round((out["rss_at_start_mb"] - out["rss_one_board_mb"]) * 1024 / boards, 2)
    out["ok"] = out["first_answer_ms"]["median"] <= 100 and out["rss_per_idle_board_kb"] <= 5
    return out


def print_boards(out: dict[str, Any]) -> None:
    print(f"\n{fmt_int(out['boards'])} config boards x {fmt_int(out['members'])} members, one node, sqlite, "
          f"idle_unload_seconds {out['idle_unload_seconds']:g}; load average before {out['load_average'][0]} "
          f"on {out['cores']} cores")
    print(f"start (spawn to /readyz 200):          {out['start_s']:.2f} s")
    print(f"RSS: one board {out['rss_one_board_mb']} MB; all boards at start {out['rss_at_start_mb']} MB; "
          f"all idle after one activation each {out['rss_idle_mb']} MB")
    print(f"RSS per board: never loaded {out['rss_per_never_loaded_board_kb']} KB; idle (unloaded) "
          f"{out['rss_per_idle_board_kb']} KB (goal <= 5)")
    first = out["first_answer_ms"]
    print(f"first answer of an unloaded {fmt_int(out['big_members'])}-member board, {out['repeats']} runs: "
          f"min {first['min']} / median {first['median']} / p99 {first['p99']} / max {first['max']} ms (goal median <= 100)")
    print(f"activating every board once (16 connections): {out['activate_all_s']} s")
    print("where the RSS is (MB; threads): " + "; ".join(
        f"{at} {out[key]}" for at, key in (("one board", "map_one_board"), ("at start", "map_at_start"), ("idle", "map_idle"))))
    cpu = out["cpu"]
    print(f"CPU over the server's run (cores): server {cpu['server_cpu']}, load generator {cpu['client_cpu']}, "
          f"other {cpu['other_cpu']}; ok: {out['ok']}")


def run(boards: int, members: int, big_members: int, repeats: int, idle: float) -> dict[str, Any]:
    return asyncio.run(boards_benchmark(boards, members, big_members, repeats, idle))
