"""``python -m loadtest rebuild``: how fast a board's journal replays, folded in the journal and
event by event, on each journal backend.

For each backend asked (sqlite in a temporary directory; PostgreSQL at ``--pg-url`` or on a
throwaway embedded server, `loadtest.postgres`) and each ``--events`` size, a journal of the
load tests' board (best, desc, earliest; alltime+weekly+daily) is written with `Journal.append`
in transactions of `BATCH` events (not timed): every member once, up to ``--members``, then a
seeded zipf stream, values uniform in 0..1e9, instants spread evenly over the ``--span-hours``
before a fixed now, in seq order like a live journal. It is then replayed as `arena rebuild` and
a start without a snapshot do (a read-only open, then `arena.board.load.load`), ``--rebuild-repeats``
times per mode after one warm-up: events/s from the replay's own clock (the open, with sqlite's
quick_check, is left out), min/median/max, and the CPU split of the replay (this process, which
is Arena's replay; the rest of the machine: the PostgreSQL server, and other people's work on a
shared machine). Both modes must build the same digests. ``--profile N`` prints the top N lines
(by own time) of a cProfile of one folded replay per backend and size.
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import random
import statistics
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

from arena.board.load import load
from arena.config import JournalSettings
from arena.engine.board import BoardEngine
from arena.engine.events import Event
from arena.engine.periods import PeriodKind
from arena.engine.records import ScoreRecord
from arena.engine.spec import BoardSpec
from arena.journal import JournalBackend
from arena.journal.postgresql import PostgresBackend
from arena.journal.sqlite import SqliteBackend
from loadtest.postgres import postgres_url
from loadtest.stats import CpuMeter, fmt_int, progress
from loadtest.workload import member_name, zipf_ranks

NOW = 1_796_216_400_000  # 2026-12-02T13:00:00Z: the same windows every run
HOUR_MS = 3_600_000
BATCH = 10_000
SPEC = BoardSpec("bench", periods=(PeriodKind.ALLTIME, PeriodKind.WEEKLY, PeriodKind.DAILY), min_value=0,
                 max_value=1_000_000_000)
MODES = {"folded": True, "events": False}


def score_batches(events: int, members: int, zipf: float, seed: int, span_hours: float) -> Iterator[list[ScoreRecord]]:
    """The journal's score records in batches of `BATCH`, generated as they are written (10M
    records would not fit in memory at once)."""
    rng = random.Random(f"{seed}:rebuild")
    span = max(1, int(span_hours * HOUR_MS))
    first = NOW - span
    for start in range(0, events, BATCH):
        seqs = range(start + 1, min(events, start + BATCH) + 1)
        stream = zipf_ranks(members, zipf, len(seqs), rng)
        batch = []
        for seq, ranked in zip(seqs, stream, strict=True):
            member = member_name(seq - 1 if seq <= members else ranked)
            at = first + (seq - 1) * span // events
            batch.append(ScoreRecord(seq, Event(SPEC.name, member, rng.randrange(1_000_000_001), at, f"r{seq:09d}"),
                                     at, "bench"))
        yield batch


@asynccontextmanager
async def journal_backend(kind: str, url: str | None) -> AsyncIterator[JournalBackend]:
    """An empty backend of ``kind`` (a temporary directory, or a fresh schema dropped afterwards)."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="arena-rebuild-") as tmp:
            sqlite = SqliteBackend(Path(tmp), "normal")
            yield sqlite
            await sqlite.close()
        return
    assert url is not None
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    postgresql = PostgresBackend(JournalSettings("postgresql", url, schema), "normal", "bench")
    try:
        yield postgresql
    finally:
        async with postgresql.store.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await postgresql.close()


async def write_journal(backend: JournalBackend, events: int, members: int, zipf: float, seed: int,
                        span_hours: float) -> None:
    journal = await backend.open(SPEC)
    try:
        for batch in score_batches(events, members, zipf, seed, span_hours):
            await journal.append(batch)
            if batch[-1].seq % 1_000_000 == 0:
                progress(f"  written {batch[-1].seq:,} events")
    finally:
        await journal.close()


async def replay_once(backend: JournalBackend, fold: bool) -> tuple[BoardEngine, dict[str, Any]]:
    journal = await backend.open(SPEC, readonly=True)
    try:
        engine = BoardEngine(SPEC)
        meter = CpuMeter(None)
        report = await load(engine, journal, NOW, fold=fold)
        cpu = meter.stop()
    finally:
        await journal.close()
    return engine, {"events": report.events, "seconds": report.seconds, "events_per_s": report.events / report.seconds,
                    "arena_cpu": cpu["client_cpu"], "machine_cpu": cpu["machine_cpu"], "other_cpu": cpu["other_cpu"]}


