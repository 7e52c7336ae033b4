"""The nodes of a benchmark cluster: ``nodes`` `arena serve` processes on one PostgreSQL schema,
each board the benchmark board's definition, started together and ready; which `arena` source
tree they run (the loadtest's own, or another: the before of a before/after comparison)."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from arena.cluster.placement import preference
from arena.config import Admin, ClusterSettings, Config, JournalSettings
from loadtest.arena_client import bench_config, http_get_json
from loadtest.config_toml import write_config
from loadtest.process import ARENA, ArenaServe, arena_in

SECRET = secrets.token_urlsafe(24)
SPEC_BOARD = "bench"


def node_ids(nodes: int) -> list[str]:
    return [f"node-{i}" for i in range(1, nodes + 1)]


def board_names(boards: int) -> list[str]:
    return [f"b{i:02d}" for i in range(boards)]


def cluster_config(workdir: Path, token: str, url: str, schema: str, boards: list[str], *,
                   node_id: str | None, standbys: int = 1, lease_seconds: float = 3.0,
                   admins: tuple[Admin, ...] = ()) -> Config:
    """The benchmark board's definition under each of ``boards``, journaled in ``schema``; a node
    ``node_id`` of a cluster (None: no ``[cluster]``, for writing journals in-process); ``admins``
    may use the admin routes. Every board stays loaded on its owner (`idle_unload_seconds = 0`), so
    its standbys follow it: the takeover and hand-off figures are of loaded boards."""
    base = bench_config(workdir / "data", token, journal=JournalSettings("postgresql", url, schema))
    base = dataclasses.replace(base, server=dataclasses.replace(base.server, idle_unload_seconds=0))
    spec = base.boards[SPEC_BOARD]
    cluster = None if node_id is None else ClusterSettings(node_id=node_id, standbys=standbys, lease_seconds=lease_seconds)
    return dataclasses.replace(base, boards={b: dataclasses.replace(spec, name=b) for b in boards}, cluster=cluster,
                               admins=admins)


@contextmanager
def running_nodes(workdir: Path, token: str, url: str, schema: str, boards: list[str], nodes: int,
                  standbys: int = 1, tree: Path | None = None, admins: tuple[Admin, ...] = ()) -> Iterator[list[ArenaServe]]:
    """``nodes`` `arena serve` processes of one cluster (of the source tree ``tree``; None: the
    one this interpreter imports), started together and ready; stopped (SIGTERM, then SIGKILL)
    at the end."""
    command, env = arena_in(tree) if tree is not None else (ARENA, {})
    servers = []
    for node_id in node_ids(nodes):
        directory = workdir / schema / node_id
        directory.mkdir(parents=True)
        config = cluster_config(directory, token, url, schema, boards, node_id=node_id, standbys=standbys, admins=admins)
        servers.append(ArenaServe(write_config(config, directory / "config.toml"), command=command,
                                  env={**env, "ARENA_CLUSTER_SECRET": SECRET}))
    try:
        with ThreadPoolExecutor(len(servers)) as pool:  # together: placement then settles at once
            list(pool.map(lambda server: server.start(120.0), servers))
        yield servers
    finally:
        for server in servers:
            server.stop(60.0)


def cluster_view(servers: list[ArenaServe]) -> dict[str, Any] | None:
    """`GET /v1/cluster` of the first live node of ``servers`` that answers 200 (None: none did)."""
    for server in servers:
        if not server.alive():
            continue
        try:
            status, view = http_get_json(f"{server.url}/v1/cluster", timeout=2.0)
        except OSError:  # stopping or not listening yet: ask the next
            continue
        if status == 200:
            return dict(view)
    return None


def placed(servers: list[ArenaServe], boards: list[str]) -> bool:
    """Whether every board is owned by its placement's node over the live ``servers``."""
    view = cluster_view(servers)
    if view is None:
        return False
    live = [n["node_id"] for n in view["nodes"] if n["alive"]]
    return all(view["boards"][b]["owner"] == preference(b, live)[0] for b in boards)
