"""Memory of a board's tables per member, in-process: where the bytes go (issue 39).

    python -m loadtest.bench_memory --members 1000000 --replay      # RSS and the breakdown, ~3 min
    python -m loadtest.bench_memory --members 1000000 --tracemalloc # and the allocations by line (slower)

A script, not a test. The board is `compare`'s ``bench`` (best, desc, tie earliest,
alltime+weekly+daily). Every member gets one event, in frames of ``--frame`` events that go the
actor's way without the network: the frame's JSON text parsed by orjson, each event by
`parse_event`, its keys looked up in the sqlite journal, the batch decided
(`BoardEngine.decide`), journaled (`SqliteJournal.append`) and committed (`BoardEngine.commit`),
so the member strings, entries, tables and sqlite's caches are made as `arena serve` makes them.
The process's RSS (``/proc/self/statm``) is read before the first frame and after the last, after
a full collection, and after glibc's `malloc_trim` (what the heaps would give back if asked).
B/member/table = RSS growth / (members x tables). ``--replay`` then loads the board from that
journal in a new process (`arena.board.load.load`: a start without a snapshot) and measures it
the same way.

The breakdown counts the tables' objects with `sys.getsizeof`, rounded up to the allocator's
16-byte blocks, each object once however many tables share it: the member dicts, the rank and
names SortedLists' sublists, the packed entries, the member strings, the tie keys (latest
aggregation only); and sqlite's heap (`sqlite3_memory_used`). What RSS holds beyond them is the
allocators': free blocks and pages between live ones.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import gc
import os
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from arena.board.heap import tune
from arena.board.load import load
from arena.cli.main import GC_THRESHOLDS
from arena.engine.board import BoardEngine
from arena.engine.events import Event, parse_event
from arena.engine.periods import PeriodKind
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.journal.sqlite import SqliteJournal
from loadtest.stats import progress
from loadtest.workload import member_name

PERIODS = (PeriodKind.ALLTIME, PeriodKind.WEEKLY, PeriodKind.DAILY)
TARGET_BYTES = 110.0
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def malloc_trim() -> bool:
    """glibc's `malloc_trim(0)`, its time on stderr; False where there is none."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    started = time.perf_counter()
    trim(0)
    progress(f"malloc_trim(0) took {(time.perf_counter() - started) * 1000:.1f} ms")
    return True


def block(size: int) -> int:
    """What an object of ``size`` bytes costs: pymalloc's 16-byte classes up to 512 B, else
    malloc's chunk (16-byte aligned, an 8-byte header)."""
    return (size + 15) // 16 * 16 if size <= 512 else (size + 8 + 15) // 16 * 16


def frames(members: int, frame: int, now: int, rnd: random.Random) -> Iterable[bytes]:
    for begin in range(0, members, frame):
        yield orjson.dumps([
            {"board": "bench", "idempotency_key": f"prefill-{i}", "member": member_name(i),
             "value": rnd.randrange(1_000_000_000), "occurred_at": now - rnd.randrange(1, 4000)}
            for i in range(begin, min(begin + frame, members))
        ])


async def ingest(engine: BoardEngine, journal: SqliteJournal | None, members: int, frame: int, now: int) -> None:
    """Every member's event, a frame at a time, the actor's way (`arena.board.actor`): keys
    looked up in the journal, the batch decided, journaled, committed."""
    spec = engine.spec
    boards = {spec.name: spec}
    rnd = random.Random(20261202)
    done = 0
    for text in frames(members, frame, now, rnd):
        events = [parse_event(raw, boards, lambda _board: True) for raw in orjson.loads(text)]
        batch = [e for e in events if isinstance(e, Event)]
        assert len(batch) == len(events), "every prefill event is valid"
        known = {} if journal is None else await journal.lookup([e.idempotency_key for e in batch])
        plan = engine.decide([(batch, now, "bench")], known, now)
        if journal is not None:
            await journal.append(plan.records)
        engine.commit(plan)
        done += len(batch)
        if done % 200_000 < frame:
            progress(f"{done:,} members")


