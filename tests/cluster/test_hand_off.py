"""Graceful hand-off on real `arena serve` nodes under ingest sent to the owners: SIGTERM hands
every board of a node off (and releases it, so that the next owner need not wait for a lease to
expire) before it exits, so a rolling restart of all three nodes loses nothing acked (sum boards
against an oracle); a fourth node joining follows its share as a standby until caught up, then
takes it by the same hand-off. How long a board waits meanwhile is measured by
`python -m loadtest cluster`, not here."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from arena.cluster.placement import preference
from support.cluster import NodeFactory, check_nothing_lost, ingesting, settled, start_cluster
from support.server import ChildServer

BOARDS: dict[str, dict[str, Any]] = {f"s{i}": {"aggregation": "sum"} for i in range(6)}
NODES = ["node-a", "node-b", "node-c"]

pytestmark = pytest.mark.slow


def handed_off(log: str, node_id: str, boards: list[str]) -> None:
    """``log`` (of node ``node_id``) shows each of ``boards`` handed off and released."""
    assert f"node {node_id} leaving: handing off {len(boards)} boards" in log, log
    assert all(f"board {b}: handing it off to the next node in its placement" in log for b in boards), log
    assert "not released yet" not in log, log


async def test_a_rolling_restart_under_ingest_hands_every_board_off_and_loses_nothing(
        cluster_nodes: NodeFactory, pg_journal: Any) -> None:
    servers = await start_cluster(cluster_nodes, NODES, BOARDS)
    async with ingesting(servers, BOARDS) as writer:
        for node_id, server in zip(NODES, servers, strict=True):
            owned = [b for b in BOARDS if preference(b, NODES)[0] == node_id]  # settled: owned by placement
            await asyncio.to_thread(server.stop)  # SIGTERM: hands its boards off, then exits
            handed_off(server.log(), node_id, owned)
            await asyncio.to_thread(server.start)
            await settled(servers, NODES, BOARDS)
        await writer.more(BOARDS, 100, "ingest after the restarts")
    print(f"rolling restart: frames resent: {writer.resends}")
    await check_nothing_lost(writer, servers, pg_journal)


async def test_a_fourth_node_joining_takes_its_share(cluster_nodes: NodeFactory, pg_journal: Any) -> None:
    # every board loaded on its owner (idle_unload_seconds 0): a board its owner had not marked
    # active yet when node-d joined would be taken inactive, not from a standby copy
    loaded = {"idle_unload_seconds": 0}
    servers = await start_cluster(cluster_nodes, NODES, BOARDS, settings=loaded)
    async with ingesting(servers, BOARDS) as writer:
        fourth = cluster_nodes("node-d", BOARDS, settings=loaded)
        await asyncio.to_thread(fourth.start)
        servers.append(fourth)
        await settled(servers, [*NODES, "node-d"], BOARDS)
        await writer.more(BOARDS, 100, "ingest after the join")
    # it followed its share as a standby until caught up, and took each from that copy, handed
    # off by its owner (released: no lease to wait for)
    log = fourth.log()
    assert "node node-d: serving (caught up" in log
    share = [b for b in BOARDS if preference(b, [*NODES, "node-d"])[0] == "node-d"]
    assert share and all(re.search(rf"board {b}: granted to node node-d \(epoch \d+\), from its standby copy", log) for b in share), log
    for b in share:
        previous: ChildServer = servers[NODES.index(preference(b, NODES)[0])]
        assert f"board {b}: handing it off to the next node in its placement" in previous.log(), previous.log_tail()
    assert all("not released yet" not in s.log() for s in servers)
    await check_nothing_lost(writer, servers, pg_journal)
