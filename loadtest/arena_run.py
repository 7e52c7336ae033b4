"""The Arena side of a run: prefill, ingest, query phases and the lag probe."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from loadtest.arena_client import ArenaTarget, ArenaWs
from loadtest.common import RunConfig
from loadtest.httpclient import HttpConnection
from loadtest.ingest import Source, Submitter, background_ingest, background_rate, run_ingest
from loadtest.query import arena_http_path, arena_http_phase, arena_ws_phase
from loadtest.stats import (
    CpuMeter,
    cpu_per_unit,
    fmt_int,
    fmt_ms,
    idle,
    latency_summary,
    now,
    progress,
    rss_bytes,
)
from loadtest.workload import Event, Workload

QUERY_OPS = ("http-rank", "http-top", "http-around", "ws-rank", "ws-top", "ws-around")
TABLES = 3  # alltime + weekly + daily


async def _open_all(target: ArenaTarget, n: int) -> list[ArenaWs]:
    return [await ArenaWs.open(target) for _ in range(n)]


async def _close_all(conns: list[ArenaWs]) -> None:
    for c in conns:
        await c.close()


def _stray(conns: list[ArenaWs]) -> list[str]:
    return [s for c in conns for s in c.stray][:10]


async def arena_prefill(cfg: RunConfig, workload: Workload, target: ArenaTarget) -> dict[str, Any]:
    """Every member gets one event, in frames of ``max_batch`` over the connections.

    Also measures the server's VmRSS before and after (bytes per member per table)."""
    conns = await _open_all(target, cfg.connections)
    rss0 = rss_bytes(target.pid) if target.pid else None
    cpu = CpuMeter(target.pid, target.store_pid)
    try:
        pairs: list[tuple[Submitter, Source]] = [
            (c, workload.prefill(i, cfg.connections, cfg.max_batch)) for i, c in enumerate(conns)]
        res = await run_ingest("prefill arena", pairs, inflight=cfg.inflight, seconds=None,
                               progress_every=cfg.progress_every, total=cfg.members)
    finally:
        await _close_all(conns)
    res.update(cpu.stop())
    res.update(cpu_per_unit(res, res["counts"]["results_checked"]))
    res["stray_frames"] = _stray(conns)
    await asyncio.sleep(0.5)  # let the server settle (free frame buffers) before reading RSS
    rss1 = rss_bytes(target.pid) if target.pid else None
    # and once it is idle: at 10**6 records the board's snapshot is being written at the last ack
    rss2 = rss_bytes(target.pid) if target.pid and await idle(target.pid) else None
    res["rss_before"] = rss0
    res["rss_after"] = rss1
    res["rss_idle"] = rss2
    res["bytes_per_member_per_table"] = _per_cell(cfg, rss0, rss1)
    res["bytes_per_member_per_table_idle"] = _per_cell(cfg, rss0, rss2)
    per, per_idle = res["bytes_per_member_per_table"], res["bytes_per_member_per_table_idle"]
    progress(f"prefill arena done: {fmt_int(res['events_per_s'])} ev/s in {res['seconds']:.2f}s"
             + ("" if rss0 is None or rss1 is None or per is None else f", RSS +{fmt_int(rss1 - rss0)} B = {per:.1f} B/member/table")
             + ("" if per_idle is None else f" ({per_idle:.1f} once the server is idle)")
             + f" ok={res['ok']}")
    return res


def _per_cell(cfg: RunConfig, before: int | None, after: int | None) -> float | None:
    return None if before is None or after is None else (after - before) / cfg.members / TABLES


