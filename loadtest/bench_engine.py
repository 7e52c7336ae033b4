"""Engine micro-benchmark: one ranked table of N members, and a rebuild from a real journal.

    python -m loadtest.bench_engine --members 1000000          # the issue's size
    python -m loadtest.bench_engine --members 10000 --events 100000 --repeats 3   # a quick run

A script, not a test. Method (after sortedcontainers' benchmarks): a fixed seed, a warm-up pass
that is not measured, then ``--repeats`` measured passes; each line prints min / median / max of
the per-pass figure. Progress lines go to stderr, the results table to stdout.

What is measured, in one process, no network:

* ``rank``: `RankedTable.entry` of a random member (dict lookup + SortedList bisect).
* ``top100``: `RankedTable.top(100)` at offset 0 and at a random offset.
* ``around``: `RankedTable.around_member(m, 10)` (21 entries).
* ``updates/s``: `RankedTable.apply` of an improving score (best, desc) of a random member.
* ``bytes/member``: tracemalloc of building the table (its dict, SortedList, tuples and sort keys,
  member strings excluded and shown apart), and the process RSS delta of building a second table
  (allocator slack included; noisier).
* ``rebuild``: a board journal of ``--events`` score events is written with `SqliteJournal.append`
  in batches (timed), reopened read-only like `arena rebuild`, and `arena.board.load.load` into a
  fresh `BoardEngine` is timed; events/s = journaled events / replay seconds. Beside the replay,
  a task asks for a turn of the event loop every millisecond: the longest wait and the p99 say
  how long another board's queries and acks would stall while this board replays.

Peer: the same rank lookups and updates on a bare ``dict`` + ``SortedList`` of the same tuples,
without the table's wrapper, to show what the wrapper costs.

Caveats: one CPU-bound Python thread; numbers move by 10-20 % with CPU frequency and the page
cache (the journal is read from a warm cache after the first pass). tracemalloc counts what
Python allocates, not what the allocator keeps; RSS counts that too.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import os
import platform
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sortedcontainers import SortedList

from arena.board.load import LoadReport, load
from arena.cli.main import GC_THRESHOLDS
from arena.engine.board import BoardEngine
from arena.engine.events import Event
from arena.engine.periods import ALLTIME_WINDOW, PeriodKind
from arena.engine.rankkey import pack
from arena.engine.records import Record, ScoreRecord
from arena.engine.scoring import Aggregation, Order, ScoringRule, Standing, Tie
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.journal.sqlite import SqliteJournal
from loadtest.stats import fmt_unit, progress, rss_bytes
from loadtest.workload import member_name

TARGET_RANK_US = 15.0
TARGET_REBUILD_EVENTS_S = 1_000_000.0
TARGET_BYTES_PER_MEMBER = 300.0
NOW = 1_796_216_400_000  # 2026-12-02T13:00:00Z: a fixed "now" so windows are the same every run
DAY_MS = 86_400_000


@dataclass
class Row:
    name: str
    unit: str
    values: list[float]
    target: str = ""
    ok: bool | None = None
    note: str = ""

    def cells(self) -> list[str]:
        lo, mid, hi = min(self.values), statistics.median(self.values), max(self.values)
        verdict = "" if self.ok is None else ("ok" if self.ok else "MISSED")
        figures = [fmt_unit(x, self.unit) for x in (lo, mid, hi)]
        return [self.name, self.unit, *figures, self.target, verdict, self.note]


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    profile: str = ""

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row


def per_op_us(run: Callable[[], int], repeats: int) -> list[float]:
    """Warm up once, then ``repeats`` timed passes; µs per operation of each pass."""
    run()
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        n = run()
        out.append((time.perf_counter() - started) * 1e6 / n)
    return out


# -- the table ----------------------------------------------------------------------------------


def standings_for(n: int, rnd: random.Random) -> dict[str, Standing]:
    return {member_name(i): (rnd.randrange(1_000_000_000), NOW - rnd.randrange(DAY_MS), "") for i in range(n)}


def bench_table(args: argparse.Namespace, results: Results) -> None:
    n: int = args.members
    repeats: int = args.repeats
    q: int = args.queries
    rnd = random.Random(args.seed)
    rule = ScoringRule.for_board(Aggregation.BEST, Order.DESC, Tie.EARLIEST)

    progress(f"table: {n:,} standings")
    standings = standings_for(n, rnd)
    names = list(standings)

    # RSS first, on the table the queries use: measured after a freed table, the allocator would
    # reuse that memory and the delta would read low.
    progress("table: build (timed) and RSS delta")
    gc.collect()
    rss0 = rss_bytes(os.getpid())
    started = time.perf_counter()
    table = RankedTable.from_standings(rule, ALLTIME_WINDOW, standings)
    build_s = time.perf_counter() - started
    gc.collect()
    rss1 = rss_bytes(os.getpid())
    assert len(table) == n
    results.add(Row("build from standings", "s", [build_s], note="pack each standing, then one sort (a replay does the sort per table)"))

    progress("table: memory (tracemalloc of a second RankedTable.from_standings)")
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    traced = RankedTable.from_standings(rule, ALLTIME_WINDOW, standings)
    traced_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del traced
    gc.collect()
    name_bytes = sum(sys.getsizeof(m) for m in names) / n
    results.add(Row("memory: table structures (tracemalloc)", "B/member", [traced_bytes / n],
                    f"<= {TARGET_BYTES_PER_MEMBER:.0f}", traced_bytes / n <= TARGET_BYTES_PER_MEMBER,
                    "dict + SortedList + packed bytes entries"))
    with_names = traced_bytes / n + name_bytes
    results.add(Row("memory: + member strings", "B/member", [with_names],
                    f"<= {TARGET_BYTES_PER_MEMBER:.0f}", with_names <= TARGET_BYTES_PER_MEMBER,
                    f"a name like {names[0]!r} is {sys.getsizeof(names[0])} B; shared by a board's tables"))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = SortedList(names)
    index_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del index
    results.add(Row("memory: of which the member-name index", "B/member", [index_bytes / n],
                    note="a SortedList of the dict's own strings (prefix search)"))
    if rss0 is not None and rss1 is not None:
        rss_delta = (rss1 - rss0) / n
        results.add(Row("memory: RSS delta of the first table", "B/member", [rss_delta],
                        f"<= {TARGET_BYTES_PER_MEMBER:.0f}", rss_delta <= TARGET_BYTES_PER_MEMBER,
                        "member strings excluded; allocator slack included"))

    lookups = [names[rnd.randrange(n)] for _ in range(q)]

    progress(f"table: rank lookups x{q:,} x{repeats}")

    def ranks() -> int:
        entry = table.entry
        for m in lookups:
            entry(m)
        return len(lookups)

    rank_us = per_op_us(ranks, repeats)
    results.add(Row("rank (entry of a member)", "µs/op", rank_us, f"<= {TARGET_RANK_US:.0f}",
                    statistics.median(rank_us) <= TARGET_RANK_US))

    items = table._items
    bare: SortedList = table._sorted

    def peer_ranks() -> int:
        get, bisect = items.__getitem__, bare.bisect_left
        for m in lookups:
            bisect(get(m))
        return len(lookups)

    results.add(Row("  peer: bare dict + SortedList.bisect", "µs/op", per_op_us(peer_ranks, repeats),
                    note="no Entry, no unpack"))

    tops = max(q // 10, 1)
    offsets = [rnd.randrange(max(n - 100, 1)) for _ in range(tops)]
    progress(f"table: top-100 and around(10) x{tops:,} x{repeats}")

    def top_first() -> int:
        for _ in range(tops):
            table.top(100)
        return tops

    def top_offset() -> int:
        for off in offsets:
            table.top(100, off)
        return tops

    def around() -> int:
        for m in lookups[:tops]:
            table.around_member(m, 10)
        return tops

    results.add(Row("top 100 (offset 0)", "µs/op", per_op_us(top_first, repeats)))
    results.add(Row("top 100 (random offset)", "µs/op", per_op_us(top_offset, repeats)))
    results.add(Row("around member, radius 10", "µs/op", per_op_us(around, repeats)))

    prefixes = [m[: rnd.randint(3, len(m))] for m in lookups[:tops]]

    def search() -> int:
        for prefix in prefixes:
            table.search(prefix, 20)
        return tops

    results.add(Row("search a prefix, limit 20", "µs/op", per_op_us(search, repeats), note="each entry with its rank"))

    updates = args.updates
    progress(f"table: improving updates x{updates:,} x{repeats}")
    scores = {m: s for m, (s, _r, _k) in standings.items()}

    def improving_batch() -> list[tuple[str, int, int, str]]:
        batch = []
        for i in range(updates):
            m = names[rnd.randrange(n)]
            scores[m] += rnd.randrange(1, 100_000)
            batch.append((m, scores[m], NOW + i, "k"))
        return batch

    def timed_updates(apply: Callable[[str, int, int, str], object]) -> list[float]:
        per_s = []
        for rep in range(repeats + 1):
            batch = improving_batch()
            started = time.perf_counter()
            for m, v, t, k in batch:
                apply(m, v, t, k)
            elapsed = time.perf_counter() - started
            if rep:  # the first pass is the warm-up
                per_s.append(len(batch) / elapsed)
        return per_s

    results.add(Row("updates (apply, improving)", "updates/s", timed_updates(table.apply)))
    assert all(table.standing(m) is not None for m in names[:10])

    peer_items = dict(table._items)
    peer_sorted = SortedList(peer_items.values())
    sort_key = rule.sort_key

    def peer_apply(m: str, v: int, t: int, k: str) -> None:
        old = peer_items[m]
        peer_sorted.remove(old)
        new = peer_items[m] = pack(sort_key(v, t), m)
        peer_sorted.add(new)

    results.add(Row("  peer: bare remove + add", "updates/s", timed_updates(peer_apply), note="no fold, no unpack"))


# -- the rebuild --------------------------------------------------------------------------------


def board_spec(periods: Sequence[str]) -> BoardSpec:
    return BoardSpec("bench", periods=tuple(PeriodKind(p) for p in periods))


def score_records(args: argparse.Namespace, rnd: random.Random) -> list[Record]:
    """Events spread over the last ``--days`` days before NOW, in time order like a live journal."""
    n = args.events
    span = args.days * DAY_MS
    times = sorted(NOW - rnd.randrange(span) for _ in range(n))
    members = args.members
    return [
        ScoreRecord(seq, Event("bench", member_name(rnd.randrange(members)), rnd.randrange(1_000_000_000), t,
                               f"e{seq:09d}"), t + rnd.randrange(5_000), "bench")
        for seq, t in enumerate(times, start=1)
    ]


async def write_journal(path: Path, spec: BoardSpec, records: list[Record], batch: int) -> float:
    journal = await SqliteJournal.open(path, spec)
    started = time.perf_counter()
    try:
        for i in range(0, len(records), batch):
            await journal.append(records[i : i + batch])
    finally:
        elapsed = time.perf_counter() - started
        await journal.close()
    return elapsed


@dataclass
class Replayed:
    report: LoadReport
    open_s: float
    cpu_s: float  # process CPU time of the replay, every thread (aiosqlite's included)
    engine: BoardEngine
    pauses: list[float]  # seconds between turns of the event loop during the replay, sorted


async def _turns(gaps: list[float]) -> None:
    """Ask for a turn of the event loop every millisecond and record how long each took: what
    another board's queries and acks would wait while this one replays."""
    last = time.perf_counter()
    while True:
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def replay_once(path: Path, spec: BoardSpec) -> Replayed:
    started = time.perf_counter()
    journal = await SqliteJournal.open(path, spec, readonly=True)
    opened = time.perf_counter() - started
    gaps: list[float] = []
    turns = asyncio.create_task(_turns(gaps))
    try:
        engine = BoardEngine(spec)
        cpu = time.process_time()
        report = await load(engine, journal, NOW)
        cpu = time.process_time() - cpu
        await asyncio.sleep(0.002)  # the turns task records the pause the replay ended with
    finally:
        turns.cancel()
        await journal.close()
    return Replayed(report, opened, cpu, engine, sorted(gaps))


