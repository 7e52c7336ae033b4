"""The settlement feed across a failover, on two real `arena serve` nodes of one PostgreSQL
schema: a backend polls `GET /v1/settlements` with its last cursor (from whichever node answers)
while tables close and settle, voids revise them, the owner of most boards is SIGKILLed as its
tables close, and the other node takes the boards over, settles what was left and revises again.
It sees every journaled revision exactly once, in log order (each table's revisions in order),
and each item equals the revision its board's journal holds."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import asyncpg
import httpx

from arena.cluster.placement import preference
from arena.config import JournalSettings
from arena.engine.settlement import LogItem, SettlementRecord, log_item
from support.cluster import NodeFactory, owner_urls, start_cluster
from support.prized import DAY, MIN, W1
from support.server import ADMIN_TOKEN, ChildServer, Client, event, token_for, until

NODES = ["node-a", "node-b"]
BOARDS: dict[str, dict[str, Any]] = {
    f"f{i}": {"aggregation": "best", "periods": ["daily"], "close_grace_seconds": 0,
              "prizes": {"daily": [{"reward": "gold", "ranks": [1, 1]}, {"reward": "silver", "ranks": [2, 3]}]}}
    for i in range(6)
}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def pin(http: httpx.AsyncClient, nodes: list[ChildServer], now: int) -> None:
    for node in nodes:
        assert (await http.post(f"{node.url}/v1/_test/clock", json={"now_ms": now})).status_code == 200


async def submit(http: httpx.AsyncClient, nodes: list[ChildServer], day: int) -> None:
    """Five members' scores on every board for day ``day`` (0: 2027-01-04), through each board's owner."""
    owners = await owner_urls(http, nodes)
    for board in BOARDS:
        client = await Client.connect(owners[board].replace("http", "ws", 1) + "/v1/ws", token_for("gs"))
        try:
            events = [event(board, f"m{i}", 10 * i + day, W1 + day * DAY + i, f"{board}-{day}-{i}") for i in range(5)]
            assert all(r["status"] == "accepted" for r in await client.submit(events, timeout=10))
        finally:
            await client.close()


async def void_winners(http: httpx.AsyncClient, nodes: list[ChildServer], day: int) -> None:
    """Void day ``day``'s winner (m4) of every board, through its owner: each settled table revises."""
    owners = await owner_urls(http, nodes)
    for board in BOARDS:
        answer = await http.post(f"{owners[board]}/v1/boards/{board}/void", headers=ADMIN,
                                 json={"idempotency_key": f"{board}-{day}-4", "reason": "cheat"})
        assert answer.status_code == 200, answer.text


async def journaled(journal: JournalSettings) -> list[LogItem]:
    """Every settlement revision the boards' journals hold, as log items (no cursor)."""
    assert journal.url is not None
    conn = await asyncpg.connect(journal.url)
    try:
        rows = await conn.fetch(f"SELECT board, seq, body FROM {journal.schema}.board_record WHERE kind = 'settlement'"
                                " ORDER BY board, seq")
    finally:
        await conn.close()
    return [log_item(r["board"], SettlementRecord.parse(r["seq"], r["body"])) for r in rows]


class Poller:
    """A backend polling the feed with its last cursor, from the first node that answers."""

    def __init__(self, nodes: list[ChildServer]) -> None:
        self.nodes = nodes
        self.cursor = 0
        self.seen: list[dict[str, Any]] = []
        self.stop = asyncio.Event()

    async def run(self) -> None:
        deadline = time.monotonic() + 180
        async with httpx.AsyncClient(timeout=2) as http:
            while time.monotonic() < deadline:
                finishing = self.stop.is_set()
                page = await self._page(http)
                if page is not None:
                    self.seen += page["items"]
                    self.cursor = page["next"]
                    if finishing and not page["items"]:
                        return
                await asyncio.sleep(0.01)  # a backend's polling interval (bounded by the deadline)
        raise AssertionError("the poller did not finish within 180 s")

    async def _page(self, http: httpx.AsyncClient) -> dict[str, Any] | None:
        for node in self.nodes:
            if not node.alive():
                continue
            try:
                answer = await http.get(f"{node.url}/v1/settlements", params={"after": self.cursor, "limit": 4},
                                        headers={"Authorization": f"Bearer {token_for('gs')}"})
            except httpx.HTTPError:
                continue
            if answer.status_code == 200:
                page: dict[str, Any] = answer.json()
                return page
        return None


