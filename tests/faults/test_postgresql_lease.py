"""On PostgreSQL a node's lease on the schema replaces the data_dir lock, with real child servers:
a second `arena serve` on the same schema refuses to start with one line naming the holder; a
restart right after a SIGKILL waits for the dead lease to expire, then serves with nothing acked
lost; a restart after a graceful stop does not wait. Their logs say whether they waited."""

from __future__ import annotations

import asyncio
import random
import socket
from pathlib import Path
from typing import Any

from arena.config import ClusterSettings, JournalSettings
from loadtest.process import free_port
from support.arena_cli import arena
from support.cluster import SECRET
from support.faults import Ledger, assert_standings_match_rebuild, random_writers, seed, write_config
from support.postgres import journaled
from support.server import ChildServer, Client, event, now_ms, statuses, token_for, until

BOARDS: dict[str, dict[str, Any]] = {
    "best": {"aggregation": "best", "periods": ["alltime", "daily"]},
    "total": {"aggregation": "sum", "periods": ["alltime", "daily"], "max_value": 1000},
}
PERIODS = {name: body["periods"] for name, body in BOARDS.items()}
MEMBERS = [f"player-{i:02d}" for i in range(20)]
WAITING = "waiting for its lease to expire"
RESTART_LEASE = 15.0


def config_in(directory: Path, journal: JournalSettings) -> Path:
    directory.mkdir()
    return write_config(directory, BOARDS, journal=journal)


async def test_a_second_server_on_the_same_schema_refuses_to_start_naming_the_holder(
    tmp_path: Path, pg_journal: JournalSettings
) -> None:
    server = ChildServer(config_in(tmp_path / "a", pg_journal))
    await asyncio.to_thread(server.start)
    try:
        done = await asyncio.to_thread(arena, "serve", "--config", config_in(tmp_path / "b", pg_journal), "--port", str(free_port()))
        assert done.returncode == 2, done.stderr
        [line] = [line for line in done.stderr.splitlines() if line.startswith("arena serve:")]
        assert f"schema {pg_journal.schema} is held by node {socket.gethostname()}:{server.port} (its lease is live" in line
        assert WAITING in done.stderr  # it waited for the lease, which stayed live
        client = await Client.connect(server.ws_url, token_for("gs"))  # the holder serves on
        assert statuses(await client.submit([event("best", "a", 1, now_ms(), "after")])) == ["accepted"]
        await client.close()
    finally:
        server.kill()


async def test_a_restart_right_after_a_sigkill_waits_for_the_dead_lease_and_loses_nothing(
    tmp_path: Path, pg_journal: JournalSettings, monkeypatch: Any
) -> None:
    """A node of one, so that its lease can be long enough for the restart to come before it
    expires even on a loaded machine (a lone node's lease is 3 s); a restarted process of the
    same node id waits for the dead one's lease just the same."""
    assert pg_journal.url is not None
    monkeypatch.setenv("ARENA_CLUSTER_SECRET", SECRET)
    config = write_config(tmp_path, BOARDS, journal=pg_journal,
                          cluster=ClusterSettings(node_id="node-a", lease_seconds=RESTART_LEASE))
    server = ChildServer(config)
    await asyncio.to_thread(server.start)
    try:
        rng = random.Random(seed())
        ledger = Ledger()
        stop = asyncio.Event()
        writers = random_writers(server.ws_url, rng, "", list(BOARDS), MEMBERS, ledger, stop, writers=2, in_flight=4)
        await until(lambda: len(ledger.acked) > 10, "acks before the SIGKILL", 60)
        server.kill()
        await asyncio.wait_for(asyncio.gather(*writers), 60)

        await asyncio.to_thread(server.start, port=server.port)  # the same node, another process
        assert WAITING in server.log()

        journal = {board: await journaled(pg_journal.url, pg_journal.schema, board) for board in BOARDS}
        for events, results in ledger.acked:
            assert [r["status"] for r in results] == ["accepted"] * len(events)
            for e in events:
                assert journal[e["board"]][e["idempotency_key"]] == (e["member"], e["value"], e["occurred_at"])
        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            for events in [ev for ev, _ in ledger.acked] + ledger.unacked:
                expected = ["duplicate" if e["idempotency_key"] in journal[e["board"]] else "accepted" for e in events]
                assert [r["status"] for r in await client.submit(events, timeout=60)] == expected
        finally:
            await client.close()
        await asyncio.to_thread(assert_standings_match_rebuild, server.url, config, PERIODS)

        assert await asyncio.to_thread(server.stop) == 0  # a graceful stop gives the lease up
        await asyncio.to_thread(server.start, port=server.port)
        assert WAITING not in server.log()
    finally:
        server.kill()
