"""``python -m loadtest settle``: what settling a big table costs the writers (DESIGN.md "Seasons:
settlement and prizes"; goal: ack p99 while a 1M-member table settles ≤ ack p99 of the same run
without prizes + 50 ms).

Two runs, the same but for the prizes, each on its own `arena serve` (sqlite, durability full):
the board ``settle`` (best, desc) has ``alltime`` and a tournament ``season`` that began an hour
before and closes ``close_after`` seconds after the server is configured (no close grace); with
prizes, ``season`` has a ranks tier (1..10) and a ``top_percent = 10`` tier. Every member gets
one event (the prefill), then the simulator streams at ``rate`` events/s (after the close, into
alltime only) while the season closes: ack latency is measured over the ``window`` seconds from
the close moment, and the CPU of the server and of this process over the ingest phase. With
prizes, the settlement route is polled from the close moment until it answers: the time to
settle (the actor's close tick included). ``pairs`` pairs of runs, interleaved, as the machine's
other load moves: the medians of their ack p99s are compared.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import time
from typing import Any

import httpx

from arena.config import parse_board
from arena.engine.times import format_ms
from loadtest.arena_client import ArenaServer
from loadtest.arena_run import arena_ingest, arena_prefill
from loadtest.common import RunConfig
from loadtest.stats import fmt_int, fmt_ms, progress
from loadtest.workload import Workload

BOARD = "settle"
PERIOD = "season"
TIERS = [{"reward": "top10", "ranks": [1, 10]}, {"reward": "top10pct", "top_percent": 10}]
GOAL_MS = 50.0
POLL_SECONDS = 0.05


def definition(close_ms: int, prizes: bool) -> dict[str, Any]:
    """The board: alltime and the season [an hour before, ``close_ms``), with `TIERS` or none."""
    board: dict[str, Any] = {"aggregation": "best", "order": "desc", "tie": "earliest", "periods": ["alltime"],
                             "min_value": 0, "max_value": 1_000_000_000, "close_grace_seconds": 0,
                             "custom_periods": {PERIOD: {"start": format_ms(close_ms - 3_600_000), "end": format_ms(close_ms)}}}
    if prizes:
        board["prizes"] = {PERIOD: TIERS}
    return board


async def _settled(url: str, close_at: float, deadline: float) -> float | None:
    """Seconds from the close moment (perf_counter ``close_at``) until the season's settlement
    answers 200; None when it has not by ``deadline``."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        await asyncio.sleep(max(0.0, close_at - time.perf_counter()))
        while time.perf_counter() < deadline:
            answer = await http.get(f"{url}/v1/boards/{BOARD}/{PERIOD}/settlement", params={"limit": 1})
            if answer.status_code == 200:
                return round(time.perf_counter() - close_at, 3)
            await asyncio.sleep(POLL_SECONDS)
    return None


async def one_run(cfg: RunConfig, *, prizes: bool, close_after: float, window: float) -> dict[str, Any]:
    """Prefill, then the stream across the season's close, on a fresh server."""
    server = ArenaServer(board=BOARD)
    close_ms = time.time_ns() // 1_000_000 + round(close_after * 1000)
    close_at = time.perf_counter() + close_after
    config = server.config
    server.config = dataclasses.replace(
        config, server=dataclasses.replace(config.server, idle_unload_seconds=0),
        boards={BOARD: parse_board(BOARD, definition(close_ms, prizes))})
    try:
        target = server.start()
        prefill = await arena_prefill(cfg, Workload(cfg.workload_spec()), target)
        lead = close_at - time.perf_counter()
        if lead < cfg.warmup:
            raise RuntimeError(f"the prefill ended {lead:.1f}s before the close (warm-up {cfg.warmup:g}s): raise --close-after")
        measured = dataclasses.replace(cfg, warmup=lead, seconds=window)
        deadline = close_at + window
        settling = asyncio.create_task(_settled(target.base_url, close_at, deadline) if prizes else asyncio.sleep(0))
        ingest = await arena_ingest(measured, Workload(cfg.workload_spec()), target, rate=cfg.ingest_rate,
                                    label=f"ingest across the close ({'prizes' if prizes else 'no prizes'})", stream_label="c")
        settle_s = await settling
    finally:
        server.cleanup()
    return {"prizes": prizes, "prefill_events_per_s": prefill["events_per_s"], "ingest": ingest,
            "ack_p99_ms": ingest["ack_latency"]["p99_ms"], "settle_s": settle_s,
            "ok": prefill["ok"] and ingest["ok"] and (settle_s is not None or not prizes)}


