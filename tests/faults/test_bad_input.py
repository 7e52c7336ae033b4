"""Bad input on the WebSocket (and HTTP query parameters): every frame gets the contract's
answer or close code, the connection stays usable otherwise, the server stays up, and other
connections are unaffected. Random frames come from hypothesis (seeded, `derandomize`)."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from support.faults import flood, memory_kib, never_reading_websocket
from support.server import ChildServer, now_ms, token_for

BOARDS: dict[str, dict[str, Any]] = {
    "v": {"aggregation": "best", "periods": ["alltime", "daily"], "min_value": 0, "max_value": 1000},
    "w": {"aggregation": "sum", "periods": ["alltime"]},
}
EXAMPLES = int(os.environ.get("ARENA_FUZZ_EXAMPLES", "150"))
"""Hypothesis examples per fuzz test; the `slow` variants run ten times as many."""
FRAME_ERRORS = {"bad_frame", "unknown_op", "batch_too_large", "invalid_request"}
QUERY_ERRORS = {"unknown_board", "unknown_period", "period_not_retained", "member_not_found", "not_ready", "unavailable"}
REASONS = {"invalid_event", "unknown_board", "forbidden", "idempotency_key_reused", "value_out_of_range",
           "occurred_in_future", "period_closed", "unavailable"}
_keys = itertools.count()


pytestmark = pytest.mark.server(BOARDS)


def _connect(child_server: ChildServer, **kwargs: Any) -> ClientConnection:
    # No client keepalive: its thread draws ping payloads from the global `random`, and hypothesis
    # fails a test (deprecation warning, an error here) if that happens during a draw.
    kwargs.setdefault("ping_interval", None)
    ws: ClientConnection = connect(child_server.ws_url, additional_headers={"Authorization": f"Bearer {token_for('gs')}"},
                                   max_size=None, **kwargs)
    return ws


def _ask(ws: ClientConnection, text: str | bytes, **send: Any) -> dict[str, Any]:
    ws.send(text, **send)
    answer: dict[str, Any] = json.loads(ws.recv(timeout=60))  # json, not orjson: big ints stay exact
    return answer


def _usable(ws: ClientConnection) -> None:
    assert _ask(ws, '{"op":"ping","id":"still-there"}') == {"op": "pong", "id": "still-there"}


def _closed_with(ws: ClientConnection, message: str | bytes, code: int, **send: Any) -> None:
    with pytest.raises(ConnectionClosed) as closed:
        # the server may close while a large frame is still being written: then send raises
        ws.send(message, **send)
        ws.recv(timeout=60)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == code



def _valid(board: str = "v") -> dict[str, Any]:
    return {"board": board, "member": "m", "value": 5, "occurred_at": now_ms() - 1000, "idempotency_key": f"k{next(_keys)}"}


# -- frames the contract names one by one --------------------------------------------------------


def test_invalid_utf8_text_frame_closes_1007(child_server: ChildServer) -> None:
    with _connect(child_server) as ws:
        _closed_with(ws, b'{"op":"ping","id":"\xff\xfe"}', 1007, text=True)
    with _connect(child_server) as ws:
        _usable(ws)


def test_binary_frame_is_bad_frame_and_the_connection_stays_open(child_server: ChildServer) -> None:
    with _connect(child_server) as ws:
        answer = _ask(ws, b'{"op":"ping","id":1}')
        assert answer["op"] == "error" and answer["code"] == "bad_frame" and answer["id"] is None
        _usable(ws)


def test_frame_over_max_frame_bytes_closes_1009(child_server: ChildServer) -> None:
    with _connect(child_server) as ws:
        _closed_with(ws, '{"op":"ping","id":"' + "x" * (1 << 20) + '"}', 1009)
    with _connect(child_server) as ws:  # just under the limit is a frame like any other
        big = '{"op":"ping","id":1,"pad":"' + "x" * ((1 << 20) - 100) + '"}'
        assert _ask(ws, big) == {"op": "pong", "id": 1}


def test_ten_thousand_events_in_one_frame_is_batch_too_large(child_server: ChildServer) -> None:
    with _connect(child_server) as ws:
        answer = _ask(ws, json.dumps({"op": "submit", "id": 7, "events": [{}] * 10_000}))
        assert (answer["op"], answer["id"], answer["code"]) == ("error", 7, "batch_too_large")
        _usable(ws)
        answer = _ask(ws, json.dumps({"op": "submit", "id": 8, "events": [_valid() for _ in range(1000)]}))
        assert [r["status"] for r in answer["results"]] == ["accepted"] * 1000


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,
    '{"op":"submit","id":1,"events":' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"a":' * 100_000 + "1" + "}" * 100_000,
    '{"op":"submit","id":1,"events":[{"value":NaN}]}',
    '{"op":"submit","id":1,"events":[{"value":Infinity}]}',
    '{"op":"submit","id":1,"events":[{"value":-Infinity}]}',
    "not json at all",
    "",
    "null",
    "[1,2,3]",
    '"a string"',
    '{"op":"ping"',
    '{"op":"ping","id":1} trailing',
    "\ufeff{}",
])
def test_malformed_frames_are_bad_frame(child_server: ChildServer, text: str) -> None:
    with _connect(child_server) as ws:
        answer = _ask(ws, text)
        assert answer["op"] == "error" and answer["code"] == "bad_frame", answer
        _usable(ws)


@pytest.mark.parametrize("frame, code", [
    ({"op": "launch"}, "unknown_op"),
    ({"op": None}, "unknown_op"),
    ({"id": 1}, "unknown_op"),
    ({"op": ["submit"]}, "unknown_op"),
    ({"op": "SUBMIT", "events": [{}]}, "unknown_op"),
    ({"op": "submit"}, "invalid_request"),
    ({"op": "submit", "events": []}, "invalid_request"),
    ({"op": "submit", "events": {"0": {}}}, "invalid_request"),
    ({"op": "submit", "events": "x"}, "invalid_request"),
    ({"op": "top", "board": 1, "period": "alltime"}, "invalid_request"),
    ({"op": "top", "board": "v", "period": "alltime", "limit": "10"}, "invalid_request"),
    ({"op": "top", "board": "v", "period": "alltime", "limit": 10.0}, "invalid_request"),
    ({"op": "top", "board": "v", "period": "alltime", "limit": True}, "invalid_request"),
    ({"op": "top", "board": "v", "period": "alltime", "limit": 0}, "invalid_request"),
    ({"op": "top", "board": "v", "period": "alltime", "limit": 10**30}, "invalid_request"),
    ({"op": "top", "board": "v", "period": "alltime", "offset": -1}, "invalid_request"),
    ({"op": "top", "board": "nope", "period": "alltime"}, "unknown_board"),
    ({"op": "top", "board": "v", "period": "yearly"}, "unknown_period"),
    ({"op": "top", "board": "v", "period": "daily", "period_id": "2026-13-01"}, "unknown_period"),
    ({"op": "top", "board": "v", "period": "daily", "period_id": "x" * 100_000}, "unknown_period"),
    ({"op": "rank", "board": "v", "period": "alltime", "member": "nobody"}, "member_not_found"),
    ({"op": "rank", "board": "v", "period": "alltime"}, "invalid_request"),
    ({"op": "around", "board": "v", "period": "alltime", "member": "m", "rank": 1}, "invalid_request"),
    ({"op": "around", "board": "v", "period": "alltime", "rank": 1, "radius": 101}, "invalid_request"),
    ({"op": "around", "board": "v", "period": "alltime", "rank": 0}, "invalid_request"),
    ({"op": "score_at_percentile", "board": "v", "period": "alltime", "p": 0}, "invalid_request"),
    ({"op": "score_at_percentile", "board": "v", "period": "alltime", "p": 100.5}, "invalid_request"),
    ({"op": "score_at_percentile", "board": "v", "period": "alltime", "p": "50"}, "invalid_request"),
    ({"op": "score_at_percentile", "board": "v", "period": "alltime", "p": True}, "invalid_request"),
    ({"op": "score_at_percentile", "board": "v", "period": "alltime", "p": 10**400}, "invalid_request"),
    ({"op": "score_at_percentile", "board": "v", "period": "alltime", "p": 1e-300}, None),
    ({"op": "top", "board": "v", "period": "alltime", "offset": 10**30}, None),
    ({"op": "around", "board": "v", "period": "alltime", "rank": 10**30}, None),
])
def test_bad_requests_get_their_error_code(child_server: ChildServer, frame: dict[str, Any], code: str | None) -> None:
    with _connect(child_server) as ws:
        frame = {"id": "q", **frame}
        answer = _ask(ws, json.dumps(frame))
        assert answer["id"] == frame["id"]
        if code is None:
            assert answer["op"] == "result", answer
        else:
            assert answer["op"] == "error" and answer["code"] == code, answer
        _usable(ws)


def test_huge_float_in_a_query_is_an_error_not_a_dead_connection(child_server: ChildServer) -> None:
    with _connect(child_server) as ws:  # 1e400 is a JSON number that no double holds
        answer = _ask(ws, '{"op":"score_at_percentile","id":1,"board":"v","period":"alltime","p":1e400}')
        assert answer["op"] == "error" and answer["code"] == "invalid_request", answer
        _usable(ws)


@pytest.mark.parametrize("text, frame_id", [
    ('{"op":"ping","id":1000000000000000000000000000000}', 10**30),
    ('{"op":"ping","id":-9223372036854775809}', -(2**63) - 1),
    ('{"op":"ping","id":1000000000000000000000000000000,"x":1e400}', 10**30),
    ('{"op":"ping","id":"\\ud800"}', "\ud800"),
    ('{"op":"ping","id":"' + "é" * 128 + '"}', "é" * 128),
    ('{"op":"ping"}', None),
])
def test_ids_are_echoed_exactly(child_server: ChildServer, text: str, frame_id: object) -> None:
    with _connect(child_server) as ws:
        assert _ask(ws, text) == {"op": "pong", "id": frame_id}
        _usable(ws)


@pytest.mark.parametrize("frame_id", [
    "1e400", "1.5", "false", "[18446744073709551616, 1.5]", "[" * 300 + "]" * 300, "[" * 1000 + "]" * 1000, '{"a": 1}',
    '"' + "é" * 129 + '"',
])
def test_an_id_not_a_short_string_or_an_integer_is_invalid_request_with_a_null_id(child_server: ChildServer, frame_id: str) -> None:
    """An `id` is a string of at most 128 code points or an integer (the contract, "A public
    reader is a stranger"): an answer echoes nothing larger."""
    with _connect(child_server) as ws:
        answer = _ask(ws, '{"op":"ping","id":%s}' % frame_id)
        assert answer["op"] == "error" and answer["code"] == "invalid_request" and answer["id"] is None, answer
        _usable(ws)


def _echoed(frame_id: object) -> bool:
    """Whether the contract echoes this id (else: invalid_request, id null)."""
    return frame_id is None or type(frame_id) is int or (type(frame_id) is str and len(frame_id) <= 128)


# -- events: one mutation of a valid event, and the reason the contract gives ----------------------

LITERAL_1E400 = "__1e400__"
MUTATIONS: list[tuple[str, Any, str | None]] = [
    ("board", None, "unknown_board"), ("board", 5, "unknown_board"), ("board", "nope", "unknown_board"),
    ("board", ["v"], "unknown_board"), ("board", "V", "unknown_board"),
    ("member", None, "invalid_event"), ("member", "", "invalid_event"), ("member", "m" * 129, "invalid_event"),
    ("member", "m" * 128, None), ("member", "a\x00b", "invalid_event"), ("member", "a\x85b", "invalid_event"),
    ("member", "a\u200bb/%é😀", None), ("member", 5, "invalid_event"), ("member", ["m"], "invalid_event"),
    ("member", "x" * 200_000, "invalid_event"),
    ("value", 1.0, "invalid_event"), ("value", 3.5, "invalid_event"), ("value", True, "invalid_event"),
    ("value", False, "invalid_event"), ("value", "5", "invalid_event"), ("value", None, "invalid_event"),
    ("value", [5], "invalid_event"), ("value", {}, "invalid_event"), ("value", LITERAL_1E400, "invalid_event"),
    ("value", 1e300, "invalid_event"), ("value", -1, "value_out_of_range"), ("value", 1001, "value_out_of_range"),
    ("value", 2**63, "value_out_of_range"), ("value", 10**30, "value_out_of_range"),
    ("value", -(10**30), "value_out_of_range"), ("value", 0, None), ("value", 1000, None),
    ("occurred_at", None, "invalid_event"), ("occurred_at", -1, "invalid_event"), ("occurred_at", 1.7e12, "invalid_event"),
    ("occurred_at", True, "invalid_event"), ("occurred_at", "yesterday", "invalid_event"),
    ("occurred_at", "1969-12-31T23:59:59.999Z", "invalid_event"), ("occurred_at", "0001-01-01T00:00:00+23:59", "invalid_event"),
    ("occurred_at", "9999-12-31T23:59:59.999-23:59", "occurred_in_future"),
    ("occurred_at", 10**30, "occurred_in_future"), ("occurred_at", 2**62, "occurred_in_future"),
    ("idempotency_key", None, "invalid_event"), ("idempotency_key", 5, "invalid_event"),
    ("idempotency_key", "", "invalid_event"), ("idempotency_key", "k" * 129, "invalid_event"),
    ("meta", [], "invalid_event"), ("meta", "x", "invalid_event"), ("meta", {"b": "x" * 1100}, "invalid_event"),
    ("meta", 5, "invalid_event"), ("meta", {}, None), ("meta", None, None), ("meta", {"deep": [[[[[[1]]]]]]}, None),
    ("unknown_field", {"anything": [1, 2]}, None),
]
MISSING = object()


def _fresh_key(key: object) -> object:
    return f"{key}-{next(_keys)}" if isinstance(key, str) and 1 <= len(key) <= 120 else key


@st.composite
def _event(draw: st.DrawFn) -> tuple[Any, str]:
    """(event, expected status) where status is 'accepted' or 'rejected:REASON'."""
    if draw(st.integers(0, 20)) == 0:
        return draw(st.sampled_from([None, 1, "x", [], [{}], True])), "rejected:invalid_event"
    e = _valid()
    field, value, reason = draw(st.sampled_from(MUTATIONS))
    if draw(st.booleans()) and field not in ("unknown_field", "meta"):
        value, reason = MISSING, ("unknown_board" if field == "board" else "invalid_event")
    if value is MISSING:
        del e[field]
    else:
        e[field] = _fresh_key(value) if field == "idempotency_key" else value
    return e, ("accepted" if reason is None else f"rejected:{reason}")


def _dumps(frame: object) -> str:
    return json.dumps(frame, ensure_ascii=False).replace(f'"{LITERAL_1E400}"', "1e400")


def _echo(e: Any) -> object:
    key = e.get("idempotency_key") if isinstance(e, dict) else None
    return key if isinstance(key, str) else None


def _fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def observer(child_server: ChildServer) -> Iterator[ClientConnection]:
    """A connection that only watches: every fuzz example checks it is still served."""
    with _connect(child_server) as ws:
        yield ws


def _every_event_gets_the_contracts_result(
    child_server: ChildServer, observer: ClientConnection, events: list[tuple[Any, str]], repeat: int
) -> None:
    sent = [e for e, _ in events]
    expected = [status for _, status in events]
    # Validation step 4 across the frame: the first accepted event repeated is a duplicate, and
    # with another value it reuses the key.
    first = next((e for e, status in events if status == "accepted"), None)
    if first is not None and repeat:
        sent.append(dict(first))
        expected.append("duplicate")
        if repeat == 2:
            sent.append({**first, "value": first["value"] + 1})
            expected.append("rejected:idempotency_key_reused")
    with _connect(child_server) as ws:
        answer = _ask(ws, _dumps({"op": "submit", "id": "fuzz", "events": sent}))
        assert answer["op"] == "ack" and answer["id"] == "fuzz", answer
        got = [r["status"] if r["status"] != "rejected" else f"rejected:{r['reason']}" for r in answer["results"]]
        assert got == expected, [(json.dumps(e)[:200], w, g) for e, w, g in zip(sent, expected, got, strict=False) if w != g]
        assert [r["idempotency_key"] for r in answer["results"]] == [_echo(e) for e in sent]
    _usable(observer)
    assert child_server.alive()


_events = given(events=st.lists(_event(), min_size=1, max_size=12), repeat=st.integers(0, 2))
test_every_event_gets_the_contracts_result = _fuzz(EXAMPLES)(_events(_every_event_gets_the_contracts_result))
test_every_event_gets_the_contracts_result_many = pytest.mark.slow(
    _fuzz(10 * EXAMPLES)(_events(_every_event_gets_the_contracts_result)))


# -- random frames: the answer is well formed, whatever the frame --------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_ops = st.sampled_from(["submit", "top", "rank", "around", "percentile", "score_at_percentile", "ping", "pong", "ack"])
_fields = st.fixed_dictionaries(
    {"op": _ops | _json, "id": _json},
    optional={
        "board": st.sampled_from(["v", "w", "nope"]) | _json,
        "period": st.sampled_from(["alltime", "daily", "hourly"]) | _json,
        "period_id": st.sampled_from(["alltime", "2026-12-02", "2026-W49"]) | _json,
        "member": st.sampled_from(["m", "nobody"]) | _json,
        "limit": st.integers(-5, 2000) | _json, "offset": st.integers(-5, 10**20) | _json,
        "rank": st.integers(-5, 10**20) | _json, "radius": st.integers(-5, 200) | _json,
        "p": st.floats(-10, 200) | _json,
        "events": st.lists(_json | st.builds(_valid), max_size=5) | _json,
    },
)


def _random_frames_get_a_well_formed_answer(child_server: ChildServer, observer: ClientConnection, frame: Any) -> None:
    with _connect(child_server) as ws:
        answer = _ask(ws, json.dumps(frame))
        is_object = isinstance(frame, dict)
        echoed = is_object and _echoed(frame.get("id"))
        assert answer["id"] == (frame.get("id") if echoed else None)
        if is_object and not echoed:
            assert (answer["op"], answer["code"]) == ("error", "invalid_request"), answer
        if answer["op"] == "error":
            assert answer["code"] in FRAME_ERRORS | QUERY_ERRORS and isinstance(answer["message"], str), answer
            assert is_object or answer["code"] == "bad_frame"
        elif answer["op"] == "ack":
            assert frame["op"] == "submit"
            assert len(answer["results"]) == len(frame["events"])
            for r in answer["results"]:
                assert r["status"] in ("accepted", "duplicate") or r["reason"] in REASONS, r
        elif answer["op"] == "pong":
            assert frame["op"] == "ping"
        else:
            assert answer["op"] == "result" and answer["board"] in BOARDS, answer
        _usable(ws)
    _usable(observer)
    assert child_server.alive()


_frames = given(frame=_fields | _json)
test_random_frames_get_a_well_formed_answer = _fuzz(EXAMPLES)(_frames(_random_frames_get_a_well_formed_answer))
test_random_frames_get_a_well_formed_answer_many = pytest.mark.slow(
    _fuzz(10 * EXAMPLES)(_frames(_random_frames_get_a_well_formed_answer)))


# -- HTTP query parameters ----------------------------------------------------------------------


@pytest.mark.parametrize("path, status", [
    ("/v1/boards/v/alltime/score_at_percentile?p=1e999999999", 400),
    ("/v1/boards/v/alltime/score_at_percentile?p=1e-999999999", 200),
    ("/v1/boards/v/alltime/score_at_percentile?p=NaN", 400),
    ("/v1/boards/v/alltime/score_at_percentile?p=-Infinity", 400),
    ("/v1/boards/v/alltime/score_at_percentile?p=50", 200),
    ("/v1/boards/v/alltime/top?limit=" + "9" * 5000, 400),
    ("/v1/boards/v/alltime/top?offset=" + "9" * 30, 200),
    ("/v1/boards/v/alltime/top?limit=1e3", 400),
    ("/v1/boards/v/alltime/around?rank=" + "9" * 30, 200),
    ("/v1/boards/v/daily/top?period_id=" + "%00" * 1000, 404),
    ("/v1/boards/v/alltime/members/" + "%FF" * 10, 404),
    ("/v1/boards/" + "x" * 5000 + "/alltime/top", 404),
])
def test_bad_query_parameters_are_client_errors(child_server: ChildServer, path: str, status: int) -> None:
    answer = httpx.get(child_server.url + path, timeout=60)
    assert answer.status_code == status, answer.text
    assert httpx.get(child_server.url + "/healthz", timeout=60).status_code == 200


# -- slow readers: backpressure, not buffering --------------------------------------------------


def test_a_reader_that_never_reads_acks_is_throttled_without_hurting_others(child_server: ChildServer) -> None:
    """A client pipelining submits and never reading: the server's acks fill the socket and its
    outbox, and it stops reading that connection. The client's writes then stall; memory stays
    flat; another connection is served meanwhile."""
    frame = json.dumps({"op": "submit", "id": 0, "events": [_valid("w") for _ in range(100)]}).encode()
    before = memory_kib(child_server.pid)["VmRSS"]
    budget = 256 << 20  # what an unthrottled server would swallow in seconds
    sock = never_reading_websocket(child_server.port, "/v1/ws", f"Authorization: Bearer {token_for('gs')}\r\n")
    try:
        sent = flood(sock, frame, budget)
        assert sent < budget, "the server kept reading a client that never reads its acks"
        # Meanwhile another connection is served normally.
        with _connect(child_server) as ws:
            answer = _ask(ws, json.dumps({"op": "submit", "id": 1, "events": [_valid("v")]}))
            assert [r["status"] for r in answer["results"]] == ["accepted"]
            _usable(ws)
        after = memory_kib(child_server.pid)["VmRSS"]
        print(f"\nslow reader: wrote {sent / 1e6:.1f} MB before the server stopped reading; "
              f"server RSS {before / 1024:.0f} -> {after / 1024:.0f} MiB")
        assert after - before < 200 * 1024, (before, after)
    finally:
        sock.close()
    assert child_server.alive()


@pytest.mark.parametrize(("what", "frame"), [
    ("unsubscribe, 256 KB sub (invalid_request)", {"op": "unsubscribe", "id": 1, "sub": "s" * (256 << 10)}),
    ("unsubscribe, 128-character sub", {"op": "unsubscribe", "id": "i" * 128, "sub": "s" * 128}),
    ("ping", {"op": "ping", "id": "i" * 128}),
])
def test_a_public_reader_that_floods_frames_and_reads_nothing_costs_bounded_memory(
    child_server: ChildServer, what: str, frame: dict[str, Any]
) -> None:
    """DoS 2 of issue 31: every answer of a /v1/live connection counts toward one bounded outbox;
    while it is full the server reads no more of that connection. Before, each `unsubscribed`
    went to an unbounded queue and the server grew by ~230 MiB/s."""
    budget = 128 << 20
    before = memory_kib(child_server.pid)["VmRSS"]
    sock = never_reading_websocket(child_server.port, "/v1/live")
    try:
        sent = flood(sock, json.dumps(frame).encode(), budget)
        after = memory_kib(child_server.pid)["VmRSS"]
        print(f"\n{what}: wrote {sent / 1e6:.1f} MB; server RSS {before / 1024:.0f} -> {after / 1024:.0f} MiB")
        assert after - before < 50 * 1024, (what, sent, before, after)
        if len(frame.get("sub", "")) <= 128:  # answers as large as the frames: the outbox fills
            assert sent < budget, "the server kept reading a client that never reads its answers"
        with _connect(child_server) as ws:
            _usable(ws)
    finally:
        sock.close()
    assert child_server.alive()
