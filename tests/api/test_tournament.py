"""A tournament board (a one-off custom period, `periods = []`) through a real server on both
backends: events in its window accepted, before and after it `outside_window`, closed at end +
grace (`period_closed`), its table answered by period_id (top, digest, periods, /v1/boards) and
followed by a live view, the
same digest after a restart from the snapshot, and `arena rebuild` printing it; and a season of
every_hours windows retained by `keep_closed` alike on the server, after a restart and in a rebuild."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.config import JournalSettings, load_config
from arena.engine.times import format_ms
from support.arena_cli import rebuild_digests, run_arena
from support.faults import assert_standings_match_rebuild, server_digests, write_config
from support.server import Client, InProcessServer, event, now_ms, statuses, token_for, until

MIN = 60_000
HOUR = 60 * MIN


def tournament(start: int) -> dict[str, Any]:
    return {"aggregation": "best", "periods": [], "timezone": "Europe/Berlin",
            "custom_periods": {"finals": {"start": format_ms(start), "end": format_ms(start + 6 * HOUR)}}}


async def get(http: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    answer = await http.get(path, params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def pin(http: httpx.AsyncClient, now: int) -> None:
    assert (await http.post("/v1/_test/clock", json={"now_ms": now})).status_code == 200


async def test_a_tournament_takes_its_window_closes_and_survives_a_restart_and_a_rebuild(
    tmp_path: Path, served_journal: JournalSettings, caplog: pytest.LogCaptureFixture
) -> None:
    start = now_ms() // HOUR * HOUR - 2 * 24 * HOUR  # over before the wall clock: a restart finds it closed
    end = start + 6 * HOUR
    period_id = format_ms(start)[:13] + "Z"
    config_path = write_config(tmp_path, {"cup": tournament(start)}, journal=served_journal)
    config = load_config(config_path)

    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            await pin(http, start - 10_000)
            upcoming = await get(http, "/v1/boards/cup/finals/top")  # before it: its window, open and empty
            assert (upcoming["period_id"], upcoming["closed"], upcoming["size"]) == (period_id, False, 0)
            assert statuses(await client.submit([event("cup", "early", 1, start - 1, "k-early")])) == ["rejected:outside_window"]
            await pin(http, start + HOUR)
            sent = [event("cup", "ann", 30, start, "k1"), event("cup", "bob", 50, start + MIN, "k2"),
                    event("cup", "cy", 40, start + 2 * MIN, "k3")]
            watched = await client.request({"op": "subscribe", "view": {"op": "top", "board": "cup", "period": "finals", "limit": 2}})
            assert watched["op"] == "subscribed", watched
            assert statuses(await client.submit(sent)) == ["accepted"] * 3
            await until(lambda: any(u.get("sub") == watched["sub"] and u.get("size") == 3 for u in client.unmatched),
                        "the live view of the tournament to show its three members", 10)
            before_end = await get(http, "/v1/boards/cup/finals/top")
            assert (before_end["period_id"], before_end["closed"], before_end["size"]) == (period_id, False, 3)

            await pin(http, end + 30_000)  # in the grace
            (late, grace) = await client.submit([event("cup", "dan", 99, end, "k-after"), event("cup", "dan", 60, end - 1, "k4")])
            assert (late["status"], late["reason"]) == ("rejected", "outside_window") and late["message"]
            assert grace["status"] == "accepted"
            await pin(http, end + MIN)  # end + close_grace_seconds (60)
            assert statuses(await client.submit([event("cup", "eve", 70, end - 1, "k5")])) == ["rejected:period_closed"]
        finally:
            await client.close()

        top = await get(http, "/v1/boards/cup/finals/top", period_id=period_id)
        assert [(e["member"], e["score"]) for e in top["entries"]] == [("dan", 60), ("bob", 50), ("cy", 40), ("ann", 30)]
        assert (top["start"], top["end"], top["closed"]) == (format_ms(start), format_ms(end), True)
        digest = await get(http, "/v1/boards/cup/finals/digest", period_id=period_id)
        assert await get(http, "/v1/boards/cup/finals/digest") == digest  # without period_id: the last window
        listed = (await get(http, "/v1/boards/cup/finals/periods"))["periods"]
        assert [(p["period_id"], p["closed"], p["size"]) for p in listed] == [(period_id, True, 4)]
        (board,) = (await get(http, "/v1/boards"))["boards"]
        assert [(p["period"], p["period_id"], p["size"]) for p in board["periods"]] == [("finals", period_id, 4)]
        missing = await http.get("/v1/boards/cup/daily/top")
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "unknown_period")
        for wrong in ("2026-01-01T00Z", "2026-01-01", "finals"):
            answer = await http.get("/v1/boards/cup/finals/top", params={"period_id": wrong})
            assert (answer.status_code, answer.json()["error"]["code"]) == (404, "unknown_period")

    with caplog.at_level(logging.INFO, logger="arena"):
        async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
            assert await get(http, "/v1/boards/cup/finals/digest", period_id=period_id) == digest
            assert await get(http, "/v1/boards/cup/finals/digest") == digest
    assert "board cup: started from the snapshot" in caplog.text

    code, out, err = await run_arena("rebuild", "--config", config_path)
    assert code == 0, err
    rebuilt = rebuild_digests(out)[("cup", "finals", period_id)]
    assert (rebuilt.sha256, rebuilt.members, rebuilt.events) == (digest["sha256"], 4, 4)


async def test_an_every_hours_season_keeps_its_windows_across_a_restart_and_a_rebuild(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    anchor = now_ms() // HOUR * HOUR - 8 * HOUR
    board = {"aggregation": "sum", "periods": ["yearly"], "keep_closed": 2,
             "custom_periods": {"shift": {"every_hours": 2, "anchor": format_ms(anchor)}}}
    periods = {"season": ["yearly", "shift"]}
    config_path = write_config(tmp_path, {"season": board}, journal=served_journal)
    config = load_config(config_path)

    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            for i in range(4):  # one batch in each past window, while it is open
                at = anchor + i * 2 * HOUR + 30 * MIN
                await pin(http, at)
                sent = [event("season", f"m{j}", i + j, at, f"k{i}-{j}") for j in range(3)]
                assert statuses(await client.submit(sent)) == ["accepted"] * 3
        finally:
            await client.close()
        assert (await http.post("/v1/_test/clock", json={"now_ms": None})).status_code == 200
        listed = (await get(http, "/v1/boards/season/shift/periods"))["periods"]
        expected = [format_ms(anchor + k * 2 * HOUR)[:13] + "Z" for k in (4, 3, 2)]
        assert [(p["period_id"], p["closed"]) for p in listed] == [(expected[0], False), (expected[1], True), (expected[2], True)]
        gone = await http.get("/v1/boards/season/shift/top", params={"period_id": format_ms(anchor + 2 * HOUR)[:13] + "Z"})
        assert (gone.status_code, gone.json()["error"]["code"]) == (404, "period_not_retained")
        before = await asyncio.to_thread(server_digests, server.url, periods)

    async with InProcessServer(config) as server:
        assert await asyncio.to_thread(server_digests, server.url, periods) == before
        await asyncio.to_thread(assert_standings_match_rebuild, server.url, config_path, periods)
