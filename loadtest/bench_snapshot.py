"""``python -m loadtest.bench_snapshot``: what taking a snapshot of a board of 10**6 members adds
to the event loop while ingest goes on (what it adds to an ack at most): the loop's stalls (a
ticker that sleeps 1 ms, beside batches of 100 updates a ms) during a snapshot and, as the
control, during as long a time without one; the CPU seconds of this process in both (the
ingest takes whatever CPU the snapshot leaves it, so on a busy machine compare the snapshot's
CPU across runs and trees rather than against its control); then the snapshot's size and the
time to decode and load it. ``--profile N`` prints the N costliest
functions of one more snapshot taken under ingest (cProfile, by own time). One table of the
board's rule (``--aggregation``); the journal is a stub that knows the record at the snapshot's
seq; the snapshot goes to a file, or with ``--postgres`` to an embedded PostgreSQL. A warm-up,
then ``--repeat`` runs (fixed seeds); a shared machine's noise shows in the control."""
import argparse
import asyncio
import cProfile
import os
import pstats
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from arena.board.clock import Clock
from arena.board.snapshots import Snapshotter
from arena.config import JournalSettings
from arena.engine.board import BoardEngine
from arena.engine.periods import ALLTIME_WINDOW, PeriodKind
from arena.engine.scoring import Aggregation
from arena.engine.snapshot import decode
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.journal import journal_backend
from arena.journal.snapshots import SnapshotStore, snapshot_store
from loadtest.arena_client import bench_config

MEMBERS = 1_000_000


class _OneRecord:
    async def scan(self, upto_seq=None, min_occurred_at=None, before_occurred_at=None, min_seq=None):  # type: ignore[no-untyped-def]
        yield [(upto_seq, "m", 0, 0, "k")]


def _ms(values: list[float], q: float) -> str:
    values = sorted(values)
    return f"{values[min(int(len(values) * q), len(values) - 1)] * 1000:.1f}"


async def run(engine: BoardEngine, store: SnapshotStore, seed: int, profile: cProfile.Profile | None = None
              ) -> tuple[float, list[float], list[float], float, float]:
    rng = random.Random(seed)
    table = engine.tables[(PeriodKind.ALLTIME, "alltime")]
    update = engine.rule.update
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last - 0.001)
            last = now

    async def ingest() -> None:  # 100 events a millisecond at most, as batches would apply them
        while not done:
            members = [f"member-{rng.randrange(MEMBERS)}" for _ in range(100)]
            batch = [(member, update(member, rng.randrange(10**9), 2000, f"k{rng.random()}")) for member in members]
            table.apply_updates(batch)
            await asyncio.sleep(0.001)

    tasks = [asyncio.create_task(ticker()), asyncio.create_task(ingest())]
    await asyncio.sleep(0.2)
    engine.last_seq += 1
    snapshotter = Snapshotter(engine, _OneRecord(), store, 1, Clock())  # type: ignore[arg-type]
    gaps.clear()
    started, cpu = time.perf_counter(), time.process_time()
    if profile is not None:
        profile.enable()
    await snapshotter.take()
    if profile is not None:
        profile.disable()
    took, cpu = time.perf_counter() - started, time.process_time() - cpu
    during = gaps[:]
    gaps.clear()
    control_cpu = time.process_time()
    await asyncio.sleep(took)
    control_cpu = time.process_time() - control_cpu
    done = True
    await asyncio.gather(*tasks)
    return took, during, gaps, cpu, control_cpu


async def main(aggregation: str, repeat: int, postgres: str | None, profile: int = 0) -> None:
    spec = BoardSpec("b", aggregation=Aggregation(aggregation))
    engine = BoardEngine(spec)
    rng = random.Random(1)
    table = RankedTable(engine.rule, ALLTIME_WINDOW)
    table.apply_updates([(f"member-{i}", engine.rule.update(f"member-{i}", rng.randrange(10**9), 1000, f"k{i}"))
                         for i in range(MEMBERS)])
    engine.tables[(PeriodKind.ALLTIME, "alltime")] = table
    backend = journal_backend(replace(bench_config(Path(tempfile.mkdtemp()), "-"), journal=JournalSettings(
        "postgresql", postgres, "arena_snapshot_bench")) if postgres else bench_config(Path(tempfile.mkdtemp()), "-"))
    await (await backend.open(spec)).close()  # PostgreSQL: the schema
    store = snapshot_store(backend)
    print(f"10**6 members, 1 table ({aggregation}), ingest 100 events a ms at most, to {store.where('b')}"
          f" (after a warm-up run); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}:")
    await run(engine, store, 0)
    data = None
    for i in range(1, repeat + 1):
        took, during, control, cpu, control_cpu = await run(engine, store, i)
        data = await store.load("b")
        assert data is not None
        print(f"  run {i}: snapshot in {took:.3f}s, {len(data) / 1e6:.1f} MB, CPU {cpu:.3f}s (control {control_cpu:.3f}s);"
              f" loop stall max {_ms(during, 1)} ms, p99 {_ms(during, 0.99)} ms ({len(during)} ticks);"
              f" control max {_ms(control, 1)} ms, p99 {_ms(control, 0.99)} ms ({len(control)} ticks)")
    if profile:
        profiler = cProfile.Profile()
        await run(engine, store, repeat + 1, profiler)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(profile)
    await backend.close()
    if data is None:
        return
    started = time.perf_counter()
    image = decode(data).tables[0]
    decoded = time.perf_counter()
    RankedTable.from_sorted(engine.rule, ALLTIME_WINDOW, image.names, image.entries, image.order, image.keys)
    print(f"decode {decoded - started:.3f}s, load the table {time.perf_counter() - decoded:.3f}s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aggregation", default="best", choices=[a.value for a in Aggregation])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", action="store_true", help="store the snapshot in an embedded PostgreSQL")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print the N costliest functions of one more snapshot")
    args = parser.parse_args()
    if args.postgres:
        from loadtest.postgres import postgres_url

        with postgres_url() as url:
            asyncio.run(main(args.aggregation, args.repeat, url, args.profile))
    else:
        asyncio.run(main(args.aggregation, args.repeat, None, args.profile))
