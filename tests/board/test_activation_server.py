"""Activation on demand through a real server, on both journal backends (DESIGN.md, "Many boards:
activation on demand"): a start loads nothing and is ready; an idle board is unloaded and its next
query answers the same digest and seq; answers during an activation are never stale and events
sent during one are all acked; past max_active_boards the least recently used board goes; a
subscription keeps its board active; the close marker of an inactive board is journaled at the
close moment without loading it. Small idle_unload_seconds and deadline loops, no sleeps."""

from __future__ import annotations

import asyncio
import enum
import functools
import gc
import json
import types
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from arena.board.activation import Unloaded
from arena.board.actor import BoardActor
from arena.config import Config, JournalSettings
from arena.engine.board import BoardEngine
from arena.engine.periods import PeriodKind, Window
from arena.engine.records import CloseRecord
from arena.journal import JournalBackend, journal_backend
from support.faults import parse_metric
from support.server import Client, InProcessServer, event, make_config, now_ms, token_for, until

PERIODS = ["alltime", "daily"]
BOARDS = {name: {"aggregation": "sum", "periods": PERIODS} for name in ("a", "b", "c")}
DAY = 86_400_000
NOW = 1_799_020_800_000 + 12 * 3_600_000  # pinned: 2027-01-04T12:00:00Z
IDLE = 0.3


async def listed(http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    return {b["board"]: b for b in (await http.get("/v1/boards")).json()["boards"]}


async def metric(http: httpx.AsyncClient, name: str, **labels: str) -> float:
    return parse_metric((await http.get("/metrics")).text, name, **labels)


async def inactive(http: httpx.AsyncClient, board: str) -> bool:
    row = (await listed(http))[board]
    return not row["active"] and row["state"] == "inactive"


async def close_markers(backend: JournalBackend, config: Config, board: str) -> list[CloseRecord]:
    """The close markers in ``board``'s journal now, read beside the server."""
    journal = await backend.open(config.boards[board], readonly=True)
    try:
        return await journal.close_markers()
    finally:
        await journal.close()


async def served(journal: JournalSettings, data_dir: Path, now_ms: int | None = None, **settings: Any) -> InProcessServer:
    server = InProcessServer(make_config(data_dir, BOARDS, journal=journal, **settings), now_ms=now_ms)
    await server.start()
    return server


@pytest.fixture
async def rig(tmp_path: Path, served_journal: JournalSettings) -> Any:
    # pinned from the start: the close moments a start records are those of its own day
    server = await served(served_journal, tmp_path, NOW, idle_unload_seconds=IDLE)
    async with httpx.AsyncClient(base_url=server.url) as http:
        client = await Client.connect(server.ws_url, token_for("gs"))
        try:
            yield server, http, client
        finally:
            await client.close()
            await server.stop()


async def test_a_start_loads_nothing_and_a_query_after_an_unload_answers_the_same(rig: Any) -> None:
    server, http, client = rig
    boards = await listed(http)
    assert all(not b["active"] and b["state"] == "inactive" for b in boards.values())
    ready = await http.get("/readyz")
    assert ready.status_code == 200 and set(ready.json()["boards"].values()) == {"inactive"}
    assert await metric(http, "arena_active_boards") == 0

    results = await client.submit([event("a", f"m{i % 7}", i, NOW - i, f"k{i}") for i in range(50)])
    assert {r["status"] for r in results} == {"accepted"}
    before = {p: (await http.get(f"/v1/boards/a/{p}/digest")).json() for p in PERIODS}
    assert before["daily"]["seq"] == 50 and before["daily"]["size"] == 7
    assert (await listed(http))["a"]["active"]

    await until(lambda: inactive(http, "a"), "board a to be unloaded")
    assert await metric(http, "arena_board_unloads_total", reason="idle") >= 1
    row = (await listed(http))["a"]  # its sizes as recorded at the unload
    assert {t["period"]: t["size"] for t in row["periods"]} == {"alltime": 7, "daily": 7}
    activations = await metric(http, "arena_board_activations_total")

    after = {p: (await http.get(f"/v1/boards/a/{p}/digest")).json() for p in PERIODS}
    assert after == before
    assert await metric(http, "arena_board_activations_total") == activations + 1
    assert (await listed(http))["a"]["active"]


def reachable(root: object) -> list[object]:
    """Every object reachable from ``root`` through `gc.get_referents` (classes and modules
    aside; an enum member counts, not its insides)."""
    seen: dict[int, object] = {}
    todo = [root]
    while todo:
        item = todo.pop()
        if id(item) in seen or isinstance(item, type | types.ModuleType):
            continue
        seen[id(item)] = item
        if not isinstance(item, enum.Enum):
            todo += gc.get_referents(item)
    return list(seen.values())


async def test_an_unloaded_board_keeps_its_record_and_no_table_or_journal(rig: Any) -> None:
    """What an idle board costs: once unloaded, nothing in the process holds its engine (its
    tables), its actor or its journal any more, and the record of its unload holds plain values
    only (its seq, its windows and sizes, its close moments)."""
    server, http, client = rig
    results = await client.submit([event("c", f"m{i}", i, NOW - i, f"c{i}") for i in range(30)])
    assert {r["status"] for r in results} == {"accepted"}
    assert (await http.get("/v1/boards/c/daily/top?limit=1")).json()["size"] == 30
    await until(lambda: inactive(http, "c"), "board c to be unloaded")
    supervisor = server.arena.supervisor
    handle = supervisor.handles["c"]
    assert handle.engine is None and handle.journal is None and "c" not in supervisor.actors
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, BoardEngine) and o.spec.name == "c"]
    assert not [o for o in gc.get_objects() if isinstance(o, BoardActor) and o.handle is handle]
    record = supervisor.activations.unloaded["c"]
    assert record.seq == 30 and {size for _, size in record.sizes} == {30}
    plain = {Unloaded, tuple, int, str, type(None), Window, PeriodKind}
    assert {type(o) for o in reachable(record)} <= plain


