"""Leagues: how fast a member's division standings answer on a league board of 10**6 members in
divisions of 50 (DESIGN.md "Partitioned tables: regions and leagues"; goal <= 1 ms p99).

    python -m loadtest.leagues --members 1000000 --size 50 --queries 20000

A script, not a test. In one process, a league board's engine (`arena.engine.board.BoardEngine`,
one daily season, best score) takes one event for each of ``--members`` members through the
live path (`decide`, `commit`) in batches of ``--batch``: each member joins a bronze division
in journal order. Then ``--queries`` times, for a random member: its division
(`BoardEngine.division`), that division's table (`BoardEngine.view`, as `?partition=` does) and
its standings (`top(size)`), timed with `time.perf_counter_ns`: p50 / p99 / max, under the
cyclic GC thresholds of `arena serve` (`arena.cli.main.GC_THRESHOLDS`). Then what a snapshot
adds for the league: the tiers and divisions image (`League.image`, made in pieces between
which the event loop runs: its total and its longest step), and loading it back. What HTTP or a
WebSocket adds on top is the same as for any table query (docs/performance.md). The machine is
shared: figures move with its load.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from typing import Any

import orjson

from arena.cli.main import GC_THRESHOLDS
from arena.config import parse_board
from arena.engine.board import BoardEngine
from arena.engine.events import Event
from arena.engine.league import League

NOW = 1_799_020_800_000 + 12 * 3_600_000  # 2027-01-04T12:00Z


def build(members: int, size: int, batch: int) -> tuple[BoardEngine, float]:
    """A league board with one event for each member, and the seconds it took."""
    spec = parse_board("league", {"periods": ["daily"], "league": {"size": size, "tiers": ["bronze", "silver", "gold"],
                                                                     "promote": 5, "relegate": 5}})
    engine = BoardEngine(spec)
    engine.publish(0, engine.kinds)
    rnd = random.Random(1)
    started = time.perf_counter()
    for begin in range(0, members, batch):
        events = [Event("league", f"member-{i:07d}", rnd.randrange(1_000_000), NOW - rnd.randrange(3_600_000), f"k{i}")
                  for i in range(begin, min(begin + batch, members))]
        plan = engine.decide([(events, NOW, "gs")], {}, NOW)
        engine.commit(plan)
    return engine, time.perf_counter() - started


def measure(engine: BoardEngine, members: int, size: int, queries: int) -> dict[str, Any]:
    rnd = random.Random(2)
    window = engine.schedule.current("daily", NOW)
    times = []
    for _ in range(queries):
        member = f"member-{rnd.randrange(members):07d}"
        begin = time.perf_counter_ns()
        division = engine.division(window, member)
        assert division is not None
        entries = engine.view("daily", None, NOW, division).top(size)
        times.append(time.perf_counter_ns() - begin)
        assert any(e.member == member for e in entries)
    times.sort()
    ms = [t / 1e6 for t in times]
    return {"p50_ms": statistics.median(ms), "p99_ms": ms[int(len(ms) * 0.99) - 1], "max_ms": ms[-1],
            "divisions": len(engine.partition_names(window))}


def snapshot_costs(engine: BoardEngine) -> dict[str, Any]:
    """What a snapshot of the league costs beyond its tables: its image (`League.image`: what it
    reads taken at once, its JSON text made in pieces between which the loop runs, and which the
    snapshot's header holds as they are; the longest step is what the loop waits at most), and
    loading it back (at a start)."""
    assert engine.league is not None
    begin = time.perf_counter()
    steps = engine.league.image()
    longest = time.perf_counter() - begin
    while True:
        step = time.perf_counter()
        try:
            next(steps)
        except StopIteration as made:
            image = made.value
            break
        finally:
            longest = max(longest, time.perf_counter() - step)
    text = b"".join(image)
    imaged = time.perf_counter()
    League(engine.league.spec).load(orjson.loads(text), engine.schedule.window_by_id)
    loaded = time.perf_counter()
    return {"image_ms": round((imaged - begin) * 1000, 1), "image_longest_step_ms": round(longest * 1000, 1),
            "image_mb": round(len(text) / 2**20, 1), "load_ms": round((loaded - imaged) * 1000, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--json", help="write the figures to this file too")
    args = parser.parse_args(argv)
    gc.set_threshold(*GC_THRESHOLDS)
    engine, seconds = build(args.members, args.size, args.batch)
    figures = {"members": args.members, "size": args.size, "ingest_seconds": round(seconds, 1),
               **measure(engine, args.members, args.size, args.queries), **snapshot_costs(engine)}
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
