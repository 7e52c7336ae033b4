"""``python -m loadtest cluster``: a cluster of nodes on one PostgreSQL journal, against one node
on the same PostgreSQL in the same run, and how long a dead owner's boards take to serve again.

- **ingest**: ``boards`` boards, one WebSocket connection per board streaming flat out. First
  through a single node (a cluster of one); then through ``nodes`` nodes, connection *i* on node
  *i* mod ``nodes`` whatever board it names: the node forwards to the board's owner. Each phase
  has its own schema. Reported: events/s, ack latency, and the CPU of every process.
- **takeover**: for each journal size and standby count, a fresh schema whose boards owned by
  ``node-1`` (by placement over the nodes) hold that many events each; the nodes start (with
  standbys: until they have caught up), ``node-1`` is SIGKILLed, and each of its boards is polled
  through the other nodes until it answers again. Reported per run: the slowest and median board,
  and the survivors' `arena_takeover_seconds`.

Everything shares this machine's cores: the per-process CPU says how the work would spread over
one machine per node.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import secrets
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from arena.cluster.placement import preference
from arena.config import ClusterSettings, Config, JournalSettings
from loadtest.arena_client import ArenaTarget, ArenaWs, bench_config, http_get_json
from loadtest.config_toml import write_config
from loadtest.ingest import Source, Submitter, run_ingest
from loadtest.postgres import postgres_url, postmaster_pid
from loadtest.process import ArenaServe, wait_until
from loadtest.start import journal_events
from loadtest.stats import CpuMeter, fmt_int, fmt_ms, progress
from loadtest.workload import Workload, WorkloadSpec

SECRET = secrets.token_urlsafe(24)
SPEC_BOARD = "bench"


def node_ids(nodes: int) -> list[str]:
    return [f"node-{i}" for i in range(1, nodes + 1)]


def board_names(boards: int) -> list[str]:
    return [f"b{i:02d}" for i in range(boards)]


def cluster_config(workdir: Path, token: str, url: str, schema: str, boards: list[str], *,
                   node_id: str | None, standbys: int = 1, lease_seconds: float = 3.0) -> Config:
    """The benchmark board's definition under each of ``boards``, journaled in ``schema``; a node
    ``node_id`` of a cluster (None: no ``[cluster]``, for writing journals in-process)."""
    base = bench_config(workdir / "data", token, journal=JournalSettings("postgresql", url, schema))
    spec = base.boards[SPEC_BOARD]
    cluster = None if node_id is None else ClusterSettings(node_id=node_id, standbys=standbys, lease_seconds=lease_seconds)
    return dataclasses.replace(base, boards={b: dataclasses.replace(spec, name=b) for b in boards}, cluster=cluster)


@contextmanager
def running_nodes(workdir: Path, token: str, url: str, schema: str, boards: list[str], nodes: int,
                  standbys: int = 1) -> Iterator[list[ArenaServe]]:
    """``nodes`` `arena serve` processes of one cluster, started together and ready; stopped
    (SIGTERM, then SIGKILL) at the end."""
    servers = []
    for node_id in node_ids(nodes):
        directory = workdir / schema / node_id
        directory.mkdir(parents=True)
        config = cluster_config(directory, token, url, schema, boards, node_id=node_id, standbys=standbys)
        servers.append(ArenaServe(write_config(config, directory / "config.toml"),
                                  env={"ARENA_CLUSTER_SECRET": SECRET}))
    try:
        with ThreadPoolExecutor(len(servers)) as pool:  # together: placement then settles at once
            list(pool.map(lambda server: server.start(120.0), servers))
        yield servers
    finally:
        for server in servers:
            server.stop(60.0)


def placed(servers: list[ArenaServe], boards: list[str]) -> bool:
    """Whether every board is owned by its placement's node over the live ``servers``."""
    status, view = http_get_json(f"{servers[0].url}/v1/cluster")
    if status != 200:
        return False
    live = [n["node_id"] for n in view["nodes"] if n["alive"]]
    return all(view["boards"][b]["owner"] == preference(b, live)[0] for b in boards)


class ProcessCpu:
    """Cores used by each process (and the PostgreSQL server's) between construction and `stop`."""

    def __init__(self, servers: dict[str, int], store_pid: int | None) -> None:
        first = True
        self._meters = {}
        for name, pid in servers.items():
            self._meters[name] = CpuMeter(pid, store_pid if first else None)
            first = False

    def stop(self) -> dict[str, float | None]:
        shares = {name: meter.stop() for name, meter in self._meters.items()}
        first = next(iter(shares.values()))
        out: dict[str, float | None] = {name: s["server_cpu"] for name, s in shares.items()}
        out["postgresql"] = first.get("store_cpu")
        out["load generator"] = first["client_cpu"]
        machine = first["machine_cpu"]
        if machine is not None:
            out["other"] = round(max(0.0, machine - sum(v or 0.0 for v in out.values())), 3)
        return out


