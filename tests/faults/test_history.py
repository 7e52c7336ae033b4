"""The history checker (`support.history`) on one `arena serve` node, on both journal backends:
while writers stream and readers query (HTTP, WS query ops, a subscription), a fault strikes —
SIGKILL and a restart (also on boards with regions and a league, whose partitions are read too), a
graceful restart, a start from a snapshot with a long journal tail, a
supervisor restart, a PostgreSQL restart, boards unloaded between answers and activated again
while an API board is retired, a tournament that closes and is settled, then revised by voids
around a SIGKILL — and afterwards every answer must reflect every event acked before its query
was sent and equal the oracle's standings (or settlement) at its seq ("Never stale"), and the
settlement feed must give each revision once, in order."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.config import JournalSettings
from arena.engine.league import LeagueSpec
from support.faults import parse_metric, write_config
from support.history import Recorder, Workload, check_journals, cup_workload, members, record, settle_void_and
from support.oracle import OBoard
from support.postgres import EmbeddedPostgres
from support.server import ChildServer, until

WORKLOAD = Workload(
    {"total": OBoard(aggregation="sum", min_value=0, max_value=9), "best": OBoard(aggregation="best", max_value=1000)},
    members(30),
)


async def _served(tmp_path: Path, journal: JournalSettings, workload: Workload = WORKLOAD, **settings: Any) -> ChildServer:
    server = ChildServer(write_config(tmp_path, workload.board_config(), journal=journal, **settings))
    await asyncio.to_thread(server.start)
    return server


async def _restart(server: ChildServer, sig: int) -> None:
    """Stop ``server`` with ``sig`` and start it again on its port at once: readers meet it
    while its boards load."""
    if sig == signal.SIGKILL:
        server.kill()
    else:
        assert await asyncio.to_thread(server.stop) == 0
    await asyncio.to_thread(server.start, port=server.port, ready=False)


async def _judge(server: ChildServer, history: Any, journal: JournalSettings, tmp_path: Path,
                 workload: Workload = WORKLOAD) -> None:
    report = await check_journals(history, workload, journal, tmp_path / "data")
    print(f"\n{report}")
    assert report.ok, f"{report}\nserver log:\n{server.log_tail()}"
    assert report.checked > 0 and report.acked > 0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
async def test_answers_are_never_stale_across_a_restart(tmp_path: Path, served_journal: JournalSettings, sig: int) -> None:
    server = await _served(tmp_path, served_journal)
    try:
        async def fault(recorder: Recorder) -> None:
            await _restart(server, sig)

        history = await record(WORKLOAD, lambda: [server.url], fault)
    finally:
        server.kill()
    await _judge(server, history, served_journal, tmp_path)


REGIONAL = Workload(
    {"world": OBoard(aggregation="sum", min_value=0, max_value=9, regions=("eu", "na", "asia")),
     "league": OBoard(aggregation="best", max_value=1000)},
    members(30), leagues={"league": LeagueSpec(size=8, tiers=("bronze", "silver"), promote=1, relegate=1)},
)
"""A board with regions (its events carry one, or none) and a league whose season's divisions fill
as members first play: readers ask the regions' and the divisions' tables too."""


async def test_answers_of_regions_and_divisions_are_never_stale_across_a_sigkill(tmp_path: Path, served_journal: JournalSettings) -> None:
    server = await _served(tmp_path, served_journal, REGIONAL)
    try:
        async def fault(recorder: Recorder) -> None:
            await _restart(server, signal.SIGKILL)

        history = await record(REGIONAL, lambda: [server.url], fault)
    finally:
        server.kill()
    await _judge(server, history, served_journal, tmp_path, REGIONAL)
    asked = {(a.query.board, a.query.partition) for a in history.answers if a.error is None}
    assert {("world", r) for r in ("eu", "na", "asia")} | {("league", f"bronze-{k}") for k in (1, 2, 3, 4)} <= asked, asked


async def test_answers_are_never_stale_across_a_supervisor_restart(tmp_path: Path, served_journal: JournalSettings) -> None:
    server = await _served(tmp_path, served_journal, max_restarts=10, restart_window_seconds=3600)
    try:
        async def fault(recorder: Recorder) -> None:
            async with httpx.AsyncClient(base_url=server.url) as http:
                for board in WORKLOAD.boards:
                    answer = await http.post(f"/v1/_test/boards/{board}/crash", json={"times": 1})
                    assert answer.status_code == 200, answer.text
                    await until(partial(_restarts, http, board), f"board {board} restarted")

        history = await record(WORKLOAD, lambda: [server.url], fault)
    finally:
        server.kill()
    await _judge(server, history, served_journal, tmp_path)


async def _restarts(http: httpx.AsyncClient, board: str) -> bool:
    return parse_metric((await http.get("/metrics")).text, "arena_actor_restarts_total", board=board) >= 1


QUIET = Workload(
    {**{f"q{i}": OBoard(aggregation="sum", min_value=0, max_value=9) for i in range(8)},
     "cup": OBoard(aggregation="best", max_value=1000)},
    members(12), written=("q0", "q1", "cup"), api_boards=("cup",),
    resting=tuple(f"q{i}" for i in range(2, 8)),
)
"""Writers on two config boards and an API board; six boards read only, left alone in turn
so that they unload between answers (and activate again on the next one)."""


async def test_answers_are_never_stale_while_boards_activate_unload_and_one_is_retired(
        tmp_path: Path, served_journal: JournalSettings) -> None:
    server = await _served(tmp_path, served_journal, QUIET, idle_unload_seconds=0.2)
    try:
        async def metric(name: str) -> float:
            async with httpx.AsyncClient(base_url=server.url) as http:
                return parse_metric((await http.get("/metrics")).text, name)

        async def fault(recorder: Recorder) -> None:
            unloads = await metric("arena_board_unloads_total")
            await until(lambda: _more(metric, "arena_board_unloads_total", unloads + 10), "boards unloaded between answers")
            await recorder.retire("cup")
            activations = await metric("arena_board_activations_total")
            await until(lambda: _more(metric, "arena_board_activations_total", activations + 10), "boards activated again")

        history = await record(QUIET, lambda: [server.url], fault, after=50)
    finally:
        server.kill()
    await _judge(server, history, served_journal, tmp_path, QUIET)
    rejected = [a for a in history.acks if a.board == "cup" and a.status == "rejected:board_retired"]
    assert rejected, "no event was sent to the retired board"


async def _more(metric: Callable[[str], Awaitable[float]], name: str, least: float) -> bool:
    return await metric(name) >= least


SNAPSHOT_EVERY = 20_000
TAIL = re.compile(r"started from the snapshot at seq \d+ and (\d+) records after it")
BIG = Workload({"total": OBoard(aggregation="sum", min_value=0, max_value=9)}, members(2000), seed=7)


@pytest.mark.slow
async def test_answers_are_never_stale_during_a_start_from_a_snapshot_with_a_long_tail(
        tmp_path: Path, served_journal: JournalSettings) -> None:
    """A snapshot at about 20k records, then 12.5k more and SIGKILL: the restart loads the
    snapshot and replays a tail of thousands of events while the readers hammer the board."""
    server = await _served(tmp_path, served_journal, BIG, snapshot_every_events=SNAPSHOT_EVERY)
    try:
        async def fault(recorder: Recorder) -> None:
            await until(lambda: " written to " in server.log(), "the first snapshot", timeout=120)
            await recorder.until_acked(SNAPSHOT_EVERY * 5 // 8, "a long tail", timeout=120)
            await _restart(server, signal.SIGKILL)
            await until(lambda: TAIL.search(server.log()), "the start from the snapshot")
            tail = TAIL.search(server.log())
            assert tail is not None and int(tail[1]) >= SNAPSHOT_EVERY // 4, tail[0] if tail else None

        history = await record(BIG, lambda: [server.url], fault, writers=4, batch=500, http_readers=4)
    finally:
        server.kill()
    await _judge(server, history, served_journal, tmp_path, BIG)


@pytest.mark.slow
async def test_answers_are_never_stale_across_a_postgresql_restart(tmp_path: Path, own_postgres: EmbeddedPostgres) -> None:
    journal = JournalSettings("postgresql", own_postgres.url, "arena")
    server = await _served(tmp_path, journal)
    try:
        async def fault(recorder: Recorder) -> None:
            await asyncio.to_thread(own_postgres.stop)
            answered = len(recorder.history.answers)
            await until(lambda: len(recorder.history.answers) > answered + 100, "answers without the store")
            await asyncio.to_thread(own_postgres.start)

        history = await record(WORKLOAD, lambda: [server.url], fault)
    finally:
        server.kill()
    await _judge(server, history, journal, tmp_path)


async def test_settlements_are_never_stale_across_a_close_voids_and_a_sigkill(tmp_path: Path, served_journal: JournalSettings) -> None:
    server = ChildServer(write_config(tmp_path, {}, journal=served_journal))
    await asyncio.to_thread(server.start)
    workload = cup_workload({"total": OBoard(aggregation="sum", min_value=0, max_value=9),
                             "best": OBoard(aggregation="best", max_value=1000)}, 30, 8)
    try:
        history = await record(workload, lambda: [server.url],
                               lambda recorder: settle_void_and(recorder, partial(_restart, server, signal.SIGKILL)))
    finally:
        server.kill()
    await _judge(server, history, served_journal, tmp_path, workload)
    assert history.voids and len({(i["board"], i["revision"]) for i in history.feed}) >= 6
    kinds = {a.query.kind for a in history.answers if a.error is None and a.query.kind in ("settlement", "preview", "award")}
    assert kinds == {"settlement", "preview", "award"}, kinds
