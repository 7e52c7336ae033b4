"""Webhook deliveries survive their owner's death and the store's: pending deliveries of a SIGKILLed
`arena serve` are sent after its restart (both backends), by the node that takes its boards over
in a 2-node PostgreSQL cluster, and after a PostgreSQL restart; every revision at least once,
signed, one body per ``Arena-Delivery`` (the body is made again by another process: the same
bytes), a table's revisions in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.client import ArenaClient, ScoreEvent
from arena.config import JournalSettings, Webhook
from support.cluster import NodeFactory, owner_urls, start_cluster
from support.faults import write_config
from support.postgres import EmbeddedPostgres
from support.prized import DAY, W1, journaled_settlement
from support.receiver import Receiver
from support.server import ADMIN_TOKEN, ChildServer, InProcessServer, make_config, token_for, until

BOARDS: dict[str, dict[str, Any]] = {
    "hs": {"aggregation": "best", "periods": ["alltime", "weekly"], "prizes": {"weekly": [{"reward": "gold", "ranks": [1, 2]}]}},
}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SECRET_ENV = "ARENA_TEST_WEBHOOK_SECRET"
SECRET = "s3cret"
REVISIONS = ["hs/weekly/2027-W01/*/0", "hs/weekly/2027-W01/*/1"]
FAST: dict[str, Any] = {"webhook_backoff_seconds": 0.05, "webhook_timeout_seconds": 0.5}


@pytest.fixture
async def receiver(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Receiver]:
    """A receiver that is down (its port known): `Receiver.start` brings it up."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    r = await Receiver().start()
    await r.stop()
    yield r
    await r.stop()


def webhook(receiver: Receiver) -> Webhook:
    return Webhook("rewards", receiver.url, SECRET_ENV, ("hs",))


async def settle_both_revisions(url: str, clocks: list[str]) -> None:
    """Events on hs's week, its close (the clock pinned on every node of ``clocks``) and a void:
    revisions 0 and 1."""
    async with httpx.AsyncClient() as http:
        for node in clocks:
            assert (await http.post(f"{node}/v1/_test/clock", json={"now_ms": W1 + DAY})).status_code == 200
    async with ArenaClient(url, token_for("gs")) as client:
        results = await client.submit_many([ScoreEvent("hs", f"m{i}", 10 * i, W1 + i, idempotency_key=f"hs{i}") for i in range(5)])
        assert all(r.recorded for r in results)
    async with httpx.AsyncClient() as http:
        for node in clocks:
            assert (await http.post(f"{node}/v1/_test/clock", json={"now_ms": W1 + 8 * DAY})).status_code == 200

        await journaled_settlement(http, f"{url}/v1/boards/hs/weekly/settlement", "2027-W01")
        answer = await http.post(f"{url}/v1/boards/hs/void", json={"idempotency_key": "hs4", "reason": "cheat"}, headers=ADMIN)
        assert answer.status_code == 200, answer.text


async def until_attempted(url: str) -> None:
    """Revision 0's delivery was attempted (and refused: the receiver is down); revision 1 waits."""
    async with httpx.AsyncClient() as http:
        async def attempted() -> bool:
            answer = await http.get(f"{url}/v1/webhooks/rewards/deliveries", params={"state": "pending"}, headers=ADMIN)
            listed = answer.json()["deliveries"] if answer.status_code == 200 else []
            return [(d["delivery"], d["attempts"] > 0) for d in listed] == [(REVISIONS[0], True), (REVISIONS[1], False)]

        await until(attempted, "revision 0 attempted, revision 1 waiting")


def check_delivered_in_order(receiver: Receiver) -> None:
    receiver.check(SECRET)
    delivered = receiver.delivered()
    assert set(delivered) == set(REVISIONS)
    ids = [r.delivery for r in receiver.received]
    first_ok = next(i for i, r in enumerate(receiver.received) if r.delivery == REVISIONS[0] and r.status == 200)
    assert REVISIONS[1] not in ids[:first_ok]


async def test_a_sigkilled_server_sends_its_pending_deliveries_after_its_restart(
    tmp_path: Path, served_journal: JournalSettings, receiver: Receiver
) -> None:
    config = write_config(tmp_path, BOARDS, journal=served_journal, webhooks=[webhook(receiver)], **FAST)
    server = ChildServer(config)
    server.start()
    try:
        await settle_both_revisions(server.url, [server.url])
        await until_attempted(server.url)
        port = int(server.url.rpartition(":")[2])
        server.kill()
        await receiver.start()
        server.start(port=port)
        async with httpx.AsyncClient() as http:
            assert (await http.post(f"{server.url}/v1/_test/clock", json={"now_ms": W1 + 8 * DAY})).status_code == 200
        await until(lambda: set(receiver.delivered()) == set(REVISIONS), "both revisions delivered after the restart")
        check_delivered_in_order(receiver)
    finally:
        server.kill()


async def test_the_node_that_takes_a_board_over_sends_its_pending_deliveries(
    cluster_nodes: NodeFactory, receiver: Receiver
) -> None:
    settings = {"webhooks": [webhook(receiver)], **FAST}
    nodes = await start_cluster(lambda node_id, boards, **cluster: cluster_nodes(node_id, boards, settings, **cluster),
                                ["a", "b"], BOARDS)
    async with httpx.AsyncClient() as http:
        owner_url = (await owner_urls(http, nodes))["hs"]
    owner = next(n for n in nodes if n.url == owner_url)
    other = next(n for n in nodes if n is not owner)
    await settle_both_revisions(owner.url, [n.url for n in nodes])
    await until_attempted(other.url)  # any node lists the shared outbox
    owner.kill()
    await receiver.start()
    await until(lambda: set(receiver.delivered()) == set(REVISIONS), "both revisions delivered by the new owner", timeout=60)
    check_delivered_in_order(receiver)
    async with httpx.AsyncClient() as http:
        assert (await owner_urls(http, [other]))["hs"] == other.url


async def test_deliveries_go_on_after_a_postgresql_restart(
    tmp_path: Path, own_postgres: EmbeddedPostgres, receiver: Receiver
) -> None:
    journal = JournalSettings("postgresql", own_postgres.url, "arena")
    config = make_config(tmp_path / "data", BOARDS, journal=journal, webhooks=[webhook(receiver)], **FAST)
    async with InProcessServer(config, now_ms=W1 + DAY) as server:
        await settle_both_revisions(server.url, [server.url])
        await until_attempted(server.url)
        await asyncio.to_thread(own_postgres.stop)
        await receiver.start()
        await asyncio.to_thread(own_postgres.start)
        await until(lambda: set(receiver.delivered()) == set(REVISIONS), "both revisions delivered", timeout=60)
        check_delivered_in_order(receiver)