def bench_rebuild(args: argparse.Namespace, results: Results) -> None:
    rnd = random.Random(args.seed + 1)
    spec = board_spec(args.periods)
    tmp = Path(args.journal_dir or tempfile.mkdtemp(prefix="arena-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "bench.journal.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    try:
        progress(f"rebuild: generating {args.events:,} events over {args.days} days, {args.members:,} members")
        records = score_records(args, rnd)
        progress(f"rebuild: writing {path} in batches of {args.batch:,} (synchronous=FULL)")
        write_s = asyncio.run(write_journal(path, spec, records, args.batch))
        del records
        gc.collect()
        size = sum(Path(f"{path}{s}").stat().st_size for s in ("", "-wal") if Path(f"{path}{s}").exists())
        results.add(Row("journal write (SqliteJournal.append)", "s", [write_s],
                        note=f"{args.events / write_s:,.0f} events/s, {args.events // args.batch} transactions, "
                             f"{size / 2**20:.0f} MiB"))

        rates, cpu_rates, opens, totals, longest, p99s = [], [], [], [], [], []
        engine: BoardEngine | None = None
        passes: list[float] = []
        for rep in range(args.rebuild_repeats + 1):
            progress(f"rebuild: replay {'warm-up' if rep == 0 else f'{rep}/{args.rebuild_repeats}'}")
            engine = None
            gc.collect()
            done = asyncio.run(replay_once(path, spec))
            engine, report = done.engine, done.report
            if rep:
                rates.append(report.events / report.seconds)
                cpu_rates.append(report.events / done.cpu_s)
                opens.append(done.open_s)
                totals.append(report.seconds)
                longest.append(done.pauses[-1] * 1e3)
                p99s.append(done.pauses[int(len(done.pauses) * 0.99)] * 1e3)
                passes = sorted({t.seconds for t in report.tables})
        assert engine is not None
        largest = max(engine.tables.values(), key=len)
        kinds = "+".join(args.periods)
        results.add(Row(f"rebuild ({kinds})", "events/s", rates, f">= {TARGET_REBUILD_EVENTS_S:,.0f}",
                        statistics.median(rates) >= TARGET_REBUILD_EVENTS_S,
                        f"{args.events:,} events, {len(engine.tables)} tables, largest {len(largest):,} members"))
        results.add(Row("  per CPU second (all threads)", "events/s", cpu_rates, note="less sensitive to a loaded machine"))
        results.add(Row("  replay seconds", "s", totals,
                        note="tables built at " + ", ".join(f"{p:.2f}s" for p in passes) + " (current short tables, then the rest)"))
        results.add(Row("  longest event-loop pause", "ms", longest,
                        note="what other boards wait for while one replays; most is the sort of the largest table"))
        results.add(Row("  event-loop pause p99", "ms", p99s, note="turns asked for every 1 ms during the replay"))
        results.add(Row("  read-only open (not in events/s)", "s", opens, note="includes PRAGMA quick_check"))

        if args.profile:
            progress("rebuild: one replay under cProfile")
            profiler = cProfile.Profile()
            profiler.enable()
            asyncio.run(replay_once(path, spec))
            profiler.disable()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.profile)
            results.profile = out.getvalue()
    finally:
        if not args.keep_journal and not args.journal_dir:
            shutil.rmtree(tmp, ignore_errors=True)
        elif args.keep_journal:
            progress(f"rebuild: journal kept at {path}")


# -- main -----------------------------------------------------------------------------------------


def print_results(args: argparse.Namespace, results: Results) -> None:
    header = ["metric", "unit", "min", "median", "max", "target", "verdict", "note"]
    table = [header] + [r.cells() for r in results.rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    print(f"# arena engine benchmark: python -m loadtest.bench_engine {' '.join(sys.argv[1:])}")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(f"# python {platform.python_version()} on {platform.platform()}, {os.cpu_count()} CPUs, load {load}; seed {args.seed}; "
          f"{args.members:,} members, {args.repeats} repeats (+1 warm-up) of {args.queries:,} lookups / "
          f"{args.updates:,} updates; rebuild of {args.events:,} events x{args.rebuild_repeats} (+1 warm-up)")
    for row in table:
        cells = [c.rjust(w) if 2 <= i <= 4 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))]
        print("  ".join(cells) + "  " + row[-1])
    if results.profile:
        print("\n# cProfile of one replay, by own time (cProfile slows the per-row loop; read it as shares)")
        print(results.profile)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m loadtest.bench_engine", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--members", type=int, default=1_000_000, help="members in the table (and in the journal)")
    p.add_argument("--events", type=int, default=None, help="journaled events to rebuild from (default: --members)")
    p.add_argument("--repeats", type=int, default=5, help="measured passes per table metric")
    p.add_argument("--queries", type=int, default=200_000, help="rank lookups per pass (top/around: a tenth)")
    p.add_argument("--updates", type=int, default=200_000, help="improving updates per pass")
    p.add_argument("--rebuild-repeats", type=int, default=3, help="measured replays")
    p.add_argument("--periods", type=lambda s: s.split(","), default=["alltime", "weekly", "daily"],
                   help="the board's periods, comma-separated")
    p.add_argument("--days", type=int, default=7, help="events spread over this many days before 'now'")
    p.add_argument("--batch", type=int, default=20_000, help="records per journal transaction")
    p.add_argument("--seed", type=int, default=20261202)
    p.add_argument("--journal-dir", help="write the journal here (default: a temp dir, removed)")
    p.add_argument("--keep-journal", action="store_true", help="keep the journal file")
    p.add_argument("--profile", type=int, nargs="?", const=20, default=0, metavar="N",
                   help="print the top N functions of one replay under cProfile")
    p.add_argument("--skip-table", action="store_true")
    p.add_argument("--skip-rebuild", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.events is None:
        args.events = args.members
    if args.members < 1 or args.events < 1 or args.repeats < 1 or args.rebuild_repeats < 1:
        parser().error("sizes and repeats must be >= 1")
    for p in args.periods:
        if p not in {k.value for k in PeriodKind}:
            parser().error(f"unknown period {p!r}")
    gc.set_threshold(*GC_THRESHOLDS)  # as in the arena process (see arena.cli.GC_THRESHOLDS)
    results = Results()
    started = time.perf_counter()
    if not args.skip_table:
        bench_table(args, results)
    if not args.skip_rebuild:
        bench_rebuild(args, results)
    progress(f"done in {time.perf_counter() - started:.1f}s")
    print_results(args, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
