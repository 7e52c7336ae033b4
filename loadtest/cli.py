"""``python -m loadtest <command>``: the sub-commands and their options."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from loadtest.common import RunConfig
from loadtest.stats import fmt_int, fmt_ms, progress

T = TypeVar("T")

EPILOG = """\
Everything runs on loopback; every loop is bounded in count and time. Progress
lines go to stderr, the result table to stdout. Exit code 0 when every check
passed, 1 when a check failed, 2 when something needed is missing.
See loadtest/README.md for the method and its caveats."""


def _run(coro: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency of uvicorn[standard]
        return asyncio.run(coro)
    return uvloop.run(coro)


def _common(p: argparse.ArgumentParser, *, ingest: bool = True, query: bool = True, server: bool = True) -> None:
    g = p.add_argument_group("workload")
    g.add_argument("--members", type=int, default=1_000_000, help="members on the board (default 1,000,000)")
    g.add_argument("--seed", type=int, default=20261202, help="fixed seed of the workload (default 20261202)")
    g.add_argument("--zipf", type=float, default=1.0, help="zipf exponent of member activity, 0 = uniform (default 1.0)")
    g.add_argument("--warmup", type=float, default=2.0, help="seconds before each measured phase (default 2)")
    g.add_argument("--windows", "--repeats", type=int, default=3, dest="windows",
                   help="measured time is split in this many windows: rates as min/median/max (default 3)")
    g.add_argument("--progress-every", type=float, default=2.0, help="seconds between progress lines (default 2)")
    if ingest:
        g = p.add_argument_group("ingest (game-server simulator)")
        g.add_argument("--seconds", type=float, default=30.0, help="measured ingest seconds (default 30)")
        g.add_argument("--connections", type=int, default=4, help="WebSocket connections N (default 4)")
        g.add_argument("--batch", type=int, default=100, help="events per streaming frame B (default 100)")
        g.add_argument("--inflight", type=int, default=8, help="frames in flight per connection K (default 8)")
        g.add_argument("--max-batch", type=int, default=1000,
                       help="events per prefill frame = the server's max_batch (default 1000)")
        g.add_argument("--retry-share", type=float, default=0.05,
                       help="share of events that resend an acked event, must ack duplicate (default 0.05)")
        g.add_argument("--ingest-rate", type=float, default=None,
                       help="pace ingest to this many events/s (default: flat out)")
        g.add_argument("--lag-probes", type=int, default=200, help="lag probes (default 200)")
        g.add_argument("--lag-share", type=float, default=0.5,
                       help="background ingest during the lag probe (and, in compare, the rank-under-ingest"
                                " phase), share of the measured max (default 0.5)")
        g.add_argument("--lag-via", choices=("ws", "http"), default="ws",
                       help="how the lag probe polls: WS rank op or HTTP members/{member} (default ws)")
    if query:
        g = p.add_argument_group("queries")
        g.add_argument("--query-seconds", type=float, default=None,
                       help="measured seconds of each query phase (default: seconds/3, at least 1)")
        g.add_argument("--query-connections", type=int, default=16, help="query connections C (default 16)")
        g.add_argument("--query-rate", type=float, default=None,
                       help="total req/s over all query connections (default: flat out)")
        g.add_argument("--period", default="alltime", help="period queried (default alltime)")
    if server:
        g = p.add_argument_group("arena server")
        g.add_argument("--url", default=None,
                       help="use an already running Arena at this http://host:port instead of starting one")
        g.add_argument("--token", default=None, help="game-server bearer token for --url")
        g.add_argument("--board", default="bench",
                       help="board for --url (best, desc, earliest, alltime+weekly+daily, values 0..1e9; default bench)")
        g.add_argument("--durability", choices=("full", "normal"), default="full",
                       help="durability of the generated config (default full)")
        g.add_argument("--keep", action="store_true", help="keep the server's temp dir (data, logs, config)")


def _config(a: argparse.Namespace) -> RunConfig:
    seconds = getattr(a, "seconds", 30.0)
    qs = getattr(a, "query_seconds", None)
    if qs is None:
        qs = max(1.0, seconds / 3)
    kw: dict[str, Any] = {
        "members": a.members, "seed": a.seed, "zipf": a.zipf, "warmup": a.warmup, "windows": max(1, a.windows),
        "progress_every": a.progress_every, "seconds": seconds, "query_seconds": qs,
    }
    for name in ("connections", "batch", "inflight", "max_batch", "retry_share", "ingest_rate",
                 "lag_probes", "query_connections", "query_rate", "period"):
        if hasattr(a, name):
            kw[name] = getattr(a, name)
    if hasattr(a, "lag_share"):
        kw["lag_rate_share"] = a.lag_share
    cfg = RunConfig(**kw)
    if cfg.members < 1 or cfg.connections < 1 or cfg.batch < 1 or cfg.inflight < 1:
        raise SystemExit("members, connections, batch and inflight must be >= 1")
    if cfg.batch > cfg.max_batch:
        raise SystemExit(f"--batch {cfg.batch} is larger than --max-batch {cfg.max_batch}")
    return cfg


def build_parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m loadtest",
        description="Load generators and peer benchmarks for Arena (WebSocket ingest, HTTP/WS queries).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fmt = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser("compare", formatter_class=fmt, epilog=EPILOG,
                       help="Arena vs bare-uvicorn ceiling vs Redis, same work, one table",
                       description="Start Arena on a temp config, prefill M members, ingest flat out for --seconds,\n"
                                   "run the query phases (HTTP and WS rank/top/around), HTTP rank again while ingest\n"
                                   "streams at half the measured rate, probe event->visibility lag at half the\n"
                                   "measured ingest rate; then the same HTTP rank load against a bare\n"
                                   "uvicorn app (the ceiling); then prefill and durable ingest again with Arena's\n"
                                   "journal on PostgreSQL (synchronous_commit on), its CPU counted apart; then the\n"
                                   "same work against Redis 7 (Lua per frame, AOF fsync always). Prints one table\n"
                                   "and writes it as JSON.")
    _common(p)
    p.add_argument("--json", type=Path, default=None,
                   help="write results here (default loadtest/results/compare-<timestamp>.json)")
    p.add_argument("--no-redis", action="store_true", help="skip the Redis peer")
    p.add_argument("--no-postgresql", action="store_true", help="skip Arena with its journal on PostgreSQL")
    p.add_argument("--postgresql-url", default=None,
                   help="PostgreSQL server for the journal (default: a throwaway embedded server, the dev extra)")

    p = sub.add_parser("ingest", formatter_class=fmt, epilog=EPILOG, help="the game-server simulator alone",
                       description="Prefill the board to M members (frames of --max-batch events, every member one\n"
                                   "event), then stream zipf-skewed frames of B events with K in flight on N\n"
                                   "connections for --seconds, 5% retries. Every ack is checked: id, one result\n"
                                   "per event in order, accepted for new events, duplicate for retries.")
    _common(p, query=False)
    p.add_argument("--no-prefill", action="store_true", help="skip the prefill (e.g. with --url)")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("query", formatter_class=fmt, epilog=EPILOG, help="query load alone (after a prefill)",
                       description="Prefill M members, then run query phases with C connections, one request in\n"
                                   "flight each: HTTP top?limit=10, members/{member}, around/{member}?radius=5 (tiny\n"
                                   "raw-asyncio HTTP/1.1 keep-alive client) and the WS ops rank, top, around.\n"
                                   "Latency per request: p50/p90/p99/max; req/s min/median/max over windows.")
    _common(p, ingest=False)
    p.add_argument("--seconds", type=float, default=30.0, help=argparse.SUPPRESS)
    p.add_argument("--connections", type=int, default=4, help="connections for the prefill (default 4)")
    p.add_argument("--max-batch", type=int, default=1000, help="events per prefill frame (default 1000)")
    p.add_argument("--inflight", type=int, default=8, help="prefill frames in flight per connection (default 8)")
    p.add_argument("--ops", default="http-rank,http-top,http-around,ws-rank,ws-top,ws-around",
                   help="comma-separated phases (default all six)")
    p.add_argument("--no-prefill", action="store_true", help="skip the prefill (e.g. with --url)")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("lag", formatter_class=fmt, epilog=EPILOG, help="event->visibility lag probe",
                       description="Prefill, measure the max ingest rate for --seconds (unless --ingest-rate),\n"
                                   "then stream at --lag-share of it while a probe submits one event of a new\n"
                                   "member and polls rank on another connection until visible; p50/p99 of\n"
                                   "--lag-probes probes. Queries sent after the ack that miss count as violations.")
    _common(p, query=False)
    p.add_argument("--period", default="alltime", help="period queried (default alltime)")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("redis", formatter_class=fmt, epilog=EPILOG, help="the Redis peer alone",
                       description="Start a private redis-server (loopback, temp dir, appendonly yes, appendfsync\n"
                                   "always) and run the same work as Arena: prefill, ingest (one Lua script per\n"
                                   "frame: idempotency hash, best on alltime/weekly/daily ZSETs, XADD journal),\n"
                                   "ZREVRANK+ZSCORE / ZREVRANGE queries, lag probe, used_memory per member.\n"
                                   "See loadtest/redis_peer.py for the tie encoding and its precision limit.")
    _common(p, server=False)
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("ceiling", formatter_class=fmt, epilog=EPILOG, help="bare uvicorn app, HTTP ceiling",
                       description="Serve a fixed JSON body from a bare ASGI app (uvicorn, 1 process, uvloop,\n"
                                   "httptools, no access log) and measure it with the same query client and\n"
                                   "members/{member} paths: the most any single-process uvicorn app gets here.")
    _common(p, ingest=False, server=False)
    p.add_argument("--seconds", type=float, default=30.0, help=argparse.SUPPRESS)
    p.add_argument("--body-bytes", type=int, default=330, help="size of the fixed body (default 330)")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("rebuild", formatter_class=fmt, epilog=EPILOG, help="replay speed of a journal, folded and not",
                       description="Write a journal of --events score events on each --journal-backend (not timed),\n"
                                   "then replay it as `arena rebuild` does, folded in the journal and event by event\n"
                                   "(--replay), --rebuild-repeats times after a warm-up: events/s, CPU split, same\n"
                                   "digests. See loadtest/rebuild.py.")
    _common(p, ingest=False, query=False, server=False)
    p.add_argument("--events", type=int, nargs="+", default=[1_000_000],
                   help="journal sizes, one journal each (default 1000000)")
    p.add_argument("--journal-backend", choices=("sqlite", "postgresql", "both"), default="sqlite",
                   help="where the journal is (default sqlite)")
    p.add_argument("--pg-url", default=None,
                   help="PostgreSQL server for --journal-backend postgresql (default: a throwaway embedded one)")
    p.add_argument("--replay", choices=("folded", "events", "both"), default="both",
                   help="folded in the journal, event by event, or both (default both)")
    p.add_argument("--span-hours", type=float, default=1.0, help="the events' instants span this many hours (default 1)")
    p.add_argument("--rebuild-repeats", type=int, default=3, help="measured replays per mode (default 3)")
    p.add_argument("--profile", type=int, default=0, help="print the top N lines of a cProfile of one folded replay")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("start", formatter_class=fmt, epilog=EPILOG, help="time to ready after a restart",
                       description="Journal --events events over --members members (in-process), then time `arena\n"
                                   "serve` to /readyz: with snapshots off, after a graceful restart (from its\n"
                                   "snapshot) and after a SIGKILL (the snapshot and a tail of --tail records).")
    p.add_argument("--members", type=int, default=100_000, help="members (default 100,000)")
    p.add_argument("--events", type=int, default=1_000_000, help="events in the journal (default 1,000,000)")
    p.add_argument("--tail", type=int, default=100_000, help="records journaled after the snapshot (default 100,000)")
    p.add_argument("--postgres", action="store_true", help="journal on PostgreSQL (--postgres-url, or an embedded one)")
    p.add_argument("--postgres-url", default=None, help="a PostgreSQL server to use (default: a throwaway one)")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("boards", formatter_class=fmt, epilog=EPILOG, help="many boards activated on demand",
                       description="Journal --boards boards of --members members and one of --big-members, then\n"
                                   "`arena serve` them with idle_unload_seconds = --idle: time to /readyz, RSS per\n"
                                   "idle board, and the first answer of the unloaded big board (--repeats times).")
    p.add_argument("--boards", type=int, default=10_000, help="boards (default 10,000)")
    p.add_argument("--members", type=int, default=100, help="members per board (default 100)")
    p.add_argument("--big-members", type=int, default=10_000, help="members of the big board (default 10,000)")
    p.add_argument("--repeats", type=int, default=20, help="first answers of the big board measured (default 20)")
    p.add_argument("--idle", type=float, default=1.0, help="idle_unload_seconds of the server (default 1)")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("settle", formatter_class=fmt, epilog=EPILOG, help="the cost of settling a big table",
                       description="Twice, on a fresh server each: prefill M members on a board whose tournament\n"
                                   "closes --close-after seconds after the start, then stream at --ingest-rate\n"
                                   "across the close; once without prizes, once with a ranks tier and a\n"
                                   "top_percent = 10 tier. Ack p99 over --window seconds from the close, the time\n"
                                   "to settle, CPU split (goal: + <= 50 ms of ack p99); --pairs times, interleaved.\n"
                                   "See loadtest/settle.py.")
    _common(p, query=False, server=False)
    p.set_defaults(ingest_rate=5000.0, batch=20)  # frames of 20: enough acks in the window for a p99
    p.add_argument("--close-after", type=float, default=120.0,
                   help="seconds from the start of each run to the close: the prefill must end before (default 120)")
    p.add_argument("--window", type=float, default=10.0, help="measured seconds from the close (default 10)")
    p.add_argument("--pairs", type=int, default=3, help="runs without and with prizes, interleaved (default 3)")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("spread", formatter_class=fmt, epilog=EPILOG, help="a new board served by every node",
                       description="Start --nodes nodes on one PostgreSQL, create --boards boards one after the\n"
                                   "other through them (PUT /v1/boards/{board}) and time each until every node\n"
                                   "answers its queries (goal: 1 s).")
    p.add_argument("--nodes", type=int, default=3, help="nodes of the cluster (default 3)")
    p.add_argument("--boards", type=int, default=20, help="boards created, one after the other (default 20)")
    p.add_argument("--postgresql-url", default=None, help="a PostgreSQL server to use (default: a throwaway one)")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("cluster", formatter_class=fmt, epilog=EPILOG, help="a cluster of nodes against one node",
                       description="On one PostgreSQL: ingest over --boards boards (one connection each) through one\n"
                                   "node, then through --nodes nodes (any node takes any board and forwards it to the\n"
                                   "owner); then, for each --takeover-events and --standbys, SIGKILL the owner of a\n"
                                   "share of the boards and time until each answers again; then a rolling restart\n"
                                   "(SIGTERM one node at a time) under ingest: how long acks wait while a node hands\n"
                                   "its boards off, and that nothing acked is lost. CPU per process. --compare BEFORE\n"
                                   "runs it all on another arena source tree and this one, interleaved.")
    p.add_argument("--nodes", type=int, default=3, help="nodes of the cluster (default 3)")
    p.add_argument("--boards", type=int, default=12, help="boards (default 12)")
    p.add_argument("--members", type=int, default=100_000, help="members per board (default 100,000)")
    p.add_argument("--seconds", type=float, default=10.0, help="measured ingest seconds per phase (default 10)")
    p.add_argument("--batch", type=int, default=100, help="events per frame (default 100)")
    p.add_argument("--inflight", type=int, default=8, help="frames in flight per connection (default 8)")
    p.add_argument("--takeover-events", type=_int_list, default=[100_000, 1_000_000],
                   help="journaled events per board of the killed node, comma-separated (default 100000,1000000)")
    p.add_argument("--standbys", type=_int_list, default=[0, 1], help="standby counts to try (default 0,1)")
    p.add_argument("--handoff-rounds", type=int, default=1,
                   help="rolling restarts of every node in the hand-off phase (default 1; 0 skips it)")
    p.add_argument("--arena-src", type=Path, default=None,
                   help="the nodes run the arena package of this source tree (default: the one this python imports)")
    p.add_argument("--compare", type=Path, default=None, metavar="BEFORE",
                   help="run everything on the arena of BEFORE and of --arena-src (default: this loadtest's tree),"
                        " interleaved, and print each figure's ratio after/before")
    p.add_argument("--compare-runs", type=int, default=2, help="runs of each tree with --compare (default 2)")
    p.add_argument("--postgresql-url", default=None, help="a PostgreSQL server to use (default: a throwaway one)")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")

    p = sub.add_parser("live", formatter_class=fmt, epilog=EPILOG, help="live views: subscribers under ingest",
                       description="Prefill M members; ingest flat out without subscribers, then with N of them\n"
                                   "(WS /v1/live and SSE mixed; one shared top-10 view, 100 member views): the\n"
                                   "ratio. Then at half that rate, markers (new top scores) from ack to the first\n"
                                   "update naming them, p50/p99; updates/s and server CPU per update; with\n"
                                   "--idle N, server RSS per idle subscriber. See loadtest/live.py.")
    _common(p, query=False)
    p.set_defaults(members=10_000)
    p.add_argument("--subscribers", type=int, default=1000, help="live subscribers N (default 1000)")
    p.add_argument("--idle", type=int, default=0, help="idle subscribers for the memory measure (default 0: skip)")
    p.add_argument("--hostile", choices=("members", "top"), default=None,
                   help="instead: ingest without / with / without one /v1/live reader holding up to 100 distinct views"
                        " (members: 1,000 active members each, reaching max_view_entries and max_view_members;"
                        " top: top-1000 at offsets 0..99, issue 31's DoS 4)")
    p.add_argument("--hostile-rounds", type=int, default=5,
                   help="with --hostile: phases with the reader, each between two without it (default 5)")
    p.add_argument("--json", type=Path, default=None, help="write results as JSON here")
    return top


def _target(a: argparse.Namespace, server: Any) -> Any:
    from loadtest.arena_client import ArenaTarget

    if a.url:
        return ArenaTarget(base_url=a.url.rstrip("/"), token=a.token or "", max_batch=getattr(a, "max_batch", 1000),
                           board=a.board)
    return server.start()


async def _with_arena(a: argparse.Namespace, body: Any) -> Any:
    from loadtest.arena_client import ArenaServer

    if a.url:
        return await body(_target(a, None))
    server = ArenaServer(durability=a.durability, max_batch=getattr(a, "max_batch", 1000), keep=a.keep)
    try:
        target = server.start()
        progress(f"arena serving on {target.base_url} (pid {target.pid}), workdir {server.workdir}")
        return await body(target)
    finally:
        rc = server.stop()
        progress(f"arena stopped (exit code {rc})")
        server.cleanup()


def _print_ingest(name: str, r: dict[str, Any]) -> None:
    c = r["counts"]
    lat = r["ack_latency"]
    print(f"{name:<16} {fmt_int(r['events_per_s']):>10} ev/s  windows {fmt_int(r['rate']['min'])}/"
          f"{fmt_int(r['rate']['median'])}/{fmt_int(r['rate']['max'])}  ack p50/p99/max ms "
          f"{fmt_ms(lat['p50_ms'])}/{fmt_ms(lat['p99_ms'])}/{fmt_ms(lat['max_ms'])}  "
          f"sent={fmt_int(c['events_sent'])} checked={fmt_int(c['results_checked'])} accepted={fmt_int(c['accepted'])}"
          f" duplicate={fmt_int(c['duplicate'])} rejected={c['rejected'] or 0} unexpected={c['unexpected'] or 0}"
          f" ack_errors={c['ack_errors'] or 0} cpu client/server/other {r.get('client_cpu')}/{r.get('server_cpu')}/{r.get('other_cpu')}"
          f" ok={c['ok']}")


def _print_query(name: str, r: dict[str, Any]) -> None:
    lat = r["latency"]
    print(f"{name:<20} {fmt_int(r['req_per_s']):>9} req/s  windows {fmt_int(r['rate']['min'])}/"
          f"{fmt_int(r['rate']['median'])}/{fmt_int(r['rate']['max'])}  p50/p90/p99/max ms "
          f"{fmt_ms(lat['p50_ms'])}/{fmt_ms(lat['p90_ms'])}/{fmt_ms(lat['p99_ms'])}/{fmt_ms(lat['max_ms'])}"
          f"  errors={r['errors'] or 0} cpu client/server/other {r.get('client_cpu')}/{r.get('server_cpu')}/{r.get('other_cpu')}")


def _print_lag(name: str, r: dict[str, Any]) -> None:
    lag, ack = r["lag"], r["ack"]
    print(f"{name:<16} lag p50/p99/max ms {fmt_ms(lag['p50_ms'])}/{fmt_ms(lag['p99_ms'])}/{fmt_ms(lag['max_ms'])}"
          f"  ack p50/p99 ms {fmt_ms(ack['p50_ms'])}/{fmt_ms(ack['p99_ms'])}  probes={r['probes']}"
          f" background {fmt_int(r.get('background_rate'))} ev/s"
          f" violations={r.get('visible_after_ack_violations', 0)} errors={len(r['errors'])} ok={r['ok']}")


def _finish(a: argparse.Namespace, doc: dict[str, Any], ok: bool) -> int:
    from loadtest.report import machine_info, write_json

    doc.setdefault("machine", machine_info())
    if getattr(a, "json", None):
        write_json(a.json, doc)
        print(f"json: {a.json}")
    return 0 if ok else 1


def cmd_compare(a: argparse.Namespace) -> int:
    from loadtest.compare import compare, print_compare
    from loadtest.redis_server import INSTALL_HINT, redis_binary
    from loadtest.report import default_json_path, write_json

    if not a.no_redis and redis_binary() is None:
        print(f"redis-server not found; {INSTALL_HINT} (or run with --no-redis)", file=sys.stderr)
        return 2
    cfg = _config(a)
    results = _run(compare(cfg, durability=a.durability, keep=a.keep, url=a.url, token=a.token, board=a.board,
                           skip_redis=a.no_redis, skip_postgresql=a.no_postgresql,
                           postgresql_url=a.postgresql_url, lag_via=a.lag_via))
    path = a.json or default_json_path("compare")
    write_json(path, results)
    print_compare(results, path)
    return 0 if results["ok"] else 1


def cmd_ingest(a: argparse.Namespace) -> int:
    from loadtest.arena_run import arena_ingest, arena_prefill
    from loadtest.workload import Workload

    cfg = _config(a)
    workload = Workload(cfg.workload_spec())

    async def body(target: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"command": "ingest", "config": cfg.as_dict()}
        if not a.no_prefill:
            out["prefill"] = await arena_prefill(cfg, workload, target)
        out["ingest"] = await arena_ingest(cfg, workload, target, rate=cfg.ingest_rate)
        return out

    out = _run(_with_arena(a, body))
    print()
    if "prefill" in out:
        _print_ingest("prefill arena", out["prefill"])
        if out["prefill"].get("bytes_per_member_per_table") is not None:
            prefill = out["prefill"]
            idle = prefill.get("bytes_per_member_per_table_idle")
            print(f"{'':16} server RSS {fmt_int(prefill['rss_before'])} -> {fmt_int(prefill['rss_after'])} B"
                  f" = {prefill['bytes_per_member_per_table']:.1f} B/member/table"
                  + ("" if idle is None else f"; once idle {fmt_int(prefill['rss_idle'])} B = {idle:.1f} B/member/table"))
    _print_ingest("ingest arena", out["ingest"])
    ok = out["ingest"]["ok"] and out.get("prefill", {"ok": True})["ok"]
    return _finish(a, out, ok)


def cmd_query(a: argparse.Namespace) -> int:
    from loadtest.arena_run import QUERY_OPS, arena_prefill, arena_queries
    from loadtest.workload import Workload

    cfg = _config(a)
    ops = tuple(o.strip() for o in a.ops.split(",") if o.strip())
    bad = [o for o in ops if o not in QUERY_OPS]
    if bad:
        raise SystemExit(f"unknown --ops {bad}; choose from {', '.join(QUERY_OPS)}")
    workload = Workload(cfg.workload_spec())

    async def body(target: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"command": "query", "config": cfg.as_dict()}
        if not a.no_prefill:
            out["prefill"] = await arena_prefill(cfg, workload, target)
        out["query"] = await arena_queries(cfg, workload, target, ops)
        return out

    out = _run(_with_arena(a, body))
    print()
    for op, r in out["query"].items():
        _print_query(f"arena {op}", r)
    ok = all(not r["errors"] for r in out["query"].values()) and out.get("prefill", {"ok": True})["ok"]
    return _finish(a, out, ok)


def cmd_lag(a: argparse.Namespace) -> int:
    from loadtest.arena_run import arena_ingest, arena_lag, arena_prefill
    from loadtest.workload import Workload

    cfg = _config(a)
    workload = Workload(cfg.workload_spec())

    async def body(target: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"command": "lag", "config": cfg.as_dict()}
        out["prefill"] = await arena_prefill(cfg, workload, target)
        max_rate = cfg.ingest_rate
        if max_rate is None:
            out["ingest"] = await arena_ingest(cfg, workload, target)
            max_rate = out["ingest"]["events_per_s"]
            # ingest_rate is the max; the probe runs at lag_share of it
        out["lag"] = await arena_lag(cfg, workload, target, max_rate, via=a.lag_via)
        return out

    out = _run(_with_arena(a, body))
    print()
    if "ingest" in out:
        _print_ingest("ingest arena", out["ingest"])
    _print_lag("lag arena", out["lag"])
    return _finish(a, out, out["lag"]["ok"] and out["prefill"]["ok"])


def cmd_redis(a: argparse.Namespace) -> int:
    from loadtest.redis_peer import run_redis
    from loadtest.redis_server import INSTALL_HINT, RedisServer, redis_binary
    from loadtest.workload import Workload

    binary = redis_binary()
    if binary is None:
        print(f"redis-server not found; {INSTALL_HINT}", file=sys.stderr)
        return 2
    cfg = _config(a)
    workload = Workload(cfg.workload_spec())
    rs = RedisServer(binary)

    async def body() -> dict[str, Any]:
        return await run_redis(cfg, workload, rs)

    try:
        rs.start()
        progress(f"redis-server on 127.0.0.1:{rs.port} (pid {rs.pid}), dir {rs.dir}")
        out = _run(body())
    finally:
        rs.cleanup()
    out = {"command": "redis", "config": cfg.as_dict(), "redis": out}
    r = out["redis"]
    print()
    _print_ingest("prefill redis", r["prefill"])
    print(f"{'':16} used_memory {fmt_int(r['prefill']['used_memory_before'])} -> "
          f"{fmt_int(r['prefill']['used_memory_after'])} B = {r['prefill']['bytes_per_member_per_table']:.0f}"
          f" B/member/table (zsets only {r['prefill']['zset_bytes_per_member_per_table']:.0f})")
    _print_ingest("ingest redis", r["ingest"])
    for op, q in r["query"].items():
        _print_query(f"redis {op}", q)
    _print_lag("lag redis", r["lag"])
    ok = r["prefill"]["ok"] and r["ingest"]["ok"] and r["lag"]["ok"] and all(
        not q["errors"] for q in r["query"].values())
    return _finish(a, out, ok)


def cmd_ceiling(a: argparse.Namespace) -> int:
    from loadtest.compare import run_ceiling
    from loadtest.workload import Workload

    cfg = _config(a)
    workload = Workload(cfg.workload_spec())
    res = _run(run_ceiling(cfg, workload, a.body_bytes, "bench"))
    print()
    _print_query("ceiling http-rank", res)
    return _finish(a, {"command": "ceiling", "config": cfg.as_dict(), "ceiling": res}, not res["errors"])


def cmd_rebuild(a: argparse.Namespace) -> int:
    from loadtest.rebuild import print_rebuild, rebuild_benchmark

    backends = ["sqlite", "postgresql"] if a.journal_backend == "both" else [a.journal_backend]
    modes = ["folded", "events"] if a.replay == "both" else [a.replay]
    if min(a.events) < 1 or a.members < 1 or a.rebuild_repeats < 1:
        raise SystemExit("--events, --members and --rebuild-repeats must be >= 1")
    out = _run(rebuild_benchmark(backends, a.events, a.members, a.zipf, a.seed, a.span_hours, modes,
                                 a.rebuild_repeats, a.profile, a.pg_url))
    print_rebuild(out)
    return _finish(a, out, out["ok"])


def cmd_start(a: argparse.Namespace) -> int:
    from loadtest.start import print_start, run

    out = run(a.members, a.events, a.tail, a.postgres, a.postgres_url)
    print_start(out)
    return _finish(a, out, out["ok"])


def cmd_boards(a: argparse.Namespace) -> int:
    from loadtest.boards import print_boards, run

    out = run(a.boards, a.members, a.big_members, a.repeats, a.idle)
    print_boards(out)
    return _finish(a, out, out["ok"])


def cmd_spread(a: argparse.Namespace) -> int:
    from loadtest.spread import print_spread, run

    out = run(a.nodes, a.boards, a.postgresql_url)
    print_spread(out)
    return _finish(a, out, out["ok"])


def cmd_settle(a: argparse.Namespace) -> int:
    from loadtest.settle import print_settle, settle_benchmark

    out = _run(settle_benchmark(_config(a), a.close_after, a.window, max(1, a.pairs)))
    print_settle(out)
    return _finish(a, out, out["ok"])


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def cmd_cluster(a: argparse.Namespace) -> int:
    from loadtest.before_after import OWN_TREE, compare_trees, print_comparison
    from loadtest.cluster import Sizes, cluster_benchmark, print_cluster

    for tree in (a.arena_src, a.compare):
        if tree is not None and not (tree / "arena" / "__main__.py").is_file():
            raise SystemExit(f"{tree} holds no arena package (arena/__main__.py)")
    sizes = Sizes(a.nodes, a.boards, a.members, a.seconds, a.batch, a.inflight, a.takeover_events, a.standbys,
                  a.handoff_rounds)
    if a.compare is not None:
        out = compare_trees(a.compare.resolve(), (a.arena_src or OWN_TREE).resolve(), a.compare_runs, sizes,
                            a.postgresql_url)
        print_comparison(out)
    else:
        out = cluster_benchmark(sizes, a.postgresql_url, a.arena_src.resolve() if a.arena_src else None)
        print_cluster(out)
    return _finish(a, out, out["ok"])


def cmd_live(a: argparse.Namespace) -> int:
    from loadtest.live import hostile_benchmark, live_benchmark, live_config, print_hostile, print_live, raise_open_files_limit
    from loadtest.workload import Workload

    raise_open_files_limit()
    cfg = live_config(_config(a))
    workload = Workload(cfg.workload_spec())
    hostile = a.hostile is not None
    name = "hostile" if hostile else "live"

    async def body(target: Any) -> dict[str, Any]:
        measured = await (hostile_benchmark(cfg, workload, target, a.hostile, a.hostile_rounds) if hostile
                          else live_benchmark(cfg, workload, target, a.subscribers, a.idle))
        return {"command": "live --hostile" if hostile else "live", "config": cfg.as_dict(), name: measured}

    out = _run(_with_arena(a, body))
    print()
    (print_hostile if hostile else print_live)(out[name])
    return _finish(a, out, out[name]["summary"]["ok"])


COMMANDS = {"compare": cmd_compare, "ingest": cmd_ingest, "query": cmd_query, "lag": cmd_lag,
            "redis": cmd_redis, "ceiling": cmd_ceiling, "rebuild": cmd_rebuild, "start": cmd_start, "boards": cmd_boards, "live": cmd_live,
            "cluster": cmd_cluster, "spread": cmd_spread, "settle": cmd_settle}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from loadtest.process import ServerFailed

        if isinstance(exc, ServerFailed):
            print(f"error: {exc}", file=sys.stderr)
            return 2
        raise
