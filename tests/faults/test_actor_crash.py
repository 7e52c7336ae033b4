"""Injected actor crashes: the batch in flight is answered `unavailable`, the board restarts from
its journal with the same standings, other boards keep serving, and past the restart intensity
the board is marked failed instead of looping."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

import arena.board.actor
import arena.board.load
from arena.board.state import BoardState
from support.faults import journaled
from support.server import Client, InProcessServer, event, make_config, now_ms, statuses, token_for, until

BOARDS: dict[str, dict[str, Any]] = {
    "a": {"aggregation": "sum", "periods": ["alltime"]},
    "b": {"aggregation": "sum", "periods": ["alltime"]},
}



async def _until_ready(server: InProcessServer, board: str, runs: int) -> None:
    assert server.arena is not None
    supervisor = server.arena.supervisor
    handle = server.arena.boards[board]
    await until(lambda: supervisor.runs[board] == runs and handle.state is BoardState.SERVING, f"run {runs} of {board}")


async def _crash(http: httpx.AsyncClient, board: str, times: int) -> None:
    answer = await http.post(f"/v1/_test/boards/{board}/crash", json={"times": times})
    assert answer.status_code == 200, answer.text


async def test_crashed_board_restarts_from_its_journal_and_fails_the_batch_in_flight(tmp_path: Path) -> None:
    # every board loaded at start: b's one run shows that a's crash leaves it alone
    config = make_config(tmp_path, BOARDS, max_restarts=2, restart_window_seconds=3600, idle_unload_seconds=0)
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert server.arena is not None
        runs = server.arena.supervisor.runs
        client = await Client.connect(server.ws_url, token_for("gs"))
        now = now_ms()
        seed = [event("a", f"m{i % 7}", i, now - i, f"seed-{i}") for i in range(50)]
        assert statuses(await client.submit(seed)) == ["accepted"] * 50
        before = (await http.get("/v1/boards/a/alltime/digest")).json()
        assert runs == {"a": 1, "b": 1}

        await _crash(http, "a", 1)
        results = await client.submit([event("a", "x", 5, now, "crash-1"), event("b", "y", 5, now, "b-1")])
        assert statuses(results) == ["rejected:unavailable", "accepted"]
        await _until_ready(server, "a", 2)
        after = (await http.get("/v1/boards/a/alltime/digest")).json()
        assert (after["sha256"], after["seq"], after["size"]) == (before["sha256"], before["seq"], before["size"])
        assert "crash-1" not in journaled(tmp_path, "a")
        assert statuses(await client.submit([event("a", "x", 5, now, "crash-1")])) == ["accepted"]
        assert runs == {"a": 2, "b": 1}
        await client.close()


async def test_pipelined_frames_around_a_crash_are_all_or_nothing(tmp_path: Path) -> None:
    config = make_config(tmp_path, BOARDS, max_restarts=5, restart_window_seconds=3600)
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert server.arena is not None
        client = await Client.connect(server.ws_url, token_for("gs"))
        now = now_ms()
        await _crash(http, "a", 1)

        def frames(wave: str) -> list[list[dict[str, object]]]:
            return [[event("a", f"m{f}", f, now, f"{wave}{f}-e{i}") for i in range(20)] for f in range(30)]

        # The first wave meets the crash (however the actor drains it); the second is pipelined
        # the moment the first answer arrives, so it queues while the board restarts.
        first = frames("w1-")
        first_answers = [client.send({"op": "submit", "events": evs}) for evs in first]
        await first_answers[0]
        second = frames("w2-")
        answers = await asyncio.gather(*first_answers, *(client.send({"op": "submit", "events": evs}) for evs in second))
        journal = journaled(tmp_path, "a")
        outcomes = []
        for evs, answer in zip(first + second, answers, strict=True):
            got = set(statuses(answer["results"]))
            assert got in ({"accepted"}, {"rejected:unavailable"}), got
            outcomes.append(got.pop())
            for e in evs:
                assert (e["idempotency_key"] in journal) == (outcomes[-1] == "accepted")
        assert outcomes[0] == "rejected:unavailable"
        assert outcomes[30:] == ["accepted"] * 30
        assert server.arena.supervisor.runs["a"] == 2
        await client.close()


async def test_past_the_restart_intensity_the_board_is_failed_not_looping(tmp_path: Path) -> None:
    # every board loaded at start: b's one run shows that a's crashes leave it alone
    config = make_config(tmp_path, BOARDS, max_restarts=2, restart_window_seconds=3600, idle_unload_seconds=0)
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert server.arena is not None
        supervisor = server.arena.supervisor
        client = await Client.connect(server.ws_url, token_for("gs"))
        now = now_ms()
        assert statuses(await client.submit([event("a", "m", 1, now, "ok-1")])) == ["accepted"]
        await _crash(http, "a", 10)
        for n in range(3):  # crash 1 and 2 are restarted (max_restarts = 2), crash 3 fails the board
            results = await client.submit([event("a", "m", 1, now, f"crash-{n}")])
            assert statuses(results) == ["rejected:unavailable"]
            if n < 2:
                await _until_ready(server, "a", n + 2)
        await until(lambda: supervisor.handles["a"].state is BoardState.FAILED, "board a to fail")
        # Failed, not looping: more traffic neither restarts nor reaches the journal.
        for n in range(5):
            assert statuses(await client.submit([event("a", "m", 1, now, f"late-{n}")])) == ["rejected:unavailable"]
        assert supervisor.runs == {"a": 3, "b": 1}
        assert set(journaled(tmp_path, "a")) == {"ok-1"}

        top = await http.get("/v1/boards/a/alltime/top")
        assert top.status_code == 503 and top.json()["error"]["code"] == "unavailable"
        assert top.headers["retry-after"] == "1"
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["boards"]["a"] == "failed"
        answer = await client.request({"op": "top", "board": "a", "period": "alltime"})
        assert answer["op"] == "error" and answer["code"] == "unavailable"

        # The other board is untouched.
        assert statuses(await client.submit([event("b", "m", 1, now, "b-ok")])) == ["accepted"]
        assert (await http.get("/v1/boards/b/alltime/top")).json()["entries"][0]["score"] == 1
        metrics = (await http.get("/metrics")).text
        assert 'arena_actor_restarts_total{board="a"} 2.0' in metrics
        assert 'arena_board_ready{board="a"} -1.0' in metrics
        await client.close()


async def test_a_restarted_board_answers_not_ready_until_it_has_loaded_then_everything_acked(
    tmp_path: Path, monkeypatch: Any
) -> None:
    loading = asyncio.Event()
    load = arena.board.load.load

    async def held_load(*args: Any, **kwargs: Any) -> Any:
        await loading.wait()
        return await load(*args, **kwargs)

    async with InProcessServer(make_config(tmp_path, BOARDS)) as server, httpx.AsyncClient(base_url=server.url) as http:
        client = await Client.connect(server.ws_url, token_for("gs"))
        now = now_ms()
        assert statuses(await client.submit([event("a", "m", 3, now, "k1"), event("a", "m", 4, now, "k2")])) == ["accepted"] * 2
        monkeypatch.setattr(arena.board.actor, "load", held_load)
        await _crash(http, "a", 1)
        assert statuses(await client.submit([event("a", "x", 5, now, "crash-1")])) == ["rejected:unavailable"]
        assert server.arena is not None
        runs = server.arena.supervisor.runs
        await until(lambda: runs["a"] == 2, "the restart")
        top = await http.get("/v1/boards/a/alltime/top")
        assert (top.status_code, top.json()["error"]["code"]) == (503, "not_ready")
        assert (await http.get("/readyz")).status_code == 503
        loading.set()
        await _until_ready(server, "a", 2)
        top = await http.get("/v1/boards/a/alltime/top")
        assert (top.status_code, top.json()["seq"], top.json()["entries"][0]["score"]) == (200, 2, 7)
        await client.close()
