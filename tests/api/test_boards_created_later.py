"""A board created through the admin API after the server started is served like a config board
by what was set up at the start: a WebSocket opened before it existed stops reading while its
mailbox is full (backpressure), and on sqlite its journal's WAL is measured. Through a real server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.config import JournalSettings
from support.faults import parse_metric
from support.server import ADMIN_TOKEN, Client, InProcessServer, event, make_config, now_ms, token_for, until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CUP = {"aggregation": "sum", "periods": ["alltime"]}
MAILBOX = 10


def config(tmp_path: Path, journal: JournalSettings, **settings: Any) -> Any:
    return make_config(tmp_path, {"config_board": {"periods": ["alltime"]}}, {"gs": ["cup-*"]}, journal=journal, **settings)


async def test_a_connection_opened_before_a_board_was_created_waits_for_room_in_its_mailbox(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    # on demand, so that holding the new board's journal open keeps its events in its mailbox
    settings = {"idle_unload_seconds": 600, "mailbox_events": MAILBOX}
    async with InProcessServer(config(tmp_path, served_journal, **settings)) as server, \
            httpx.AsyncClient(base_url=server.url) as http:
        client = await Client.connect(server.ws_url, token_for("gs"))  # before cup-1 exists
        try:
            assert (await http.put("/v1/boards/cup-1", json=CUP, headers=ADMIN)).status_code == 201
            assert (await http.post("/v1/_test/boards/cup-1/open", json={"held": True})).status_code == 200
            now = now_ms()

            async def depth() -> float:
                return parse_metric((await http.get("/metrics")).text, "arena_mailbox_events", board="cup-1")

            async def full() -> bool:
                return await depth() == MAILBOX

            try:
                first = client.send({"op": "submit", "events": [event("cup-1", f"m{i}", 1, now, f"a{i}") for i in range(MAILBOX)]})
                await until(full, "the first frame to fill cup-1's mailbox")
                second = client.send({"op": "submit", "events": [event("cup-1", "m", 1, now, "b0")]})
                pong = client.send({"op": "ping"})
                with pytest.raises(TimeoutError):  # the connection reads nothing while the mailbox is full
                    await asyncio.wait_for(asyncio.shield(pong), 0.5)
                assert await depth() == MAILBOX
            finally:
                assert (await http.post("/v1/_test/boards/cup-1/open", json={"held": False})).status_code == 200
            assert (await asyncio.wait_for(pong, 10))["op"] == "pong"
            for answer in (await asyncio.wait_for(first, 10), await asyncio.wait_for(second, 10)):
                assert answer["op"] == "ack" and {r["status"] for r in answer["results"]} == {"accepted"}
            assert (await http.get("/v1/boards/cup-1/alltime/top")).json()["size"] == MAILBOX + 1
        finally:
            await client.close()


async def test_the_wal_of_a_board_created_at_runtime_is_measured(tmp_path: Path) -> None:
    async with InProcessServer(config(tmp_path, JournalSettings())) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.put("/v1/boards/cup-1", json=CUP, headers=ADMIN)).status_code == 201
        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            assert [r["status"] for r in await client.submit([event("cup-1", "ann", 3, now_ms(), "k1")])] == ["accepted"]
        finally:
            await client.close()
        text = (await http.get("/metrics")).text
        assert 'arena_journal_wal_bytes{board="config_board"}' in text
        assert parse_metric(text, "arena_journal_wal_bytes", board="cup-1") > 0
