"""Regions: what partitions cost (DESIGN.md "Partitioned tables: regions and leagues").

    python -m loadtest.regions --seconds 5 --rounds 3 --members 100000

A script, not a test. Two measurements:

* **Ingest**: one ``arena serve`` with two boards alike in everything (best, desc, earliest,
  alltime+weekly+daily) but ``regions``: ``plain`` has none, ``regional`` has 8, and each of its
  events names one of them at random (so each event lands in 3 global tables and 3 region tables).
  ``--rounds`` rounds of ``--seconds`` each, alternating the boards in the same run on the same
  server: ``--connections`` WebSocket writers, each with ``--inflight`` frames of ``--batch``
  events in flight, members uniform over ``--members``. Events/s per round (acked events over
  the round's seconds), min/median/max, and the ratio of the medians (goal >= 0.8).
* **Memory**: in one process, a board's engine (`arena.engine.board.BoardEngine`) folds one event
  for each of ``--memory-members`` members into its alltime table, with and without 8 regions;
  tracemalloc of the tables (member strings counted apart) gives bytes per member per table:
  a region's table holds each member once more.

Caveats: the machine is shared (other processes run beside it); loopback; durability ``normal``
by default (``--durability full`` waits on fsync, which hides CPU costs).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import random
import secrets
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import websockets

from arena.config import parse_board
from arena.engine.board import BoardEngine
from arena.engine.periods import ALLTIME_WINDOW
from arena.engine.spec import BoardSpec
from loadtest.arena_client import bench_config
from loadtest.config_toml import write_config
from loadtest.process import ArenaServe

REGIONS = [f"r{i}" for i in range(8)]
BOARD = {"aggregation": "best", "order": "desc", "tie": "earliest", "periods": ["alltime", "weekly", "daily"],
         "min_value": 0, "max_value": 1_000_000_000}


@dataclasses.dataclass
class Options:
    seconds: float
    rounds: int
    members: int
    connections: int
    inflight: int
    batch: int
    durability: str
    memory_members: int


async def _writer(url: str, token: str, board: str, opts: Options, until: float, seed: int) -> int:
    """One connection writing to ``board`` until ``until``: the events acked accepted."""
    rnd = random.Random(seed)
    regional = board == "regional"
    accepted = 0
    counter = 0
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None) as ws:
        pending: dict[int, int] = {}

        async def send() -> None:
            nonlocal counter
            now = int(time.time() * 1000)
            events = []
            for _ in range(opts.batch):
                counter += 1
                event: dict[str, Any] = {"board": board, "member": f"m{rnd.randrange(opts.members)}",
                                         "value": rnd.randrange(1_000_000_000), "occurred_at": now - rnd.randrange(500, 4000),
                                         "idempotency_key": f"{seed}-{counter}"}
                if regional:
                    event["region"] = rnd.choice(REGIONS)
                events.append(event)
            pending[counter] = len(events)
            await ws.send(orjson.dumps({"op": "submit", "id": counter, "events": events}).decode())

        for _ in range(opts.inflight):
            await send()
        while pending:
            frame = orjson.loads(await ws.recv())
            pending.pop(frame["id"])
            accepted += sum(1 for r in frame["results"] if r["status"] == "accepted")
            if time.monotonic() < until:
                await send()
    return accepted


async def _round(url: str, token: str, board: str, opts: Options, seed: int) -> float:
    started = time.monotonic()
    until = started + opts.seconds
    counts = await asyncio.gather(*(_writer(url, token, board, opts, until, seed * 100 + i) for i in range(opts.connections)))
    return sum(counts) / (time.monotonic() - started)


def ingest(opts: Options) -> dict[str, list[float]]:
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="arena-regions-") as tmp:
        base = bench_config(Path(tmp) / "data", token, durability=opts.durability)
        boards = {"plain": parse_board("plain", BOARD), "regional": parse_board("regional", {**BOARD, "regions": REGIONS})}
        config = write_config(dataclasses.replace(base, boards=boards), Path(tmp) / "config.toml")
        server = ArenaServe(config)
        server.start()
        try:
            rates: dict[str, list[float]] = {"plain": [], "regional": []}
            for r in range(opts.rounds):
                for board in ("plain", "regional") if r % 2 == 0 else ("regional", "plain"):
                    rate = asyncio.run(_round(server.ws_url, token, board, opts, r * 2 + (board == "regional")))
                    rates[board].append(rate)
                    print(f"round {r + 1}: {board} {rate:,.0f} events/s", file=sys.stderr, flush=True)
            return rates
        finally:
            server.stop()


def memory(members: int) -> dict[str, float]:
    """Bytes per member of a board's alltime table(s), one event per member, without and with 8
    regions (members spread evenly over them)."""
    names = [f"member-{i:09d}" for i in range(members)]
    out: dict[str, float] = {}
    for label, regions in (("plain", ()), ("regional", tuple(REGIONS))):
        spec = BoardSpec("m", regions=regions)
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        engine = BoardEngine(spec)
        windows = (ALLTIME_WINDOW,)
        engine.fold((windows, name, i, 1_000 + i, f"k{i}", regions[i % len(regions)] if regions else None)
                    for i, name in enumerate(names))
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        tables = 1 + (1 if regions else 0)  # each member is in the global table and in one region's
        out[label] = used / members
        out[f"{label}_per_table"] = used / (members * tables)
        del engine
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--members", type=int, default=100_000)
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--inflight", type=int, default=8)
    p.add_argument("--batch", type=int, default=250)
    p.add_argument("--durability", default="normal", choices=("normal", "full"))
    p.add_argument("--memory-members", type=int, default=200_000)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    opts = Options(a.seconds, a.rounds, a.members, a.connections, a.inflight, a.batch, a.durability, a.memory_members)
    rates = ingest(opts)
    mem = memory(opts.memory_members)
    print("board\tmin\tmedian\tmax (events/s)")
    for board, values in rates.items():
        print(f"{board}\t{min(values):,.0f}\t{statistics.median(values):,.0f}\t{max(values):,.0f}")
    ratio = statistics.median(rates["regional"]) / statistics.median(rates["plain"])
    print(f"regional / plain (medians): {ratio:.2f} (goal >= 0.8)")
    print(f"memory, alltime table, {opts.memory_members:,} members: plain {mem['plain']:.0f} B/member; "
          f"8 regions {mem['regional']:.0f} B/member ({mem['regional_per_table']:.0f} B per member per table)")
    if a.json:
        a.json.write_text(json.dumps({"options": dataclasses.asdict(opts), "rates": rates, "memory": mem, "ratio": ratio}))
    return 0 if ratio >= 0.8 else 1


if __name__ == "__main__":
    raise SystemExit(main())
