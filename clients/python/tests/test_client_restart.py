"""The client across a server restart: `arena serve` is stopped (SIGTERM, or SIGKILL) and started
again on the same data dir and port while producers keep submitting. No event is lost or doubled:
every result is accepted or duplicate, and the journal holds exactly one row per key."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections import Counter
from pathlib import Path

import httpx
import pytest

from arena.journal.sqlite import journal_path
from arena_client import ArenaClient, AuthenticationError, ConnectionFailed, SubmitResult, SubmitStatus
from loadtest.config_toml import write_config
from support.server import ChildServer, make_config, now_ms, token_for, until

PRODUCERS = 50
EVENTS_EACH = 60
VALUE = 3


def _journal(data_dir: Path) -> list[tuple[str, int]]:
    db = sqlite3.connect(f"file:{journal_path(data_dir, 'b')}?mode=ro", uri=True)
    try:
        return list(db.execute("SELECT idempotency_key, value FROM score_event"))
    finally:
        db.close()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_a_restart_mid_stream_loses_and_doubles_nothing(tmp_path: Path, stop: signal.Signals) -> None:
    data_dir = tmp_path / "data"
    config = make_config(data_dir, {"b": {"aggregation": "sum", "periods": ["alltime", "daily"]}})
    server = ChildServer(write_config(config, tmp_path / "config.toml"))
    await asyncio.to_thread(server.start)
    port = server.port
    results: list[SubmitResult] = []
    acked = asyncio.Event()

    async def produce(client: ArenaClient, p: int) -> None:
        for i in range(EVENTS_EACH):
            key = f"p{p}-{i}" if p % 2 else None  # even producers let the client make the keys
            result = await client.submit("b", f"m{p}", VALUE, idempotency_key=key)
            results.append(result)
            if len(results) >= PRODUCERS * EVENTS_EACH // 5:
                acked.set()

    try:
        async with ArenaClient(server.url, token_for("gs"), reconnect_base=0.02, reconnect_max=0.5,
                               give_up_after=60, max_batch=8, linger=0.001) as client:
            producers = [asyncio.create_task(produce(client, p)) for p in range(PRODUCERS)]
            await acked.wait()
            server.signal(stop)
            code = await asyncio.to_thread(server.wait)
            assert code == (0 if stop is signal.SIGTERM else -signal.SIGKILL)
            down_at = len(results)
            await asyncio.to_thread(server.start, 30.0, port)  # same data dir, same port
            await asyncio.gather(*producers)
            stats = client.stats
        async with httpx.AsyncClient(base_url=server.url) as http:
            alltime = (await http.get("/v1/boards/b/alltime/top", params={"limit": 1000})).json()
    finally:
        server.kill()

    assert down_at < PRODUCERS * EVENTS_EACH, "the stream ended before the restart"
    assert stats.connections >= 2 and stats.events_resent + stats.events_sent >= PRODUCERS * EVENTS_EACH
    tally = Counter(r.status for r in results)
    assert len(results) == PRODUCERS * EVENTS_EACH
    assert tally[SubmitStatus.ACCEPTED] + tally[SubmitStatus.DUPLICATE] == PRODUCERS * EVENTS_EACH, tally
    journal = _journal(data_dir)
    keys = Counter(k for k, _ in journal)
    assert len(journal) == PRODUCERS * EVENTS_EACH
    assert set(keys) == {r.idempotency_key for r in results}  # generated keys survived the resends
    assert {f"p{p}-{i}" for p in range(1, PRODUCERS, 2) for i in range(EVENTS_EACH)} <= set(keys)
    assert max(keys.values()) == 1
    # and the standings applied each event once
    assert {e["member"]: e["score"] for e in alltime["entries"]} == {f"m{p}": VALUE * EVENTS_EACH for p in range(PRODUCERS)}


async def test_queries_waiting_during_a_restart_are_answered_after_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    config = make_config(data_dir, {"b": {}})
    server = ChildServer(write_config(config, tmp_path / "config.toml"))
    await asyncio.to_thread(server.start)
    try:
        async with ArenaClient(server.url, token_for("gs"), reconnect_base=0.02, reconnect_max=0.3) as client:
            await client.submit("b", "a", 1, occurred_at=now_ms())
            server.signal(signal.SIGTERM)
            await asyncio.to_thread(server.wait)
            await until(lambda: not client.connected, "the client to see the 1012 close")
            query = asyncio.ensure_future(client.top("b", "alltime"))
            submit = asyncio.ensure_future(client.submit("b", "c", 2))
            done, _ = await asyncio.wait([query, submit], timeout=0.2)  # reconnects fail meanwhile
            assert not done  # they wait for the server, not fail
            await asyncio.to_thread(server.start, 30.0, server.port)
            assert (await submit).status is SubmitStatus.ACCEPTED
            top = await query
            assert top.size >= 1
    finally:
        server.kill()


async def test_a_server_gone_for_give_up_after_fails_the_waiting_calls_with_their_keys(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = ChildServer(write_config(make_config(data_dir, {"b": {}}), tmp_path / "config.toml"))
    await asyncio.to_thread(server.start)
    try:
        async with ArenaClient(server.url, token_for("gs"), give_up_after=0.5, reconnect_base=0.02,
                               reconnect_max=0.1) as client:
            assert (await client.submit("b", "a", 1)).recorded
            server.signal(signal.SIGTERM)
            await asyncio.to_thread(server.wait)
            with pytest.raises(ConnectionFailed) as failed:
                await client.submit("b", "a", 2, idempotency_key="stranded")
            assert failed.value.idempotency_keys == ("stranded",)
            await asyncio.to_thread(server.start, 30.0, server.port)
            # the client tries again when there is work: resending the stranded key is safe
            again = await client.submit("b", "a", 2, idempotency_key="stranded", occurred_at=now_ms())
            assert again.recorded
    finally:
        server.kill()


async def test_a_token_refused_on_reconnect_fails_every_call_with_authentication_error(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    path = write_config(make_config(data_dir, {"b": {}}), tmp_path / "config.toml")
    server = ChildServer(path)
    await asyncio.to_thread(server.start)
    try:
        client = await ArenaClient(server.url, token_for("gs"), reconnect_base=0.02).connect()
        assert (await client.submit("b", "a", 1)).recorded
        server.signal(signal.SIGTERM)
        await asyncio.to_thread(server.wait)
        write_config(make_config(data_dir, {"b": {}}, {"other": ["*"]}), path)  # gs's token is revoked
        pending = asyncio.ensure_future(client.submit("b", "a", 2))
        await asyncio.to_thread(server.start, 30.0, server.port)
        with pytest.raises(AuthenticationError):
            await pending
        with pytest.raises(AuthenticationError):
            await client.submit("b", "a", 3)
        await client.close()
    finally:
        server.kill()
