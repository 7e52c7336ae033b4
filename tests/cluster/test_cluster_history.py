"""The history checker (`support.history`) on a 3-node cluster on PostgreSQL: writers and readers
spread over the live nodes (every node forwards to the owner) while an owner is SIGKILLed (a
takeover) or stopped with SIGTERM and started again (a hand-off away and back), or while boards
unload between answers and activate again, one is retired and an owner is SIGKILLed, or while a
tournament closes and is settled and revised by voids around the SIGKILL of an owner; afterwards every
answer, through any node, must reflect every event acked before its query was sent and equal the
oracle's standings (or settlement) at its seq, and the settlement feed must give each revision once,
in order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.cluster.placement import preference
from arena.config import JournalSettings
from arena.engine.league import LeagueSpec
from support.cluster import NodeFactory, settled, start_cluster
from support.faults import parse_metric
from support.history import (
    History,
    Recorder,
    Report,
    Workload,
    check_journals,
    cup_workload,
    members,
    record,
    settle_void_and,
)
from support.oracle import OBoard
from support.server import ChildServer, until

NODES = ["node-a", "node-b", "node-c"]
WORKLOAD = Workload(
    {f"s{i}": OBoard(aggregation="sum", min_value=0, max_value=9, regions=("eu", "na") if i == 1 else ())
     if i % 2 else OBoard(aggregation="best", max_value=1000) for i in range(4)},
    members(20), leagues={"s2": LeagueSpec(size=6, tiers=("bronze", "silver"), promote=1, relegate=1)},
)
"""Board s1 has regions and s2 is a league: readers ask its regions' and divisions' tables too,
through any node."""

pytestmark = pytest.mark.slow


def _owner_of_most(servers: list[ChildServer]) -> tuple[ChildServer, list[str]]:
    owned = {n: [b for b in WORKLOAD.boards if preference(b, NODES)[0] == n] for n in NODES}
    node = max(NODES, key=lambda n: len(owned[n]))
    return servers[NODES.index(node)], owned[node]


async def _run(cluster_nodes: NodeFactory, pg_journal: JournalSettings, tmp_path: Path, *, kill: bool) -> None:
    servers = await start_cluster(cluster_nodes, NODES, dict(WORKLOAD.board_config()))
    victim, boards = _owner_of_most(servers)
    assert boards
    rest = [(n, s) for n, s in zip(NODES, servers, strict=True) if s is not victim]

    async def fault(recorder: Recorder) -> None:
        if kill:
            victim.kill()
        else:
            assert await asyncio.to_thread(victim.stop) == 0  # hands its boards off, then exits
        await settled([s for _, s in rest], [n for n, _ in rest], dict(WORKLOAD.boards))
        await recorder.until_acked(50, "ingest on the other nodes")
        if not kill:
            await asyncio.to_thread(victim.start, port=victim.port)  # and back to it, by a hand-off
            await settled(servers, NODES, dict(WORKLOAD.boards))

    _, report = await _recorded(WORKLOAD, servers, fault, pg_journal, tmp_path)
    assert report.checked > 0 and report.acked > 0


QUIET = Workload(
    {**{f"q{i}": OBoard(aggregation="sum", min_value=0, max_value=9) for i in range(6)},
     "cup": OBoard(aggregation="best", max_value=1000)},
    members(12), written=("q0", "q1", "cup"), api_boards=("cup",),
    resting=tuple(f"q{i}" for i in range(2, 6)),
)
"""Writers on two config boards and an API board; four boards read only (through any node), left
alone in turn so that they unload on their owners between answers and activate again on the next one."""


async def test_answers_are_never_stale_while_boards_activate_unload_move_and_one_is_retired(
        cluster_nodes: NodeFactory, pg_journal: JournalSettings, tmp_path: Path) -> None:
    """Activation on demand in a cluster: boards unload and activate on their owners while
    readers ask every node; the API board is retired through a node that may not own it; then
    the owner of the most boards is SIGKILLed (its inactive boards are taken over inactive)."""
    config = dict(QUIET.board_config())
    servers = await start_cluster(cluster_nodes, NODES, config, settings={"idle_unload_seconds": 0.3})
    victim_id = max(NODES, key=lambda n: sum(preference(b, NODES)[0] == n for b in QUIET.boards))
    victim = servers[NODES.index(victim_id)]
    rest = [(n, s) for n, s in zip(NODES, servers, strict=True) if s is not victim]

    async def counted(name: str) -> float:
        async with httpx.AsyncClient(timeout=10) as http:
            return sum([parse_metric((await http.get(f"{s.url}/metrics")).text, name) for s in servers if s.alive()])

    async def fault(recorder: Recorder) -> None:
        unloads = await counted("arena_board_unloads_total")
        await until(partial(_at_least, counted, "arena_board_unloads_total", unloads + 10), "boards unloaded between answers", 90)
        await recorder.retire("cup")
        victim.kill()
        await settled([s for _, s in rest], [n for n, _ in rest], dict(QUIET.boards))
        activations = await counted("arena_board_activations_total")
        await until(partial(_at_least, counted, "arena_board_activations_total", activations + 10), "boards activated again", 90)

    history, report = await _recorded(QUIET, servers, fault, pg_journal, tmp_path, after=50)
    assert report.checked > 0 and report.acked > 0
    assert any(a.board == "cup" and a.status == "rejected:board_retired" for a in history.acks)


async def _at_least(metric: Callable[[str], Awaitable[float]], name: str, least: float) -> bool:
    return await metric(name) >= least


async def test_answers_are_never_stale_across_a_takeover_after_sigkill(
        cluster_nodes: NodeFactory, pg_journal: JournalSettings, tmp_path: Path) -> None:
    await _run(cluster_nodes, pg_journal, tmp_path, kill=True)


async def test_answers_are_never_stale_across_a_hand_off(
        cluster_nodes: NodeFactory, pg_journal: JournalSettings, tmp_path: Path) -> None:
    await _run(cluster_nodes, pg_journal, tmp_path, kill=False)


async def test_settlements_are_never_stale_across_a_close_voids_and_a_takeover_after_sigkill(
        cluster_nodes: NodeFactory, pg_journal: JournalSettings, tmp_path: Path) -> None:
    """API boards with a tournament that closes while the writers run: it settles, an admin voids
    its winners (a revision), the owner of the most boards is SIGKILLed, the others take its
    boards over, and the winners are voided again (a revision by the new owners); the feed is
    polled from any node throughout."""
    servers = await start_cluster(cluster_nodes, NODES, {})
    workload = cup_workload(dict(WORKLOAD.boards), 20, 10)
    victim_id = max(NODES, key=lambda n: sum(preference(b, NODES)[0] == n for b in workload.boards))
    victim = servers[NODES.index(victim_id)]
    rest = [(n, s) for n, s in zip(NODES, servers, strict=True) if s is not victim]

    async def takeover() -> None:
        victim.kill()
        await settled([s for _, s in rest], [n for n, _ in rest], dict(workload.boards))

    history, _ = await _recorded(workload, servers, lambda recorder: settle_void_and(recorder, takeover), pg_journal, tmp_path)
    assert history.voids and len({(i["board"], i["revision"]) for i in history.feed}) >= 3 * len(workload.boards)


async def _recorded(workload: Workload, servers: list[ChildServer], fault: Callable[[Recorder], Awaitable[None]],
                    pg_journal: JournalSettings, tmp_path: Path, **options: Any) -> tuple[History, Report]:
    """The history of ``workload`` through every live node of ``servers`` while ``fault`` runs
    (`record`), every node killed after it, and its report against the journals, which holds."""
    try:
        history = await record(workload, lambda: [s.url for s in servers if s.alive()], fault, **options)
    finally:
        for server in servers:
            server.kill()
    report = await check_journals(history, workload, pg_journal, tmp_path)
    print(f"\n{report}")
    assert report.ok, str(report)
    return history, report
