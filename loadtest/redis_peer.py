"""The Redis peer: the same event stream against Redis 7, doing what Arena does.

One Lua script call per frame (``EVALSHA``), atomic like one Arena batch:

* idempotency: a hash ``{board}:idem`` key -> ``"member|value|occurred_at"``;
  a key already there with the same payload is ``duplicate``, with another
  payload ``rejected: idempotency_key_reused`` (HSETNX semantics, written only
  for accepted events, so a rejected event leaves no trace);
* validation: value bounds, occurred_at not later than now + 30 s (server TIME);
* aggregation ``best`` (desc, tie earliest) on three ZSETs, routed by
  occurred_at in UTC: ``{board}:alltime``, ``{board}:weekly:<monday epoch s>``,
  ``{board}:daily:<midnight epoch s>`` with ``ZADD GT``;
* a journal: ``XADD {board}:journal * member .. value .. occurred_at ..
  idempotency_key .. received_at .. source ..``.

The redis-server runs with ``appendonly yes`` and ``appendfsync always``, so a
reply is sent only after the AOF write is fsynced — the durability of Arena's
``synchronous=FULL``.

**Tie encoding and its precision limit.** A ZSET orders by one double, so the
tie rule is folded into the score: ``score = value * K - (seconds since the
window start)``; for equal values the earlier event has the higher score
(earliest wins), and ``ZADD GT`` keeps the best. This is exact only while
``(max_value + 1) * K < 2**53`` and the offset stays below ``K``:

============  ===========  ===============================  =====================
table         K            offset range covered             exact for max_value <
============  ===========  ===============================  =====================
daily         2**17        86,400 s  (< 131,072)            2**36 (6.9e10)
weekly        2**20        604,800 s (< 1,048,576)          2**33 (8.6e9)
alltime       2**22        48.5 days after the run's epoch  2**31 (2.1e9)
============  ===========  ===============================  =====================

So with the benchmark's ``max_value = 1e9`` the alltime table can only resolve
ties by the second, for 48 days after an epoch (here: one day before the run
started); a real deployment would need a second structure or to give up
exact ties — Arena keeps (score, reached_at ms, member) exactly. Equal
(value, second) pairs fall back to Redis's member order, which ``ZREVRANGE``
reverses (member descending, Arena: ascending). Ties inside one second are not
resolved by milliseconds.

Queries: rank = ``ZREVRANK`` + ``ZSCORE`` (one round trip, pipelined), top =
``ZREVRANGE 0 9 WITHSCORES``, around = ``ZREVRANK`` then ``ZREVRANGE r-5 r+5
WITHSCORES`` (`loadtest.redis_query`). Memory: ``INFO memory`` used_memory before/after the
prefill.

The redis-server is `loadtest.redis_server`, the client `loadtest.resp` (RESP2 on asyncio, no
redis-py in the hot path).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from loadtest.common import RunConfig
from loadtest.ingest import AckError, Source, Submitter, background_ingest, background_rate, run_ingest
from loadtest.query import run_phase
from loadtest.redis_query import REDIS_QUERY_OPS, redis_query_workers
from loadtest.redis_server import RedisServer
from loadtest.resp import RedisError, RespConnection
from loadtest.stats import (
    CpuMeter,
    cpu_per_unit,
    fmt_int,
    fmt_ms,
    latency_summary,
    now,
    progress,
)
from loadtest.workload import Event, Workload

MAX_FUTURE_SKEW_MS = 30_000

LUA_SUBMIT = r"""
-- KEYS[1] idempotency hash, KEYS[2] journal stream
-- ARGV: board, source, min_value, max_value, max_future_ms, alltime_epoch_s, events (JSON array
-- of [idempotency_key, member, value, occurred_at_ms])
-- returns one status letter per event: A accepted, D duplicate, K idempotency_key_reused,
-- R value_out_of_range, F occurred_in_future
-- tie factors K (see the module docstring): alltime 2^22 = 4194304, weekly 2^20, daily 2^17
local board, source = ARGV[1], ARGV[2]
local lo, hi = tonumber(ARGV[3]), tonumber(ARGV[4])
local skew, epoch = tonumber(ARGV[5]), tonumber(ARGV[6])
local events = cjson.decode(ARGV[7])
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_txt = string.format('%.0f', now_ms)
local alltime = board .. ':alltime'
local out = {}
for i, e in ipairs(events) do
  local key, member, value, occ = e[1], e[2], e[3], e[4]
  local value_txt, occ_txt = string.format('%.0f', value), string.format('%.0f', occ)
  local payload = member .. '|' .. value_txt .. '|' .. occ_txt
  local prev = redis.call('HGET', KEYS[1], key)
  if prev then
    if prev == payload then out[i] = 'D' else out[i] = 'K' end
  elseif value < lo or value > hi then
    out[i] = 'R'
  elseif occ > now_ms + skew then
    out[i] = 'F'
  else
    redis.call('HSET', KEYS[1], key, payload)
    local sec = math.floor(occ / 1000)
    local day = sec - sec % 86400
    local week = sec - (sec - 345600) % 604800  -- 1970-01-05 was a Monday
    redis.call('ZADD', alltime, 'GT', string.format('%.0f', value * 4194304 - (sec - epoch)), member)
    redis.call('ZADD', board .. ':weekly:' .. string.format('%.0f', week), 'GT',
               string.format('%.0f', value * 1048576 - (sec - week)), member)
    redis.call('ZADD', board .. ':daily:' .. string.format('%.0f', day), 'GT',
               string.format('%.0f', value * 131072 - (sec - day)), member)
    redis.call('XADD', KEYS[2], '*', 'member', member, 'value', value_txt, 'occurred_at', occ_txt,
               'idempotency_key', key, 'received_at', now_txt, 'source', source)
    out[i] = 'A'
  end
