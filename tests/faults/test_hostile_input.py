"""Input a careless or hostile game server (or a public client) may send, through a real server:
it is refused for what it is, alone, and never takes a board or the process down. Each test here
failed before its fix (issue 18 of the black-box review)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from arena.engine.events import KEY_RULE
from arena.engine.periods import Calendar
from support.faults import parse_metric
from support.server import ADMIN_TOKEN, InProcessServer, make_config, now_ms, token_for

BOARDS: dict[str, dict[str, Any]] = {"b": {"aggregation": "best", "periods": ["alltime", "daily"]}}
HOUR = 3_600_000



def _event(member: str, key: str, value: int = 5, **extra: Any) -> dict[str, Any]:
    return {"board": "b", "member": member, "value": value, "occurred_at": now_ms(), "idempotency_key": key, **extra}


def _frame(frame: dict[str, Any]) -> str:
    """Frame text as a client may write it: json escapes a lone surrogate as "\\ud800"."""
    return json.dumps(frame)


async def _ask(ws: ClientConnection, text: str) -> dict[str, Any]:
    await ws.send(text)
    answer: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 30))  # json keeps lone surrogates, big ints
    return answer


pytestmark = pytest.mark.server(BOARDS)

@pytest.fixture
async def ws(server: InProcessServer) -> AsyncIterator[ClientConnection]:
    async with websockets.connect(server.ws_url, additional_headers={"Authorization": f"Bearer {token_for('gs')}"}) as conn:
        yield conn


async def _metric(server: InProcessServer, name: str, **labels: str) -> float:
    async with httpx.AsyncClient(base_url=server.url) as http:
        return parse_metric((await http.get("/metrics")).text, name, **labels)


# -- 1. a lone surrogate -----------------------------------------------------------------------


async def test_a_lone_surrogate_member_is_invalid_event_alone_and_never_crashes_the_board(
    server: InProcessServer, ws: ClientConnection
) -> None:
    for i in range(8):  # six crashes within a minute used to mark the board failed
        answer = await _ask(ws, _frame({"op": "submit", "id": i, "events": [_event("ok", f"ok{i}"), _event("\ud800", f"bad{i}")]}))
        assert [(r["idempotency_key"], r["status"], r.get("reason")) for r in answer["results"]] == [
            (f"ok{i}", "accepted", None), (f"bad{i}", "rejected", "invalid_event")]
    async with httpx.AsyncClient(base_url=server.url) as http:
        top = await http.get("/v1/boards/b/alltime/top")
        assert top.status_code == 200 and top.json()["entries"][0]["member"] == "ok"
    assert await _metric(server, "arena_events_total", board="b", reason="invalid_event") == 8
    assert await _metric(server, "arena_actor_restarts_total", board="b") == 0


async def test_a_lone_surrogate_key_is_invalid_event_and_echoed_as_sent(ws: ClientConnection) -> None:
    text = _frame({"op": "submit", "id": "k", "events": [_event("m", "\udc00x"), _event("m", "fine")]})
    answer = await _ask(ws, text)
    assert answer["results"] == [{"idempotency_key": "\udc00x", "status": "rejected", "reason": "invalid_event",
                                  "message": f'idempotency_key: {KEY_RULE}, got "\\udc00x"'},
                                 {"idempotency_key": "fine", "status": "accepted"}]


@pytest.mark.parametrize("meta", ['{"note": "\\ud800"}', '{"\\udbff": 1}', '{"big": 1e400}'])
async def test_meta_that_json_text_cannot_carry_is_invalid_event_alone(ws: ClientConnection, meta: str) -> None:
    """A lone surrogate has no UTF-8 form; 1e400 reads as an infinity (it was stored as null)."""
    events = f'[{_frame(_event("m", "meta-bad"))[:-1]}, "meta": {meta}}}, {_frame(_event("m", "meta-ok"))}]'
    answer = await _ask(ws, f'{{"op": "submit", "id": 1, "events": {events}}}')
    assert [r["status"] for r in answer["results"]] == ["rejected", "accepted"]
    assert answer["results"][0]["reason"] == "invalid_event"


# -- 4. meta integers beyond 64 bits -------------------------------------------------------------


async def test_meta_integers_beyond_64_bits_come_back_from_the_audit_exactly(server: InProcessServer, ws: ClientConnection) -> None:
    meta = '{"big": 18446744073709551616, "neg": -99999999999999999999999, "f": 1.5, "s": "é"}'
    events = f'[{_frame(_event("m", "meta-big"))[:-1]}, "meta": {meta}}}]'
    answer = await _ask(ws, f'{{"op": "submit", "id": 1, "events": {events}}}')
    assert answer["results"][0]["status"] == "accepted"
    async with httpx.AsyncClient(base_url=server.url) as http:
        audit = await http.get("/v1/boards/b/events", params={"member": "m"}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    stored = json.loads(audit.text)["events"][0]["meta"]
    assert stored == {"big": 18446744073709551616, "neg": -99999999999999999999999, "f": 1.5, "s": "é"}
    assert type(stored["big"]) is int


# -- 6. a leap second ------------------------------------------------------------------------------


async def test_an_rfc3339_leap_second_is_accepted_as_the_last_millisecond_of_its_minute(
    server: InProcessServer, ws: ClientConnection
) -> None:
    leap = {**_event("leap", "leap"), "occurred_at": "2016-12-31T23:59:60Z"}
    answer = await _ask(ws, _frame({"op": "submit", "id": 1, "events": [leap]}))
    assert answer["results"] == [{"idempotency_key": "leap", "status": "accepted"}]  # alltime takes it
    async with httpx.AsyncClient(base_url=server.url) as http:
        entry = (await http.get("/v1/boards/b/alltime/members/leap")).json()["entry"]
    assert entry["reached_at"] == "2016-12-31T23:59:59.999Z"


# -- 7. frame ids ----------------------------------------------------------------------------------


async def test_a_frame_id_with_a_lone_surrogate_is_echoed_as_sent(ws: ClientConnection) -> None:
    assert await _ask(ws, _frame({"op": "ping", "id": "\ud800"})) == {"op": "pong", "id": "\ud800"}
    answer = await _ask(ws, _frame({"op": "submit", "id": "\udfff" * 128, "events": [_event("m", "id-s")]}))
    assert answer["op"] == "ack" and answer["id"] == "\udfff" * 128  # 128 code points, 384 bytes of UTF-8


@pytest.mark.parametrize("frame_id", [
    "1e400",  # reads as an infinity
    "1.5",
    "true",
    '["\\udfff", 1]',
    "[-1e999]",
    '{"nested": {"id": 1}}',
    '"' + "x" * 129 + '"',
])
async def test_an_id_that_is_not_a_short_string_or_an_integer_is_invalid_request_and_the_frame_is_not_taken(
    server: InProcessServer, ws: ClientConnection, frame_id: str
) -> None:
    """The contract ("A public reader is a stranger"): what an answer echoes is bounded."""
    for text in ('{"op": "ping", "id": %s}' % frame_id,
                 '{"op": "submit", "id": %s, "events": [%s]}' % (frame_id, _frame(_event("m", "id-odd")))):
        answer = await _ask(ws, text)
        assert answer["op"] == "error" and answer["code"] == "invalid_request" and answer["id"] is None, answer
        assert "id" in answer["message"]
    assert await _ask(ws, '{"op": "ping", "id": 2}') == {"op": "pong", "id": 2}
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get("/v1/boards/b/alltime/members/m")).status_code == 404  # nothing was submitted


# -- 2. the periods route ----------------------------------------------------------------------------


async def test_the_periods_route_is_linear_in_what_it_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2,200 retained hours took 15 s and held the event loop (each listed window walked the whole
    retention again): counted in calendar steps, not timed."""
    steps = 0
    previous = Calendar.previous

    def counted(calendar: Calendar, window: Any) -> Any:
        nonlocal steps
        steps += 1
        return previous(calendar, window)

    monkeypatch.setattr(Calendar, "previous", counted)
    config = make_config(tmp_path / "data", {"h": {"periods": ["hourly"], "keep_closed": 2200}})
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        steps = 0
        listing = (await http.get("/v1/boards/h/hourly/periods")).json()["periods"]
        first = steps
        steps = 0
        assert (await http.get("/v1/boards/h/hourly/periods")).json()["periods"] == listing
        again = steps
        old = (await http.get("/v1/boards/h/hourly/top", params={"period_id": listing[-1]["period_id"]})).json()
    assert len(listing) >= 2201 and sum(not p["closed"] for p in listing) <= 2
    assert first <= 2 * 2200 and again <= 10, (first, again)
    assert old["size"] == 0 and old["closed"] is True


# -- 3. keep_closed reaching back before 1970 ----------------------------------------------------------


@pytest.mark.parametrize(("period", "first_id"), [("monthly", "1970-01"), ("weekly", "1970-W01")])
async def test_a_retention_reaching_back_before_1970_stops_at_the_calendars_start(
    tmp_path: Path, period: str, first_id: str
) -> None:
    config = make_config(tmp_path / "data", {"long": {"periods": [period], "keep_closed": 5000}},
                         idle_unload_seconds=0)  # loaded at start
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        boards = (await http.get("/v1/boards")).json()["boards"]
        listing = (await http.get(f"/v1/boards/long/{period}/periods")).json()["periods"]
        oldest = await http.get(f"/v1/boards/long/{period}/top", params={"period_id": first_id})
    assert boards[0]["state"] == "ready"
    assert listing[-1]["period_id"] == first_id and all(p["size"] == 0 for p in listing)
    assert oldest.status_code == 200 and oldest.json()["closed"] is True
