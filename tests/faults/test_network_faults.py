"""A 3-node cluster under network faults (`support.netns`): every node, PostgreSQL and the client
on hosts of the test's own, links cut or blackholed while writers ingest through every node and
readers read through every node (`support.history`). The contract (DESIGN.md, "Cluster", its
last point): no lost or doubled ack, no stale answer (the history checker); no query waits more
than 5 s for its answer, unless the client itself could not reach the node it asked; ownership
epochs only grow; every board is served again through every node within ``lease_seconds`` + 5 s
after the heal; `arena verify` is clean on every node at the end.

The process-fault version of this is tests/cluster/test_cluster_history.py. The flapping link
flaps for `FLAP_SECONDS` (10 s, not the issue's 20 s, to keep the suite short). Each fault runs
once per CI run; stale answers were rare (a handful in 40,000 answers), so after a cluster change
run it several times, longer and heavier: `python -m loadtest.netfaults` (which sets the
``ARENA_NETFAULTS_*`` variables read below) does, and prints the per-fault figures
(`Figures`, one ``figures`` line per fault) that docs/performance.md gives.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.cluster.placement import preference
from arena.config import ClusterSettings, JournalSettings
from support.arena_cli import run_arena
from support.cluster import SECRET, settled
from support.faults import write_config
from support.history import History, Recorder, Workload, check_journals, members, record
from support.netns import PORT, NetnsNode, Network, Topology
from support.oracle import OBoard
from support.postgres import drop_schema, fetch, fetchval, fresh_schema
from support.server import until

NODES = ["node-a", "node-b", "node-c"]
LEASE = float(os.environ.get("ARENA_NETFAULTS_LEASE", "1.5"))
FAULT_SECONDS = 2 * LEASE + 1
"""How long a cut lasts: longer than a lease, so ownership moves (or would) during it."""
FLAP_SECONDS = float(os.environ.get("ARENA_NETFAULTS_FLAP_SECONDS", "10"))
LOAD = int(os.environ.get("ARENA_NETFAULTS_LOAD", "1"))
"""How many times the history recorder's default writers and readers run."""
QUERY_BOUND = 5.0
WORKLOAD = Workload(
    {f"s{i}": OBoard(aggregation="sum", min_value=0, max_value=9) if i % 2 else OBoard(aggregation="best", max_value=1000)
     for i in range(4)},
    members(20),
)

pytestmark = pytest.mark.slow


@dataclass
class Cluster:
    topology: Topology
    journal: JournalSettings
    """The nodes' journal, over the test's network."""
    local: JournalSettings
    """The same schema through PostgreSQL's Unix socket: the test reads it whatever the network does."""
    nodes: list[NetnsNode]
    epochs: list[str] = field(default_factory=list)
    """Every time an ownership epoch was seen to go back (should stay empty)."""

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def host_of(self, url: str) -> str:
        return next(n.host.name for n in self.nodes if n.url == url)

    def owner_of_most(self) -> tuple[str, list[str]]:
        owned = {n: [b for b in WORKLOAD.boards if preference(b, NODES)[0] == n] for n in NODES}
        node = max(NODES, key=lambda n: len(owned[n]))
        return node, owned[node]


@pytest.fixture
async def cluster(network: Network, tmp_path: Path, monkeypatch: Any) -> AsyncIterator[Cluster]:
    """Three nodes on a schema of the test's own, started and settled; killed at the end, every
    link healed, the schema dropped."""
    monkeypatch.setenv("ARENA_CLUSTER_SECRET", SECRET)
    schema = fresh_schema()
    journal = JournalSettings("postgresql", network.postgres.url, schema)
    topology = network.topology
    nodes = []
    for name in NODES:
        directory = tmp_path / name
        directory.mkdir()
        settings = ClusterSettings(node_id=name, advertise_url=f"http://{topology.hosts[name].address}:{PORT}",
                                   lease_seconds=LEASE)
        config = write_config(directory, WORKLOAD.board_config(), journal=journal, cluster=settings)
        nodes.append(NetnsNode(topology, name, config))
    try:
        await asyncio.gather(*(asyncio.to_thread(n.start) for n in nodes))
        await settled(nodes, NODES, dict(WORKLOAD.boards))  # type: ignore[arg-type]
        yield Cluster(topology, journal, JournalSettings("postgresql", network.postgres.socket_url, schema), nodes)
    finally:
        topology.heal_all()
        for node in nodes:
            node.kill()
        await fetchval(network.postgres.socket_url, drop_schema(schema))