async def test_never_stale_and_nothing_lost_across_activations(rig: Any) -> None:
    """Frames sent to an unloaded board are all acked (once, in order) and every query that
    follows an ack reflects it, however the activations fall."""
    server, http, client = rig
    acked = 0
    for round_ in range(3):
        await until(lambda: inactive(http, "b"), "board b to be unloaded")
        frames = [client.submit([event("b", f"m{round_}-{f}-{i}", 1, NOW - 1, f"k{round_}-{f}-{i}") for i in range(20)])
                  for f in range(5)]
        query = http.get("/v1/boards/b/alltime/top?limit=1")  # sent with them: waits for the activation
        for results in await asyncio.gather(*frames):
            assert {r["status"] for r in results} == {"accepted"}
        acked += 100
        seq_after_acks = acked
        assert (await query).status_code == 200
        top = (await http.get("/v1/boards/b/alltime/top?limit=1")).json()
        assert top["seq"] >= seq_after_acks and top["size"] == acked  # after the acks: every event
        ws = await client.request({"op": "top", "board": "b", "period": "alltime", "limit": 1})
        assert ws["op"] == "result" and ws["seq"] >= seq_after_acks
    assert await metric(http, "arena_board_activations_total") >= 3


async def test_past_max_active_boards_the_least_recently_used_goes(tmp_path: Path, served_journal: JournalSettings) -> None:
    server = await served(served_journal, tmp_path, idle_unload_seconds=600, max_active_boards=1)
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            for board in ("a", "b", "c"):
                assert (await http.get(f"/v1/boards/{board}/alltime/top")).status_code == 200

            async def one_active() -> bool:
                boards = await listed(http)
                return {b: (row["active"], row["state"]) for b, row in boards.items()} == {
                    "a": (False, "inactive"), "b": (False, "inactive"), "c": (True, "ready")}

            await until(one_active, "only the most recently used board to stay active")
            assert await metric(http, "arena_board_unloads_total", reason="lru") == 2
            assert await metric(http, "arena_active_boards") == 1
    finally:
        await server.stop()


async def test_a_websocket_query_op_counts_as_a_use(tmp_path: Path, served_journal: JournalSettings) -> None:
    """A query op on a loaded board answers at once, and still makes it the most recently used:
    a board read only over WebSocket is not the one unloaded past max_active_boards."""
    server = await served(served_journal, tmp_path, idle_unload_seconds=600, max_active_boards=2)
    client = await Client.connect(server.ws_url, token_for("gs"))
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            for board in ("a", "b"):
                assert (await http.get(f"/v1/boards/{board}/alltime/top")).status_code == 200
            answer = await client.request({"op": "top", "board": "a", "period": "alltime", "limit": 1})
            assert answer["op"] == "result"
            assert (await http.get("/v1/boards/c/alltime/top")).status_code == 200

            async def b_went() -> bool:
                return {b for b, row in (await listed(http)).items() if row["active"]} == {"a", "c"}

            await until(b_went, "board b (used before a's query op) to be the one unloaded")
    finally:
        await client.close()
        await server.stop()


async def test_a_subscription_keeps_its_board_active(rig: Any) -> None:
    server, http, client = rig
    async with websockets.connect(server.url.replace("http", "ws") + "/v1/live") as live:
        await live.send(json.dumps({"op": "subscribe", "id": 1, "view": {"op": "top", "board": "a", "period": "alltime"}}))
        assert json.loads(await live.recv())["op"] == "subscribed"
        update = json.loads(await live.recv())  # the subscription activated it
        assert update["op"] == "update" and update["size"] == 0
        assert (await http.get("/v1/boards/b/alltime/top")).status_code == 200
        await until(lambda: inactive(http, "b"), "board b (no subscription) to be unloaded")
        assert (await listed(http))["a"]["active"]  # unloaded as idle long before, but subscribed
        await client.submit([event("a", "m", 5, NOW - 1, "live-1")])
        while (update := json.loads(await asyncio.wait_for(live.recv(), 10)))["size"] != 1:
            pass
    await until(lambda: inactive(http, "a"), "board a to be unloaded once its subscriber left")