async def measure(backend: JournalBackend, modes: list[str], repeats: int, profile: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    digests: dict[str, dict[str, str]] = {}
    for mode in modes:
        runs = []
        for rep in range(repeats + 1):
            engine = None
            gc.collect()
            engine, run = await replay_once(backend, MODES[mode])
            progress(f"  {mode} replay {'warm-up' if rep == 0 else f'{rep}/{repeats}'}: "
                     f"{run['seconds']:.2f}s, {fmt_int(run['events_per_s'])} events/s")
            if rep:
                runs.append(run)
        assert engine is not None
        digests[mode] = {f"{k}/{pid}": t.digest() for (k, pid), t in engine.tables.items()}
        del engine
        rates = [r["events_per_s"] for r in runs]
        out[mode] = {"runs": runs, "digests": digests[mode],
                     "events_per_s": {"min": min(rates), "median": statistics.median(rates), "max": max(rates)}}
    if len(digests) == 2:
        out["same_digests"] = digests["folded"] == digests["events"]
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        await replay_once(backend, True)
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(profile)
        out["profile"] = text.getvalue()
    return out


async def rebuild_benchmark(backends: list[str], sizes: list[int], members: int, zipf: float, seed: int,
                            span_hours: float, modes: list[str], repeats: int, profile: int,
                            pg_url: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"command": "rebuild", "backends": {}, "members": members, "zipf": zipf, "seed": seed,
                           "span_hours": span_hours, "repeats": repeats}
    with postgres_url(pg_url) if "postgresql" in backends else nullcontext() as url:
        for kind in backends:
            out["backends"][kind] = {}
            for events in sizes:
                async with journal_backend(kind, url) as backend:
                    who = min(members, events)
                    progress(f"{kind}: writing {events:,} events of {who:,} members")
                    await write_journal(backend, events, who, zipf, seed, span_hours)
                    out["backends"][kind][events] = await measure(backend, modes, repeats, profile)
    out["ok"] = all(r.get("same_digests", True) for sizes_ in out["backends"].values() for r in sizes_.values())
    return out


def print_rebuild(out: dict[str, Any]) -> None:
    """One line per backend, size and mode; then the folded/event-by-event and PostgreSQL/sqlite
    ratios of the medians, and the profiles asked for."""
    print(f"\nreplay of a journal (board: best, alltime+weekly+daily; members {out['members']:,}, zipf {out['zipf']},"
          f" instants over {out['span_hours']} h; {out['repeats']} runs after a warm-up; shared machine)")
    print("backend     events      mode     events/s min / median / max        arena CPU  machine CPU  other CPU")
    medians: dict[tuple[str, int, str], float] = {}
    for kind, sizes in out["backends"].items():
        for events, result in sizes.items():
            for mode in MODES:
                if mode not in result:
                    continue
                rate = result[mode]["events_per_s"]
                medians[(kind, events, mode)] = rate["median"]
                last = result[mode]["runs"][-1]
                print(f"{kind:<11} {events:>10,}  {mode:<8} {fmt_int(rate['min']):>11} / {fmt_int(rate['median']):>11} /"
                      f" {fmt_int(rate['max']):>11}   {last['arena_cpu']:>8.2f}  {last['machine_cpu'] or 0:>11.2f}"
                      f"  {last['other_cpu'] or 0:>9.2f}")
            if "same_digests" in result:
                print(f"{'':<11} {'':>10}  digests folded = event by event: {result['same_digests']}")
    for (kind, events, mode), rate in medians.items():
        if mode == "folded" and (kind, events, "events") in medians:
            print(f"{kind} {events:,}: folded / event by event = {rate / medians[(kind, events, 'events')]:.2f}")
        if kind == "postgresql" and ("sqlite", events, mode) in medians:
            print(f"{mode} {events:,}: postgresql / sqlite = {rate / medians[('sqlite', events, mode)]:.2f}")
    for kind, sizes in out["backends"].items():
        for events, result in sizes.items():
            if "profile" in result:
                print(f"\nprofile of one folded replay, {kind}, {events:,} events:\n{result['profile']}")
    print(f"ok: {out['ok']}")
