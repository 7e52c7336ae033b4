"""Submit -> ack -> query through a real server: auth, aggregations, duplicates, closing, errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest
import websockets

from arena.board.commands import Barrier
from arena.engine.events import Event
from support.faults import parse_metric
from support.server import (
    ADMIN_TOKEN,
    Client,
    InProcessServer,
    event,
    loop_turns_within,
    make_config,
    statuses,
    token_for,
    until,
)

NOW = 1796216400000  # 2026-12-02T13:00:00Z
HOUR = 3_600_000

BOARDS: dict[str, dict[str, Any]] = {
    "best": {"aggregation": "best", "periods": ["alltime", "daily"]},
    "sum": {"aggregation": "sum", "periods": ["alltime", "hourly"], "min_value": -100},
    "latest": {"aggregation": "latest", "periods": ["alltime"]},
}
SERVERS = {"gs": ["*"], "only_best": ["best"]}


pytestmark = pytest.mark.server(BOARDS, SERVERS, now_ms=NOW)

async def _connect(server: Any, sid: str = "gs") -> Client:
    return await Client.connect(server.ws_url, token_for(sid))


async def test_handshake_without_a_token_is_refused(server: Any) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(server.ws_url)
    assert refused.value.response.status_code == 403


@pytest.mark.parametrize("token", ["wrong", ADMIN_TOKEN])
async def test_handshake_with_an_unknown_or_admin_token_is_refused(server: Any, token: str) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        await Client.connect(server.ws_url, token)
    assert refused.value.response.status_code == 403


async def test_a_token_scoped_to_one_board_cannot_write_another(server: Any) -> None:
    client = await _connect(server, "only_best")
    results = await client.submit([event("sum", "a", 1, NOW, "s1"), event("best", "a", 1, NOW, "b1")])
    assert statuses(results) == ["rejected:forbidden", "accepted"]
    await client.close()


async def test_round_trip_for_every_aggregation_over_ws_and_http(server: Any, http: httpx.AsyncClient) -> None:
    client = await _connect(server)
    events = []
    for board in BOARDS:
        events += [
            event(board, "ann", 10, NOW - 3000, f"{board}-1"),
            event(board, "ann", 30, NOW - 2000, f"{board}-2"),
            event(board, "bob", 25, NOW - 1000, f"{board}-3"),
            event(board, "ann", 5, NOW - 500, f"{board}-4"),
        ]
    assert set(statuses(await client.submit(events))) == {"accepted"}
    expected = {"best": [("ann", 30), ("bob", 25)], "sum": [("ann", 45), ("bob", 25)], "latest": [("bob", 25), ("ann", 5)]}
    for board, standings in expected.items():
        top = (await http.get(f"/v1/boards/{board}/alltime/top")).json()
        assert [(e["member"], e["score"]) for e in top["entries"]] == standings
        answer = await client.request({"op": "top", "board": board, "period": "alltime", "limit": 10})
        assert answer["op"] == "result" and answer["entries"] == top["entries"]
        rank = await client.request({"op": "rank", "board": board, "period": "alltime", "member": "ann"})
        member = (await http.get(f"/v1/boards/{board}/alltime/members/ann")).json()
        assert rank["entry"] == member["entry"]
    await client.close()


async def test_ack_means_visible_to_every_connection(server: Any) -> None:
    writer, reader = await _connect(server), await _connect(server)
    for i in range(20):
        assert statuses(await writer.submit([event("best", f"m{i}", i, NOW - 1, f"k{i}")])) == ["accepted"]
        answer = await reader.request({"op": "rank", "board": "best", "period": "daily", "member": f"m{i}"})
        assert answer["entry"]["score"] == i
    await writer.close()
    await reader.close()


async def test_duplicates_and_reused_keys_are_decided_across_reconnects(server: Any) -> None:
    first = await _connect(server)
    assert statuses(await first.submit([event("best", "a", 7, NOW - 1, "once")])) == ["accepted"]
    await first.close()
    second = await _connect(server)
    results = await second.submit([event("best", "a", 7, NOW - 1, "once"), event("best", "a", 8, NOW - 1, "once")])
    assert statuses(results) == ["duplicate", "rejected:idempotency_key_reused"]
    await second.close()


async def test_the_same_instant_written_two_ways_is_a_duplicate(server: Any) -> None:
    client = await _connect(server)
    results = await client.submit([
        event("best", "a", 7, "2026-12-02T17:30:00.250+05:30", "tz"),
        event("best", "a", 7, "2026-12-02T12:00:00.250Z", "tz"),
    ])
    assert statuses(results) == ["accepted", "duplicate"]
    await client.close()


async def test_late_event_inside_the_grace_is_applied_and_after_the_close_rejected(server: Any, http: httpx.AsyncClient) -> None:
    client = await _connect(server)
    end = NOW + HOUR  # the hourly window 13:00-14:00 ends here; grace is 60 s
    await http.post("/v1/_test/clock", json={"now_ms": end + 59_000})
    assert statuses(await client.submit([event("sum", "late", 3, end - 1, "in-grace")])) == ["accepted"]
    hour = (await http.get("/v1/boards/sum/hourly/top", params={"period_id": "2026-12-02T13"})).json()
    assert [(e["member"], e["score"]) for e in hour["entries"]] == [("late", 3)]
    await http.post("/v1/_test/clock", json={"now_ms": end + 60_000})
    results = await client.submit([event("sum", "late", 4, end - 1, "after-close")])
    assert statuses(results) == ["accepted"]  # alltime is still open
    hour = (await http.get("/v1/boards/sum/hourly/top", params={"period_id": "2026-12-02T13"})).json()
    assert hour["closed"] is True and [(e["member"], e["score"]) for e in hour["entries"]] == [("late", 3)]
    alltime = (await http.get("/v1/boards/sum/alltime/members/late")).json()
    assert alltime["entry"]["score"] == 7
    await client.close()


async def test_a_frame_waiting_in_the_mailbox_across_the_close_moment_is_applied_then_closed(server: Any, http: httpx.AsyncClient) -> None:
    close = NOW + HOUR + 60_000  # the hourly window 13:00-14:00 closes here
    client = await _connect(server)
    assert statuses(await client.submit([event("sum", "early", 1, NOW + 5, "early")])) == ["accepted"]
    await http.post("/v1/_test/clock", json={"now_ms": close - 1})
    handle = server.arena.boards["sum"]
    await handle.command(Barrier())  # a round trip: the actor waits for the 13:00 table's close moment
    # stamped before the close moment; the actor only gets to it after (no await in between)
    future = handle.submit([Event("sum", "waiting", 5, NOW + 10, "stamped-in-time")], close - 1, "gs")
    server.arena.clock.set(close + 1)
    with loop_turns_within(30, "the actor, past the close moment with a frame stamped before it"):
        results = await asyncio.wait_for(future, 10)
    assert [r.status.value for r in results] == ["accepted"]
    hour = (await http.get("/v1/boards/sum/hourly/top", params={"period_id": "2026-12-02T13"})).json()
    assert hour["closed"] is True and [(e["member"], e["score"]) for e in hour["entries"]] == [("waiting", 5), ("early", 1)]
    late = await client.submit([event("sum", "late", 1, NOW + 10, "after-the-close")])
    assert statuses(late) == ["accepted"]  # alltime only
    hour = (await http.get("/v1/boards/sum/hourly/top", params={"period_id": "2026-12-02T13"})).json()
    assert [e["member"] for e in hour["entries"]] == ["waiting", "early"]
    await client.close()


async def test_the_rotator_closes_a_table_at_its_close_moment_without_traffic(server: Any, http: httpx.AsyncClient) -> None:
    end = NOW + HOUR
    await http.post("/v1/_test/clock", json={"now_ms": end + 60_000})
    listed: dict[str, Any] = {}

    async def closed() -> bool:
        periods = (await http.get("/v1/boards/sum/hourly/periods")).json()["periods"]
        listed.clear()
        listed.update((p["period_id"], p) for p in periods)
        return bool(listed["2026-12-02T13"]["closed"])

    await until(closed, "the 13:00 table to close")
    assert listed["2026-12-02T13"]["closed_at"] == "2026-12-02T14:01:00.000Z"
    assert listed["2026-12-02T14"]["closed"] is False


async def test_a_member_with_slash_percent_and_question_mark_works_in_every_route(server: Any, http: httpx.AsyncClient) -> None:
    name = "clan/alpha 50%?x=1"
    client = await _connect(server)
    assert statuses(await client.submit([event("best", name, 9, NOW - 1, "weird")])) == ["accepted"]
    path = quote(name, safe="")
    for route in ("members", "around", "percentile"):
        answer = await http.get(f"/v1/boards/best/daily/{route}/{path}")
        assert answer.status_code == 200, (route, answer.text)
        body = answer.json()
        entry = body["entry"] if "entry" in body else body["entries"][0]
        assert entry["member"] == name
    audit = await http.get("/v1/boards/best/events", params={"member": name},
                                  headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert [e["idempotency_key"] for e in audit.json()["events"]] == ["weird"]
    void = await http.post(f"/v1/boards/best/members/{path}/void", json={"reason": "test"},
                                  headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert void.status_code == 200 and void.json()["voided"] == 1
    await client.close()


async def test_pipelined_frames_are_all_acked_in_order_of_their_ids(server: Any, http: httpx.AsyncClient) -> None:
    client = await _connect(server)
    futures = [client.send({"op": "submit", "events": [event("sum", f"p{i % 7}", 1, NOW - 1, f"pipe{i}")]}) for i in range(300)]
    answers = await asyncio.gather(*futures)
    assert all(a["op"] == "ack" and a["results"][0]["status"] == "accepted" for a in answers)
    total = sum(e["score"] for e in (await http.get("/v1/boards/sum/alltime/top")).json()["entries"])
    assert total == 300
    await client.close()


async def test_through_a_tiny_outbox_every_frame_gets_its_answer_once(tmp_path: Path) -> None:
    """Every frame owed goes through one bounded outbox (here 2 frames or 4 KiB, smaller than one
    top-1000 answer), and the server reads no more while it is full: a client pipelining big
    queries, submits, pings and subscriptions still gets each answer once, none dropped."""
    config = make_config(tmp_path, BOARDS, SERVERS, max_in_flight_frames=2, max_frame_bytes=4096)
    async with InProcessServer(config) as running:
        client = await _connect(running)
        for first in range(0, 1000, 25):
            await client.submit([event("best", f"m{i}", i, NOW - 1, f"fill{i}") for i in range(first, first + 25)])
        await client.close()
        ws = await websockets.connect(running.ws_url, additional_headers={"Authorization": f"Bearer {token_for('gs')}"},
                                      max_queue=1, max_size=None)
        frames: list[dict[str, Any]] = []
        for i in range(0, 100, 5):
            frames += [{"op": "top", "id": i, "board": "best", "period": "alltime", "limit": 1000},
                       {"op": "submit", "id": i + 1, "events": [event("sum", "late", 1, NOW - 1, f"late{i}")]},
                       {"op": "ping", "id": i + 2},
                       {"op": "subscribe", "id": i + 3, "view": {"op": "rank", "board": "sum", "period": "alltime",
                                                                 "member": "late"}},
                       {"op": "unsubscribe", "id": i + 4, "sub": "1"}]

        async def send() -> None:
            for frame in frames:
                await ws.send(orjson.dumps(frame).decode())

        sending = asyncio.create_task(send())
        answers: dict[int, str] = {}
        async with asyncio.timeout(60):
            while len(answers) < len(frames):
                answer = orjson.loads(await ws.recv())
                if answer["op"] != "update":
                    assert answer["id"] not in answers, answer
                    answers[answer["id"]] = answer["op"]
        await sending
        assert answers == {f["id"]: {"top": "result", "submit": "ack", "ping": "pong", "subscribe": "subscribed",
                                     "unsubscribe": "unsubscribed"}[f["op"]] for f in frames}
        await ws.close()


# -- every error code of the contract -------------------------------------------------------

async def test_ws_frame_errors_keep_the_connection_open(server: Any) -> None:
    client = await _connect(server)
    cases: list[tuple[Any, str]] = [
        ({"op": "nope"}, "unknown_op"),
        ({"op": "submit"}, "invalid_request"),
        ({"op": "submit", "events": []}, "invalid_request"),
        ({"op": "submit", "events": {"a": 1}}, "invalid_request"),
        ({"op": "submit", "events": [event("best", "a", 1, NOW, f"x{i}") for i in range(1001)]}, "batch_too_large"),
        ({"op": "top", "board": "best", "period": "daily", "limit": "ten"}, "invalid_request"),
        ({"op": "top", "board": "best", "period": "daily", "limit": 0}, "invalid_request"),
        ({"op": "rank", "board": "best", "period": "daily"}, "invalid_request"),
        ({"op": "around", "board": "best", "period": "daily", "radius": 5}, "invalid_request"),
        ({"op": "top", "board": "nope", "period": "daily"}, "unknown_board"),
        ({"op": "top", "board": "best", "period": "weekly"}, "unknown_period"),
        ({"op": "rank", "board": "best", "period": "daily", "member": "ghost"}, "member_not_found"),
    ]
    for frame, code in cases:
        answer = await client.request(frame)
        assert (answer["op"], answer["code"]) == ("error", code), frame
        assert answer["id"] == frame.get("id", answer["id"])
    await client.ws.send("not json")
    await client.ws.send("[1, 2]")
    await client.ws.send(b"\x00binary")
    assert (await client.request({"op": "ping"}))["op"] == "pong"  # answered after the three, in order
    assert [(f["op"], f["code"], f["id"]) for f in client.unmatched] == [("error", "bad_frame", None)] * 3
    await client.close()


async def test_http_errors_have_the_contract_codes(server: Any, http: httpx.AsyncClient) -> None:
    http = http
    cases = [
        ("/v1/boards/best/daily/top?limit=0", 400, "invalid_request"),
        ("/v1/boards/best/daily/top?limit=abc", 400, "invalid_request"),
        ("/v1/boards/best/daily/around?rank=0", 400, "invalid_request"),
        ("/v1/boards/best/daily/around/x?radius=101", 400, "invalid_request"),
        ("/v1/boards/best/daily/score_at_percentile?p=0", 400, "invalid_request"),
        ("/v1/boards/nope/daily/top", 404, "unknown_board"),
        ("/v1/boards/best/weekly/top", 404, "unknown_period"),
        ("/v1/boards/best/yearly/top", 404, "unknown_period"),
        ("/v1/boards/best/daily/top?period_id=2026-13-01", 404, "unknown_period"),
        ("/v1/boards/best/daily/top?period_id=2026-12-09", 404, "unknown_period"),
        ("/v1/boards/best/daily/top?period_id=2026-11-01", 404, "period_not_retained"),
        ("/v1/boards/best/daily/members/ghost", 404, "member_not_found"),
        ("/v1/boards/best/events?member=a", 401, "unauthorized"),
    ]
    for url, status, code in cases:
        answer = await http.get(url)
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), url
    void = await http.post("/v1/boards/best/void", json={"idempotency_key": "nope", "reason": "x"},
                           headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert (void.status_code, void.json()["error"]["code"]) == (404, "unknown_event")
    retained = await http.get("/v1/boards/best/daily/top", params={"period_id": "2026-11-29"})
    assert retained.status_code == 200 and retained.json()["size"] == 0
    encoded_name = await http.get("/v1/boards/best/daily/top?period%5Fid=2026-13-01")
    assert encoded_name.json()["error"]["code"] == "unknown_period"
    last_wins = await http.get("/v1/boards/best/daily/top?limit=abc&limit=2")
    assert last_wins.status_code == 200


async def test_a_crashed_board_answers_unavailable_past_the_restart_intensity(tmp_path: Path) -> None:
    config = make_config(tmp_path, BOARDS, SERVERS, max_restarts=2)
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        client = await _connect(server)
        assert statuses(await client.submit([event("best", "a", 5, "2026-12-02T12:00:00Z", "keep")])) == ["accepted"]
        await http.post("/v1/_test/boards/best/crash", json={"times": 3})
        for i in range(3):
            assert statuses(await client.submit([event("best", "a", 9, NOW - 1, f"c{i}")])) == ["rejected:unavailable"]
        assert server.arena is not None and server.arena.supervisor.runs["best"] == 3
        answer = await http.get("/v1/boards/best/alltime/top")
        assert (answer.status_code, answer.json()["error"]["code"]) == (503, "unavailable")
        assert (await http.get("/readyz")).status_code == 503
        assert statuses(await client.submit([event("sum", "a", 1, "2026-12-02T12:00:00Z", "other")])) == ["accepted"]
        assert statuses(await client.submit([event("best", "a", 1, "2026-12-02T12:00:00Z", "gone")])) == ["rejected:unavailable"]
        await client.close()


async def test_a_crashed_actor_is_restarted_from_its_journal_with_the_same_standings(server: Any, http: httpx.AsyncClient) -> None:
    client = await _connect(server)
    events = [event("best", f"m{i % 5}", i, NOW - 1000 + i, f"e{i}") for i in range(50)]
    await client.submit(events)
    before = (await http.get("/v1/boards/best/alltime/digest")).json()
    await http.post("/v1/_test/boards/best/crash", json={"times": 1})
    assert statuses(await client.submit([event("best", "m0", 999, NOW - 1, "lost")])) == ["rejected:unavailable"]
    await server.until_ready()
    after = (await http.get("/v1/boards/best/alltime/digest")).json()
    assert after["sha256"] == before["sha256"] and after["seq"] == before["seq"]
    assert statuses(await client.submit([event("best", "m0", 999, NOW - 1, "lost")])) == ["accepted"]
    await client.close()


async def test_metrics_show_each_boards_journal_wal_size(server: Any, http: httpx.AsyncClient) -> None:
    client = await _connect(server)
    assert statuses(await client.submit([event("best", "ann", 3, NOW - 1, "w1")])) == ["accepted"]
    await client.close()
    text = (await http.get("/metrics")).text
    wal = server.config.server.data_dir / "best.journal.sqlite-wal"
    assert parse_metric(text, "arena_journal_wal_bytes", board="best") == wal.stat().st_size > 0
    assert 'arena_journal_wal_bytes{board="latest"}' in text  # every board, written or not


async def test_every_rejection_carries_a_message_naming_the_field_and_the_rule(server: Any) -> None:
    client = await _connect(server)
    base = {"board": "best", "member": "m", "value": 1, "occurred_at": NOW}
    missing_time = {k: v for k, v in base.items() if k != "occurred_at"}
    results = await client.submit([
        {**base, "value": 3.5, "idempotency_key": "float"},
        {**missing_time, "idempotency_key": "no-time"},
        {**base, "occurred_at": "2026-12-06 02:00:00", "idempotency_key": "spaced"},
        {**base, "idempotency_key": "fine"},
    ])
    await client.close()
    assert [(r["idempotency_key"], r["status"], r.get("reason")) for r in results] == [
        ("float", "rejected", "invalid_event"), ("no-time", "rejected", "invalid_event"),
        ("spaced", "rejected", "invalid_event"), ("fine", "accepted", None)]
    assert results[0]["message"] == "value: must be an integer within [0, 1000000000], got 3.5"
    assert results[1]["message"] == "occurred_at: missing"
    assert results[2]["message"].startswith("occurred_at: must be an RFC 3339 time with its offset")
    assert results[2]["message"].endswith('got "2026-12-06 02:00:00"')
    assert "message" not in results[3]
