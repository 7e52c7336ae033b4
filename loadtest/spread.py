"""``python -m loadtest spread``: how long until every node of a cluster serves a board created
through one of them (DESIGN.md, "Boards as data": within 1 s).

``nodes`` `arena serve` nodes on one PostgreSQL schema (a throwaway server unless a URL is given)
start with one config board; then ``boards`` times, one after the other: `PUT /v1/boards/{new}`
through node *i* mod ``nodes``, and every node is asked `top` of the new board every
``POLL_SECONDS`` until it answers 200 (served there, or forwarded to its owner). Reported per
board: the `PUT`'s answer, and the time from sending the `PUT` until the last node answered; the
median, p99 and slowest over the boards, and the CPU of every process over the run.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from arena.config import Admin
from loadtest.cluster import ProcessCpu, drop_schemas
from loadtest.nodes import board_names, placed, running_nodes
from loadtest.postgres import postgres_url, postmaster_pid
from loadtest.process import ArenaServe, wait_until
from loadtest.stats import percentile, progress

POLL_SECONDS = 0.005
SERVED_TIMEOUT = 30.0
DEFINITION = {"aggregation": "best", "order": "desc", "tie": "earliest", "periods": ["alltime"]}
GOAL_SECONDS = 1.0


async def _served(http: httpx.AsyncClient, url: str, board: str, deadline: float) -> float:
    """When (perf_counter) the node at ``url`` first answered `top` of ``board`` 200."""
    while True:
        answer = await http.get(f"{url}/v1/boards/{board}/alltime/top?limit=1")
        if answer.status_code == 200:
            return time.perf_counter()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{url} does not serve {board} after {SERVED_TIMEOUT:g}s: {answer.status_code} {answer.text}")
        await asyncio.sleep(POLL_SECONDS)


async def _create_all(servers: list[ArenaServe], admin_token: str, boards: int) -> list[dict[str, float]]:
    runs = []
    headers = {"Authorization": f"Bearer {admin_token}"}
    async with httpx.AsyncClient(timeout=10.0) as http:
        for i in range(boards):
            board = f"new-{i:04d}"
            started = time.perf_counter()
            created = await http.put(f"{servers[i % len(servers)].url}/v1/boards/{board}", json=DEFINITION, headers=headers)
            answered = time.perf_counter()
            if created.status_code != 201:
                raise RuntimeError(f"PUT /v1/boards/{board}: {created.status_code} {created.text}")
            deadline = answered + SERVED_TIMEOUT
            served = await asyncio.gather(*(_served(http, s.url, board, deadline) for s in servers))
            runs.append({"put_ms": round((answered - started) * 1000, 1),
                         "served_by_all_ms": round((max(served) - started) * 1000, 1)})
            progress(f"{board}: created in {runs[-1]['put_ms']} ms, served by all {len(servers)} nodes after "
                     f"{runs[-1]['served_by_all_ms']} ms")
    return runs


def spread_benchmark(nodes: int, boards: int, pg: str | None) -> dict[str, Any]:
    token, admin_token = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    admins = (Admin("loadtest", hashlib.sha256(admin_token.encode()).hexdigest()),)
    out: dict[str, Any] = {"command": "spread", "nodes": nodes, "boards": boards, "cores": os.cpu_count(),
                           "load_average": [round(x, 2) for x in os.getloadavg()]}
    seed = board_names(1)
    with postgres_url(pg) as url, tempfile.TemporaryDirectory(prefix="arena-spread-") as tmp:
        schema = f"arena_spread_{secrets.token_hex(4)}"
        try:
            with running_nodes(Path(tmp), token, url, schema, seed, nodes, admins=admins) as servers:
                wait_until(lambda: placed(servers, seed), "the config board on its placement's node", 120.0, 0.2)
                cpu = ProcessCpu({f"node-{i + 1}": s.pid for i, s in enumerate(servers)}, postmaster_pid(url))
                runs = asyncio.run(_create_all(servers, admin_token, boards))
                out["cpu"] = cpu.stop()
        finally:
            asyncio.run(drop_schemas(url, [schema]))
    spread = sorted(r["served_by_all_ms"] for r in runs)
    out["runs"] = runs
    out["served_by_all_ms"] = {"median": round(statistics.median(spread), 1), "p99": round(percentile(spread, 99), 1),
                               "max": spread[-1]}
    out["put_ms_median"] = round(statistics.median(r["put_ms"] for r in runs), 1)
    out["ok"] = out["served_by_all_ms"]["max"] <= GOAL_SECONDS * 1000
    return out


def print_spread(out: dict[str, Any]) -> None:
    spread = out["served_by_all_ms"]
    print(f"\na board created through one of {out['nodes']} nodes (PostgreSQL), {out['boards']} boards, "
          f"load average before {out['load_average'][0]}")
    print(f"PUT answered after (median):          {out['put_ms_median']} ms")
    print(f"served by every node after the PUT:   median {spread['median']} / p99 {spread['p99']} / "
          f"max {spread['max']} ms (goal <= {GOAL_SECONDS * 1000:.0f})")
    print("CPU over the run (cores): " + ", ".join(f"{k} {v}" for k, v in out["cpu"].items()))
    print(f"ok: {out['ok']}")


def run(nodes: int, boards: int, pg: str | None) -> dict[str, Any]:
    return spread_benchmark(nodes, boards, pg)
