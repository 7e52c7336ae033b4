"""The comparison table (text and JSON) built from the results of a run."""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from loadtest.stats import fmt_int, fmt_ms, fmt_unit

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _get(d: dict[str, Any] | None, *path: str) -> Any:
    cur: Any = d
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    if isinstance(cur, float) and math.isnan(cur):
        return None
    return cur


def _ratio(a: Any, b: Any) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or b == 0:
        return None
    return a / b


def build_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per metric: Arena's value, the peer's, and Arena/peer."""
    a = results.get("arena") or {}
    r = results.get("redis") or {}
    c = results.get("ceiling") or {}
    rows: list[dict[str, Any]] = []

    def row(metric: str, unit: str, arena: Any, peer_name: str, peer: Any) -> None:
        rows.append({"metric": metric, "unit": unit, "arena": arena, "peer": peer_name,
                     "peer_value": peer, "ratio": _ratio(arena, peer)})

    row("prefill", "ev/s", _get(a, "prefill", "events_per_s"), "redis", _get(r, "prefill", "events_per_s"))
    row("ingest", "ev/s", _get(a, "ingest", "events_per_s"), "redis", _get(r, "ingest", "events_per_s"))
    row("ingest server CPU", "µs/event", _get(a, "ingest", "server_us_per_unit"), "redis",
        _get(r, "ingest", "server_us_per_unit"))
    row("ingest ack p99", "ms", _get(a, "ingest", "ack_latency", "p99_ms"), "redis",
        _get(r, "ingest", "ack_latency", "p99_ms"))
    # Arena with its journal on PostgreSQL, against Arena on sqlite in the same run
    pg = results.get("postgresql") or {}
    row("prefill on PostgreSQL", "ev/s", _get(pg, "prefill", "events_per_s"), "sqlite", _get(a, "prefill", "events_per_s"))
    row("ingest on PostgreSQL", "ev/s", _get(pg, "ingest", "events_per_s"), "sqlite", _get(a, "ingest", "events_per_s"))
    row("ingest ack p99 on PostgreSQL", "ms", _get(pg, "ingest", "ack_latency", "p99_ms"), "sqlite",
        _get(a, "ingest", "ack_latency", "p99_ms"))
    row("ingest server CPU on PostgreSQL", "µs/event", _get(pg, "ingest", "server_us_per_unit"), "sqlite",
        _get(a, "ingest", "server_us_per_unit"))
    row("ingest PostgreSQL CPU", "cores", _get(pg, "ingest", "store_cpu"), "sqlite", None)
    for op in ("rank", "top", "around"):
        for kind in ("http", "ws"):
            q = _get(a, "query", f"{kind}-{op}")
            rq = _get(r, "query", op)
            row(f"{op} {kind.upper()}", "req/s", _get(q, "req_per_s"), "redis", _get(rq, "req_per_s"))
            row(f"{op} {kind.upper()} p99", "ms", _get(q, "latency", "p99_ms"), "redis",
                _get(rq, "latency", "p99_ms"))
            row(f"{op} {kind.upper()} server CPU", "µs/req", _get(q, "server_us_per_unit"), "redis",
                _get(rq, "server_us_per_unit"))
    row("rank HTTP vs ceiling", "req/s", _get(a, "query", "http-rank", "req_per_s"), "ceiling",
        _get(c, "req_per_s"))
    row("rank HTTP p99 vs ceiling", "ms", _get(a, "query", "http-rank", "latency", "p99_ms"), "ceiling",
        _get(c, "latency", "p99_ms"))
    row("rank HTTP server CPU vs ceiling", "µs/req", _get(a, "query", "http-rank", "server_us_per_unit"),
        "ceiling", _get(c, "server_us_per_unit"))
    row("rank HTTP (wrk) vs ceiling", "req/s", _get(a, "wrk_rank", "req_per_s"), "ceiling", _get(c, "wrk", "req_per_s"))
    row("rank HTTP (wrk) p99 vs ceiling", "ms", _get(a, "wrk_rank", "latency", "p99_ms"), "ceiling",
        _get(c, "wrk", "latency", "p99_ms"))
    row("rank HTTP (wrk) CPU vs ceiling", "µs/req", _get(a, "wrk_rank", "server_us_per_unit"), "ceiling",
        _get(c, "wrk", "server_us_per_unit"))
    row("rank HTTP under 50% ingest", "req/s", _get(a, "rank_under_ingest", "req_per_s"), "ceiling",
        _get(c, "req_per_s"))
    row("rank HTTP p99 under 50% ingest", "ms", _get(a, "rank_under_ingest", "latency", "p99_ms"), "ceiling",
        _get(c, "latency", "p99_ms"))
    row("lag p50", "ms", _get(a, "lag", "lag", "p50_ms"), "redis", _get(r, "lag", "lag", "p50_ms"))
    row("lag p99", "ms", _get(a, "lag", "lag", "p99_ms"), "redis", _get(r, "lag", "lag", "p99_ms"))
    row("memory", "B/member/table", _get(a, "prefill", "bytes_per_member_per_table"), "redis",
        _get(r, "prefill", "bytes_per_member_per_table"))
    row("memory (zsets only)", "B/member/table", _get(a, "prefill", "bytes_per_member_per_table"), "redis",
        _get(r, "prefill", "zset_bytes_per_member_per_table"))
    return [x for x in rows if x["arena"] is not None or x["peer_value"] is not None]


def format_table(rows: list[dict[str, Any]]) -> str:
    head = f"{'metric':<31} {'unit':<15} {'arena':>12} {'peer':>8} {'peer value':>12} {'arena/peer':>10}"
    lines = [head, "-" * len(head)]
    for x in rows:
        ratio = "-" if x["ratio"] is None else f"{x['ratio']:.2f}"
        lines.append(f"{x['metric']:<31} {x['unit']:<15} {fmt_unit(x['arena'], x['unit']):>12} {x['peer']:>8}"
                     f" {fmt_unit(x['peer_value'], x['unit']):>12} {ratio:>10}")
    return "\n".join(lines)


def format_phase_details(results: dict[str, Any]) -> str:
    """min/median/max over windows and CPU shares, one line per measured phase."""
    lines = []

    def line(name: str, d: Any, unit: str) -> None:
        if not isinstance(d, dict) or "rate" not in d:
            return
        rt = d["rate"]
        lat = d.get("latency") or d.get("ack_latency") or {}
        lines.append(f"  {name:<22} {unit} min/median/max {fmt_int(rt.get('min'))}/{fmt_int(rt.get('median'))}/"
                     f"{fmt_int(rt.get('max'))}  p50/p90/p99/max ms {fmt_ms(lat.get('p50_ms'))}/"
                     f"{fmt_ms(lat.get('p90_ms'))}/{fmt_ms(lat.get('p99_ms'))}/{fmt_ms(lat.get('max_ms'))}"
                     f"  cpu client/server/other {d.get('client_cpu')}/{d.get('server_cpu')}/{d.get('other_cpu')}"
                     + (f" postgresql {d['store_cpu']}" if "store_cpu" in d else "")
                     + f"  µs/{'event' if unit == 'ev/s' else 'req'} client/server"
                     f" {d.get('client_us_per_unit')}/{d.get('server_us_per_unit')}")

    for name, unit, phase in timed_phases(results):
        line(name, phase, unit)
    return "\n".join(lines)


def timed_phases(results: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(name, unit, phase result or None) of each phase after the prefill, in report order."""
    for peer, name in (("arena", "arena"), ("postgresql", "arena on pg"), ("redis", "redis")):
        p = results.get(peer) or {}
        yield f"{name} ingest", "ev/s", p.get("ingest")
        for op, q in (p.get("query") or {}).items():
            yield f"{name} {op}", "req/s", q
        yield f"{name} rank (wrk)", "req/s", p.get("wrk_rank")
        yield f"{name} rank under ingest", "req/s", p.get("rank_under_ingest")
    ceiling = results.get("ceiling") or {}
    yield "ceiling rank", "req/s", ceiling or None
    yield "ceiling rank (wrk)", "req/s", ceiling.get("wrk")


def machine_info() -> dict[str, Any]:
    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}


def default_json_path(command: str) -> Path:
    return RESULTS_DIR / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}.json"


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str))