async def ingest(servers: list[ArenaServe], token: str, boards: list[str], members: int, seconds: float,
                 batch: int, inflight: int, store_pid: int | None) -> dict[str, Any]:
    """One connection per board, round-robin over ``servers``, streaming flat out."""
    conns: list[ArenaWs] = []
    pairs: list[tuple[Submitter, Source]] = []
    for i, board in enumerate(boards):
        target = ArenaTarget(servers[i % len(servers)].url, token, board=board)
        conn = await ArenaWs.open(target)
        conns.append(conn)
        workload = Workload(WorkloadSpec(members=members, seed=i, zipf=0.0, run_id=f"{board}-{time.time_ns()}"))
        pairs.append((conn, workload.stream(i, batch)))
    cpu = ProcessCpu({f"node {i + 1}": s.pid for i, s in enumerate(servers)}, store_pid)
    try:
        result = await run_ingest(f"ingest via {len(servers)} node(s)", pairs, inflight=inflight, seconds=seconds,
                                  warmup=1.0)
    finally:
        for conn in conns:
            await conn.close()
    result["cpu"] = cpu.stop()
    return result


_TAKEOVER = re.compile(r'^arena_takeover_seconds_(sum|count) (\S+)$', re.M)
_STANDBY_SEQ = re.compile(r'^arena_standby_seq\{board="([^"]+)"\} (\S+)$', re.M)


def metrics_text(server: ArenaServe) -> str:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as answer:
        text: str = answer.read().decode()
        return text


def takeover_metric(servers: list[ArenaServe]) -> dict[str, float]:
    """The nodes' `arena_takeover_seconds` sum and count, added up."""
    total = {"sum": 0.0, "count": 0.0}
    for server in servers:
        for kind, value in _TAKEOVER.findall(metrics_text(server)):
            total[kind] += float(value)
    return total


def followed_up_to(servers: list[ArenaServe], boards: list[str], seq: int) -> bool:
    """Whether some node of ``servers`` follows each of ``boards`` up to ``seq`` (`arena_standby_seq`)."""
    loaded: dict[str, float] = {}
    for server in servers:
        for board, value in _STANDBY_SEQ.findall(metrics_text(server)):
            loaded[board] = max(loaded.get(board, 0.0), float(value))
    return all(loaded.get(b, 0.0) >= seq for b in boards)


def takeover(servers: list[ArenaServe], victim_boards: list[str], timeout: float = 120.0) -> dict[str, Any]:
    """SIGKILL ``servers[0]``, then poll each of its boards through the others until it answers:
    seconds from the kill to each board's first 200, and what the survivors' `arena_takeover_seconds`
    observed meanwhile."""
    survivors = servers[1:]
    before = takeover_metric(survivors)
    servers[0].kill()
    killed = time.perf_counter()
    waiting = set(victim_boards)
    took: dict[str, float] = {}
    deadline = killed + timeout
    while waiting and time.perf_counter() < deadline:
        for board in sorted(waiting):
            for server in survivors:
                status, _ = http_get_json(f"{server.url}/v1/boards/{board}/alltime/top?limit=1", timeout=2.0)
                if status == 200:
                    took[board] = time.perf_counter() - killed
                    waiting.discard(board)
                    break
        time.sleep(0.02)  # a polling interval, not a wait for an event: the result is measured
    seconds = sorted(took.values())
    return {"boards": len(victim_boards), "served_again": len(took),
            "max_s": round(max(seconds), 3) if seconds else None,
            "median_s": round(statistics.median(seconds), 3) if seconds else None,
            "metric": {kind: value - before[kind] for kind, value in takeover_metric(survivors).items()},
            "ok": not waiting}


def run_takeover(workdir: Path, token: str, url: str, schema: str, boards: list[str], nodes: int, members: int,
                 events: int, standbys: int) -> dict[str, Any]:
    victim_boards = [b for b in boards if preference(b, node_ids(nodes))[0] == "node-1"]
    writer = cluster_config(workdir, token, url, schema, boards, node_id=None)
    for board in victim_boards:
        progress(f"takeover: journaling {events:,} events into board {board}")
        asyncio.run(journal_events(writer, members, events, seed=1, board=board))
    with running_nodes(workdir, token, url, schema, boards, nodes, standbys) as servers:
        wait_until(lambda: placed(servers, boards), "every board on its placement's node", 120.0, 0.2)
        if standbys:  # a standby still loading when its owner dies is no standby yet
            wait_until(lambda: followed_up_to(servers[1:], victim_boards, events), "the standbys to catch up", 300.0, 0.2)
        progress(f"takeover: {events:,} events per board, standbys={standbys}: SIGKILL node-1")
        result = takeover(servers, victim_boards)
    result.update({"events_per_board": events, "standbys": standbys})
    return result