end
return table.concat(out)
"""

_STATUS = {
    ord("A"): "accepted",
    ord("D"): "duplicate",
    ord("K"): "rejected:idempotency_key_reused",
    ord("R"): "rejected:value_out_of_range",
    ord("F"): "rejected:occurred_in_future",
}


# --------------------------------------------------------------------------- ingest


class RedisBoard:
    """Key names and script arguments of the benchmark board in Redis."""

    def __init__(self, board: str, sha: bytes, cfg: RunConfig) -> None:
        self.board = board
        self.sha = sha
        self.idem_key = f"{board}:idem".encode()
        self.journal_key = f"{board}:journal".encode()
        self.alltime_key = f"{board}:alltime".encode()
        self.min_value = str(cfg.min_value).encode()
        self.max_value = str(cfg.max_value).encode()
        # the alltime tie offset counts seconds from one day before the run
        self.epoch = str(int(time.time()) - 86_400).encode()


class RedisIngest:
    """A submitter (see loadtest.ingest) that sends each frame as one EVALSHA."""

    def __init__(self, conn: RespConnection, board: RedisBoard, source_id: str) -> None:
        self.conn = conn
        self.b = board
        self.source = source_id.encode()

    async def submit(self, events: list[Event]) -> asyncio.Future[list[str]]:
        b = self.b
        n = len(events)

        def statuses(reply: Any) -> list[str]:
            if not isinstance(reply, bytes) or len(reply) != n:
                raise AckError(f"script answered {reply!r:.100} for {n} events")
            return [_STATUS[c] for c in reply]

        return self.conn.command(b"EVALSHA", b.sha, b"2", b.idem_key, b.journal_key, b.board.encode(),
                                 self.source, b.min_value, b.max_value, MAX_FUTURE_SKEW_MS, b.epoch,
                                 orjson.dumps(events), transform=statuses)


async def used_memory(conn: RespConnection) -> int:
    info = (await conn.call("INFO", "memory")).decode()
    for line in info.splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":", 1)[1])
    raise RedisError("no used_memory in INFO memory")


async def key_memory(conn: RespConnection, board: str) -> dict[str, int]:
    """MEMORY USAGE (all samples) of every key of the board, by kind."""
    out: dict[str, int] = {}
    cursor = b"0"
    while True:
        cursor, keys = await conn.call("SCAN", cursor, "MATCH", f"{board}:*", "COUNT", 1000)
        for key in keys:
            kind = key.decode().split(":")[1]
            usage = await conn.call("MEMORY", "USAGE", key, "SAMPLES", 0)
            out[kind] = out.get(kind, 0) + int(usage or 0)
        if cursor == b"0":
            return out


# --------------------------------------------------------------------------- lag


async def redis_lag(port: int, board: RedisBoard, cfg: RunConfig, probes: int) -> dict[str, Any]:
    """Submit one new member, then ZSCORE it on another connection until it shows."""
    sub_conn = await RespConnection.open(port)
    q_conn = await RespConnection.open(port)
    probe = RedisIngest(sub_conn, board, "lag-probe")
    lags: list[float] = []
    acks: list[float] = []
    polls = 0
    errors: list[str] = []
    try:
        for i in range(probes):
            member = f"probe-{cfg.run_id}-{i}"
            value = cfg.max_value - 1000 - i
            ev: Event = (f"{cfg.run_id}-probe{i}", member, value, time.time_ns() // 1_000_000 - 1000)
            t0 = now()
            fut = await probe.submit([ev])
            seen = None
            t_limit = t0 + 10.0
            m = member.encode()
            while now() < t_limit:
                polls += 1
                if await q_conn.command(b"ZSCORE", board.alltime_key, m) is not None:
                    seen = now()
                    break
            statuses = await fut
            t_ack = now()
            if seen is None or statuses != ["accepted"]:
                errors.append(f"probe {i}: seen={seen is not None} statuses={statuses}")
                continue
            lags.append(seen - t0)
            acks.append(t_ack - t0)
    finally:
        sub_conn.close()
        q_conn.close()
    return {"lag": latency_summary(lags), "ack": latency_summary(acks), "probes": probes,
            "polls": polls, "errors": errors, "ok": not errors}


# --------------------------------------------------------------------------- the whole peer run


async def run_redis(cfg: RunConfig, workload: Workload, server: RedisServer, *,
                    parts: tuple[str, ...] = ("prefill", "ingest", "query", "lag")) -> dict[str, Any]:
    """Prefill, ingest flat out, query phases, lag probe — against ``server``."""
    out: dict[str, Any] = {"port": server.port}
    admin = await RespConnection.open(server.port)
    sha = await admin.call("SCRIPT", "LOAD", LUA_SUBMIT)
    board = RedisBoard("bench", sha, cfg)
    version = (await admin.call("INFO", "server")).decode()
    out["redis_version"] = next((ln.split(":", 1)[1] for ln in version.splitlines()
                                 if ln.startswith("redis_version:")), "?")
    conns = [await RespConnection.open(server.port) for _ in range(cfg.connections)]
    pid = server.pid
    try:
        if "prefill" in parts:
            mem0 = await used_memory(admin)
            cpu = CpuMeter(pid)
            pairs: list[tuple[Submitter, Source]] = [
                (RedisIngest(c, board, f"loadtest-{i}"), workload.prefill(i, cfg.connections, cfg.max_batch))
                for i, c in enumerate(conns)]
            res = await run_ingest("prefill redis", pairs, inflight=cfg.inflight, seconds=None,
                                   progress_every=cfg.progress_every, total=cfg.members)
            res.update(cpu.stop())
            res.update(cpu_per_unit(res, res["counts"]["results_checked"]))
            mem1 = await used_memory(admin)
            keys = await key_memory(admin, board.board)
            res["used_memory_before"] = mem0
            res["used_memory_after"] = mem1
            res["key_memory"] = keys
            res["bytes_per_member_per_table"] = (mem1 - mem0) / cfg.members / 3
            zsets = sum(v for k, v in keys.items() if k in ("alltime", "weekly", "daily"))
            res["zset_bytes_per_member_per_table"] = zsets / cfg.members / 3
            out["prefill"] = res
            progress(f"prefill redis done: {fmt_int(res['events_per_s'])} ev/s in {res['seconds']:.2f}s,"
                     f" used_memory +{fmt_int(mem1 - mem0)} B"
                     f" = {res['bytes_per_member_per_table']:.0f} B/member/table ok={res['ok']}")
        if "ingest" in parts:
            cpu = CpuMeter(pid)
            pairs = [(RedisIngest(c, board, f"loadtest-{i}"), workload.stream(i, cfg.batch))
                     for i, c in enumerate(conns)]
            res = await run_ingest("ingest redis", pairs, inflight=cfg.inflight, seconds=cfg.seconds,
                                   warmup=cfg.warmup, rate=cfg.ingest_rate, windows=cfg.windows,
                                   progress_every=cfg.progress_every)
            res.update(cpu.stop())
            res.update(cpu_per_unit(res, res["counts"]["results_checked"]))
            out["ingest"] = res
            progress(f"ingest redis done: {fmt_int(res['events_per_s'])} ev/s"
                     f" ack p99={fmt_ms(res['ack_latency']['p99_ms'])}ms ok={res['ok']}"
                     f" cpu client/server/other {res['client_cpu']}/{res['server_cpu']}/{res['other_cpu']}")
        if "query" in parts:
            out["query"] = {}
            for op in REDIS_QUERY_OPS:
                qconns = [await RespConnection.open(server.port) for _ in range(cfg.query_connections)]
                try:
                    fns = redis_query_workers(qconns, board.alltime_key, workload.names, op, cfg.seed)
                    out["query"][op] = await run_phase(f"redis-{op}", fns, seconds=cfg.query_seconds,
                                                       warmup=cfg.warmup, rate=cfg.query_rate,
                                                       windows=cfg.windows, progress_every=cfg.progress_every,
                                                       server_pid=pid)
                finally:
                    for c in qconns:
                        c.close()
        if "lag" in parts:
            max_rate = out.get("ingest", {}).get("events_per_s") or cfg.ingest_rate
            out["lag"] = await lag_under_load(cfg, workload, server.port, board, conns, max_rate)
    finally:
        for c in conns:
            c.close()
        admin.close()
    return out


async def lag_under_load(cfg: RunConfig, workload: Workload, port: int, board: RedisBoard,
                         conns: list[RespConnection], max_rate: float | None) -> dict[str, Any]:
    rate = background_rate(cfg, max_rate)
    pairs: list[tuple[Submitter, Source]] = [
        (RedisIngest(c, board, f"loadtest-{i}"), workload.stream(i, cfg.batch, label="lagbg"))
        for i, c in enumerate(conns)]
    async with background_ingest(cfg, "lag-background redis", pairs, rate) as background:
        res = await redis_lag(port, board, cfg, cfg.lag_probes)
    res["background_rate"] = rate
    res["background"] = background
    res["ok"] = res["ok"] and background["ok"]
    progress(f"lag redis: p50={fmt_ms(res['lag']['p50_ms'])}ms p99={fmt_ms(res['lag']['p99_ms'])}ms"
             f" at {fmt_int(rate)} ev/s background, ok={res['ok']}")
    return res
