"""Board ownership across real `arena serve` nodes on one PostgreSQL: the boards spread over the
live nodes by placement, every node's `/v1/cluster` agrees, each owner answers for its boards, and
`arena_boards_owned` counts them per node."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from arena.cluster.placement import preference
from support.cluster import NodeFactory
from support.server import ChildServer, until

BOARDS: dict[str, dict[str, Any]] = {f"b{i}": {"aggregation": "sum"} for i in range(9)}
NODES = ["node-a", "node-b", "node-c"]


def metric(text: str, name: str) -> float:
    """The value of an unlabelled sample of ``name`` in a Prometheus text."""
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " "))


def owners(node: ChildServer) -> dict[str, str | None]:
    return {board: view["owner"] for board, view in httpx.get(f"{node.url}/v1/cluster").json()["boards"].items()}


async def test_the_boards_spread_over_three_nodes_by_placement(cluster_nodes: NodeFactory) -> None:
    servers = [cluster_nodes(n, BOARDS) for n in NODES]
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
