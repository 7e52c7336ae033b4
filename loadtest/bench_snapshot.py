"""``python -m loadtest.bench_snapshot``: the longest event-loop stall while a snapshot of a board
of 10**6 members is taken with ingest going on (what taking one adds to an ack at most), the
snapshot's size, and the time to decode and load it. One alltime table; the journal is a stub
that knows the record at the snapshot's seq."""
import asyncio
import random
import tempfile
import time
from pathlib import Path

from arena.clock import Clock
from arena.engine.board import BoardEngine
from arena.engine.periods import ALLTIME_WINDOW, PeriodKind
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.journal.snapshots import SqliteSnapshots
from arena.snapshot import decode
from arena.snapshotter import Snapshotter


class _OneRecord:
    async def scan(self, upto_seq=None, min_occurred_at=None, before_occurred_at=None, min_seq=None):  # type: ignore[no-untyped-def]
        yield [(upto_seq, "m", 0, 0, "k")]


async def main() -> None:
    spec = BoardSpec("b")
    engine = BoardEngine(spec)
    rng = random.Random(1)
    states = {f"member-{i}": engine.rule.update(f"member-{i}", rng.randrange(10**9), 1000, f"k{i}") for i in range(1_000_000)}
    engine.tables[(PeriodKind.ALLTIME, "alltime")] = RankedTable.from_states(engine.rule, ALLTIME_WINDOW, states)
    engine.last_seq = 5
    tmp = tempfile.mkdtemp()
    snap = Snapshotter(engine, _OneRecord(),  # type: ignore[arg-type]
                        SqliteSnapshots(Path(tmp)), 1, Clock())
    gaps: list[float] = []
    done = False
    table = engine.tables[(PeriodKind.ALLTIME, "alltime")]
    update = engine.rule.update

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last - 0.001)
            last = now

    async def ingest() -> None:  # 100 events a millisecond at most, as batches would apply them
        while not done:
            table.apply_updates([(f"member-{rng.randrange(10**6)}", update("x", rng.randrange(10**9), 2000, "k"))
                                 for _ in range(100)])
            await asyncio.sleep(0.001)

    tasks = [asyncio.create_task(ticker()), asyncio.create_task(ingest())]
    await asyncio.sleep(0.2)
    gaps.clear()
    started = time.perf_counter()
    await snap.take()
    took = time.perf_counter() - started
    done = True
    await asyncio.gather(*tasks)
    data = (Path(tmp) / "b.snapshot").read_bytes()
    gaps.sort()
    print(f"10**6 members, 1 table: snapshot {took:.3f}s, {len(data) / 1e6:.1f} MB; loop stall max"
          f" {gaps[-1] * 1000:.1f} ms, p99 {gaps[int(len(gaps) * 0.99)] * 1000:.1f} ms over {len(gaps)} ticks")
    started = time.perf_counter()
    image = decode(data).tables[0]
    decoded = time.perf_counter()
    RankedTable.from_entries(engine.rule, ALLTIME_WINDOW, image.entries, None)
    print(f"decode {decoded - started:.3f}s, load the table {time.perf_counter() - decoded:.3f}s")


if __name__ == "__main__":
    asyncio.run(main())
