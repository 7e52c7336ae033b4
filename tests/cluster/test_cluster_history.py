"""The history checker (`support.history`) on a 3-node cluster on PostgreSQL: writers and readers
spread over the live nodes (every node forwards to the owner) while an owner is SIGKILLed (a
takeover) or stopped with SIGTERM and started again (a hand-off away and back); afterwards every
answer, through any node, must reflect every event acked before its query was sent and equal the
oracle's standings at its seq."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from arena.cluster.placement import preference
from arena.config import JournalSettings
from support.cluster import NodeFactory, settled, start_cluster
from support.history import Recorder, Workload, check_journals, members, record
from support.oracle import OBoard
from support.server import ChildServer

NODES = ["node-a", "node-b", "node-c"]
WORKLOAD = Workload(
    {f"s{i}": OBoard(aggregation="sum", min_value=0, max_value=9) if i % 2 else OBoard(aggregation="best", max_value=1000)
     for i in range(4)},
    members(20),
)

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

    try:
        history = await record(WORKLOAD, lambda: [s.url for s in servers if s.alive()], fault)
    finally:
        for server in servers:
            server.kill()
    report = await check_journals(history, WORKLOAD, pg_journal, tmp_path)
    print(f"\n{report}")
    assert report.ok, str(report)
    assert report.checked > 0 and report.acked > 0


async def test_answers_are_never_stale_across_a_takeover_after_sigkill(
        cluster_nodes: NodeFactory, pg_journal: JournalSettings, tmp_path: Path) -> None:
    await _run(cluster_nodes, pg_journal, tmp_path, kill=True)


async def test_answers_are_never_stale_across_a_hand_off(
        cluster_nodes: NodeFactory, pg_journal: JournalSettings, tmp_path: Path) -> None:
    await _run(cluster_nodes, pg_journal, tmp_path, kill=False)
