"""The peer protocol without a network: every message reads back as itself from what
`serialise` writes (exactly: big integers, non-UTF-8 bodies), and what is not a peer message
raises `ProtocolError`, carrying the request's id when one can be read."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.cluster.peer.protocol import (
    Answered,
    Ask,
    Elsewhere,
    Ended,
    Http,
    HttpAnswer,
    Numbered,
    ProtocolError,
    Refused,
    Reply,
    Submit,
    Submitted,
    ToClient,
    ToServer,
    Unwatch,
    Update,
    Watch,
    Watching,
    parse_answer,
    parse_request,
    secret_matches,
    serialise,
    update_frame,
)
from arena.engine.events import Event, Reason, Result, Status

text = st.text(st.characters(codec="utf-8"), max_size=12)  # valid events hold no lone surrogate
integers = st.integers(min_value=-(2**80), max_value=2**80)  # beyond 64 bits too
ids = st.integers(min_value=0, max_value=2**53)
json_values = st.recursive(
    st.none() | st.booleans() | integers | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
objects = st.dictionaries(text, json_values, max_size=4)
headers = st.lists(st.tuples(text, text), max_size=3).map(tuple)
bodies = st.binary(max_size=16) | text.map(str.encode)


@st.composite
def submits(draw: st.DrawFn) -> Submit:
    board = draw(text)
    event = st.builds(Event, st.just(board), text, integers, integers, text, st.none() | text, st.none() | text)
    events = draw(st.lists(event, max_size=4))
    return Submit(board, draw(text), draw(integers), tuple(events))


requests = st.one_of(
    submits(),
    st.builds(Ask, text, objects),
    st.builds(Http, text, text, text, text, headers, bodies),
    st.builds(Watch, text, objects),
)
results = st.builds(Result, st.none() | text, st.sampled_from(Status), st.none() | st.sampled_from(Reason))
answers = st.one_of(
    st.builds(Submitted, st.lists(results, max_size=4).map(tuple), st.booleans()),
    st.builds(Answered, objects),
    st.builds(Refused, text, text, st.integers(min_value=100, max_value=599)),
    st.builds(HttpAnswer, st.integers(min_value=100, max_value=599), headers, bodies),
    st.just(Watching()),
    st.just(Elsewhere()),
)


@given(st.one_of(st.builds(Numbered, ids, requests), st.builds(Unwatch, ids)))
def test_every_request_reads_back_as_itself(message: ToServer) -> None:
    assert parse_request(serialise(message)) == message
    assert parse_request(serialise(message).decode()) == message  # text frames, as a socket gives them


@given(st.one_of(st.builds(Reply, ids, answers), st.builds(Update, ids, ids, objects), st.builds(Ended, ids, text, text)))
def test_every_answer_reads_back_as_itself(message: ToClient) -> None:
    assert parse_answer(serialise(message)) == message


def test_events_and_results_travel_exactly() -> None:
    event = Event("b", "m\u00e9", 10**30, 2**63 + 5, "k", '{"a":[1,2]}')
    regional = Event("b", "m", 1, 2, "r", None, "eu")  # a forwarded event keeps its region
    submit = Numbered(1, Submit("b", "gs", 5, (event, regional)))
    assert parse_request(serialise(submit)) == submit
    for result in (Result("k", Status.ACCEPTED), Result(None, Status.REJECTED, Reason.UNAVAILABLE, "board: cannot take events now")):
        reply = Reply(2, Submitted((result,)))
        assert parse_answer(serialise(reply)) == reply


def test_the_wire_format_is_the_documented_one() -> None:
    """Nodes of two versions talk during a rolling restart: the JSON does not change shape."""
    event = Event("b", "m", 1, 2, "k")
    assert orjson.loads(serialise(Numbered(7, Submit("b", "gs", 5, (event,))))) == {
        "op": "submit", "board": "b", "source": "gs", "received_at": 5, "events": [["m", 1, 2, "k", None]], "id": 7}
    assert orjson.loads(serialise(Numbered(7, Submit("b", "gs", 5, (event._replace(region="eu"),)))))["events"] == [
        ["m", 1, 2, "k", None, "eu"]]  # a region only when there is one: an event without reads as before
    assert orjson.loads(serialise(Reply(7, Submitted((Result("k", Status.ACCEPTED),), moved=True)))) == {
        "results": [["k", "accepted", None]], "moved": True, "id": 7}
    rejected = Result("r", Status.REJECTED, Reason.INVALID_EVENT, "value: missing")
    assert orjson.loads(serialise(Reply(7, Submitted((Result("k", Status.ACCEPTED), rejected))))) == {
        "results": [["k", "accepted", None], ["r", "rejected", "invalid_event"]], "messages": [None, "value: missing"], "id": 7}
    old = parse_answer(b'{"results": [["r", "rejected", "invalid_event"]], "id": 7}')  # from a node of the release before
    assert old == Reply(7, Submitted((Result("r", Status.REJECTED, Reason.INVALID_EVENT),)))
    assert orjson.loads(serialise(Reply(7, Elsewhere()))) == {"not_here": True, "id": 7}
    assert orjson.loads(serialise(Reply(7, Watching()))) == {"watching": True, "id": 7}
    assert orjson.loads(serialise(Numbered(3, Http("b", "GET", "/x", "a=1", (("k", "v"),), b"\xff")))) == {
        "op": "http", "board": "b", "method": "GET", "path": "/x", "query": "a=1", "headers": [["k", "v"]],
        "body": "\u00ff", "latin1": True, "id": 3}
    assert orjson.loads(serialise(Update(4, 9, {"entries": []}))) == {"watch": 4, "seq": 9, "body": {"entries": []}}
    assert update_frame(4, 9, b'{"entries":[]}') == serialise(Update(4, 9, {"entries": []}))
    assert orjson.loads(serialise(Ended(4, "period_not_retained", "gone"))) == {
        "watch": 4, "ended": "period_not_retained", "message": "gone"}
    assert orjson.loads(serialise(Unwatch(4))) == {"op": "unwatch", "watch": 4}


@pytest.mark.parametrize("data", [
    "not json", "[1, 2]", "7", '{"op": "ask", "board": "b", "frame": {}}', '{"op": "ask", "id": "7"}',
    '{"op": "unwatch", "watch": "4"}', b"\xff\xfe",
])
def test_what_is_not_a_request_raises_a_protocol_error_without_an_id(data: str | bytes) -> None:
    with pytest.raises(ProtocolError) as error:
        parse_request(data)
    assert error.value.id is None


@pytest.mark.parametrize("request_", [
    {"op": "what", "board": "b"},
    {"op": ["submit"], "board": "b"},
    {"op": "submit", "board": "b", "events": []},  # no source, no received_at
    {"op": "submit", "board": "b", "source": "gs", "received_at": 1, "events": [["m", 1.5, 2, "k", None]]},
    {"op": "submit", "board": "b", "source": "gs", "received_at": 1, "events": [["m", 1, 2, "k"]]},
    {"op": "ask", "frame": {}},
    {"op": "ask", "board": 3, "frame": {}},
    {"op": "http", "board": "b", "method": "GET", "path": "/", "query": "", "headers": [["k"]], "body": ""},
    {"op": "http", "board": "b", "method": "GET", "path": "/", "query": "", "headers": [], "body": "\u0100", "latin1": True},
    {"op": "watch", "board": "b", "view": []},
])
def test_a_request_that_cannot_be_read_raises_a_protocol_error_with_its_id(request_: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as error:
        parse_request(orjson.dumps({**request_, "id": 7}))
    assert error.value.id == 7


@pytest.mark.parametrize("data", [
    "nonsense", "[]", '{"id": 1}', '{"id": "1", "watching": true}', '{"id": 1, "results": [["k", "maybe", null]]}',
    '{"id": 1, "results": [["k", "rejected", "because"]]}', '{"id": 1, "error": {"code": "x"}}',
    '{"id": 1, "status": 200, "headers": [], "body": 5}', '{"watch": 1, "seq": "2", "body": {}}',
    '{"watch": 1, "ended": 5, "message": ""}',
])
def test_what_is_not_an_answer_raises_a_protocol_error(data: str) -> None:
    with pytest.raises(ProtocolError):
        parse_answer(data)


def test_the_secret_check() -> None:
    assert secret_matches("s", "Bearer s")
    assert not secret_matches("s", "Bearer t") and not secret_matches("s", None)
    assert not secret_matches("", "Bearer ")