async def test_a_backend_polling_the_feed_sees_every_revision_once_in_order_across_a_failover(
    cluster_nodes: NodeFactory, pg_journal: JournalSettings
) -> None:
    nodes = await start_cluster(cluster_nodes, NODES, BOARDS)
    owned = {n: [b for b in BOARDS if preference(b, NODES)[0] == n] for n in NODES}
    victim_id = max(NODES, key=lambda n: len(owned[n]))
    victim = nodes[NODES.index(victim_id)]
    survivor = nodes[1 - NODES.index(victim_id)]
    poller = Poller(nodes)
    async with httpx.AsyncClient(timeout=10) as http:
        await pin(http, nodes, W1 + 60 * MIN)
        await submit(http, nodes, 0)
        polling = asyncio.create_task(poller.run())
        try:
            # day 0 closes and settles on both owners; voids revise every table
            await pin(http, nodes, W1 + DAY + MIN)

            async def day0_settled() -> bool:
                return len([i for i in poller.seen if i["period_id"] == "2027-01-04"]) == len(BOARDS)

            await until(day0_settled, "every board's day 0 settled in the feed")
            await void_winners(http, nodes, 0)
            await submit(http, nodes, 1)
            # day 1 closes, and its owner dies at once, between closing, settling and appending
            await pin(http, nodes, W1 + 2 * DAY + MIN)
            victim.kill()

            async def taken_over() -> bool:
                owners = await owner_urls(http, [survivor])
                return len(owners) == len(BOARDS) and set(owners.values()) == {survivor.url}

            await until(taken_over, "the survivor to own every board", timeout=60)
            await until(lambda: _settled(http, survivor), "every board's day 1 settled on the survivor", timeout=60)
            await void_winners(http, [survivor], 1)

            async def everything_seen() -> bool:
                expected = await journaled(pg_journal)
                seen = {repr(replace(LogItem(**i), cursor=0)) for i in poller.seen}
                return sum(i.awards > 0 for i in expected) == 4 * len(BOARDS) and seen.issuperset(map(repr, expected))

            await until(everything_seen, "every revision journaled and seen", timeout=60)
            poller.stop.set()
            await asyncio.wait_for(polling, 60)
        finally:
            polling.cancel()
        # what the backend saw: each revision once, in log order, equal to its journal's
        cursors = [i["cursor"] for i in poller.seen]
        assert cursors == sorted(set(cursors))
        seen = [LogItem(**i) for i in poller.seen]
        expected = await journaled(pg_journal)
        assert sorted(map(repr, (replace(i, cursor=0) for i in seen))) == sorted(map(repr, expected))
        for table in {(i.board, i.period_id) for i in seen if i.awards}:  # (and the empty tables the clock's jump closed)
            assert [i.revision for i in seen if (i.board, i.period_id) == table] == [0, 1]
        assert {i.period_id for i in seen if i.awards} == {"2027-01-04", "2027-01-05"}
        everything = await http.get(f"{survivor.url}/v1/settlements", params={"limit": 1000}, headers=ADMIN)
        assert [LogItem(**i) for i in everything.json()["items"]] == seen


async def _settled(http: httpx.AsyncClient, node: ChildServer) -> bool:
    for board in BOARDS:
        answer = await http.get(f"{node.url}/v1/boards/{board}/daily/settlement", params={"period_id": "2027-01-05"})
        if answer.status_code != 200:
            return False
    return True