async def arena_ingest(cfg: RunConfig, workload: Workload, target: ArenaTarget, *,
                       rate: float | None = None, label: str = "ingest arena",
                       stream_label: str = "s", max_new: int | None = None,
                       seconds: float | None = None) -> dict[str, Any]:
    """The zipf stream with retries, flat out (or paced at ``rate`` events/s)."""
    conns = await _open_all(target, cfg.connections)
    cpu = CpuMeter(target.pid, target.store_pid)
    try:
        pairs: list[tuple[Submitter, Source]] = [
            (c, workload.stream(i, cfg.batch, stream_label)) for i, c in enumerate(conns)]
        res = await run_ingest(label, pairs, inflight=cfg.inflight,
                               seconds=cfg.seconds if seconds is None else seconds,
                               warmup=cfg.warmup, rate=rate, windows=cfg.windows,
                               progress_every=cfg.progress_every, max_new=max_new)
    finally:
        await _close_all(conns)
    res.update(cpu.stop())
    res.update(cpu_per_unit(res, res["counts"]["results_checked"]))
    res["stray_frames"] = _stray(conns)
    progress(f"{label} done: {fmt_int(res['events_per_s'])} ev/s (windows {fmt_int(res['rate']['min'])}"
             f"..{fmt_int(res['rate']['max'])}) ack p99={fmt_ms(res['ack_latency']['p99_ms'])}ms ok={res['ok']}"
             f" cpu client/server/other {res['client_cpu']}/{res['server_cpu']}/{res['other_cpu']}"
             + (f" postgresql {res['store_cpu']}" if "store_cpu" in res else ""))
    return res


async def arena_queries(cfg: RunConfig, workload: Workload, target: ArenaTarget,
                        ops: tuple[str, ...] = QUERY_OPS) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op in ops:
        kind, _, name = op.partition("-")
        common = {"period": cfg.period, "connections": cfg.query_connections, "seconds": cfg.query_seconds,
                      "warmup": cfg.warmup, "rate": cfg.query_rate, "windows": cfg.windows, "seed": cfg.seed}
        if kind == "http":
            out[op] = await arena_http_phase(target, workload.names, name, **common)  # type: ignore[arg-type]
        elif kind == "ws":
            out[op] = await arena_ws_phase(target, workload.names, name, **common)  # type: ignore[arg-type]
        else:
            raise ValueError(f"unknown query op {op!r} (one of {', '.join(QUERY_OPS)})")
    return out


async def sample_answer_bytes(target: ArenaTarget, member: str, period: str) -> int:
    """Size of one real ``members/{member}`` answer (the ceiling app mimics it)."""
    conn = HttpConnection(target.base_url)
    try:
        status, body = await conn.get(arena_http_path(target.board, period, "rank", member))
    finally:
        conn.close()
    return len(body) if status == 200 else 330


def _stamp(into: list[float], _fut: object) -> None:
    into.append(now())