async def watch_epochs(cluster: Cluster, stop: asyncio.Event) -> None:
    """Read the ownership rows every 50 ms until ``stop``: an epoch that goes back is noted."""
    seen: dict[str, int] = {}
    while not stop.is_set():
        for board, epoch in await fetch(cluster.local.url or "", f"SELECT board, epoch FROM {cluster.local.schema}.board_owner"):
            if epoch < seen.get(board, 0):
                cluster.epochs.append(f"board {board}: epoch {epoch} after {seen[board]}")
            seen[board] = max(epoch, seen.get(board, 0))
        try:
            await asyncio.wait_for(stop.wait(), 0.05)
        except TimeoutError:
            pass


async def served_again(cluster: Cluster) -> float:
    """Seconds from now until every board answers a query through every node (deadline:
    ``lease_seconds`` + 5 s, the contract's bound after a heal): until the round of queries
    that all answered was sent."""
    healed = time.monotonic()
    asked = healed
    async with httpx.AsyncClient(timeout=2) as http:
        async def served() -> bool:
            nonlocal asked
            asked = time.monotonic()
            for url in cluster.urls:
                for board in WORKLOAD.boards:
                    try:
                        answer = await http.get(f"{url}/v1/boards/{board}/alltime/top", params={"limit": 1})
                    except httpx.HTTPError:
                        return False
                    if answer.status_code != 200:
                        return False
            return True
        await until(served, "every board served through every node after the heal", timeout=LEASE + 5)
    return asked - healed


def slow_queries(history: History, cluster: Cluster) -> list[str]:
    """Queries that waited more than `QUERY_BOUND` for an answer (or for giving up), sent to a
    node the client could reach all along."""
    slow = []
    waits = [(a.node, a.sent, a.received, f"{a.via} {a.query.kind}({a.query.board}) answered {a.error or 'ok'}")
             for a in history.answers if a.sent is not None]
    waits += [(node, sent, ended, "unanswered") for node, sent, ended in history.unanswered]
    for node, sent, ended, what in waits:
        if ended - sent > QUERY_BOUND and not cluster.topology.cut_from_client(cluster.host_of(node), sent, ended):
            slow.append(f"{what} via {node} sent at +{sent - history.started:.3f}s waited {ended - sent:.1f}s")
    return slow


@dataclass
class Figures:
    fault: str
    acks_during: int = 0
    unavailable_window: float = 0.0
    """Seconds from the first to the last 503 answered between the cut and the board served again."""
    served_after: float = 0.0
    fault_at: float = 0.0
    healed_at: float = 0.0

    def measure(self, history: History) -> None:
        self.acks_during = sum(1 for a in history.acks if self.fault_at <= a.acked <= self.healed_at and a.recorded)
        refused = [a.received for a in history.answers
                   if a.error in ("unavailable", "not_ready") and self.fault_at <= a.received <= self.healed_at + self.served_after]
        self.unavailable_window = max(refused) - min(refused) if refused else 0.0

    def __str__(self) -> str:
        return f"figures\t{self.fault}\t{self.acks_during}\t{self.unavailable_window:.2f}\t{self.served_after:.2f}"


