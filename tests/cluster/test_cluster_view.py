"""`GET /v1/cluster` and the ownership metrics through real servers: on sqlite a single node and
no cluster; on PostgreSQL the nodes' leases and the boards' owner rows, a dead node listed as not
alive, and a board's epoch growing when another node takes it."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx

from arena.config import ClusterSettings, JournalSettings
from support.faults import write_config
from support.server import ChildServer, InProcessServer, make_config, until

BOARDS: dict[str, dict[str, Any]] = {"best": {}, "total": {"aggregation": "sum"}}
SECRET = "a-cluster-secret-for-tests"


def node_config(directory: Path, journal: JournalSettings, node_id: str) -> Path:
    directory.mkdir()
    return write_config(directory, BOARDS, journal=journal, cluster=ClusterSettings(node_id=node_id, standbys=1))


def metric(text: str, name: str) -> dict[str, float]:
    """Every sample of ``name`` in a Prometheus text: labels -> value."""
    return {labels: float(value) for labels, value in re.findall(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M)}


async def test_on_sqlite_there_is_no_cluster(tmp_path: Path) -> None:
    async with InProcessServer(make_config(tmp_path, BOARDS)) as server, httpx.AsyncClient(base_url=server.url) as http:
        answer = await http.get("/v1/cluster")
        assert (answer.status_code, answer.json()) == (200, {"node": None, "nodes": [], "boards": {}})
        assert "arena_boards_owned" not in (await http.get("/metrics")).text


async def test_the_cluster_lists_its_nodes_and_the_boards_owners(tmp_path: Path, pg_journal: JournalSettings,
                                                                  monkeypatch: Any) -> None:
    monkeypatch.setenv("ARENA_CLUSTER_SECRET", SECRET)
    a = ChildServer(node_config(tmp_path / "a", pg_journal, "node-a"))
    b = ChildServer(node_config(tmp_path / "b", pg_journal, "node-b"))
    await asyncio.to_thread(a.start)
    try:
        view = httpx.get(f"{a.url}/v1/cluster").json()
        assert view == {
            "node": "node-a",
            "nodes": [{"node_id": "node-a", "url": a.url, "alive": True, "boards": ["best", "total"]}],
            "boards": {"best": {"owner": "node-a", "epoch": 1, "standbys": [], "active": False},
                       "total": {"owner": "node-a", "epoch": 1, "standbys": [], "active": False}},
            "config_mismatch": [],
        }
        metrics = httpx.get(f"{a.url}/metrics").text
        assert metric(metrics, "arena_boards_owned") == {"": 2.0}
        assert metric(metrics, "arena_ownership_changes_total") == {'{board="best"}': 1.0, '{board="total"}': 1.0}

        a.kill()  # SIGKILL: its lease stays until it expires; then node-b takes every board
        await asyncio.to_thread(b.start)

        def b_owns_both() -> bool:
            return all(board["owner"] == "node-b" for board in httpx.get(f"{b.url}/v1/cluster").json()["boards"].values())
        await until(b_owns_both, "node-b to own both boards", timeout=10)
        view = httpx.get(f"{b.url}/v1/cluster").json()
        assert view["node"] == "node-b"
        assert view["nodes"] == [{"node_id": "node-a", "url": a.url, "alive": False, "boards": []},
                                 {"node_id": "node-b", "url": b.url, "alive": True, "boards": ["best", "total"]}]
        assert view["boards"] == {"best": {"owner": "node-b", "epoch": 2, "standbys": [], "active": False},
                                  "total": {"owner": "node-b", "epoch": 2, "standbys": [], "active": False}}
        assert SECRET not in a.log() + b.log()
    finally:
        a.kill()
        b.kill()
