"""`arena migrate` through the real command line and a real PostgreSQL: sqlite journals copied
into PostgreSQL and back with every record, seq and digest equal, and the settlement log with
its cursors (the next append follows them); a board the target already
holds is skipped (exit 1); a held data_dir or schema refuses the run; a password in the URL
never shows."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from arena.cluster.lease import NodeLease
from arena.config import Config, JournalSettings, load_config
from arena.engine.events import Event
from arena.engine.periods import Calendar, PeriodKind
from arena.engine.prizes import Award, PrizeTier, sha256_of
from arena.engine.records import BoardKind, BoardRecord, CloseRecord, Record, ScoreRecord, VoidRecord
from arena.engine.settlement import LogItem, Settlement, SettlementRecord
from arena.journal import journal_backend, settlement_log
from arena.journal.datadir import DataDirLock
from arena.journal.postgresql import PostgresBackend
from support.arena_cli import arena, rebuild_digests
from support.faults import write_config
from support.server import now_ms

BOARDS: dict[str, dict[str, Any]] = {
    "best": {"aggregation": "best", "periods": ["alltime", "daily"], "close_grace_seconds": 0},
    "total": {"aggregation": "sum", "periods": ["alltime"], "max_value": 2**53 - 1},
}
PASSWORD = "pw-Mg7Kq2"
HEADER = "board\tperiod\tperiod_id\tsource_sha256\ttarget_sha256\tresult"


def history(board: str, now: int) -> list[Record]:
    """Events over several read chunks, a closed day, a void, and strings only an exact store keeps."""
    yesterday = Calendar("UTC").window_at(PeriodKind.DAILY, now - 86_400_000)
    out: list[Record] = [
        ScoreRecord(seq, Event(board, f"m\uffff{seq % 50}", 2**53 - 1 if board == "total" else seq,
                               now - 86_400_000 if seq <= 100 else now - 1_000, f"k\x00{seq}", '{"b":1,"a":2}'), now, "gs")
        for seq in range(1, 4_001)
    ]
    out.append(CloseRecord(4_001, yesterday, now))
    out.append(VoidRecord(4_002, 7, "k\x007", "bot\x00", "ops", now))
    won = (Award(1, "m\uffff1", 2**53 - 1, "gold\uffff"),)
    settled = SettlementRecord(4_003, yesterday, 1, Settlement(0, (PrizeTier("gold\uffff", ranks=(1, 1)),), won, sha256_of(won)))
    out.append(BoardRecord(4_003, BoardKind.SETTLEMENT, settled.text()))  # a settlement, copied as it was journaled
    return out


async def write_journals(config: Config) -> None:
    config.server.data_dir.mkdir(parents=True, exist_ok=True)
    backend = journal_backend(config)
    now = now_ms()
    for spec in config.boards.values():
        journal = await backend.open(spec)
        records = history(spec.name, now)
        for i in range(0, len(records), 1_000):
            await journal.append(records[i : i + 1_000])
        await journal.close()
    await backend.close()


async def all_records(config: Config) -> dict[str, list[Record]]:
    backend = journal_backend(config)
    found = {}
    for spec in config.boards.values():
        journal = await backend.open(spec, readonly=True)
        found[spec.name] = [r async for chunk in journal.records() for r in chunk]
        await journal.close()
    await backend.close()
    return found


def config_in(directory: Path, journal: JournalSettings) -> Path:
    directory.mkdir(exist_ok=True)
    return write_config(directory, BOARDS, journal=journal)


def with_password(url: str) -> str:
    """The test server trusts every login: a password in the URL is sent and ignored."""
    return url.replace("postgres:@", f"postgres:{PASSWORD}@", 1)


def migrated(output: str) -> dict[tuple[str, str, str], tuple[str, str, str]]:
    """The digest lines of `arena migrate`: (board, period, period_id) -> (source, target, result)."""
    lines = output.splitlines()
    assert lines[0] == HEADER, output
    tables = {}
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) == 6:
            board, period, period_id, source, target, result = fields
            tables[(board, period, period_id)] = (source, target, result)
    return tables


def rebuilt(config: Path) -> dict[tuple[str, str, str], tuple[int, str]]:
    done = arena("rebuild", "--config", config)
    assert done.returncode == 0, done.stderr
    return {table: (t.members, t.sha256) for table, t in rebuild_digests(done.stdout).items()}


async def test_migrate_to_postgresql_and_back_copies_every_record_with_equal_digests(
    tmp_path: Path, pg_journal: JournalSettings
) -> None:
    assert pg_journal.url is not None
    url = with_password(pg_journal.url)
    on_sqlite = config_in(tmp_path / "a", JournalSettings("sqlite", None, pg_journal.schema))
    await write_journals(load_config(on_sqlite))
    feed = [LogItem(5, "best", "daily", "2026-12-01", None, 0, 4_003, "ab" * 32, 2),
            LogItem(9, "best", "daily", "2026-12-01", "eu", 1, 4_004, "cd" * 32, 0)]  # cursors as a server left them
    assert await logged(load_config(on_sqlite), feed)

    done = await asyncio.to_thread(arena, "migrate", "--config", on_sqlite, "--to", url)
    assert done.returncode == 0, done.stdout + done.stderr
    tables = migrated(done.stdout)
    assert ("best", "daily", next(iter(k[2] for k in tables if k[1] == "daily"))) in tables
    assert all(result == "ok" and source == target for source, target, result in tables.values()), done.stdout
    assert "best\tcopied\t4003 records" in done.stdout
    assert PASSWORD not in done.stdout + done.stderr

    on_postgresql = config_in(tmp_path / "b", replace(pg_journal, url=url))
    assert await asyncio.to_thread(rebuilt, on_postgresql) == await asyncio.to_thread(rebuilt, on_sqlite)

    # and back, into a data_dir of its own
    back = config_in(tmp_path / "c", JournalSettings("sqlite", None, pg_journal.schema))
    done = await asyncio.to_thread(arena, "migrate", "--config", back, "--from", url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(result == "ok" for _s, _t, result in migrated(done.stdout).values())
    assert PASSWORD not in done.stdout + done.stderr
    original = await all_records(load_config(on_sqlite))
    assert await all_records(load_config(on_postgresql)) == original
    assert await all_records(load_config(back)) == original
    assert "# settlement log: 2 items copied" in done.stdout
    assert await logged(load_config(back)) == feed
    assert await logged(load_config(on_postgresql), [LogItem(0, "total", "alltime", "x", None, 0, 1, "ef" * 32, 0)]) == [
        *feed, LogItem(10, "total", "alltime", "x", None, 0, 1, "ef" * 32, 0)]


async def logged(config: Config, restore: list[LogItem] | None = None) -> list[LogItem]:
    """The settlement log of ``config``'s store, after restoring ``restore`` into it when empty
    (on sqlite), or appending it (on PostgreSQL)."""
    backend = journal_backend(config)
    log = settlement_log(config, backend)
    try:
        if restore and config.journal.backend == "sqlite":
            assert await log.restore(restore)
        elif restore:
            await log.append(restore)
        return await log.after(0, 1000, lambda _board: True)
    finally:
        await log.close()
        await backend.close()


async def test_a_board_the_target_already_holds_is_skipped_and_the_run_fails(tmp_path: Path, pg_journal: JournalSettings) -> None:
    assert pg_journal.url is not None
    config = write_config(tmp_path, BOARDS, journal=JournalSettings("sqlite", None, pg_journal.schema))
    await write_journals(load_config(config))
    first = await asyncio.to_thread(arena, "migrate", "--config", config, "--to", pg_journal.url)
    assert first.returncode == 0, first.stdout + first.stderr
    again = await asyncio.to_thread(arena, "migrate", "--config", config, "--to", pg_journal.url)
    assert again.returncode == 1
    assert "best\tskipped\tthe target already holds records of this board" in again.stdout
    assert "total\tskipped\tthe target already holds records of this board" in again.stdout


async def test_migrate_refuses_while_a_server_holds_the_data_dir(tmp_path: Path, pg_journal: JournalSettings) -> None:
    assert pg_journal.url is not None
    config = write_config(tmp_path, BOARDS, journal=JournalSettings("sqlite", None, pg_journal.schema))
    lock = DataDirLock(tmp_path / "data")
    lock.acquire()
    try:
        done = await asyncio.to_thread(arena, "migrate", "--config", config, "--to", with_password(pg_journal.url))
    finally:
        lock.release()
    assert done.returncode == 2
    assert "is in use by another arena serve" in done.stderr
    assert PASSWORD not in done.stdout + done.stderr


async def test_migrate_refuses_while_a_live_node_holds_the_schema(tmp_path: Path, pg_journal: JournalSettings) -> None:
    assert pg_journal.url is not None
    config = write_config(tmp_path, BOARDS, journal=JournalSettings("sqlite", None, pg_journal.schema))
    await write_journals(load_config(config))
    node = PostgresBackend(pg_journal, node_id="node-a")
    lease = NodeLease(node, lease_seconds=1.0)
    await lease.acquire()
    renewals = asyncio.create_task(lease.keep())
    try:
        done = await asyncio.to_thread(arena, "migrate", "--config", config, "--to", pg_journal.url)
    finally:
        renewals.cancel()
        await lease.release()
        await node.close()
    assert done.returncode == 2
    assert "held by node node-a" in done.stderr
    assert "copied" not in done.stdout


@pytest.mark.parametrize("args", [["--to"], ["--to", "x", "--from", "y"], []])
def test_migrate_takes_exactly_one_direction(args: list[str]) -> None:
    assert arena("migrate", *args).returncode == 2
