"""A node whose PostgreSQL sessions are all terminated (`pg_terminate_backend`, as an operator or
a failover of the database would) under ingest: it reconnects by itself, keeps or loses its boards
by the epoch rules, nothing acked is lost or counted twice (sum boards against an oracle), and
no node ever answers a board with standings other than the acked ones."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from arena.config import JournalSettings
from support.cluster import NodeFactory, check_nothing_lost, ingesting, oracle, standings, start_cluster
from support.postgres import fetchval

BOARDS: dict[str, dict[str, Any]] = {f"s{i}": {"aggregation": "sum"} for i in range(6)}
NODES = ["node-a", "node-b", "node-c"]

pytestmark = pytest.mark.slow


async def terminate_sessions(url: str, node_id: str) -> int:
    """Terminate every session of node ``node_id`` (they are named after it); how many."""
    return int(await fetchval(
        url, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
        f"arena {node_id}"))


async def test_a_node_whose_sessions_are_terminated_recovers_and_nothing_acked_is_lost(
        cluster_nodes: NodeFactory, pg_journal: JournalSettings) -> None:
    assert pg_journal.url is not None
    servers = await start_cluster(cluster_nodes, NODES, BOARDS)
    async with ingesting(servers, BOARDS, under_way=50) as writer:
        terminated = 0
        for _ in range(3):  # again while it reconnects
            terminated += await terminate_sessions(pg_journal.url, "node-a")
            await writer.more(BOARDS, 0, "every board acked again", timeout=20)
        assert terminated >= 3
        await writer.more(BOARDS, 50, "ingest goes on", timeout=20)
    await check_nothing_lost(writer, servers, pg_journal)
    async with httpx.AsyncClient() as http:
        for server in servers:  # no stale answer anywhere: every node forwards to the owner or is it
            for board, acked in writer.acked.items():
                assert await standings(http, server.url, board) == oracle(acked), (server.url, board)
    assert all(server.alive() for server in servers)
