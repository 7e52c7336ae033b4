"""A duplicate storm: the same batch resent 100 times over several connections changes nothing
and every duplicate is counted (every retry is a lookup in the journal's UNIQUE index), and the
same after a restart; on both journal backends."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from arena.config import JournalSettings
from support.faults import metric, server_digests, stored, write_config
from support.server import ChildServer, Client, clear_of_an_hour_boundary, now_ms, statuses, token_for

BOARDS: dict[str, dict[str, Any]] = {
    "a": {"aggregation": "best", "periods": ["alltime", "daily"]},
    "b": {"aggregation": "sum", "periods": ["alltime", "hourly"]},
}
PERIODS = {name: body["periods"] for name, body in BOARDS.items()}
CONNECTIONS = 5
RESENDS = 100


def _batch(n: int) -> list[dict[str, Any]]:
    now = now_ms()
    return [{"board": "ab"[i % 2], "member": f"m{i % 37}", "value": i, "occurred_at": now - i * 10, "idempotency_key": f"storm-{i}"}
            for i in range(n)]


def _duplicates(url: str) -> float:
    return metric(url, "arena_events_total", status="duplicate")


async def _storm(url: str, batch: list[dict[str, Any]], resends: int) -> None:
    """``resends`` copies of ``batch`` spread over CONNECTIONS connections, pipelined."""
    clients = [await Client.connect(url, token_for("gs")) for _ in range(CONNECTIONS)]
    answers = await asyncio.gather(*(
        asyncio.wait_for(clients[n % CONNECTIONS].send({"op": "submit", "events": batch}), 120) for n in range(resends)
    ))
    for answer in answers:
        assert answer["op"] == "ack" and statuses(answer["results"]) == ["duplicate"] * len(batch)
    for client in clients:
        await client.close()


async def test_duplicate_storm_changes_nothing_and_counts_every_duplicate(tmp_path: Path, served_journal: JournalSettings) -> None:
    await clear_of_an_hour_boundary()
    config = write_config(tmp_path, BOARDS, journal=served_journal)
    data = tmp_path / "data"

    async def journaled() -> dict[str, dict[str, tuple[str, int, int]]]:
        return {board: await stored(served_journal, data, board) for board in BOARDS}

    server = ChildServer(config)
    await asyncio.to_thread(server.start)
    try:
        batch = _batch(200)
        client = await Client.connect(server.ws_url, token_for("gs"))
        assert statuses(await client.submit(batch)) == ["accepted"] * 200
        # The same keys with another value are not duplicates, and are not counted as such.
        reused = [{**e, "value": e["value"] + 1} for e in batch[:10]]
        assert statuses(await client.submit(reused)) == ["rejected:idempotency_key_reused"] * 10
        await client.close()
        digests = server_digests(server.url, PERIODS)
        journal = await journaled()
        seq = metric(server.url, "arena_events_total", status="accepted")
        assert _duplicates(server.url) == 0

        await _storm(server.ws_url, batch, RESENDS)
        assert server_digests(server.url, PERIODS) == digests
        assert await journaled() == journal
        assert _duplicates(server.url) == RESENDS * len(batch)
        assert metric(server.url, "arena_events_total", status="accepted") == seq
        assert metric(server.url, "arena_events_total", reason="idempotency_key_reused") == 10

        # After a restart the journal's index answers the same way.
        server.signal(signal.SIGTERM)
        assert await asyncio.to_thread(server.wait) == 0
        await asyncio.to_thread(server.start)
        await _storm(server.ws_url, batch, 10)
        assert server_digests(server.url, PERIODS) == digests
        assert _duplicates(server.url) == 10 * len(batch)
        assert await journaled() == journal
    finally:
        server.kill()
