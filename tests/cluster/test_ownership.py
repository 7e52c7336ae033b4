"""Board ownership across real `arena serve` nodes on one PostgreSQL: the boards spread over the
live nodes by placement, every node's `/v1/cluster` agrees, each owner answers for its boards, and
`arena_boards_owned` counts them per node."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.cluster.placement import preference
from arena.config import ClusterSettings, JournalSettings
from support.faults import write_config
from support.server import ChildServer, until

SECRET = "a-cluster-secret-for-tests"
BOARDS: dict[str, dict[str, Any]] = {f"b{i}": {"aggregation": "sum"} for i in range(9)}
NODES = ["node-a", "node-b", "node-c"]


def metric(text: str, name: str) -> float:
    """The value of an unlabelled sample of ``name`` in a Prometheus text."""
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " "))


@pytest.fixture
async def nodes(tmp_path: Path, pg_journal: JournalSettings, monkeypatch: Any) -> AsyncIterator[Callable[[str], ChildServer]]:
    """Makes `arena serve` children on one schema, each a node of the cluster named as asked
    (lease 3 s, the default); kills them all at the end."""
    monkeypatch.setenv("ARENA_CLUSTER_SECRET", SECRET)
    made: list[ChildServer] = []

    def make(node_id: str) -> ChildServer:
        directory = tmp_path / node_id
        directory.mkdir()
        config = write_config(directory, BOARDS, journal=pg_journal, cluster=ClusterSettings(node_id=node_id))
        made.append(ChildServer(config))
        return made[-1]

    yield make
    for node in made:
        node.kill()


def owners(node: ChildServer) -> dict[str, str | None]:
    return {board: view["owner"] for board, view in httpx.get(f"{node.url}/v1/cluster").json()["boards"].items()}


async def test_the_boards_spread_over_three_nodes_by_placement(nodes: Callable[[str], ChildServer]) -> None:
    servers = [nodes(n) for n in NODES]
    await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))
    placed = {board: preference(board, NODES)[0] for board in BOARDS}
    assert len(set(placed.values())) == 3  # the test means something: every node owns some

    def settled() -> bool:
        return all(owners(s) == placed for s in servers)
    await until(settled, "every node to see the boards owned by placement", timeout=20)

    views = [httpx.get(f"{s.url}/v1/cluster").json() for s in servers]
    assert [v["node"] for v in views] == NODES
    assert all(v["boards"] == views[0]["boards"] and v["nodes"] == views[0]["nodes"] for v in views)
    listed = [(n["node_id"], n["url"], n["alive"]) for n in views[0]["nodes"]]
    assert listed == [(n, s.url, True) for n, s in zip(NODES, servers, strict=True)]
    for node, server in zip(NODES, servers, strict=True):
        mine = [b for b, owner in placed.items() if owner == node]
        ready_url = f"{server.url}/readyz"
        await until(lambda: httpx.get(ready_url).status_code == 200, f"{node} ready", timeout=20)  # noqa: B023
        assert metric(httpx.get(f"{server.url}/metrics").text, "arena_boards_owned") == len(mine)
        for board in mine:
            answer = httpx.get(f"{server.url}/v1/boards/{board}/alltime/top")
            assert answer.status_code == 200, answer.text
        assert all(view["boards"][b]["standbys"] == [n for n in preference(b, NODES) if n != node][:1]
                   for view in views for b in mine)