def cluster_benchmark(nodes: int, boards_n: int, members: int, seconds: float, batch: int, inflight: int,
                      takeover_events: list[int], standbys: list[int], pg: str | None) -> dict[str, Any]:
    boards = board_names(boards_n)
    token = secrets.token_urlsafe(16)
    out: dict[str, Any] = {"command": "cluster", "nodes": nodes, "boards": boards_n, "members": members,
                           "seconds": seconds, "batch": batch, "inflight": inflight, "cores": os.cpu_count()}
    with postgres_url(pg) as url, tempfile.TemporaryDirectory(prefix="arena-cluster-") as tmp:
        workdir = Path(tmp)
        store_pid = postmaster_pid(url)
        run = secrets.token_hex(4)  # schemas of this run only, dropped at its end
        schemas = [f"arena_bench_{run}_{i}" for i in range(2 + len(takeover_events) * len(standbys))]
        try:
            out.update(_phases(workdir, token, url, schemas, boards, nodes, members, seconds, batch, inflight,
                               takeover_events, standbys, store_pid))
        finally:
            asyncio.run(_drop(url, schemas))
    out["ok"] = out["one_node"]["ok"] and out["cluster"]["ok"] and all(t["ok"] for t in out["takeover"])
    return out


async def _drop(url: str, schemas: list[str]) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        for schema in schemas:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await conn.close()


def _phases(workdir: Path, token: str, url: str, schemas: list[str], boards: list[str], nodes: int, members: int,
            seconds: float, batch: int, inflight: int, takeover_events: list[int], standbys: list[int],
            store_pid: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for schema, (phase, count) in zip(schemas, (("one_node", 1), ("cluster", nodes)), strict=False):
        with running_nodes(workdir, token, url, schema, boards, count) as servers:
            wait_until(lambda s=servers: placed(s, boards), "every board on its placement's node", 120.0, 0.2)  # type: ignore[misc]
            out[phase] = asyncio.run(ingest(servers, token, boards, members, seconds, batch, inflight, store_pid))
        progress(f"{phase}: {fmt_int(out[phase]['events_per_s'])} events/s")
    out["ratio"] = round(out["cluster"]["events_per_s"] / max(1.0, out["one_node"]["events_per_s"]), 3)
    runs = [(events, s) for events in takeover_events for s in standbys]
    out["takeover"] = [run_takeover(workdir, token, url, schema, boards, nodes, members, events, s)
                       for schema, (events, s) in zip(schemas[2:], runs, strict=True)]
    return out


def print_cluster(out: dict[str, Any]) -> None:
    print(f"\ningest: {out['boards']} boards, {fmt_int(out['members'])} members each, one connection per board"
          f" (batch {out['batch']}, {out['inflight']} in flight), {out['seconds']:g} s, {out['cores']} cores shared")
    print(f"{'':<22}{'events/s':>12}{'ack p50':>10}{'ack p99':>10}  cpu (cores)")
    for phase, name in (("one_node", "1 node"), ("cluster", f"{out['nodes']} nodes")):
        r = out[phase]
        lat = r["ack_latency"]
        cpu = ", ".join(f"{k} {v:.2f}" for k, v in r["cpu"].items() if v is not None)
        print(f"{name:<22}{fmt_int(r['events_per_s']):>12}{fmt_ms(lat.get('p50_ms')):>10}{fmt_ms(lat.get('p99_ms')):>10}  {cpu}")
    print(f"cluster / one node: {out['ratio']:.2f}")
    print(f"\ntakeover after SIGKILL of node-1 ({out['nodes']} nodes):")
    print(f"{'events/board':>14}{'standbys':>10}{'boards':>8}{'median':>10}{'slowest':>10}"
          "  after the lease expired (arena_takeover_seconds, mean)")
    for t in out["takeover"]:
        metric = t["metric"]
        mean = metric["sum"] / metric["count"] if metric["count"] else 0.0
        print(f"{fmt_int(t['events_per_board']):>14}{t['standbys']:>10}{t['served_again']:>5}/{t['boards']:<2}"
              f"{t['median_s'] or 0:>9.2f}s{t['max_s'] or 0:>9.2f}s  {mean:.2f}s over {metric['count']:g} boards")
    print(f"ok: {out['ok']}")