def breakdown(tables: Sequence[RankedTable]) -> dict[str, int]:
    """Bytes of each kind of object the tables hold, each object counted once."""
    seen: set[int] = set()

    def once(objects: Iterable[Any]) -> int:
        total = 0
        for obj in objects:
            if id(obj) not in seen:
                seen.add(id(obj))
                total += block(sys.getsizeof(obj))
        return total

    parts = {
        "member dicts (_items)": sum(sys.getsizeof(t._items) for t in tables),
        "rank SortedLists (sublists, maxes, index)": sum(_sorted_list(t._sorted) for t in tables),
        "names SortedLists": sum(_sorted_list(t._names) for t in tables),
        "tie keys (_keys dicts)": sum(sys.getsizeof(t._keys) for t in tables if t._keys is not None),
    }
    parts["packed entries (bytes)"] = sum(once(t._items.values()) for t in tables)
    parts["member strings"] = sum(once(t._items) for t in tables)
    parts["tie key strings"] = sum(once(t._keys.values()) for t in tables if t._keys is not None)
    return parts


def _sorted_list(sorted_list: Any) -> int:
    lists = sorted_list._lists
    return (sum(block(sys.getsizeof(sub)) for sub in lists) + sys.getsizeof(lists)
            + sys.getsizeof(sorted_list._maxes) + sys.getsizeof(sorted_list._index))


def sqlite_heap() -> int | None:
    """Bytes sqlite has allocated (its page caches most of all), or None when unknown."""
    try:
        used = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0").sqlite3_memory_used
    except (OSError, AttributeError):
        return None
    used.restype = ctypes.c_int64
    return int(used())


def pymalloc_free() -> int:
    """Bytes pymalloc holds free inside its arenas (free blocks of used pools, unused pools),
    from `sys._debugmallocstats`, which writes to the C stderr."""
    with tempfile.TemporaryFile() as out:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode()
    free = 0
    for line in text.splitlines():
        name, _, value = line.partition("=")
        if name.startswith("# bytes in available blocks") or "unused pools" in name:
            free += int(value.replace(",", ""))
    return free


async def run(args: argparse.Namespace) -> None:
    gc.set_threshold(*GC_THRESHOLDS)
    tune()  # glibc's thresholds, as `arena serve` holds them
    spec = BoardSpec("bench", periods=PERIODS)
    now = int(time.time() * 1000)
    with tempfile.TemporaryDirectory(prefix="arena-memory-") as folder:
        path = Path(folder) / "bench.sqlite3"
        journal = None if args.no_journal else await SqliteJournal.open(path, spec, durability=args.durability)
        try:
            # a frame first, so that the imports and caches of the path are in the baseline
            await ingest(BoardEngine(spec), None, 1, 1, now)
            engine = BoardEngine(spec, journal.last_seq if journal is not None else 0)
            gc.collect()
            if args.tracemalloc:
                tracemalloc.start()
            before, sqlite_before, free_before = rss(), sqlite_heap(), pymalloc_free()
            started = time.process_time()
            await ingest(engine, journal, args.members, args.frame, now)
            cpu = time.process_time() - started
            after = rss()
            gc.collect()
            collected = rss()
            trimmed = rss() if malloc_trim() else collected
            sqlite_after = sqlite_heap()
            report(args, engine, cpu, before, after, collected, trimmed,
                   None if sqlite_before is None or sqlite_after is None else sqlite_after - sqlite_before,
                   pymalloc_free() - free_before)
        finally:
            if journal is not None:
                await journal.close()
        if args.replay and journal is not None:
            sys.stdout.flush()
            replayed = subprocess.run([sys.executable, "-m", "loadtest.bench_memory", "--from-journal", str(path),
                                       "--members", str(args.members)], check=False)
            if replayed.returncode:
                raise SystemExit(replayed.returncode)