async def arena_lag_probe(cfg: RunConfig, target: ArenaTarget, *, probes: int,
                          via: str = "ws") -> dict[str, Any]:
    """Submit one event of a brand-new member; query it (WS ``rank`` op on another
    connection, or HTTP members/{member}) in a tight loop until it is visible.

    Also checks the contract "after the ack, every query on any connection sees
    them": a query sent after the ack arrived that still misses the member is a
    violation."""
    sub = await ArenaWs.open(target)
    q_ws = await ArenaWs.open(target) if via == "ws" else None
    q_http = HttpConnection(target.base_url) if via == "http" else None
    lags: list[float] = []
    acks: list[float] = []
    polls = 0
    violations = 0
    errors: list[str] = []
    try:
        for i in range(probes):
            member = f"probe/{cfg.run_id}/{i}"
            value = cfg.max_value - 1000 - i
            ev: Event = (f"{cfg.run_id}-probe{i}", member, value, time.time_ns() // 1_000_000 - 1000)
            acked_at: list[float] = []
            t0 = now()
            fut = await sub.submit([ev])
            fut.add_done_callback(partial(_stamp, acked_at))
            seen: float | None = None
            path = q_http.request_bytes(arena_http_path(target.board, cfg.period, "rank", member)) if q_http else b""
            while now() < t0 + 10.0:
                ts = now()
                polls += 1
                if q_ws is not None:
                    msg = await q_ws.request({"op": "rank", "board": target.board, "period": cfg.period,
                                              "member": member})
                    if msg.get("op") == "result" and (msg.get("entry") or {}).get("member") == member:
                        seen = now()
                        break
                    missing = msg.get("op") == "error" and msg.get("code") == "member_not_found"
                    detail = str(msg)[:200]
                else:
                    assert q_http is not None
                    status, body = await q_http.send(path)
                    if status == 200:
                        seen = now()
                        break
                    missing = status == 404 and b"member_not_found" in body
                    detail = f"{status} {body[:200]!r}"
                if not missing:
                    errors.append(f"probe {i}: {detail}")
                    break
                if acked_at and ts > acked_at[0]:
                    violations += 1
            try:
                statuses = await asyncio.wait_for(fut, 30)
            except Exception as exc:  # noqa: BLE001 - any failure is a failed probe
                errors.append(f"probe {i}: no ack: {exc!r}")
                continue
            if seen is None or statuses != ["accepted"]:
                errors.append(f"probe {i}: seen={seen is not None} statuses={statuses}")
                continue
            lags.append(seen - t0)
            acks.append(acked_at[0] - t0 if acked_at else now() - t0)
    finally:
        await sub.close()
        if q_ws is not None:
            await q_ws.close()
        if q_http is not None:
            q_http.close()
    return {"lag": latency_summary(lags), "ack": latency_summary(acks), "probes": probes, "via": via,
            "polls": polls, "visible_after_ack_violations": violations, "errors": errors[:10],
            "ok": not errors and violations == 0}


@asynccontextmanager
async def arena_background(cfg: RunConfig, workload: Workload, target: ArenaTarget, rate: float,
                           label: str) -> AsyncIterator[dict[str, Any]]:
    """`background_ingest` of the simulator on its own connections to Arena."""
    conns = await _open_all(target, cfg.connections)
    pairs: list[tuple[Submitter, Source]] = [
        (c, workload.stream(i, cfg.batch, label)) for i, c in enumerate(conns)]
    try:
        async with background_ingest(cfg, f"{label} arena", pairs, rate) as background:
            yield background
    finally:
        await _close_all(conns)


async def arena_lag(cfg: RunConfig, workload: Workload, target: ArenaTarget,
                    max_rate: float | None, via: str = "ws") -> dict[str, Any]:
    """The lag probe while the simulator streams at ``lag_rate_share`` of ``max_rate``."""
    rate = background_rate(cfg, max_rate)
    async with arena_background(cfg, workload, target, rate, "lagbg") as background:
        res = await arena_lag_probe(cfg, target, probes=cfg.lag_probes, via=via)
    res["background_rate"] = rate
    res["background"] = background
    res["ok"] = res["ok"] and background["ok"]
    progress(f"lag arena: p50={fmt_ms(res['lag']['p50_ms'])}ms p99={fmt_ms(res['lag']['p99_ms'])}ms"
             f" (ack p99={fmt_ms(res['ack']['p99_ms'])}ms) at {fmt_int(rate)} ev/s background"
             f" (got {fmt_int(background['events_per_s'])}), ok={res['ok']}")
    return res


async def arena_rank_under_ingest(cfg: RunConfig, workload: Workload, target: ArenaTarget,
                                  max_rate: float | None) -> dict[str, Any]:
    """HTTP rank queries flat out while the simulator streams at ``lag_rate_share`` of
    ``max_rate`` (half speed by default): what a game's players see while scores pour in."""
    rate = background_rate(cfg, max_rate)
    async with arena_background(cfg, workload, target, rate, "rankbg") as background:
        res = await arena_http_phase(target, workload.names, "rank", period=cfg.period,
                                     connections=cfg.query_connections, seconds=cfg.query_seconds,
                                     warmup=cfg.warmup, rate=cfg.query_rate, windows=cfg.windows,
                                     seed=cfg.seed, label="arena-http-rank-under-ingest")
    res["background_rate"] = rate
    res["background"] = background
    progress(f"rank under ingest arena: {fmt_int(res['req_per_s'])} req/s p99={fmt_ms(res['latency']['p99_ms'])}ms"
             f" at {fmt_int(rate)} ev/s background (got {fmt_int(background['events_per_s'])}),"
             f" ok={background['ok'] and not res.get('errors')}")
    return res