async def run_fault(cluster: Cluster, tmp_path: Path, name: str, cut: Callable[[], None], heal: Callable[[], None],
                    hold: Callable[[], Awaitable[None]] | None = None) -> Figures:
    """Record a history around ``cut``, ``FAULT_SECONDS`` (or ``hold``), ``heal``; check it all."""
    figures = Figures(name)
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_epochs(cluster, stop))

    async def fault(recorder: Recorder) -> None:
        figures.fault_at = time.monotonic()
        cut()
        try:
            await (hold() if hold is not None else asyncio.sleep(FAULT_SECONDS))  # the fault's length, not a wait for state
        finally:
            heal()
        figures.healed_at = time.monotonic()
        figures.served_after = await served_again(cluster)

    try:
        history = await record(WORKLOAD, lambda: cluster.urls, fault, after=50, writers=3 * LOAD, http_readers=3 * LOAD,
                               ws_readers=2 * LOAD, subscribers=2 * LOAD)
    finally:
        stop.set()
        await watcher
    figures.measure(history)
    print(f"\n{figures}")
    report = await check_journals(history, WORKLOAD, cluster.local, tmp_path)
    print(report)
    assert report.ok, str(report)
    assert report.checked > 0 and report.acked > 0
    slow = slow_queries(history, cluster)
    assert not slow, f"{len(slow)} queries waited more than {QUERY_BOUND:g}s:\n  " + "\n  ".join(slow[:12])
    assert not cluster.epochs, cluster.epochs
    for node in cluster.nodes:
        code, out, err = await run_arena("verify", "--config", node.config_path, "--url", node.url)
        assert code == 0, f"arena verify via {node.host.name}: {out}{err}"
    print(f"passed\t{name}")
    return figures


async def test_owner_cut_from_postgresql(cluster: Cluster, tmp_path: Path) -> None:
    owner, _ = cluster.owner_of_most()
    t = cluster.topology
    await run_fault(cluster, tmp_path, "owner cut from PostgreSQL", lambda: t.partition(owner, "pg"), lambda: t.join(owner, "pg"))


async def test_owner_cut_from_its_peers(cluster: Cluster, tmp_path: Path) -> None:
    owner, _ = cluster.owner_of_most()
    t = cluster.topology
    peers = [n for n in NODES if n != owner]

    def cut() -> None:
        for peer in peers:
            t.partition(owner, peer)

    def heal() -> None:
        for peer in peers:
            t.join(owner, peer)

    await run_fault(cluster, tmp_path, "owner cut from its peers", cut, heal)


async def test_node_cut_from_everything(cluster: Cluster, tmp_path: Path) -> None:
    owner, _ = cluster.owner_of_most()
    t = cluster.topology
    await run_fault(cluster, tmp_path, "owner cut from everything", lambda: t.cut(owner), lambda: t.heal(owner))


async def test_client_facing_node_cut_from_the_owner(cluster: Cluster, tmp_path: Path) -> None:
    owner, _ = cluster.owner_of_most()
    facing = next(n for n in NODES if n != owner)
    t = cluster.topology
    await run_fault(cluster, tmp_path, "client-facing node cut from the owner",
                    lambda: t.partition(facing, owner), lambda: t.join(facing, owner))


async def test_a_flapping_link(cluster: Cluster, tmp_path: Path) -> None:
    owner, _ = cluster.owner_of_most()
    t = cluster.topology
    rng = random.Random(33)

    async def flap() -> None:
        deadline = time.monotonic() + FLAP_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(rng.uniform(0.3, 0.5))  # the flap's rhythm, not a wait for state
            t.heal(owner)
            await asyncio.sleep(rng.uniform(0.3, 0.5))
            t.cut(owner)

    await run_fault(cluster, tmp_path, f"owner's link flapping every 300-500 ms for {FLAP_SECONDS:g}s",
                    lambda: t.cut(owner), lambda: t.heal(owner), flap)


async def test_postgresql_cut_from_every_node(cluster: Cluster, tmp_path: Path) -> None:
    t = cluster.topology
    await run_fault(cluster, tmp_path, "PostgreSQL cut from every node", lambda: t.cut("pg"), lambda: t.heal("pg"))
