"""Clusters of real `arena serve` children on one PostgreSQL schema, and a writer that sends each
board's events to its owner (as the nodes' `/v1/cluster` names it) and resends a frame with the
same keys until it is acked: what a game server does against nodes without forwarding.

`cluster_nodes` (a fixture) makes the nodes; `OwnerWriter` writes and keeps the oracle of what
was acked; `standings` and `journaled` read back what the nodes and the tables hold.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from arena.cluster.placement import preference
from arena.config import ClusterSettings, JournalSettings
from support.faults import write_config
from support.postgres import journaled
from support.server import ChildServer, Client, event, now_ms, token_for, until

SECRET = "a-cluster-secret-for-tests"
NodeFactory = Callable[..., ChildServer]


@pytest.fixture
async def cluster_nodes(tmp_path: Path, pg_journal: JournalSettings, monkeypatch: Any) -> AsyncIterator[NodeFactory]:
    """``make(node_id, boards, settings=None, **cluster)``: an `arena serve` child (not started)
    on the test's schema, a node of the cluster with ``ClusterSettings(node_id=..., **cluster)``
    and the `[server]` ``settings`` (e.g. ``{"drain_seconds": 2}``); every one is killed at the end."""
    monkeypatch.setenv("ARENA_CLUSTER_SECRET", SECRET)
    made: list[ChildServer] = []

    def make(node_id: str, boards: dict[str, dict[str, Any]], settings: Mapping[str, Any] | None = None,
             **cluster: Any) -> ChildServer:
        directory = tmp_path / node_id
        directory.mkdir(exist_ok=True)
        config = write_config(directory, boards, journal=pg_journal, cluster=ClusterSettings(node_id=node_id, **cluster),
                              **(settings or {}))
        made.append(ChildServer(config))
        return made[-1]

    yield make
    for node in made:
        node.kill()


@asynccontextmanager
async def ingesting(servers: list[ChildServer], boards: Iterable[str], under_way: int = 100,
                    **options: Any) -> AsyncIterator[OwnerWriter]:
    """An `OwnerWriter` writing each of ``boards`` through ``servers`` (its ``options``: `via`,
    `tls`) while the block runs, entered once each board has ``under_way`` acked events; stopped
    and closed after it."""
    boards = list(boards)
    writer = OwnerWriter(servers, **options)
    stop = asyncio.Event()
    writers = [asyncio.create_task(writer.run(b, stop)) for b in boards]
    try:
        await until(lambda: all(len(writer.acked.get(b, ())) >= under_way for b in boards), "ingest under way", timeout=20)
        yield writer
    finally:
        stop.set()
        await asyncio.gather(*writers)
        await writer.close()


async def owner_urls(http: httpx.AsyncClient, nodes: list[ChildServer]) -> dict[str, str]:
    """board -> URL of its live owner, as the first node that answers `/v1/cluster` says
    (boards without a live owner are left out)."""
    for node in nodes:
        if not node.alive():
            continue
        try:
            answer = await http.get(f"{node.url}/v1/cluster", timeout=0.5)  # a paused node: ask the next
        except httpx.HTTPError:
            continue
        if answer.status_code != 200:  # its store connection is being made again: ask the next
            continue
        view = answer.json()
        urls = {n["node_id"]: n["url"] for n in view["nodes"] if n["alive"]}
        return {b: urls[v["owner"]] for b, v in view["boards"].items() if v["owner"] in urls}
    return {}


class OwnerWriter:
    """Per board, frames of ``frame_events`` sum events sent one after another to the board's
    owner; a frame answered `unavailable`, or lost with its connection, is sent again (same keys)
    to whoever owns the board then, until it is acked. ``acked``: board -> key -> (member, value).

    With ``via`` (a load balancer's URL) every frame goes there instead, over one connection per
    board, made again when it is lost (``tls``: the context for a ``https`` URL)."""

    def __init__(self, nodes: list[ChildServer], frame_events: int = 20, *, via: str | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self.nodes = nodes
        self.frame_events = frame_events
        self.via = via
        self.tls = tls
        self.acked: dict[str, dict[str, tuple[str, int]]] = {}
        self.resends = 0
        self._clients: dict[tuple[str, str], Client] = {}
        self._http = httpx.AsyncClient()

    async def run(self, board: str, stop: asyncio.Event) -> None:
        acked = self.acked.setdefault(board, {})
        frame = 0
        while not stop.is_set():
            now = now_ms()
            events = [event(board, f"m{(frame + i) % 11}", 1 + (frame * 7 + i) % 5, now, f"{board}-{frame}-{i}")
                      for i in range(self.frame_events)]
            await self.deliver(board, events)
            acked.update({e["idempotency_key"]: (e["member"], e["value"]) for e in events})
            frame += 1

    async def more(self, boards: Iterable[str], events: int, what: str, timeout: float = 30.0) -> None:
        """Wait until each of ``boards`` has over ``events`` more acked events than now."""
        now = {b: len(self.acked.get(b, ())) for b in boards}
        await until(lambda: all(len(self.acked.get(b, ())) > n + events for b, n in now.items()), what, timeout)

    async def deliver(self, board: str, events: list[dict[str, Any]], timeout: float = 30.0) -> None:
        """Send until every event is accepted or duplicate; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            url = self.via or (await owner_urls(self._http, self.nodes)).get(board)
            if url is not None:
                try:
                    client = self._clients.get((url, board)) or await Client.connect(
                        url.replace("http", "ws", 1) + "/v1/ws", token_for("gs"), ssl=self.tls)
                    self._clients[(url, board)] = client
                    results = await client.submit(events, timeout=5)
                except (OSError, TimeoutError, AssertionError, websockets.WebSocketException):  # gone: ask again
                    self._clients.pop((url, board), None)
                    results = []
                if results and all(r["status"] in ("accepted", "duplicate") for r in results):
                    return
            self.resends += 1
            await asyncio.sleep(0.02)  # a client's pause before it sends again (bounded by the deadline)
        raise AssertionError(f"board {board}: a frame was not acked within {timeout:g}s")

    async def close(self) -> None:
        for client in self._clients.values():
            try:
                await client.close()
            except (OSError, websockets.WebSocketException):
                pass
        await self._http.aclose()


def oracle(acked: dict[str, tuple[str, int]]) -> dict[str, int]:
    """member -> sum of its acked values: what a sum board must show, each event counted once."""
    sums: dict[str, int] = {}
    for member, value in acked.values():
        sums[member] = sums.get(member, 0) + value
    return sums


async def standings(http: httpx.AsyncClient, url: str, board: str) -> dict[str, int]:
    answer = await http.get(f"{url}/v1/boards/{board}/alltime/top", params={"limit": 1000})
    assert answer.status_code == 200, answer.text
    return {e["member"]: int(e["score"]) for e in answer.json()["entries"]}


async def start_cluster(make: NodeFactory, node_ids: list[str], boards: dict[str, dict[str, Any]], **cluster: Any) -> list[ChildServer]:
    """Nodes ``node_ids`` started at once, once every board is owned by its placement."""
    servers = [make(n, boards, **cluster) for n in node_ids]
    await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))
    await settled(servers, node_ids, boards)
    return servers


async def settled(servers: list[ChildServer], node_ids: list[str], boards: dict[str, Any], timeout: float = 20) -> None:
    """Wait until every board is owned by its placement over ``node_ids`` (the nodes ``servers``)."""
    urls = {n: s.url for n, s in zip(node_ids, servers, strict=True)}
    placed = {b: urls[preference(b, node_ids)[0]] for b in boards}
    async with httpx.AsyncClient() as http:
        async def done() -> bool:
            return await owner_urls(http, servers) == placed
        await until(done, "the boards owned by placement", timeout=timeout)


async def check_nothing_lost(writer: OwnerWriter, servers: list[ChildServer], journal: JournalSettings) -> None:
    """Every board's journal holds exactly the acked events, and its owner's standings are the
    oracle's (a sum board: an event applied twice, or lost, shows)."""
    assert journal.url is not None
    async with httpx.AsyncClient() as http:
        owners = await owner_urls(http, servers)
        for board, acked in writer.acked.items():
            assert acked, f"board {board}: nothing acked"
            assert set(await journaled(journal.url, journal.schema, board)) == set(acked), f"board {board}: journal != acked"
            assert await standings(http, owners[board], board) == oracle(acked), f"board {board}: standings != oracle"