async def settle_benchmark(cfg: RunConfig, close_after: float, window: float, pairs: int) -> dict[str, Any]:
    """``pairs`` runs without prizes and with, interleaved; the medians of their ack p99s."""
    out: dict[str, Any] = {"command": "settle", "config": cfg.as_dict(), "close_after": close_after, "window": window,
                           "tiers": TIERS, "cores": os.cpu_count(), "load_average_before": [round(x, 2) for x in os.getloadavg()],
                           "without_prizes": [], "with_prizes": []}
    for pair in range(pairs):
        for prizes in (False, True):
            run = await one_run(cfg, prizes=prizes, close_after=close_after, window=window)
            out["with_prizes" if prizes else "without_prizes"].append(run)
            progress(f"pair {pair + 1}/{pairs} {'with' if prizes else 'without'} prizes: ack p99 {fmt_ms(run['ack_p99_ms'])} ms"
                     " across the close" + (f", settled {run['settle_s']}s after it" if prizes else ""))
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    p99 = {key: statistics.median(r["ack_p99_ms"] for r in out[key]) for key in ("without_prizes", "with_prizes")}
    out["ack_p99_median_ms"] = {key: round(value, 2) for key, value in p99.items()}
    out["ack_p99_added_ms"] = round(p99["with_prizes"] - p99["without_prizes"], 2)
    out["goal_met"] = out["ack_p99_added_ms"] <= GOAL_MS
    out["ok"] = all(r["ok"] for key in ("without_prizes", "with_prizes") for r in out[key])
    return out


def print_settle(out: dict[str, Any]) -> None:
    cfg = out["config"]
    print(f"\nsettling a {fmt_int(cfg['members'])}-member table (tiers: ranks 1..10, top_percent 10) under"
          f" {fmt_int(cfg['ingest_rate'])} ev/s; ack latency over {out['window']:g}s from the close; cores busy")
    print(f"{'run':<20}{'ack p50':>10}{'ack p99':>10}{'ack max':>10}{'ev/s':>10}{'settled':>10}"
          f"{'server':>8}{'client':>8}{'other':>8}")
    for key, name in (("without_prizes", "without prizes"), ("with_prizes", "with prizes")):
        for i, r in enumerate(out[key], 1):
            lat, ingest = r["ingest"]["ack_latency"], r["ingest"]
            settled = "-" if r["settle_s"] is None else f"{r['settle_s']:.2f}s"
            print(f"{f'{name} #{i}':<20}{fmt_ms(lat['p50_ms']):>10}{fmt_ms(lat['p99_ms']):>10}{fmt_ms(lat['max_ms']):>10}"
                  f"{fmt_int(ingest['events_per_s']):>10}{settled:>10}{ingest['server_cpu']:>8}{ingest['client_cpu']:>8}"
                  f"{ingest['other_cpu']:>8}")
    medians = out["ack_p99_median_ms"]
    print(f"ack p99 (median of the runs) {medians['without_prizes']} ms without prizes, {medians['with_prizes']} ms with:"
          f" {out['ack_p99_added_ms']:+} ms (goal ≤ +{GOAL_MS:g} ms: {'met' if out['goal_met'] else 'missed'});"
          f" load average {out['load_average_before']} -> {out['load_average_after']} on {out['cores']} cores; ok: {out['ok']}")
