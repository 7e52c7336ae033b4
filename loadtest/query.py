"""Query load: C connections, each with one request in flight, flat out or paced.

A *request function* ``fn(i) -> None | str`` performs the i-th request of its
worker and returns None when the answer is right, or an error kind. Latency is
measured per request with ``perf_counter``; in paced mode (``rate``) it is
measured from the request's scheduled start, so a server that falls behind is
charged for the queueing it causes (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import orjson

from loadtest.arena_client import ArenaTarget, ArenaWs
from loadtest.httpclient import HttpConnection
from loadtest.stats import (
    CpuMeter,
    Recorder,
    cpu_per_unit,
    fmt_int,
    fmt_ms,
    now,
    progress,
)

RequestFn = Callable[[int], Awaitable[str | None]]

HTTP_OPS = ("rank", "top", "around")
#: How many distinct members each query worker cycles through.
TARGETS_PER_WORKER = 4096
MAX_CONSECUTIVE_ERRORS = 200


async def _worker(fn: RequestFn, rec: Recorder, t_end: float, rate: float | None) -> None:
    i = 0
    consecutive = 0
    next_slot = now()
    while True:
        if rate:
            next_slot += 1.0 / rate
            if next_slot >= t_end:
                return
            delay = next_slot - now()
            if delay > 0:
                await asyncio.sleep(delay)
            t0 = next_slot
        else:
            t0 = now()
            if t0 >= t_end:
                return
        try:
            err = await fn(i)
        except Exception as exc:  # noqa: BLE001 - every failure is counted by kind
            err = f"{type(exc).__name__}: {exc}"
        t1 = now()
        i += 1
        if err is None:
            consecutive = 0
            rec.add(t0, t1)
        else:
            consecutive += 1
            rec.error(err.split(":", 1)[0], err)
            if consecutive >= MAX_CONSECUTIVE_ERRORS:
                rec.error("worker_gave_up", f"{consecutive} errors in a row")
                return


async def run_phase(label: str, workers: list[RequestFn], *, seconds: float, warmup: float,
                    rate: float | None = None, windows: int = 1, progress_every: float = 2.0,
                    server_pid: int | None = None) -> dict[str, Any]:
    """Run every worker for ``warmup + seconds``; returns req/s over windows and latency."""
    start = now()
    rec = Recorder(measure_from=start + warmup)
    t_end = start + warmup + seconds
    per_worker = rate / len(workers) if rate else None
    cpu = CpuMeter(server_pid)

    async def report() -> None:
        last_t, last_n = now(), rec.total
        while True:
            await asyncio.sleep(progress_every)
            t, n = now(), rec.total
            progress(f"query {label} {t - start:5.1f}s {fmt_int((n - last_n) / max(1e-9, t - last_t))} req/s"
                     f" done={fmt_int(n)} errors={sum(rec.errors.values())}")
            last_t, last_n = t, n

    reporter = asyncio.create_task(report())
    try:
        await asyncio.gather(*(_worker(fn, rec, t_end, per_worker) for fn in workers))
    finally:
        reporter.cancel()
    s = rec.summary(rec.measure_from, t_end, windows)
    lat = s["latency"]
    result = {
        "label": label,
        "connections": len(workers),
        "rate_target": rate,
        "requests": s["completed"],
        "req_per_s": s["per_s"],
        "rate": s["rate"],
        "window_rates": s["window_rates"],
        "latency": lat,
        "errors": s["errors"],
        "error_samples": s["error_samples"],
        **cpu.stop(),
    }
    # CPU per request, warm-up included on both sides of the division
    result.update(cpu_per_unit(result, rec.total))
    progress(f"query {label} done: {fmt_int(result['req_per_s'])} req/s p50={fmt_ms(lat['p50_ms'])}ms"
             f" p99={fmt_ms(lat['p99_ms'])}ms max={fmt_ms(lat['max_ms'])}ms errors={sum(s['errors'].values())}"
             f" cpu client/server/other {result['client_cpu']}/{result['server_cpu']}/{result['other_cpu']}")
    return result


def pick_members(names: list[str], count: int, seed: str) -> list[str]:
    """``count`` members chosen uniformly (seeded) from the prefilled ones."""
    rng = random.Random(seed)
    n = len(names)
    return [names[int(rng.random() * n)] for _ in range(count)]


def arena_http_path(board: str, period: str, op: str, member: str) -> str:
    if op == "top":
        return f"/v1/boards/{board}/{period}/top?limit=10"
    enc = quote(member, safe="")
    if op == "rank":
        return f"/v1/boards/{board}/{period}/members/{enc}"
    if op == "around":
        return f"/v1/boards/{board}/{period}/around/{enc}?radius=5"
    raise ValueError(f"unknown op {op!r}")


def rank_paths(names: list[str], board: str, period: str, seed: int) -> list[str]:
    """The member-rank paths a native load generator cycles through."""
    return [arena_http_path(board, period, "rank", m) for m in pick_members(names, TARGETS_PER_WORKER, f"{seed}:wrk")]


def check_arena_answer(op: str, member: str, status: int, body: bytes) -> str | None:
    """The few facts a right answer must show (cheap: one orjson parse)."""
    if status != 200:
        return f"http_{status}: {body[:200]!r}"
    doc = orjson.loads(body)
    return check_arena_doc(op, member, doc)


def check_arena_doc(op: str, member: str, doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return f"bad_body: {str(doc)[:200]}"
    if op == "rank":
        entry = doc.get("entry")
        if not isinstance(entry, dict) or entry.get("member") != member:
            return f"wrong_entry: {str(doc)[:200]}"
    elif op == "top":
        entries = doc.get("entries")
        if not isinstance(entries, list) or len(entries) != min(10, int(doc.get("size", 0))):
            return f"wrong_top: {str(doc)[:200]}"
    elif op == "around":
        entries = doc.get("entries")
        if not isinstance(entries, list) or not any(e.get("member") == member for e in entries):
            return f"wrong_around: {str(doc)[:200]}"
    return None


async def http_workers(base_url: str, connections: int, requests: list[list[tuple[bytes, str]]],
                       check: Callable[[str, int, bytes], str | None]
                       ) -> tuple[list[RequestFn], Callable[[], None]]:
    """One worker per connection; worker w cycles through ``requests[w]``
    (precomputed request bytes and the member each one asks about)."""
    conns = [HttpConnection(base_url) for _ in range(connections)]
    fns: list[RequestFn] = []
    for conn, reqs in zip(conns, requests, strict=True):
        def make(conn: HttpConnection, reqs: list[tuple[bytes, str]]) -> RequestFn:
            n = len(reqs)

            async def fn(i: int) -> str | None:
                raw, member = reqs[i % n]
                status, body = await conn.send(raw)
                return check(member, status, body)
            return fn
        fns.append(make(conn, reqs))

    def close() -> None:
        for c in conns:
            c.close()
    return fns, close


async def arena_http_phase(target: ArenaTarget, names: list[str], op: str, *, period: str = "alltime",
                           connections: int, seconds: float, warmup: float, rate: float | None,
                           windows: int, seed: int, base_url: str | None = None, label: str | None = None,
                           verify: bool = True, server_pid: int | None = None) -> dict[str, Any]:
    """HTTP ``op`` (rank | top | around) against Arena, or against ``base_url``
    (the ceiling app) with the same paths and status-only checks."""
    url = base_url or target.base_url
    probe = HttpConnection(url)
    requests: list[list[tuple[bytes, str]]] = []
    for w in range(connections):
        members = pick_members(names, TARGETS_PER_WORKER, f"{seed}:query:{op}:{w}")
        requests.append([(probe.request_bytes(arena_http_path(target.board, period, op, m)), m)
                         for m in members])

    def check(member: str, status: int, body: bytes) -> str | None:
        if not verify:
            return None if status == 200 else f"http_{status}: {body[:200]!r}"
        return check_arena_answer(op, member, status, body)

    fns, close = await http_workers(url, connections, requests, check)
    try:
        return await run_phase(label or f"arena-http-{op}", fns, seconds=seconds, warmup=warmup,
                               rate=rate, windows=windows,
                               server_pid=server_pid if server_pid is not None else target.pid)
    finally:
        close()


async def arena_ws_phase(target: ArenaTarget, names: list[str], op: str, *, period: str = "alltime",
                         connections: int, seconds: float, warmup: float, rate: float | None,
                         windows: int, seed: int) -> dict[str, Any]:
    """WS query op ``op`` (rank | top | around), one in flight per connection."""
    conns = [await ArenaWs.open(target) for _ in range(connections)]
    fns: list[RequestFn] = []
    for w, ws in enumerate(conns):
        members = pick_members(names, TARGETS_PER_WORKER, f"{seed}:wsquery:{op}:{w}")

        def make(ws: ArenaWs, members: list[str]) -> RequestFn:
            n = len(members)
            board = target.board

            async def fn(i: int) -> str | None:
                m = members[i % n]
                frame: dict[str, Any]
                if op == "top":
                    frame = {"op": "top", "board": board, "period": period, "limit": 10, "offset": 0}
                elif op == "rank":
                    frame = {"op": "rank", "board": board, "period": period, "member": m}
                else:
                    frame = {"op": "around", "board": board, "period": period, "member": m, "radius": 5}
                msg = await ws.request(frame)
                if msg.get("op") != "result":
                    return f"ws_{msg.get('code') or msg.get('op')}: {str(msg)[:200]}"
                return check_arena_doc(op, m, msg)
            return fn
        fns.append(make(ws, members))
    try:
        return await run_phase(f"arena-ws-{op}", fns, seconds=seconds, warmup=warmup, rate=rate,
                               windows=windows, server_pid=target.pid)
    finally:
        for ws in conns:
            await ws.close()
