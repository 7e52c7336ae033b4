"""``python -m loadtest.bench_start``: where a start's CPU goes, in-process (no server, no
Python start-up), on the scenario of ``python -m loadtest start``: the bench board (best,
alltime+weekly+daily) with ``--members`` members and ``--events`` events journaled on sqlite.

``prepare DIR`` journals the events, loads them and writes a snapshot at the last seq
(``DIR/graceful``, its journal closed cleanly), then a copy of both gets ``--tail`` more events
(``DIR/kill``: a SIGKILL after the snapshot; each ``kill`` or ``replay`` run first makes its
journal open as a SIGKILL left it, `as_after_sigkill`). ``measure DIR MODE`` opens the journal and loads the board once, and prints
the CPU seconds of the whole process (the journal's thread included) of the open and of the
load: ``graceful`` (the snapshot, no tail), ``kill`` (the snapshot and the tail) or ``replay`` (a
full replay of the journal with the tail). ``--profile N`` prints the N costliest functions
(cProfile, own time). Run each measure in a fresh process, modes alternating."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import shutil
import time
from pathlib import Path

from arena.board.clock import Clock
from arena.board.load import load
from arena.board.snapshots import Snapshotter
from arena.engine.board import BoardEngine
from arena.journal import journal_backend
from arena.journal.snapshots import snapshot_store
from loadtest.arena_client import bench_config
from loadtest.start import BOARD, as_after_sigkill, journal_events


async def prepare(root: Path, members: int, events: int, tail: int) -> None:
    data = root / "kill"
    data.mkdir(parents=True)
    config = bench_config(data, "-")
    await journal_events(config, members, events, 1)
    backend = journal_backend(config)
    journal = await backend.open(config.boards[BOARD])
    engine = BoardEngine(config.boards[BOARD])
    await load(engine, journal, int(time.time() * 1000))
    await Snapshotter(engine, journal, snapshot_store(backend), 1, Clock()).take()
    await journal.close()
    await backend.close()
    shutil.copytree(data, root / "graceful")
    await journal_events(config, members, tail, 2, first=events)
    graceful = bench_config(root / "graceful", "-")
    backend = journal_backend(graceful)
    await (await backend.open(graceful.boards[BOARD])).close()  # closed cleanly where it is now (a copy)
    await backend.close()


async def measure(root: Path, mode: str, profile: int) -> None:
    config = bench_config(root / ("graceful" if mode == "graceful" else "kill"), "-")
    if mode != "graceful":
        as_after_sigkill(config)  # each run's open finds the journal as a SIGKILL left it
    backend = journal_backend(config)
    spec = config.boards[BOARD]
    profiler = cProfile.Profile() if profile else None
    started, wall = time.process_time(), time.perf_counter()
    if profiler is not None:
        profiler.enable()
    journal = await backend.open(spec)
    opened = time.process_time()
    report = await load(BoardEngine(spec), journal, int(time.time() * 1000),
                        snapshots=None if mode == "replay" else snapshot_store(backend))
    if profiler is not None:
        profiler.disable()
    loaded, wall = time.process_time(), time.perf_counter() - wall
    print(f"{mode}: CPU open {opened - started:.2f}s, load {loaded - opened:.2f}s, total {loaded - started:.2f}s;"
          f" wall {wall:.2f}s; {report.events:,} events applied; load average {os.getloadavg()[0]:.2f}")
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(profile)
    await journal.close()
    await backend.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["prepare", "graceful", "kill", "replay"])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--members", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=2_100_000)
    parser.add_argument("--tail", type=int, default=100_000)
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    args = parser.parse_args()
    if args.what == "prepare":
        asyncio.run(prepare(args.dir, args.members, args.events, args.tail))
    else:
        asyncio.run(measure(args.dir, args.what, args.profile))
