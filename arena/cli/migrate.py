"""`arena migrate --to URL | --from URL`: copy every board's journal between sqlite (`data_dir`)
and PostgreSQL (the URL, in ``[journal] schema``), then prove the copy by digests.

Each board is copied whole in one transaction of the target (`Journal.append_all`), its records
streamed from the source in seq order (`Journal.records`) with their seqs, so a board is either
all there or not at all. A board whose target already holds records is skipped. Afterwards both
sides are replayed read-only, as `arena rebuild` does, and every retained table's digest is
printed for both: any difference is a failure. The settlement log is copied last, its cursors
kept, into the target's empty log.

While it runs it holds the data_dir lock and a lease on the schema, as `arena serve` does: it
refuses to start while a server holds either, and no server starts until it is done.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace

import orjson

from arena.board.clock import Clock
from arena.cli.rebuild import catalog_entries, rebuild_board, table_name, table_rows
from arena.cluster.grants import Grants
from arena.cluster.lease import NodeLease
from arena.config import Config, JournalSettings, parse_board
from arena.engine.records import Record
from arena.engine.settlement import LogItem
from arena.engine.spec import BoardSpec
from arena.errors import ArenaError
from arena.journal import Journal, JournalBackend, board_catalog, settlement_log
from arena.journal.datadir import DataDirLock
from arena.journal.postgresql import PostgresBackend
from arena.journal.sqlite import SqliteBackend

MAX_LOG_PAGE = 10_000
"""Settlement log items read at a time."""
PROGRESS_SECONDS = 2.0
"""A progress line on stderr at most this often while a board is copied."""


@dataclass(frozen=True, slots=True)
class Sides:
    """Where a migration reads and writes: the configs that open each side (for the digests) and
    the backends that copy."""

    source: Config
    target: Config
    source_backend: JournalBackend
    target_backend: JournalBackend
    postgres: PostgresBackend


def sides(config: Config, url: str, to_postgresql: bool) -> Sides:
    sqlite = replace(config, journal=JournalSettings())
    postgresql = replace(config, journal=JournalSettings("postgresql", url, config.journal.schema))
    durability = config.server.durability
    pg = PostgresBackend(postgresql.journal, durability, f"arena-migrate@{socket.gethostname()}")
    files = SqliteBackend(config.server.data_dir, durability)
    if to_postgresql:  # granted as a server's writes are: not while another node holds the schema
        return Sides(sqlite, postgresql, files, Grants(pg), pg)
    return Sides(postgresql, sqlite, pg, files, pg)


def migrate(config: Config, url: str, to_postgresql: bool, print_line: Callable[[str], None] = print) -> int:
    """Copy every board of ``config``; 0 when every board was copied and its digests match, 1
    otherwise (a board skipped or failed is reported and the others go on). Raises
    DataDirLocked, SchemaHeld, JournalUnavailable before copying anything."""
    where = sides(config, url, to_postgresql)
    lock = DataDirLock(config.server.data_dir)
    lock.acquire()
    try:
        return asyncio.run(_migrate(config, where, print_line))
    finally:
        lock.release()


async def _migrate(config: Config, where: Sides, print_line: Callable[[str], None]) -> int:
    lease = NodeLease(where.postgres)
    try:
        await lease.acquire()
        renewals = asyncio.create_task(lease.keep(), name="lease")
        try:
            failed = 0
            entries = await catalog_entries(where.source)
            boards = [*config.boards.values(), *(parse_board(e.name, orjson.loads(e.definition)) for e in entries)]
            for spec in boards:
                if not await _board(spec, where, print_line):
                    failed += 1
            target = board_catalog(where.target, where.postgres)  # on sqlite: the data_dir's
            try:
                for entry in entries:  # after the journals: a copied catalog names boards whose journals are there
                    if not await target.restore(entry):
                        print_line(f"# {entry.name}: the target's board catalog holds it already; kept as it is")
                        failed += 1
            finally:
                await target.close()
            if not await _copy_log(where, print_line):
                failed += 1
        finally:
            renewals.cancel()
            await lease.release()
    finally:
        await where.postgres.close()
    print_line(f"# {len(boards) - failed} of {len(boards)} boards copied with equal digests")
    return 1 if failed else 0


async def _copy_log(where: Sides, print_line: Callable[[str], None]) -> bool:
    """Copy the settlement log with its cursors (a game backend's stored cursor means the same
    on the target); False when the target's log holds items already (it is kept as it is)."""
    source = settlement_log(where.source, where.postgres, readonly=True)
    target = settlement_log(where.target, where.postgres)
    try:
        items: list[LogItem] = []
        while page := await source.after(items[-1].cursor if items else 0, MAX_LOG_PAGE, lambda _board: True):
            items += page
        if not await target.restore(items):
            print_line("# settlement log: the target's holds items already; kept as it is")
            return False
    finally:
        await source.close()
        await target.close()
    print_line(f"# settlement log: {len(items)} items copied")
    return True


async def _board(spec: BoardSpec, where: Sides, print_line: Callable[[str], None]) -> bool:
    """Copy one board and compare its digests; False when it was skipped or anything differs."""
    name = spec.name
    source_place = where.source_backend.where(name)
    target_place = where.target_backend.where(name)
    print_line(f"# {name}: {source_place} -> {target_place}")
    try:
        copied = await _copy(spec, where)
    except ArenaError as exc:
        print_line(f"{name}\tfailed\t{exc}")
        return False
    if copied is None:
        print_line(f"{name}\tskipped\tthe target already holds records of this board")
        return False
    print_line(f"{name}\tcopied\t{copied} records")
    now = Clock().now()
    digests = []
    for config in (where.source, where.target):
        try:
            engine, report = await rebuild_board(config, spec, now=now)
        except ArenaError as exc:
            print_line(f"{name}\tMISMATCH\tcannot replay {config.journal.backend}: {exc}")
            return False
        digests.append({table_name(key): table.digest() for key, (table, _, _) in table_rows(spec, engine, report, now).items()})
    source, target = digests
    equal = source == target
    for kind, period_id in sorted(source.keys() | target.keys()):
        mine, theirs = source.get((kind, period_id), "-"), target.get((kind, period_id), "-")
        print_line(f"{name}\t{kind}\t{period_id}\t{mine}\t{theirs}\t{'ok' if mine == theirs else 'MISMATCH'}")
    return equal


async def _copy(spec: BoardSpec, where: Sides) -> int | None:
    """The number of records copied, or None when the target holds records already."""
    source = await where.source_backend.open(spec, readonly=True)
    try:
        target = await where.target_backend.open(spec)
        try:
            if target.last_seq > 0:
                return None
            counted = _Counted(spec.name, source)
            await target.append_all(counted.chunks())
            return counted.records
        finally:
            await target.close()
    finally:
        await source.close()


class _Counted:
    """A source's records as they stream, counted, with a progress line on stderr now and then."""

    def __init__(self, board: str, source: Journal) -> None:
        self.board = board
        self.source = source
        self.records = 0

    async def chunks(self) -> AsyncIterator[list[Record]]:
        started = shown = time.monotonic()
        async for chunk in self.source.records():
            self.records += len(chunk)
            yield chunk
            now = time.monotonic()
            if now - shown >= PROGRESS_SECONDS:
                shown = now
                print(f"# {self.board}: {self.records:,} of {self.source.last_seq:,} records"
                      f" ({self.records / (now - started):,.0f}/s)", file=sys.stderr, flush=True)
