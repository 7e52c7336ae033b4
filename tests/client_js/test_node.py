"""The JavaScript client's own tests (`npm test` in clients/js: Node.js's test runner) against
real servers: this test writes a config.toml, and the Node.js tests start `arena serve` on it
themselves (by this interpreter, with this tree's `arena`), SIGKILL it and restart it; on both
journal backends. And a cluster of two nodes, one of them SIGKILLed under the client's load
(clients/js/test/cluster.test.mjs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arena.config import JournalSettings
from loadtest.process import arena_in
from support.cluster import NodeFactory, start_cluster
from support.faults import write_config
from support.node import PACKAGE, in_package
from support.server import token_for

BOARDS = {
    "score": {"aggregation": "best", "periods": ["alltime", "daily"]},
    "points": {"aggregation": "sum", "periods": ["alltime"]},
}


def passed(run: subprocess.CompletedProcess[str], logs: list[Path]) -> None:
    tails = "\n".join(f"--- {log}\n{log.read_text(errors='replace')[-3000:]}" for log in logs)
    assert run.returncode == 0, f"the Node.js tests failed:\n{run.stdout[-20000:]}\n{run.stderr[-5000:]}\n{tails}"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_npm_test_passes_against_a_real_server(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    journal = request.getfixturevalue("pg_journal") if backend == "postgresql" else JournalSettings()
    assert isinstance(journal, JournalSettings)
    config = write_config(tmp_path, BOARDS, journal=journal)
    run = in_package("npm", "test", env={
        "ARENA_CONFIG": str(config),
        "ARENA_TOKEN": token_for("gs"),
        "ARENA_PYTHON": sys.executable,
        **arena_in(PACKAGE.parents[1])[1],  # PYTHONPATH: this tree's server and its arena_client
    })
    passed(run, sorted(tmp_path.glob("serve-*.log")))


async def test_the_client_survives_a_cluster_node_killed_under_load(cluster_nodes: NodeFactory) -> None:
    build = in_package("npm", "run", "build")
    assert build.returncode == 0, build.stdout + build.stderr
    nodes = await start_cluster(cluster_nodes, ["a", "b"], BOARDS)
    run = in_package("node", "--test", "test/cluster.test.mjs", env={
        "ARENA_NODES": ",".join(n.url for n in nodes),
        "ARENA_NODE_PIDS": ",".join(str(n.pid) for n in nodes),
        "ARENA_TOKEN": token_for("gs"),
    })
    passed(run, [n.log_path for n in nodes if n.log_path is not None])
    assert "# pass 1" in run.stdout, run.stdout
