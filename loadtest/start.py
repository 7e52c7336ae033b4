"""``python -m loadtest start``: how long a board with a long history takes to answer again.

Writes a journal of ``events`` score events over ``members`` members in-process, through
Arena's own engine and journal (`BoardEngine.decide`, `Journal.append`: the records `arena serve`
would journal, at a fraction of the protocol's cost), then times ``arena serve`` from spawn to
``/readyz`` 200 (Python start-up included):

- snapshots off (``snapshot_every_events = 0``): a full replay;
- after a graceful restart: from the snapshot written at the shutdown, no tail;
- after a SIGKILL: from that snapshot plus a tail of ``tail`` records journaled since.

Each start's own log line ("ready: N events replayed in S s") is reported beside the wall time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from arena.config import Config, JournalSettings
from arena.engine.board import BoardEngine
from arena.engine.events import Event
from arena.errors import JournalUnavailable
from arena.journal import journal_backend
from arena.journal.sqlite import journal_path
from loadtest.arena_client import bench_config
from loadtest.config_toml import write_config
from loadtest.process import ArenaServe
from loadtest.stats import fmt_int, progress

BOARD = "bench"
BATCH = 10_000
_READY = re.compile(r"board \S+ ready: (\d+) events replayed in ([0-9.]+)s")


async def journal_events(config: Config, members: int, events: int, seed: int, first: int = 0,
                         board: str = BOARD) -> float:
    """Journal into ``board`` ``events`` accepted score events (the first ``members`` one per
    member, then members at random) with keys from ``first`` on; returns the seconds it took."""
    started = time.perf_counter()
    spec = config.boards[board]
    backend = journal_backend(config)
    deadline = time.monotonic() + 30
    while True:
        try:
            journal = await backend.open(spec)
            break
        except JournalUnavailable:  # PostgreSQL: a killed server's lease lives on for a few seconds
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
    engine = BoardEngine(spec, last_seq=journal.last_seq)
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    try:
        for begin in range(first, first + events, BATCH):
            batch = [
                Event(board, f"member-{i if i < members else rng.randrange(members)}", rng.randrange(1_000_000_000),
                      now - rng.randrange(60_000), f"key-{i}")
                for i in range(begin, min(begin + BATCH, first + events))
            ]
            plan = engine.decide([(batch, now, "loadtest")], {}, now)
            await journal.append(plan.records)
            engine.commit(plan)  # the next batch's seqs follow this one's
            progress(f"journaled {begin + len(batch) - first:,}/{events:,} events") if (begin // BATCH) % 50 == 0 else None
    finally:
        await journal.close()
        await backend.close()
    return time.perf_counter() - started


def as_after_sigkill(config: Config, board: str = BOARD) -> None:
    """Make a sqlite journal that `journal_events` closed cleanly open as one a SIGKILL left: an
    open after a clean close skips the integrity check (`arena.journal.sqlite`), after a SIGKILL
    it runs it. The file is replaced by a copy of itself (the same bytes, another file), which
    the open checks as it would one with no clean-close mark. PostgreSQL: nothing to do."""
    if config.journal.backend != "sqlite":
        return
    path = journal_path(config.server.data_dir, board)
    copy = path.with_name(path.name + ".copy")
    shutil.copyfile(path, copy)
    os.replace(copy, path)


def time_start(server: ArenaServe, timeout: float) -> dict[str, Any]:
    """Start ``server`` and time it to ``/readyz`` 200; what its log says of the replay (each
    start logs to a file of its own: it listens on a new port)."""
    started = time.perf_counter()
    server.start(timeout)
    wall = time.perf_counter() - started
    log = server.log()
    found = _READY.search(log)
    snapshot = re.search(r"started from the snapshot at seq (\d+) and (\d+) records after it", log)
    return {
        "ready_s": round(wall, 3),
        "replayed_events": int(found.group(1)) if found else None,
        "replay_s": float(found.group(2)) if found else None,
        "snapshot_seq": int(snapshot.group(1)) if snapshot else None,
    }


async def start_benchmark(members: int, events: int, tail: int, *, postgres: str | None = None,
                          timeout: float = 3600.0, seed: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {"command": "start", "members": members, "events": events, "tail": tail,
                           "backend": "postgresql" if postgres else "sqlite"}
    with tempfile.TemporaryDirectory(prefix="arena-start-") as tmp:
        workdir = Path(tmp)
        config = bench_config(workdir / "data", secrets.token_urlsafe(16))
        if postgres is not None:
            config = dataclasses.replace(config, journal=JournalSettings("postgresql", postgres, "arena_start_bench"))
        # boards stay loaded: a start loads the board and /readyz waits for its tables (with boards
        # activated on demand it would answer at once, the board unloaded)
        loaded = dataclasses.replace(config.server, idle_unload_seconds=0)
        off = dataclasses.replace(config, server=dataclasses.replace(loaded, snapshot_every_events=0))
        on = dataclasses.replace(config, server=dataclasses.replace(loaded, snapshot_every_events=max(events, 1)))
        (workdir / "data").mkdir()
        progress(f"writing a journal of {events:,} events over {members:,} members ({out['backend']})")
        out["journal_write_s"] = round(await journal_events(config, members, events, seed), 3)

        server = ArenaServe(write_config(off, workdir / "off.toml"))
        out["snapshots_off"] = time_start(server, timeout)
        server.stop(timeout)
        progress(f"snapshots off: ready in {out['snapshots_off']['ready_s']}s")

        server = ArenaServe(write_config(on, workdir / "on.toml"))
        out["first_start"] = time_start(server, timeout)  # full replay, then a snapshot at the stop
        stopped = time.perf_counter()
        server.stop(timeout)
        out["graceful_stop_s"] = round(time.perf_counter() - stopped, 3)
        out["graceful_restart"] = time_start(server, timeout)
        progress(f"graceful restart: ready in {out['graceful_restart']['ready_s']}s")
        server.kill()
        out["tail_write_s"] = round(await journal_events(config, members, tail, seed + 1, first=events), 3)
        as_after_sigkill(config)
        out["after_sigkill"] = time_start(server, timeout)
        progress(f"after SIGKILL (+{tail:,} records): ready in {out['after_sigkill']['ready_s']}s")
        server.stop(timeout)
        if postgres is not None:
            import asyncpg

            conn = await asyncpg.connect(postgres)
            await conn.execute("DROP SCHEMA IF EXISTS arena_start_bench CASCADE")
            await conn.close()
    out["ok"] = all(out[k]["replayed_events"] is not None for k in ("snapshots_off", "graceful_restart", "after_sigkill"))
    return out


def print_start(out: dict[str, Any]) -> None:
    print(f"\ntime to ready: {fmt_int(out['members'])} members, {fmt_int(out['events'])} events, {out['backend']}")
    print(f"{'start':<28}{'ready (wall)':>14}{'replayed':>12}{'replay':>10}{'snapshot seq':>14}")
    for key, name in (("snapshots_off", "snapshots off (full replay)"), ("first_start", "first start (no snapshot)"),
                      ("graceful_restart", "after a graceful restart"),
                      ("after_sigkill", f"after SIGKILL (+{fmt_int(out['tail'])})")):
        r = out[key]
        print(f"{name:<28}{r['ready_s']:>13.2f}s{fmt_int(r['replayed_events'] or 0):>12}"
              f"{(r['replay_s'] or 0):>9.2f}s{str(r['snapshot_seq'] or '-'):>14}")
    print(f"graceful stop (writes the snapshot): {out['graceful_stop_s']:.2f}s; ok: {out['ok']}")


def run(members: int, events: int, tail: int, postgres: bool, url: str | None) -> dict[str, Any]:
    if not postgres:
        return asyncio.run(start_benchmark(members, events, tail))
    from loadtest.postgres import postgres_url

    with postgres_url(url) as pg:
        return asyncio.run(start_benchmark(members, events, tail, postgres=pg))