async def test_an_inactive_board_s_close_marker_is_journaled_at_the_close_moment(
    rig: Any, tmp_path: Path, served_journal: JournalSettings
) -> None:
    server, http, client = rig
    day_end = NOW - NOW % DAY + DAY
    close_moment = day_end + 60_000  # close_grace_seconds 60
    assert {r["status"] for r in await client.submit([event("c", "m", 3, NOW, "c1")])} == {"accepted"}
    await until(lambda: inactive(http, "c"), "board c to be unloaded")
    activations = await metric(http, "arena_board_activations_total")
    config = make_config(tmp_path, BOARDS, journal=served_journal)
    backend = journal_backend(config)
    markers = functools.partial(close_markers, backend, config, "c")
    try:
        assert (await http.post("/v1/_test/clock", json={"now_ms": close_moment - 1})).status_code == 200
        assert await markers() == []
        assert (await http.post("/v1/_test/clock", json={"now_ms": close_moment})).status_code == 200
        await until(markers, "the close marker of the inactive board's daily table")
        [marker] = await markers()
        assert (marker.seq, marker.window.kind, marker.closed_at) == (2, PeriodKind.DAILY, close_moment)
        assert await inactive(http, "c") and await metric(http, "arena_board_activations_total") == activations
    finally:
        await backend.close()
    period_id = (await http.get("/v1/boards/c/daily/top?period_id=2027-01-04")).json()
    assert period_id["closed"] and period_id["size"] == 1 and period_id["seq"] == 2
    periods = (await http.get("/v1/boards/c/daily/periods")).json()["periods"]
    closed = next(p for p in periods if p["period_id"] == "2027-01-04")
    assert closed["closed_at"] == "2027-01-05T00:01:00.000Z"


async def test_a_board_not_activated_since_the_start_journals_its_close_marker_on_time(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    """The start reads what the close of a board needs when it checks its journal, so a board
    no event, query or subscription has activated since is closed at the close moment too."""
    first = await served(served_journal, tmp_path, idle_unload_seconds=IDLE)
    try:
        client = await Client.connect(first.ws_url, token_for("gs"))
        try:
            occurred = now_ms()
            assert {r["status"] for r in await client.submit([event("c", "m", 3, occurred, "c1")])} == {"accepted"}
        finally:
            await client.close()
    finally:
        await first.stop()
    close_moment = occurred - occurred % DAY + DAY + 60_000  # close_grace_seconds 60
    config = make_config(tmp_path, BOARDS, journal=served_journal)
    backend = journal_backend(config)
    markers = functools.partial(close_markers, backend, config, "c")
    server = await served(served_journal, tmp_path, idle_unload_seconds=IDLE)
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert await inactive(http, "c")
            activations = await metric(http, "arena_board_activations_total")
            assert (await http.post("/v1/_test/clock", json={"now_ms": close_moment - 1})).status_code == 200
            assert await markers() == []
            assert (await http.post("/v1/_test/clock", json={"now_ms": close_moment})).status_code == 200
            await until(markers, "the close marker of the board not activated since the start")
            [marker] = await markers()
            assert (marker.seq, marker.window.kind, marker.closed_at) == (2, PeriodKind.DAILY, close_moment)
            assert await inactive(http, "c") and await metric(http, "arena_board_activations_total") == activations
            top = (await http.get(f"/v1/boards/c/daily/top?period_id={marker.window.period_id}")).json()
            assert top["closed"] and top["size"] == 1 and top["seq"] == 2
    finally:
        await server.stop()
        await backend.close()


async def test_past_five_seconds_of_activation_events_are_unavailable_and_queries_not_ready(rig: Any) -> None:
    """A slow activation (its journal's open held): after 5 s the frame that woke the board is
    answered `unavailable` and the query 503 `not_ready` with Retry-After; the same frame resent
    once the board serves is accepted, once."""
    server, http, client = rig
    assert (await http.post("/v1/_test/boards/a/open", json={"held": True})).status_code == 200
    frame = [event("a", f"m{i}", i, NOW - 1, f"slow-{i}") for i in range(5)]
    try:
        pending = client.submit(frame, timeout=30)
        answer = await http.get("/v1/boards/a/alltime/top", timeout=30)
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "not_ready"
        assert answer.headers["retry-after"] == "1"
        assert {r["status"] + ":" + r.get("reason", "") for r in await pending} == {"rejected:unavailable"}
        assert (await listed(http))["a"]["state"] == "activating"
    finally:
        assert (await http.post("/v1/_test/boards/a/open", json={"held": False})).status_code == 200
    assert {r["status"] for r in await client.submit(frame)} == {"accepted"}
    assert {r["status"] for r in await client.submit(frame)} == {"duplicate"}
    top = (await http.get("/v1/boards/a/alltime/top")).json()
    assert top["size"] == 5 and top["seq"] == 5
