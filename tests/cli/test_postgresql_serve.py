"""`arena serve` on the PostgreSQL journal, as a child process: events over the WebSocket, a
restart with the same digests, `arena rebuild` from the same config printing them too; and a
password in the journal URL that never shows, neither in a start-up failure nor in a DEBUG log."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.config import JournalSettings
from loadtest.process import free_port
from support.arena_cli import arena
from support.faults import assert_standings_match_rebuild, server_digests, write_config
from support.postgres import EmbeddedPostgres
from support.server import ADMIN_TOKEN, ChildServer, Client, event, now_ms, statuses, token_for

BOARDS: dict[str, dict[str, Any]] = {
    "best": {"aggregation": "best", "periods": ["alltime", "daily"]},
    "total": {"aggregation": "sum", "periods": ["alltime", "daily"], "max_value": 2**53 - 1},
}
PERIODS = {name: body["periods"] for name, body in BOARDS.items()}
PASSWORD = "pw-Zq8x3Lk"


def events(now: int) -> list[dict[str, Any]]:
    """Events whose keys, members and meta only an exact store keeps as they are."""
    return [
        event("best", "zoë 😀", 50, now - 1000, "k\x00nul", meta={"note": "a\x00b", "n": 2**64 - 1}),
        event("best", "\uffff", 70, now - 900, "k-ffff"),
        event("best", "\U0001f600", 70, now - 900, "k-1f600"),
        event("total", "whale", 2**53 - 1, now - 800, "t1"),
        event("total", "whale", 2**53 - 1, now - 700, "t2"),
        event("total", "a" * 128, 1, now - 600, "t3"),
    ]


def with_password(url: str) -> str:
    """The session server trusts every login: a password in the URL is sent and ignored."""
    return url.replace("postgres:@", f"postgres:{PASSWORD}@", 1)


async def test_serve_restart_and_rebuild_on_postgresql_give_the_same_digests(
    tmp_path: Path, pg_journal: JournalSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pg_journal.url is not None
    # the URL from the environment, with a password, and a DEBUG log that must not show it
    config = write_config(tmp_path, BOARDS, journal=JournalSettings("postgresql", None, pg_journal.schema))
    monkeypatch.setenv("ARENA_JOURNAL_URL", with_password(pg_journal.url))
    server = ChildServer(config, log_level="DEBUG")
    await asyncio.to_thread(server.start)
    try:
        sent = events(now_ms())
        client = await Client.connect(server.ws_url, token_for("gs"))
        assert statuses(await client.submit(sent)) == ["accepted"] * len(sent)
        assert statuses(await client.submit(sent)) == ["duplicate"] * len(sent)
        await client.close()
        before = server_digests(server.url, PERIODS)
        assert before[("total", "alltime", "alltime")][1] == 2

        assert await asyncio.to_thread(server.stop) == 0
        await asyncio.to_thread(server.start)
        assert server_digests(server.url, PERIODS) == before
        client = await Client.connect(server.ws_url, token_for("gs"))
        assert statuses(await client.submit(sent)) == ["duplicate"] * len(sent)  # the keys, from the store
        await client.close()
        async with httpx.AsyncClient(base_url=server.url) as http:
            audit = await http.get("/v1/boards/best/events", params={"member": "zoë 😀"},
                                   headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert [(e["idempotency_key"], e["meta"]) for e in audit.json()["events"]] == [("k\x00nul", sent[0]["meta"])]

        # `arena rebuild` reads the same config (and the URL from the environment)
        await asyncio.to_thread(assert_standings_match_rebuild, server.url, config, PERIODS)
    finally:
        server.kill()
    assert "board best ready" in server.log()
    assert PASSWORD not in server.log()


def test_an_unreachable_server_stops_the_start_with_one_line_without_the_password(tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql://arena:{PASSWORD}@127.0.0.1:{port}/arena"
    config = write_config(tmp_path, BOARDS, journal=JournalSettings("postgresql", url, "arena"))
    done = arena("--log-level", "DEBUG", "serve", "--config", config, "--port", str(free_port()), timeout=60)
    assert done.returncode == 2
    [line] = [line for line in done.stderr.splitlines() if line.startswith("arena serve:")]
    assert line.startswith(f"arena serve: cannot connect to PostgreSQL at postgresql://arena@127.0.0.1:{port}/arena schema arena: ")
    assert PASSWORD not in done.stdout + done.stderr


async def test_a_refused_login_stops_the_start_with_one_line_without_the_password(
    tmp_path: Path, own_postgres: EmbeddedPostgres
) -> None:
    url = await own_postgres.add_login("arena_login", PASSWORD)
    config = write_config(tmp_path, BOARDS, journal=JournalSettings("postgresql", url.replace(PASSWORD, "x" + PASSWORD), "arena"))
    done = await asyncio.to_thread(arena, "--log-level", "DEBUG", "serve", "--config", config, "--port", str(free_port()))
    assert done.returncode == 2
    [line] = [line for line in done.stderr.splitlines() if line.startswith("arena serve:")]
    assert line.startswith("arena serve: cannot connect to PostgreSQL at postgresql://arena_login@/postgres?host=")
    assert 'password authentication failed for user "arena_login"' in line
    assert PASSWORD not in done.stdout + done.stderr
