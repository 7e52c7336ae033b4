"""PostgreSQL stopped and started again under pipelined ingest (``pg_ctl stop -m fast``, then
``start``): while it is down, batches are answered `unavailable` and nothing of them is applied,
queries keep answering from memory; `arena serve` recovers by itself once it is back. Nothing
acked is lost, and a resend of every frame is `duplicate` for every acked event."""

from __future__ import annotations

import asyncio
import random
import re
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from arena.config import ClusterSettings, JournalSettings
from support.cluster import SECRET
from support.faults import Ledger, assert_standings_match_rebuild, random_writers, seed, write_config
from support.postgres import EmbeddedPostgres, journaled
from support.server import ChildServer, Client, token_for, until

BOARDS: dict[str, dict[str, Any]] = {
    "best": {"aggregation": "best", "periods": ["alltime", "daily"]},
    "total": {"aggregation": "sum", "periods": ["alltime", "daily"], "max_value": 1000},
}
PERIODS = {name: body["periods"] for name, body in BOARDS.items()}
MEMBERS = [f"player-{i:02d}" for i in range(40)]
WRITERS = 3
IN_FLIGHT = 4


def _answered(ledger: Ledger, since: int, status: str) -> bool:
    """Whether a frame acked after the first ``since`` has a result of ``status``."""
    return any(status in (r["status"] if r["status"] != "rejected" else r["reason"] for r in results)
               for _events, results in ledger.acked[since:])


async def test_postgresql_stopped_and_started_under_ingest_loses_no_acked_event(
    tmp_path: Path, own_postgres: EmbeddedPostgres
) -> None:
    config = write_config(tmp_path, BOARDS, journal=JournalSettings("postgresql", own_postgres.url, "arena"))
    server = ChildServer(config)
    await asyncio.to_thread(server.start)
    rng = random.Random(seed())
    ledger = Ledger()
    stop = asyncio.Event()
    writers = random_writers(server.ws_url, rng, "", list(BOARDS), MEMBERS, ledger, stop, writers=WRITERS, in_flight=IN_FLIGHT)
    try:
        await until(lambda: len(ledger.acked) > 20, "acks before the outage", 60)
        await asyncio.to_thread(own_postgres.stop)
        down = len(ledger.acked)
        await until(lambda: _answered(ledger, down, "unavailable"), "a batch answered unavailable", 30)
        async with httpx.AsyncClient(base_url=server.url) as http:  # served from memory
            top = await http.get("/v1/boards/total/alltime/top")
            assert top.status_code == 200 and top.json()["entries"], top.text
        await asyncio.to_thread(own_postgres.start)
        back = len(ledger.acked)
        await until(lambda: _answered(ledger, back, "accepted"), "an accepted batch once PostgreSQL is back", 60)
        after = len(ledger.acked)
        await until(lambda: len(ledger.acked) > after + 10, "ingest going on after the outage", 60)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*writers), 60)

        journal = {board: await journaled(own_postgres.url, "arena", board) for board in BOARDS}
        frames = [events for events, _ in ledger.acked] + ledger.unacked
        counts = {"accepted": 0, "unavailable": 0}
        for events, results in ledger.acked:
            for e, r in zip(events, results, strict=True):
                found = journal[e["board"]].get(e["idempotency_key"])
                if r["status"] == "accepted":  # acked: journaled, as sent
                    assert found == (e["member"], e["value"], e["occurred_at"]), (e, r)
                    counts["accepted"] += 1
                else:  # refused while PostgreSQL was away: nothing of it applied
                    assert r["reason"] == "unavailable" and found is None, (e, r)
                    counts["unavailable"] += 1
        assert counts["accepted"] and counts["unavailable"], counts

        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            for events in frames:
                expected = ["duplicate" if e["idempotency_key"] in journal[e["board"]] else "accepted" for e in events]
                assert [r["status"] for r in await client.submit(events, timeout=60)] == expected
        finally:
            await client.close()
        sent = {e["idempotency_key"] for events in frames for e in events}
        journal = {board: await journaled(own_postgres.url, "arena", board) for board in BOARDS}
        assert sorted(k for keys in journal.values() for k in keys) == sorted(sent)  # everything, once
        await asyncio.to_thread(assert_standings_match_rebuild, server.url, config, PERIODS)
        assert await asyncio.to_thread(server.stop) == 0
    finally:
        stop.set()
        server.kill()


async def test_a_cluster_node_without_postgresql_reports_its_lease_stale_then_fresh_again(
    tmp_path: Path, own_postgres: EmbeddedPostgres, monkeypatch: Any
) -> None:
    """`arena_lease_fresh` (what the `ArenaLeaseLost` alert reads): 0 once the node could not
    renew its lease within `lease_seconds`, 1 again once PostgreSQL is back."""
    monkeypatch.setenv("ARENA_CLUSTER_SECRET", SECRET)
    config = write_config(tmp_path, BOARDS, journal=JournalSettings("postgresql", own_postgres.url, "arena"),
                          cluster=ClusterSettings(node_id="node-a", lease_seconds=1))
    server = ChildServer(config)
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            async def lease_fresh(value: str) -> bool:
                text = (await http.get("/metrics")).text
                return re.search(rf"^arena_lease_fresh {value}$", text, re.MULTILINE) is not None

            assert await lease_fresh("1.0")
            await asyncio.to_thread(own_postgres.stop)
            await until(partial(lease_fresh, "0.0"), "arena_lease_fresh 0 without PostgreSQL", 30)
            await asyncio.to_thread(own_postgres.start)
            await until(partial(lease_fresh, "1.0"), "arena_lease_fresh 1 once PostgreSQL is back", 60)
    finally:
        server.kill()