async def from_journal(args: argparse.Namespace) -> None:
    """The board loaded from a journal (`arena.board.load.load`, as a start without a snapshot),
    in a process of its own: the RSS a load leaves, and how much of it is free memory."""
    gc.set_threshold(*GC_THRESHOLDS)
    tune()
    spec = BoardSpec("bench", periods=PERIODS)
    journal = await SqliteJournal.open(Path(args.from_journal), spec, readonly=True)
    try:
        gc.collect()
        before = rss()
        started = time.process_time()
        engine = BoardEngine(spec)
        await load(engine, journal, int(time.time() * 1000))
        cpu = time.process_time() - started
        after = rss()
    finally:
        await journal.close()
    gc.collect()
    collected = rss()
    trimmed = rss() if malloc_trim() else collected
    cells = args.members * len(engine.tables)
    print(f"the same board loaded from its journal (a replay, {cpu:.1f} s CPU), RSS growth, journal closed:")
    for name, value in (("after the load", after - before), ("after gc.collect()", collected - before),
                        ("after malloc_trim(0)", trimmed - before)):
        print(f"  {name:<42} {value / 2**20:>9.1f} {value / cells:>15.1f}")
    print("what holds it (each object once)")
    for name, value in breakdown(list(engine.tables.values())).items():
        print(f"  {name:<42} {value / 2**20:>9.1f} {value / cells:>15.1f}")


def report(args: argparse.Namespace, engine: BoardEngine, cpu: float, before: int, after: int, collected: int,
           trimmed: int, sqlite: int | None, pymalloc: int) -> None:
    tables = list(engine.tables.values())
    n = args.members
    cells = n * len(tables)
    journal = "no journal" if args.no_journal else f"sqlite journal, durability {args.durability}"
    print(f"board bench ({', '.join(PERIODS)}), {n:,} members, {len(tables)} tables, frames of {args.frame}, "
          f"{journal}; ingest {cpu:.1f} s CPU; load average {open('/proc/loadavg').read().split()[0]}")
    print(f"{'RSS growth':<44} {'MiB':>9} {'B/member/table':>15}")
    for name, value in (("after the last frame", after - before), ("after gc.collect()", collected - before),
                        ("after malloc_trim(0)", trimmed - before)):
        print(f"  {name:<42} {value / 2**20:>9.1f} {value / cells:>15.1f}")
    print(f"target: <= {TARGET_BYTES:.0f} B/member/table")
    parts = breakdown(tables)
    if sqlite is not None and not args.no_journal:
        parts["sqlite's heap (page cache)"] = sqlite
    total = sum(parts.values())
    print(f"{'what holds it (each object once)':<44} {'MiB':>9} {'B/member/table':>15}")
    for name, value in parts.items():
        print(f"  {name:<42} {value / 2**20:>9.1f} {value / cells:>15.1f}")
    print(f"  {'total':<42} {total / 2**20:>9.1f} {total / cells:>15.1f}")
    slack = trimmed - before - total
    print(f"  {'RSS beyond them after the trim':<42} {slack / 2**20:>9.1f} {slack / cells:>15.1f}")
    print(f"  {'of it pymalloc free blocks and pools':<42} {pymalloc / 2**20:>9.1f} {pymalloc / cells:>15.1f}")
    if args.tracemalloc:
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        print("tracemalloc, live allocations by line:")
        for stat in snapshot.statistics("lineno")[: args.top]:
            frame = stat.traceback[0]
            print(f"  {stat.size / cells:>8.1f} B/member/table {stat.count:>10,} blocks  {frame.filename}:{frame.lineno}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m loadtest.bench_memory", description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=1_000_000, help="members, one event each (default 1,000,000)")
    p.add_argument("--frame", type=int, default=1000, help="events a frame, the server's max_batch (default 1000)")
    p.add_argument("--no-journal", action="store_true", help="the tables alone: no sqlite journal, no key lookups")
    p.add_argument("--durability", choices=("full", "normal"), default="full", help="the journal's (default full)")
    p.add_argument("--replay", action="store_true",
                   help="then load the board from its journal in a new process (a start by replay) and measure that too")
    p.add_argument("--from-journal", default=None, help=argparse.SUPPRESS)  # the --replay child
    p.add_argument("--tracemalloc", action="store_true", help="also trace the allocations by line (slower)")
    p.add_argument("--top", type=int, default=12, help="lines of the tracemalloc listing (default 12)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    asyncio.run(from_journal(args) if args.from_journal else run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
