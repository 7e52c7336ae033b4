"""A rolling restart behind a real load balancer: HAProxy (the Debian package) runs the
repository's own `deploy/haproxy.cfg` (addresses, ports and paths substituted, every directive
kept, TLS included) in front of three `arena serve` nodes on PostgreSQL with `drain_seconds` 2.
Each node in turn gets SIGTERM, exits 0, starts again and is seen up by HAProxy, while readers
send HTTP queries and game servers stream events over WSS, all through the balancer:

- no query fails: every answer is 200 (or 404 `member_not_found`, for a member with no event
  yet), never a 5xx, a reset or a refused connection;
- no event is lost: every frame is acked in the end (resent with the same keys through the
  balancer when its connection closes or it is answered `unavailable`), the journal holds
  exactly the acked events and the standings are the oracle's.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import re
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from loadtest.process import free_port
from support.cluster import NodeFactory, check_nothing_lost, ingesting, oracle, settled, standings, start_cluster
from support.haproxy import HAProxy
from support.server import until

BOARDS: dict[str, dict[str, Any]] = {f"s{i}": {"aggregation": "sum"} for i in range(6)}
NODES = ["node-a", "node-b", "node-c"]
DRAIN_SECONDS = 2
"""Above what HAProxy's checks need to see a node go (`fall 2` at `fastinter 500ms` after one
`inter 1s`); the test never times it."""
QUERY_TIMEOUT = 15.0


@dataclass
class Readers:
    """HTTP queries through the balancer, one after another per reader, until stopped; what
    every answer was."""

    base_url: str
    tls: ssl.SSLContext
    answered: int = 0
    failures: list[str] = field(default_factory=list)

    def past(self, count: int) -> bool:
        return self.answered > count

    def paths(self) -> itertools.cycle[str]:
        routes = [f"/v1/boards/{b}/alltime/{q}" for b in BOARDS
                  for q in ("top?limit=5", "members/m3", "around/m4?radius=2", "percentile/m1", "periods")]
        return itertools.cycle(["/v1/boards", *routes])

    async def run(self, stop: asyncio.Event, offset: int) -> None:
        paths = self.paths()
        for _ in range(offset):
            next(paths)
        async with httpx.AsyncClient(base_url=self.base_url, verify=self.tls, timeout=QUERY_TIMEOUT) as http:
            while not stop.is_set():
                path = next(paths)
                try:
                    answer = await http.get(path)
                except httpx.HTTPError as exc:
                    self.failures.append(f"GET {path}: {exc!r}")
                    continue
                documented = answer.status_code == 200 or (
                    answer.status_code == 404 and '"member_not_found"' in answer.text)
                if not documented:
                    self.failures.append(f"GET {path}: {answer.status_code} {answer.text[:200]}")
                self.answered += 1


def client_tls(directory: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(directory / "cert.pem"))


@pytest.fixture
def balancer(tmp_path: Path) -> Iterator[Callable[[list[int]], HAProxy]]:
    """``start(node_ports)``: HAProxy from deploy/haproxy.cfg in front of those ports, started
    (stopped at the end)."""
    started: list[HAProxy] = []

    def start(node_ports: list[int]) -> HAProxy:
        directory = tmp_path / "haproxy"
        directory.mkdir()
        proxy = HAProxy(directory, node_ports)
        started.append(proxy)
        proxy.start()
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


async def until_seen(proxy: HAProxy, node_id: str, up: bool, what: str) -> None:
    await until(lambda: (proxy.servers().get(node_id) == "UP") == up, what, timeout=30)


@pytest.mark.slow
async def test_a_rolling_restart_through_haproxy_fails_no_query_and_loses_no_event(
        cluster_nodes: NodeFactory, pg_journal: Any, balancer: Callable[[list[int]], HAProxy]) -> None:
    servers = await start_cluster(lambda n, b: cluster_nodes(n, b, {"drain_seconds": DRAIN_SECONDS}), NODES, BOARDS)
    proxy = balancer([s.port for s in servers])
    for node_id in NODES:
        await until_seen(proxy, node_id, True, f"HAProxy to see {node_id} up")
    url = proxy.url
    tls = client_tls(proxy.directory)
    readers = Readers(url, tls)
    stop = asyncio.Event()
    reading = [asyncio.create_task(readers.run(stop, offset)) for offset in range(0, 12, 4)]
    try:
        async with ingesting(servers, BOARDS, via=url, tls=tls) as writer:
            for node_id, server in zip(NODES, servers, strict=True):
                answered = readers.answered
                assert await asyncio.to_thread(server.stop, DRAIN_SECONDS + 40) == 0, server.log_tail()
                await until_seen(proxy, node_id, False, f"HAProxy to see {node_id} down")
                await asyncio.to_thread(server.start, port=server.port)
                await until_seen(proxy, node_id, True, f"HAProxy to see {node_id} up again")
                await settled(servers, NODES, BOARDS)
                await until(functools.partial(readers.past, answered + 50), f"queries answered after restarting {node_id}")
                await writer.more(BOARDS, 100, f"ingest through HAProxy after restarting {node_id}")
    finally:
        stop.set()
        await asyncio.gather(*reading)
    print(f"rolling restart through HAProxy: {readers.answered} queries answered, frames resent: {writer.resends}")
    failed_lines = [line for line in proxy.log().splitlines() if re.search(r" (5\d\d|-1) \d+ ", line)]
    assert readers.failures == [], "\n".join([*readers.failures[:20], "haproxy log:", *failed_lines[:20]])
    await check_nothing_lost(writer, servers, pg_journal)
    async with httpx.AsyncClient(verify=tls) as http:  # the balancer answers the same standings
        for board, acked in writer.acked.items():
            assert await standings(http, url, board) == oracle(acked)


async def test_the_deployed_config_passes_haproxys_check_and_keeps_operators_routes_private(
        balancer: Callable[[list[int]], HAProxy]) -> None:
    proxy = balancer([free_port(), free_port(), free_port()])  # no node behind it
    url = proxy.url
    async with httpx.AsyncClient(verify=client_tls(proxy.directory)) as http:
        redirect = await http.get(f"http://127.0.0.1:{proxy.http_port}/v1/boards")
        assert redirect.status_code == 308 and redirect.headers["location"].startswith("https://")
        for path in ("/metrics", "/v1/cluster", "/v1/peer", "/console"):
            assert (await http.get(url + path)).status_code == 404, path
