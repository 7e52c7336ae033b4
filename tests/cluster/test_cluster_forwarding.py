"""Forwarding through three real `arena serve` nodes on one PostgreSQL: any node takes any frame
and any query; a frame naming boards of several owners gets one ack in event order; every query
is answered the same on every node; and an owner SIGKILLed (or SIGTERMed) under pipelined ingest
through all nodes loses nothing acked, while its boards are served again by the survivors."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from arena.cluster.placement import preference
from arena.config import ClusterSettings, JournalSettings
from support.faults import write_config
from support.server import ADMIN_TOKEN, ChildServer, Client, event, now_ms, statuses, token_for, until

SECRET = "a-cluster-secret-for-tests"
BOARDS: dict[str, dict[str, Any]] = {f"b{i}": {"aggregation": "sum"} for i in range(12)}  # 4, 3 and 5 per node
NODES = ["node-a", "node-b", "node-c"]


@pytest.fixture
async def three(tmp_path: Path, pg_journal: JournalSettings, monkeypatch: Any) -> AsyncIterator[list[ChildServer]]:
    """Three nodes of one cluster (lease 3 s, one standby), started, each owning some boards."""
    monkeypatch.setenv("ARENA_CLUSTER_SECRET", SECRET)
    servers = []
    for node_id in NODES:
        (tmp_path / node_id).mkdir()
        config = write_config(tmp_path / node_id, BOARDS, journal=pg_journal, cluster=ClusterSettings(node_id=node_id))
        servers.append(ChildServer(config))
    try:
        await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))
        async with httpx.AsyncClient(timeout=5) as http:
            await until(lambda: settled(http, servers), "every board owned by a live node, as every node sees it", 30)
        yield servers
    finally:
        for server in servers:
            server.kill()
        for server in servers:
            assert SECRET not in server.log()


async def owners(http: httpx.AsyncClient, server: ChildServer) -> dict[str, str | None]:
    view = (await http.get(f"{server.url}/v1/cluster")).json()
    alive = {n["node_id"] for n in view["nodes"] if n["alive"]}
    return {b: v["owner"] if v["owner"] in alive else None for b, v in view["boards"].items()}


async def settled(http: httpx.AsyncClient, servers: list[ChildServer]) -> bool:
    """Whether every live node sees every board owned by placement over the live nodes, and is ready."""
    live = [s for s in servers if s.alive()]
    placed = {b: preference(b, [NODES[servers.index(s)] for s in live])[0] for b in BOARDS}
    if any([await owners(http, s) != placed for s in live]):
        return False
    return all([(await http.get(f"{s.url}/readyz")).status_code == 200 for s in live])


async def test_any_node_takes_a_frame_of_several_owners_and_answers_every_query_the_same(three: list[ChildServer]) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        placed = await owners(http, three[0])
        assert len(set(placed.values())) == 3  # every node owns some: the frames below cross owners
        now = now_ms()
        for n, server in enumerate(three):
            frame = [event(f"b{(n + i) % 12}", f"m{i % 4}", i + 1, now, f"k{n}-{i}") for i in range(12)]
            frame.insert(5, {"board": "nope", "idempotency_key": "x"})
            client = await Client.connect(server.ws_url, token_for("gs"))
            try:
                first, again = await client.submit(frame), await client.submit(frame)
            finally:
                await client.close()
            assert [r.get("idempotency_key") for r in first] == [e.get("idempotency_key") for e in frame]
            assert statuses(first) == ["accepted"] * 5 + ["rejected:unknown_board"] + ["accepted"] * 7
            assert statuses(again) == ["duplicate"] * 5 + ["rejected:unknown_board"] + ["duplicate"] * 7

        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        answers = []
        for server in three:
            asked = []
            for board in BOARDS:
                for path in ("alltime/top?limit=20", "alltime/digest", "alltime/members/m1", "alltime/around/m2?radius=1",
                             "alltime/periods"):
                    answer = await http.get(f"{server.url}/v1/boards/{board}/{path}")
                    asked.append((answer.status_code, answer.json()))
                audit = await http.get(f"{server.url}/v1/boards/{board}/events", params={"member": "m1"}, headers=admin)
                asked.append((audit.status_code, audit.json()))
            asked.append((0, (await http.get(f"{server.url}/v1/boards")).json()))
            client = await Client.connect(server.ws_url, token_for("gs"))
            try:
                ranked = await client.request({"op": "rank", "id": 1, "board": "b3", "period": "alltime", "member": "m3"})
                asked.append((0, ranked))
            finally:
                await client.close()
            answers.append(asked)
        assert answers[0] == answers[1] == answers[2]
        assert all(status in (0, 200, 404) for status, _ in answers[0])
        forwarded = [(await http.get(f"{s.url}/metrics")).text for s in three]
        assert all('arena_forwarded_total{kind="frames"}' in text for text in forwarded)


class Writer:
    """A game server pipelining frames of sum events over several boards through one node; a
    frame's events answered `unavailable`, or lost with the connection, are sent again with the
    same keys (through the next live node once this one is gone) until each is acked."""

    def __init__(self, servers: list[ChildServer], first: int, name: str) -> None:
        self.servers = servers
        self.at = first
        self.name = name
        self.acked: dict[str, tuple[str, str, int]] = {}  # key -> (board, member, value)
        self.resent = 0
        self._client: Client | None = None
        self._frames = itertools.count()

    async def client(self, timeout: float = 30.0) -> Client:
        deadline = time.monotonic() + timeout
        while self._client is None:
            assert time.monotonic() < deadline, f"{self.name}: no node to connect to within {timeout:g}s"
            server = self.servers[self.at % len(self.servers)]
            try:
                if server.alive():
                    self._client = await Client.connect(server.ws_url, token_for("gs"))
                    break
            except (OSError, websockets.WebSocketException):
                pass
            self.at += 1
            await asyncio.sleep(0.05)  # a client's pause before it connects again (bounded by the deadline)
        return self._client

    async def run(self, stop: asyncio.Event, lanes: int = 3) -> None:
        await asyncio.gather(*(self._lane(stop) for _ in range(lanes)))

    async def _lane(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            n = next(self._frames)
            now = now_ms()
            events = [event(f"b{(n * 5 + i) % 12}", f"m{(n + i) % 7}", 1 + (n + i) % 9, now, f"{self.name}-{n}-{i}")
                      for i in range(8)]
            await self.deliver(events)

    async def deliver(self, events: list[dict[str, Any]], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while events:
            assert time.monotonic() < deadline, f"{self.name}: events not acked within {timeout:g}s"
            client = await self.client()
            try:
                results = await client.submit(events, timeout=15)
            except (ConnectionError, OSError, TimeoutError, websockets.WebSocketException):
                if self._client is client:
                    self._client = None
                    self.at += 1
                self.resent += 1
                continue
            left = []
            for e, r in zip(events, results, strict=True):
                if r["status"] in ("accepted", "duplicate"):
                    self.acked[e["idempotency_key"]] = (e["board"], e["member"], e["value"])
                else:
                    assert r.get("reason") == "unavailable", r
                    left.append(e)
            if left:
                self.resent += 1
            events = left

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


@pytest.mark.slow
@pytest.mark.parametrize("end", ["SIGKILL", "SIGTERM"])
async def test_an_owner_ended_under_pipelined_ingest_through_every_node_loses_nothing_acked(
    three: list[ChildServer], end: str
) -> None:
    """SIGKILL: its boards are taken when its lease expires; SIGTERM: it drains (acking what it
    took), gives its lease up and exits. Either way the frames forwarded to it meanwhile are
    answered or resent to the next owner."""
    writers = [Writer(three, n % 3, f"w{n}") for n in range(6)]
    stop = asyncio.Event()
    running = [asyncio.create_task(w.run(stop)) for w in writers]
    survivors = [three[0], three[2]]
    watchers = [await Client.connect(s.url.replace("http", "ws") + "/v1/live", "") for s in survivors]
    async with httpx.AsyncClient(timeout=5) as http:
        try:
            await until(lambda: sum(len(w.acked) for w in writers) > 500, "some ingest before the kill", 30)
            victim = three[1]
            lost = [b for b, o in (await owners(http, three[0])).items() if o == NODES[1]]
            assert lost
            subs = {}  # (watcher, board) -> sub: live views of the victim's boards on the survivors
            for watcher in watchers:
                for board in lost:
                    view = {"op": "top", "board": board, "period": "alltime", "limit": 100}
                    subs[watcher, board] = (await watcher.request({"op": "subscribe", "view": view}))["sub"]
            if end == "SIGKILL":
                victim.kill()
            else:
                await asyncio.to_thread(victim.stop)  # SIGTERM, and wait for the exit
                assert all(f"board {b}: handing it off" in victim.log() for b in lost), victim.log_tail()

            async def served_again() -> bool:
                for board in lost:
                    for server in survivors:
                        if (await http.get(f"{server.url}/v1/boards/{board}/alltime/top")).status_code != 200:
                            return False
                return True
            await until(served_again, "the dead owner's boards served again through the survivors", 30)
            taken = 0.0
            for server in survivors:
                text = (await http.get(f"{server.url}/metrics")).text
                taken += sum(float(v) for v in re.findall(r"^arena_takeover_seconds_count (\S+)$", text, re.M))
            assert taken >= len(lost)  # each board taken by a survivor, as a takeover
            acked_then = sum(len(w.acked) for w in writers)
            await until(lambda: sum(len(w.acked) for w in writers) > acked_then + 300, "ingest after the takeover", 30)
        finally:
            stop.set()
            await asyncio.gather(*running)
            for w in writers:
                await w.close()

        acked, resent = sum(len(w.acked) for w in writers), sum(w.resent for w in writers)
        print(f"{end}: {acked} events acked, {resent} resends")
        oracle: dict[str, dict[str, int]] = {b: {} for b in BOARDS}
        for w in writers:
            for board, member, value in w.acked.values():
                oracle[board][member] = oracle[board].get(member, 0) + value
        for server in survivors:
            for board in BOARDS:
                top = (await http.get(f"{server.url}/v1/boards/{board}/alltime/top?limit=100")).json()
                assert {e["member"]: e["score"] for e in top["entries"]} == oracle[board], (server.url, board)
        assert resent > 0  # the end was felt

        def final(watcher: Client, board: str) -> dict[str, int] | None:
            updates = [f for f in watcher.unmatched if f.get("op") == "update" and f.get("sub") == subs[watcher, board]]
            return {e["member"]: e["score"] for e in updates[-1]["entries"]} if updates else None
        try:
            for watcher, board in subs:  # the subscriptions survived the owner's death: they end on the standings
                await until(lambda w=watcher, b=board: final(w, b) == oracle[b], f"{board}'s live view to converge", 15)  # type: ignore[misc]
        finally:
            for watcher in watchers:
                await watcher.close()
