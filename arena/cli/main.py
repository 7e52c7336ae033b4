"""`arena serve | rebuild | verify | migrate | token` — see `arena <command> --help`."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from arena.auth import RedactTokens, new_token, token_sha256
from arena.board.clock import Clock
from arena.board.heap import tune as tune_heap
from arena.cli.rebuild import every_board, rebuild_board, table_name, table_rows
from arena.config import Config, load_config
from arena.engine.periods import period_name
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.engine.times import parse_rfc3339_ms
from arena.errors import ArenaError
from arena.journal import JournalBackend, journal_backend
from arena.journal.datadir import DataDirLock

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

log = logging.getLogger("arena")


def _config(args: argparse.Namespace) -> Config:
    path = Path(args.config or os.environ.get("ARENA_CONFIG") or "config.toml")
    config = load_config(path, journal_url=os.environ.get("ARENA_JOURNAL_URL"),
                         cluster_secret=os.environ.get("ARENA_CLUSTER_SECRET"))
    server = config.server
    if getattr(args, "host", None):
        server = replace(server, host=args.host)
    if getattr(args, "port", None) is not None:
        server = replace(server, port=args.port)
    if getattr(args, "data_dir", None):
        server = replace(server, data_dir=Path(args.data_dir).resolve())
    return replace(config, server=server)


def _run(coro_factory: Callable[[], Any]) -> Any:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop ships with uvicorn[standard]
        return asyncio.run(coro_factory())
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro_factory())


# -- serve ------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace, *, wrap_backend: Callable[[JournalBackend], JournalBackend] | None = None,
              extra_routes: Sequence[BaseRoute] = ()) -> int:
    """`arena serve`. ``wrap_backend`` and ``extra_routes`` are the seams of `Arena` and
    `create_app`, for a program that serves Arena with additions (`main`'s ``serve``)."""
    from arena.api.service import Arena
    from arena.cli.serve import serve

    config = _config(args)
    tune_heap()  # before the journals' and executors' threads start
    # on postgresql the node's lease on the schema keeps a second server off (Arena.start)
    lock = DataDirLock(config.server.data_dir) if config.journal.backend == "sqlite" else None
    if lock is not None:
        lock.acquire()
        log.info("data dir %s, boards: %s", config.server.data_dir, ", ".join(config.boards))
    try:
        arena = Arena(config, wrap_backend=wrap_backend)
        _run(lambda: serve(arena, config.server.host, config.server.port, access_log=args.access_log,
                           extra_routes=extra_routes))
    finally:
        if lock is not None:
            lock.release()
    return 0


# -- rebuild ----------------------------------------------------------------------------------


def _boards(config: Config, only: str | None) -> list[BoardSpec]:
    """The boards to rebuild or verify: the config's and the API boards of its store."""
    boards: list[BoardSpec] = _run(partial(every_board, config))
    if only is None:
        return boards
    chosen = [spec for spec in boards if spec.name == only]
    if not chosen:
        raise ArenaError(f"no board named {only!r} in the config or the store (boards: {', '.join(s.name for s in boards)})")
    return chosen


def cmd_rebuild(args: argparse.Namespace) -> int:
    config = _config(args)
    failed = 0
    print("board\tperiod\tperiod_id\tevents\tmembers\tseconds\tsha256", flush=True)
    for spec in _boards(config, args.board):
        print(f"# rebuilding {spec.name} from {journal_backend(config).where(spec.name)}", file=sys.stderr, flush=True)
        now = Clock().now()
        try:
            engine, report = _run(partial(rebuild_board, config, spec, now=now, everything=args.all))
        except ArenaError as exc:
            print(f"# {spec.name}: {exc}", file=sys.stderr, flush=True)
            failed += 1
            continue
        rows = table_rows(spec, engine, report, now)
        for key, (table, events, seconds) in sorted(rows.items(), key=lambda row: table_name(row[0])):
            kind, period_id = table_name(key)
            print(f"{spec.name}\t{kind}\t{period_id}\t{events}\t{len(table)}\t{seconds:.3f}\t{table.digest()}", flush=True)
        rate = report.events / report.seconds if report.seconds else 0.0
        print(f"# {spec.name}: {report.events} events in {report.seconds:.3f}s ({rate:,.0f} events/s)", file=sys.stderr, flush=True)
    return 1 if failed else 0


# -- verify -----------------------------------------------------------------------------------


def _get(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body: dict[str, Any] = orjson.loads(response.read())
            return body
    except urllib.error.HTTPError as exc:
        raise ArenaError(f"GET {url}: HTTP {exc.code}: {exc.read().decode(errors='replace')[:200]}") from exc
    except urllib.error.URLError as exc:
        raise ArenaError(f"GET {url}: {exc.reason}") from exc


def _first_difference(base: str, board: str, table: RankedTable, period_id: str) -> str:
    """Where the server's standings and the rebuilt ones first differ (server read in pages)."""
    kind = table.window.kind
    rebuilt = table.entries()
    offset = 0
    while True:
        query = urllib.parse.urlencode({"limit": 1000, "offset": offset, "period_id": period_id,
                                        **({} if table.partition is None else {"partition": table.partition})})
        page = _get(f"{base}/v1/boards/{board}/{kind}/top?{query}")["entries"]
        for served in page:
            mine = next(rebuilt, None)
            got = None if mine is None else (mine.member, mine.score, mine.reached_at)
            want = (served["member"], served["score"], parse_rfc3339_ms(served["reached_at"]))
            if got != want:
                return f"first differing rank {served['rank']}: server {want}, rebuilt {got}"
        if len(page) < 1000:
            extra = next(rebuilt, None)
            return f"rebuilt has an extra entry at rank {extra.rank}: {extra}" if extra else "entries equal (digest race?)"
        offset += 1000


def cmd_verify(args: argparse.Namespace) -> int:
    config = _config(args)
    base = (args.url or f"http://{config.server.host}:{config.server.port}").rstrip("/")
    mismatches = 0
    checked = 0
    for spec in _boards(config, args.board):
        served: list[dict[str, Any]] = []
        for kind in spec.kinds:
            listing = _get(f"{base}/v1/boards/{spec.name}/{kind}/periods")
            for p in listing["periods"]:
                query = urllib.parse.urlencode({"period_id": p["period_id"]})
                served.append(_get(f"{base}/v1/boards/{spec.name}/{kind}/digest?{query}"))
                for part in _get(f"{base}/v1/boards/{spec.name}/{kind}/partitions?{query}")["partitions"]:
                    partition = urllib.parse.urlencode({"period_id": p["period_id"], "partition": part["partition"]})
                    served.append(_get(f"{base}/v1/boards/{spec.name}/{kind}/digest?{partition}"))
        for seq in sorted({d["seq"] for d in served}):
            engine, _report = _run(partial(rebuild_board, config, spec, now=Clock().now(), upto_seq=seq, everything=True))
            for d in (d for d in served if d["seq"] == seq):
                kind = period_name(d["period"])
                table = engine.tables.get((kind, d["period_id"]))
                if table is None:  # no event ever reached it
                    table = RankedTable(engine.rule, engine.schedule.window_by_id(kind, d["period_id"]))
                if "partition" in d:
                    table = engine.partition_of(table, d["partition"])
                checked += 1
                part = "" if table.partition is None else "/" + table.partition
                name = f"{spec.name}/{kind}/{d['period_id']}{part} @ seq {seq}"
                if table.digest() == d["sha256"]:
                    print(f"ok\t{name}\t{d['size']} entries\t{d['sha256']}", flush=True)
                    continue
                mismatches += 1
                print(f"MISMATCH\t{name}\t{_first_difference(base, spec.name, table, d['period_id'])}", flush=True)
    print(f"# {checked} tables checked, {mismatches} mismatched", file=sys.stderr)
    return 1 if mismatches else 0


# -- migrate ----------------------------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace) -> int:
    from arena.cli.migrate import migrate

    config = _config(args)
    print("board\tperiod\tperiod_id\tsource_sha256\ttarget_sha256\tresult", flush=True)
    return migrate(config, args.to or args.from_, to_postgresql=args.to is not None, print_line=partial(print, flush=True))


# -- token ------------------------------------------------------------------------------------


def cmd_token(args: argparse.Namespace) -> int:
    token = new_token()
    section = "admins" if args.admin else "servers"
    print(f"token: {token}")
    print(f"token_sha256: {token_sha256(token)}")
    print("\n# config.toml (store only the hash; give the token to the game server):")
    print(f'[[{section}]]\nid = "{args.id}"\ntoken_sha256 = "{token_sha256(token)}"')
    if not args.admin:
        print('boards = ["*"]')
    return 0


# -- parser -----------------------------------------------------------------------------------


def _options(*, config: bool) -> argparse.ArgumentParser:
    """Options accepted before or after the subcommand. Their defaults are SUPPRESSed so that a
    value given in one place is not overwritten by the other's default (`main` fills them in from
    `OPTION_DEFAULTS`); given in both places, the one after the subcommand wins."""
    p = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    p.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    if config:
        p.add_argument("--config", help="config file (default: $ARENA_CONFIG or ./config.toml)")
        p.add_argument("--data-dir", help="override [server].data_dir")
    return p


OPTION_DEFAULTS = {"log_level": "INFO", "config": None, "data_dir": None}


def parser(serve: Callable[[argparse.Namespace], int] = cmd_serve) -> argparse.ArgumentParser:
    configured, logged = _options(config=True), _options(config=False)
    root = argparse.ArgumentParser(prog="arena", description="Arena: realtime leaderboards over an event journal.",
                                   parents=[configured])
    root.add_argument("--version", action="version", version=f"%(prog)s {version('arena')}")
    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run the server",
                       description="Serve WebSocket ingest and HTTP queries until SIGTERM/SIGINT (which drains gracefully).",
                       parents=[configured])
    p.add_argument("--host", help="override [server].host")
    p.add_argument("--port", type=int, help="override [server].port")
    p.add_argument("--access-log", action="store_true", help="log every HTTP request")
    p.set_defaults(run=serve)

    p = sub.add_parser("rebuild", help="rebuild tables offline from the journals",
                       description="Replay journals read-only and print, per table: events replayed, members, seconds "
                       "(of the replay pass that built the table: current hourly/daily/weekly tables come from "
                       "a first pass over recent events, the rest from a full pass) and the sha256 digest of the "
                       "standings. A summary line per board (events/s) goes to stderr.", parents=[configured])
    p.add_argument("--board", help="only this board")
    p.add_argument("--all", action="store_true", help="also every closed table, not only the retained ones")
    p.set_defaults(run=cmd_rebuild)

    p = sub.add_parser("verify", help="compare a running server with an offline rebuild",
                       description="For every table a running server retains, rebuild it offline up to the seq the "
                       "server reports and compare digests. Exit 1 on any mismatch, naming the first differing rank.",
                       parents=[configured])
    p.add_argument("--board", help="only this board")
    p.add_argument("--url", help="server base URL (default: http://[server].host:[server].port)")
    p.set_defaults(run=cmd_verify)

    p = sub.add_parser("migrate", help="copy the journals between sqlite and PostgreSQL",
                       description="Copy every board's journal (events with their seqs, close markers, voids, "
                       "definition) from data_dir into PostgreSQL (--to) or back (--from), one transaction per "
                       "board, into [journal] schema. A board the target already holds records of is skipped. "
                       "Then both sides are replayed and each retained table's digest printed for both. Exit 1 "
                       "when a board was skipped or a digest differs. Refuses to run while a server holds "
                       "data_dir or the schema.", parents=[configured])
    direction = p.add_mutually_exclusive_group(required=True)
    direction.add_argument("--to", metavar="URL", help="copy data_dir's journals into PostgreSQL at URL")
    direction.add_argument("--from", dest="from_", metavar="URL", help="copy the journals at URL into data_dir")
    p.set_defaults(run=cmd_migrate)

    p = sub.add_parser("token", help="make a new bearer token",
                       description="Print a new random token and the token_sha256 to put in config.toml.",
                       parents=[logged])
    p.add_argument("--server", dest="id", help="game server id")
    p.add_argument("--admin", metavar="ID", help="make an admin token instead")
    p.set_defaults(run=cmd_token)
    return root


GC_THRESHOLDS = (10_000, 10, 1_000)
"""The cyclic GC's generation thresholds for the arena process (CPython's are 700, 10, 10).

A full collection walks every entry of every tracked container, and a board's tables are a few
huge dicts and SortedList sublists: at 1M members x 3 tables each full collection took ~190 ms
and ran every second or so, a quarter of `arena serve` under ingest (and of a replay). With
these thresholds full collections become rare (none in a 70 s 1M-member load test) and gen0
runs a tenth as often: ingest went from 15.7k to 22.8k events/s. Arena makes few reference
cycles, so little waits longer to be freed."""


def main(argv: Sequence[str] | None = None, *, serve: Callable[[argparse.Namespace], int] = cmd_serve) -> int:
    """The `arena` command. ``serve`` runs the serve command (`cmd_serve` with additions, for
    another program that takes the same command line)."""
    args = parser(serve).parse_args(argv)
    for name, default in OPTION_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, default)
    gc.set_threshold(*GC_THRESHOLDS)
    if args.command == "token":
        if bool(args.id) == bool(args.admin):
            print("arena token: give exactly one of --server ID or --admin ID", file=sys.stderr)
            return 2
        args.id = args.id or args.admin
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactTokens())
    started = time.monotonic()
    try:
        return int(args.run(args))
    except ArenaError as exc:
        print(f"arena {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        log.debug("%s took %.3fs", args.command, time.monotonic() - started)


if __name__ == "__main__":
    sys.exit(main())
