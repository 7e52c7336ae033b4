"""`GET /v1/stats` through three real `arena serve` nodes on one PostgreSQL: any node answers for
the whole cluster (every node's counts summed), `?node=ID` for one node, and a node that does not
answer (SIGSTOPped) is left out of the sums and named, while asking for it alone is a 503."""

from __future__ import annotations

import signal
from typing import Any

import httpx

from support.cluster import NodeFactory, start_cluster
from support.documented import assert_documented
from support.server import ChildServer, Client, event, now_ms, token_for, until

BOARDS: dict[str, dict[str, Any]] = {f"b{i}": {} for i in range(6)}
NODES = ["node-a", "node-b", "node-c"]


async def stats(http: httpx.AsyncClient, server: ChildServer, status: int = 200, **params: str) -> dict[str, Any]:
    answer = await http.get(f"{server.url}/v1/stats", params=params)
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert_documented("/v1/stats", "GET", body, status)
    return body


async def test_any_node_answers_for_the_cluster_and_node_for_one(cluster_nodes: NodeFactory) -> None:
    # a long lease: a stopped node stays a live one of the cluster for the whole test
    servers = await start_cluster(cluster_nodes, NODES, BOARDS, lease_seconds=20)
    now = now_ms()
    sent = 0
    for i, server in enumerate(servers):  # each node's connection writes to every board, most forwarded
        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            results = await client.submit([event(b, f"m{i}", 1, now, f"{b}-{i}") for b in BOARDS])
            results += await client.submit([event("b0", "m0", 1, now, "b0-0")])  # a duplicate
        finally:
            await client.close()
        assert [r["status"] for r in results] == ["accepted"] * len(BOARDS) + ["duplicate"]
        sent += len(BOARDS)
    async with httpx.AsyncClient(timeout=10) as http:
        async def counted() -> bool:
            return all([sum((await stats(http, s))["events"]["accepted"]) == sent for s in servers])
        await until(counted, "every node's /v1/stats counting every event accepted in the cluster")
        for server in servers:
            body = await stats(http, server)
            assert body["nodes"] == NODES and body["unanswered"] == []
            assert sum(body["events"]["duplicate"]) == len(servers)
        alone = [await stats(http, servers[0], node=n) for n in NODES]
        assert [b["nodes"] for b in alone] == [[n] for n in NODES]
        assert sum(sum(b["events"]["accepted"]) for b in alone) == sent
        refused = await stats(http, servers[0], 400, node="node-z")
        assert refused["error"]["code"] == "invalid_request" and "node-z" in refused["error"]["message"]

        servers[2].signal(signal.SIGSTOP)
        try:
            body = await stats(http, servers[0])
            assert body["nodes"] == NODES[:2] and body["unanswered"] == ["node-c"]
            stopped = await stats(http, servers[1], 503, node="node-c")
            assert stopped["error"]["code"] == "unavailable"
        finally:
            servers[2].signal(signal.SIGCONT)
