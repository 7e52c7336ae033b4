"""Start, restart and stop: identical standings after a restart, a graceful SIGTERM that loses
no acked event, current tables answering before alltime, the data-dir lock, config errors."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

import arena.board.actor
from arena.config import load_config
from arena.engine.events import Event
from arena.engine.periods import PeriodKind
from arena.engine.records import ScoreRecord
from arena.engine.spec import BoardSpec
from arena.journal.sqlite import SqliteJournal, journal_path
from support import arena_cli
from support.server import ChildServer, Client, InProcessServer, event, make_config, now_ms, sha, statuses, token_for, until

DEV_CONFIG = """
[server]
host = "127.0.0.1"
port = 8080
data_dir = "data"
max_in_flight_frames = 16
drain_seconds = 0

[[servers]]
id = "gs"
token_sha256 = "{sha}"
boards = ["*"]

[boards.b]
aggregation = "sum"
periods = ["alltime", "daily", "hourly"]
"""


def _child(tmp_path: Path) -> ChildServer:
    config = tmp_path / "config.toml"
    config.write_text(DEV_CONFIG.format(sha=sha(token_for("gs"))))
    return ChildServer(config)


async def _digests(url: str, board: str, periods: Sequence[str]) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url) as http:
        return {p: (await http.get(f"/v1/boards/{board}/{p}/digest")).json() for p in periods}


async def test_restarting_the_server_rebuilds_identical_standings(tmp_path: Path) -> None:
    boards = {"b": {"aggregation": "latest", "periods": ["alltime", "daily", "weekly", "monthly", "hourly"]}}
    config = make_config(tmp_path, boards)
    now = now_ms()
    async with InProcessServer(config) as server:
        client = await Client.connect(server.ws_url, token_for("gs"))
        for frame in range(20):
            await client.submit([event("b", f"m{i % 37}", (i * 7919) % 1000, now - i * 1000, f"k{frame}-{i}") for i in range(50)])
        await client.close()
        before = await _digests(server.url, "b", boards["b"]["periods"])
    async with InProcessServer(config) as server:
        after = await _digests(server.url, "b", boards["b"]["periods"])
    assert after == before
    assert before["alltime"]["size"] == 37 and before["alltime"]["seq"] >= 1000


async def test_sigterm_with_frames_in_flight_loses_no_acked_event(tmp_path: Path) -> None:
    server = _child(tmp_path)
    server.start()
    now = now_ms()
    acked: set[str] = set()
    sent: list[str] = []
    try:
        client = await Client.connect(server.ws_url, token_for("gs"))
        futures = []
        for frame in range(300):
            keys = [f"f{frame}-{i}" for i in range(20)]
            sent += keys
            futures.append((keys, client.send({"op": "submit", "events": [event("b", f"m{i}", 1, now, k) for i, k in enumerate(keys)]})))
            if frame == 100:
                await futures[10][1]  # acks are flowing and many frames are in flight: stop now
                server.signal(signal.SIGTERM)
            await asyncio.sleep(0)  # one turn a frame: they go out while the server stops
        for _keys, future in futures:
            try:
                answer = await asyncio.wait_for(future, 10)
            except (ConnectionError, asyncio.TimeoutError):
                continue
            acked |= {r["idempotency_key"] for r in answer["results"] if r["status"] == "accepted"}
        assert server.wait() == 0
        close_code = client.ws.close_code
        await client.close()
    finally:
        server.kill()
    assert acked, "nothing was acked before the shutdown"
    assert close_code == 1012
    db = sqlite3.connect(f"file:{tmp_path / 'data' / 'b.journal.sqlite'}?mode=ro", uri=True)
    journaled = {k for (k,) in db.execute("SELECT idempotency_key FROM score_event")}
    db.close()
    assert acked <= journaled
    assert "arena stopped" in server.log()


async def test_a_server_stopping_while_a_board_loads_answers_its_queued_frames_unavailable(
    tmp_path: Path, monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def endless_load(*args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    monkeypatch.setattr(arena.board.actor, "load", endless_load)
    server = InProcessServer(make_config(tmp_path, {"b": {}}), wait_ready=False)
    await server.start()
    assert server.arena is not None
    mailbox = server.arena.board("b").mailbox
    client = await Client.connect(server.ws_url, token_for("gs"))
    answer = client.send({"op": "submit", "events": [event("b", "m", 1, now_ms(), "queued")]})
    await until(lambda: mailbox.depth == 1, "the frame to wait behind the replay")
    with caplog.at_level(logging.INFO, logger="arena.board"):
        await asyncio.wait_for(server.stop(), 10)  # it waited for the replay to end: forever, here
    assert "board b: replay stopped, the server is stopping" in caplog.messages
    assert statuses((await answer)["results"]) == ["rejected:unavailable"]  # retryable: sent again elsewhere
    assert client.ws.close_code == 1012
    assert server.arena.board("b").failure == "server stopped while the board was loading"
    await client.close()


async def test_current_tables_answer_before_alltime_has_loaded(tmp_path: Path) -> None:
    spec = BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY))
    now = now_ms()
    journal = await SqliteJournal.open(journal_path(tmp_path, "b"), spec)
    old = now - 40 * 86_400_000  # far outside every current window: only alltime replays them
    seq = 0
    for _chunk in range(30):
        records = []
        for i in range(10_000):
            seq += 1
            records.append(ScoreRecord(seq, Event("b", f"m{i}", i, old, f"k{seq}"), old, "gs"))
        await journal.append(records)
    seq += 1
    await journal.append([ScoreRecord(seq, Event("b", "today", 1, now, "today"), now, "gs")])
    await journal.close()
    # a start's replay (idle_unload_seconds = 0: the start loads the board)
    async with InProcessServer(make_config(tmp_path, {"b": spec}, idle_unload_seconds=0), wait_ready=False) as server:
        async with httpx.AsyncClient(base_url=server.url) as http:
            seen: list[tuple[int, int]] = []
            answers: list[httpx.Response] = []

            async def alltime_loaded() -> bool:
                daily = await http.get("/v1/boards/b/daily/top")
                alltime = await http.get("/v1/boards/b/alltime/top")
                seen.append((daily.status_code, alltime.status_code))
                answers[:] = [daily, alltime]
                if alltime.status_code == 200:
                    return True
                assert alltime.json()["error"]["code"] == "not_ready"
                return False

            await until(alltime_loaded, "alltime to load")
            daily, alltime = answers
            assert (200, 503) in seen
            assert alltime.json()["size"] == 10_001
            assert daily.json()["entries"][0]["member"] == "today"


def test_a_second_server_on_the_same_data_dir_refuses_to_start(tmp_path: Path) -> None:
    first = _child(tmp_path)
    first.start()
    try:
        second = arena_cli.arena("serve", "--config", first.config_path, "--port", "0", timeout=30)
        assert second.returncode == 2
        assert "in use by another arena serve" in second.stderr
    finally:
        first.kill()


def test_a_changed_board_definition_stops_start_up_with_one_clear_line(tmp_path: Path) -> None:
    server = _child(tmp_path)
    server.start()
    try:
        async def one() -> None:
            client = await Client.connect(server.ws_url, token_for("gs"))
            assert statuses(await client.submit([event("b", "a", 1, now_ms(), "x")])) == ["accepted"]
            await client.close()
        asyncio.run(one())
    finally:
        server.signal(signal.SIGTERM)
        server.wait()
    server.config_path.write_text(server.config_path.read_text().replace('aggregation = "sum"', 'aggregation = "best"'))
    run = arena_cli.arena("serve", "--config", server.config_path, "--port", "0", timeout=30)
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.startswith("arena serve:")]
    assert len(lines) == 1 and "aggregation: 'sum' -> 'best'" in lines[0] and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('aggregation = "sum"', 'aggregation = "max"'), "boards.b.aggregation: must be one of best, sum, latest"),
        (("max_in_flight_frames = 16", "max_in_flight_frames = 0"), "server.max_in_flight_frames: must be >= 1"),
        (("max_in_flight_frames = 16", "colour = 1"), "server.colour: unknown key"),
        (('periods = ["alltime", "daily", "hourly"]', 'periods = ["fortnightly"]'), "boards.b.periods"),
        (('boards = ["*"]', 'boards = ["cup-*-x"]'), "servers[0].boards: 'cup-*-x' is neither a board name nor a pattern"),
        (("max_in_flight_frames = 16", "ping_interval_seconds = nan"), "server.ping_interval_seconds: must be a finite number"),
        (('boards = ["*"]', 'boards = ["*"]\n[[servers]]\nid = "gs2"\ntoken_sha256 = "{sha}"'),
         "servers[1].token_sha256: the same token as servers[0]"),
        (('boards = ["*"]', 'boards = ["*"]\n[[admins]]\nid = "ops"\ntoken_sha256 = "{sha}"'),
         "admins[0].token_sha256: the same token as servers[0]"),
    ],
)
def test_a_config_error_names_the_key(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    path = tmp_path / "config.toml"
    text = DEV_CONFIG.format(sha=sha(token_for("gs")))
    assert edit[0] in text
    path.write_text(text.replace(edit[0], edit[1].format(sha=sha(token_for("gs")))))
    run = arena_cli.arena("serve", "--config", path, timeout=30)
    assert run.returncode == 2
    assert message in run.stderr and "Traceback" not in run.stderr


async def test_the_repository_config_is_a_working_default_that_warns_of_its_public_tokens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_config(Path(__file__).resolve().parents[2] / "config.toml")
    assert config.servers and config.admins and config.boards
    assert config.servers[0].token_sha256 == sha("arena-dev-token") and config.admins[0].token_sha256 == sha("arena-dev-admin")
    config = dataclasses.replace(config, server=dataclasses.replace(config.server, data_dir=tmp_path))
    with caplog.at_level(logging.WARNING, logger="arena"):
        async with InProcessServer(config, fault_injection=False):
            pass
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "game server 'dev-server' uses the public development token; do not expose this server" in warnings
    assert "admin 'ops' uses the public development token; do not expose this server" in warnings


async def test_the_handshake_gets_503_past_max_connections(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"b": {}}, max_connections=2)
    async with InProcessServer(config) as server:
        clients = [await Client.connect(server.ws_url, token_for("gs")) for _ in range(2)]
        with pytest.raises(websockets.InvalidStatus) as refused:
            await Client.connect(server.ws_url, token_for("gs"))
        assert (refused.value.response.status_code, refused.value.response.headers["Retry-After"]) == (503, "1")
        await clients[0].close()
        running = server.arena
        assert running is not None
        await until(lambda: running.connections < 2, "the server to see the close")
        third = await Client.connect(server.ws_url, token_for("gs"))
        for c in (clients[1], third):
            await c.close()
