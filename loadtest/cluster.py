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
- **hand-off**: a rolling restart under ingest (`loadtest.handoff`): how long acks wait while
  each node hands its boards off, and that nothing acked is lost.

The nodes run this interpreter's `arena`, or another source tree's (``tree``, e.g. a checkout
from before a change; the journals of the takeover phase are written by this one's, so both must
share the tables). `loadtest.before_after` runs both, interleaved.

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
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from arena.cluster.placement import preference
from loadtest.arena_client import ArenaTarget, ArenaWs, http_get_json
from loadtest.handoff import print_handoff, run_handoff
from loadtest.ingest import Source, Submitter, run_ingest
from loadtest.nodes import board_names, cluster_config, node_ids, placed, running_nodes
from loadtest.postgres import postgres_url, postmaster_pid
from loadtest.process import ArenaServe, wait_until
from loadtest.start import journal_events
from loadtest.stats import CpuMeter, fmt_int, fmt_ms, progress
from loadtest.workload import Workload, WorkloadSpec


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
                 events: int, standbys: int, tree: Path | None) -> dict[str, Any]:
    victim_boards = [b for b in boards if preference(b, node_ids(nodes))[0] == "node-1"]
    writer = cluster_config(workdir, token, url, schema, boards, node_id=None)
    for board in victim_boards:
        progress(f"takeover: journaling {events:,} events into board {board}")
        asyncio.run(journal_events(writer, members, events, seed=1, board=board))
    with running_nodes(workdir, token, url, schema, boards, nodes, standbys, tree) as servers:
        wait_until(lambda: placed(servers, boards), "every board on its placement's node", 120.0, 0.2)
        if standbys:  # a standby still loading when its owner dies is no standby yet
            wait_until(lambda: followed_up_to(servers[1:], victim_boards, events), "the standbys to catch up", 300.0, 0.2)
        progress(f"takeover: {events:,} events per board, standbys={standbys}: SIGKILL node-1")
        result = takeover(servers, victim_boards)
    result.update({"events_per_board": events, "standbys": standbys})
    return result


@dataclasses.dataclass(frozen=True, slots=True)
class Sizes:
    """What one run of the benchmark does (the command's options)."""

    nodes: int
    boards: int
    members: int
    seconds: float
    batch: int
    inflight: int
    takeover_events: list[int]
    standbys: list[int]
    handoff_rounds: int


def source_tree(tree: Path | None) -> dict[str, str | None]:
    """Which `arena` the nodes run: ``tree`` (None: this interpreter's) and its git commit."""
    where = tree or Path(__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(where), "describe", "--always", "--dirty"], capture_output=True,
                            text=True, check=False).stdout.strip()
    return {"tree": str(tree) if tree else None, "commit": commit or None}


def cluster_benchmark(sizes: Sizes, pg: str | None, tree: Path | None = None) -> dict[str, Any]:
    """One run: the ingest, takeover and hand-off phases, on nodes running the `arena` of ``tree``
    (None: this interpreter's), on ``pg`` (None: a throwaway PostgreSQL)."""
    boards = board_names(sizes.boards)
    token = secrets.token_urlsafe(16)
    out: dict[str, Any] = {"command": "cluster", **dataclasses.asdict(sizes), "cores": os.cpu_count(),
                           "arena": source_tree(tree), "load_average": [round(x, 2) for x in os.getloadavg()]}
    with postgres_url(pg) as url, tempfile.TemporaryDirectory(prefix="arena-cluster-") as tmp:
        run = secrets.token_hex(4)  # schemas of this run only, dropped at its end
        schemas = [f"arena_bench_{run}_{i}" for i in range(3 + len(sizes.takeover_events) * len(sizes.standbys))]
        try:
            out.update(_phases(Path(tmp), token, url, schemas, boards, sizes, postmaster_pid(url), tree))
        finally:
            asyncio.run(drop_schemas(url, schemas))
    out["ok"] = (out["one_node"]["ok"] and out["cluster"]["ok"] and all(t["ok"] for t in out["takeover"])
                 and out.get("handoff", {"ok": True})["ok"])
    return out


async def drop_schemas(url: str, schemas: list[str]) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        for schema in schemas:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await conn.close()


def _phases(workdir: Path, token: str, url: str, schemas: list[str], boards: list[str], sizes: Sizes,
            store_pid: int | None, tree: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for schema, (phase, count) in zip(schemas, (("one_node", 1), ("cluster", sizes.nodes)), strict=False):
        with running_nodes(workdir, token, url, schema, boards, count, tree=tree) as servers:
            wait_until(lambda s=servers: placed(s, boards), "every board on its placement's node", 120.0, 0.2)  # type: ignore[misc]
            out[phase] = asyncio.run(ingest(servers, token, boards, sizes.members, sizes.seconds, sizes.batch,
                                            sizes.inflight, store_pid))
        progress(f"{phase}: {fmt_int(out[phase]['events_per_s'])} events/s")
    out["ratio"] = round(out["cluster"]["events_per_s"] / max(1.0, out["one_node"]["events_per_s"]), 3)
    runs = [(events, s) for events in sizes.takeover_events for s in sizes.standbys]
    out["takeover"] = [run_takeover(workdir, token, url, schema, boards, sizes.nodes, sizes.members, events, s, tree)
                       for schema, (events, s) in zip(schemas[3:], runs, strict=True)]
    if sizes.handoff_rounds:
        out["handoff"] = run_handoff(workdir, token, url, schemas[2], boards, sizes.nodes, sizes.members, sizes.batch,
                                     sizes.handoff_rounds, tree)
    return out


def print_cluster(out: dict[str, Any]) -> None:
    arena = out["arena"]
    print(f"\nnodes run arena of {arena['tree'] or 'this interpreter'} ({arena['commit']});"
          f" load average at the start {out['load_average']}")
    print(f"ingest: {out['boards']} boards, {fmt_int(out['members'])} members each, one connection per board"
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
    if "handoff" in out:
        print_handoff(out["handoff"], out["nodes"])
    print(f"ok: {out['ok']}")
