"""Every `unavailable` answer is counted in `arena_events_total` by reason, whichever path gave it:
a failed board's submit, a board failed while frames waited in its mailbox, and the batch an actor
crash took down (all three were missing from /metrics)."""

from __future__ import annotations

from pathlib import Path

import httpx

from arena.board.state import BoardState
from support.faults import parse_metric
from support.server import Client, InProcessServer, event, make_config, now_ms, statuses, token_for, until

BOARDS = {"good": {"periods": ["alltime"]}, "bad": {"periods": ["alltime"]}}



async def _unavailable(http: httpx.AsyncClient, board: str) -> float:
    text = (await http.get("/metrics")).text
    return parse_metric(text, "arena_events_total", board=board, status="rejected", reason="unavailable")


async def test_unavailable_answers_are_counted_by_reason_on_every_path(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "bad.journal.sqlite").write_bytes(b"not a journal" * 100)  # fails its board at start
    config = make_config(data, BOARDS, max_restarts=0, idle_unload_seconds=0)  # good loads at start, bad fails
    async with InProcessServer(config, wait_ready=False) as server, httpx.AsyncClient(base_url=server.url) as http:
        arena = server.arena
        assert arena is not None
        await until(lambda: arena.boards["good"].state is BoardState.SERVING, "board good to load")
        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            # a failed board's submit
            results = await client.submit([event("bad", "m", 1, now_ms(), f"bad{i}") for i in range(3)])
            assert statuses(results) == ["rejected:unavailable"] * 3
            assert await _unavailable(http, "bad") == 3
            # the batch a crash took down; with max_restarts = 0 the crash also fails the board, and
            # the frame behind it is answered by BoardHandle.fail (queued) or by a failed board's submit
            assert (await http.post("/v1/_test/boards/good/crash", json={"times": 1})).status_code == 200
            crashed = client.send({"op": "submit", "events": [event("good", "m", 1, now_ms(), f"good{i}") for i in range(2)]})
            queued = client.send({"op": "submit", "events": [event("good", "m", 1, now_ms(), "good-queued")]})
            answers = [await crashed, await queued]
        finally:
            await client.close()
        assert [statuses(a["results"]) for a in answers] == [["rejected:unavailable"] * 2, ["rejected:unavailable"]]
        assert await _unavailable(http, "good") == 3
        assert (await http.get("/v1/boards/good/alltime/top")).status_code == 503
