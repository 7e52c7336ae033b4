"""The contract's validation, one reason code at a time and in its order (first failing rule wins),
through `parse_event` (steps 1-3) and `BoardEngine.decide` (steps 4-8)."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from arena.board.actor import unavailable_results
from arena.engine.board import BoardEngine
from arena.engine.events import (
    KEY_RULE,
    MAX_META_BYTES,
    MEMBER_RULE,
    OCCURRED_AT_RULE,
    Event,
    Reason,
    Result,
    Status,
    parse_event,
)
from arena.engine.periods import PeriodKind
from arena.engine.spec import BoardSpec
from arena.engine.times import parse_rfc3339_ms
from support.engine_harness import EngineHarness, accepted

NOW = parse_rfc3339_ms("2026-06-01T12:00:00Z")
BOARDS = {"b": BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY), min_value=-10, max_value=100),
          "daily": BoardSpec("daily", periods=(PeriodKind.DAILY,)),
          "other": BoardSpec("other")}


_ABSENT = object()


def event(**fields: Any) -> dict[str, Any]:
    """A valid event for board "b"; a field given as _ABSENT is left out."""
    base: dict[str, Any] = {"board": "b", "member": "alice", "value": 5, "occurred_at": NOW, "idempotency_key": "k1"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not _ABSENT}


def parse(raw: object, may_write: bool = True) -> Event | Result:
    return parse_event(raw, BOARDS, lambda board: may_write)


def verdict(parsed: Event | Result) -> tuple[object, ...]:
    """A result without its message (the tests of messages are below)."""
    assert isinstance(parsed, Result), parsed
    return (parsed.idempotency_key, parsed.status, parsed.reason)


def reason_of(raw: object, may_write: bool = True) -> str | None:
    parsed = parse(raw, may_write)
    if isinstance(parsed, Event):
        return None
    assert parsed.status is Status.REJECTED
    return parsed.reason.value if parsed.reason else None


def harness() -> EngineHarness:
    return EngineHarness(BOARDS, {"gs": ["*"], "narrow": ["other"]})


def outcome(h: EngineHarness, *events: object, now: int = NOW, server: str = "gs") -> list[str]:
    return [r.status.value if r.reason is None else r.reason.value for r in h.submit(server, list(events), now)]


# -- step 1: not an object, unknown board -------------------------------------------------------


@pytest.mark.parametrize("raw", [[], "event", 5, None, True, [event()]])
def test_an_event_that_is_not_an_object_is_invalid_event_with_a_null_key(raw: object) -> None:
    assert verdict(parse(raw)) == (None, Status.REJECTED, Reason.INVALID_EVENT)


@pytest.mark.parametrize("board", [_ABSENT, None, 5, ["b"], "nope", "B", ""])
def test_a_missing_unconfigured_or_non_string_board_is_unknown_board(board: object) -> None:
    assert verdict(parse(event(board=board))) == ("k1", Status.REJECTED, Reason.UNKNOWN_BOARD)


def test_unknown_board_wins_over_every_later_rule() -> None:
    assert reason_of(event(board="nope", member=None, value=1.5), may_write=False) == "unknown_board"


# -- step 2: forbidden --------------------------------------------------------------------------


def test_a_server_without_the_board_in_scope_is_forbidden() -> None:
    h = harness()
    assert outcome(h, event(), event(board="other", idempotency_key="k2"), server="narrow") == ["forbidden", "accepted"]


def test_forbidden_wins_over_a_malformed_event() -> None:
    assert reason_of(event(member=None, value="x"), may_write=False) == "forbidden"


# -- step 3: shape ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [_ABSENT, None, 7, "", "k" * 129, ["k"]])
def test_a_missing_empty_long_or_non_string_key_is_invalid_event(key: object) -> None:
    parsed = parse(event(idempotency_key=key))
    assert verdict(parsed) == (key if isinstance(key, str) else None, Status.REJECTED, Reason.INVALID_EVENT)


def test_keys_and_members_count_code_points_not_bytes() -> None:
    assert isinstance(parse(event(idempotency_key="é" * 128, member="😀" * 128)), Event)
    assert reason_of(event(member="😀" * 129)) == "invalid_event"


@pytest.mark.parametrize("member", [_ABSENT, None, 5, "", "m" * 129, "a\x00b", "tab\there", "new\nline", "\x7f", "x\x9f"])
def test_a_missing_empty_long_or_control_character_member_is_invalid_event(member: object) -> None:
    assert reason_of(event(member=member)) == "invalid_event"


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\udbff\udc00", "é\ud834"])
def test_a_lone_surrogate_in_a_member_or_key_is_invalid_event(text: str) -> None:
    """JSON's "\\ud800" escape reads as a lone surrogate: no Unicode scalar value, no UTF-8 form."""
    assert reason_of(event(member=text)) == "invalid_event"
    assert verdict(parse(event(idempotency_key=text))) == (text, Status.REJECTED, Reason.INVALID_EVENT)


def test_a_key_may_hold_any_unicode_scalar_value_even_u0000() -> None:
    parsed = parse(event(idempotency_key="\x00\U0010ffff\ud7ff\ue000"))
    assert isinstance(parsed, Event) and parsed.idempotency_key == "\x00\U0010ffff\ud7ff\ue000"


@pytest.mark.parametrize("member", ["a/b", "100%", "%2F", " spaced ", "\u00a0nbsp", "zero\u200bwidth", "Ünïcødé", "m" * 128])
def test_any_other_member_string_is_valid(member: str) -> None:
    parsed = parse(event(member=member))
    assert isinstance(parsed, Event) and parsed.member == member


@pytest.mark.parametrize("value", [_ABSENT, None, 3.0, 3.5, True, False, "5", [5], {"v": 5}])
def test_a_missing_float_bool_or_non_integer_value_is_invalid_event(value: object) -> None:
    assert reason_of(event(value=value)) == "invalid_event"


@pytest.mark.parametrize("occurred_at", [
    _ABSENT, None, 1.5, float(NOW), True, -1, -NOW, "", "yesterday", "2026-06-01T12:00:00", "2026-06-01 12:00:00Z",
    "2026-06-01T12:00Z", "2026-13-01T12:00:00Z", "2026-02-30T12:00:00Z", "2026-06-01T24:00:00Z",
    "2026-06-01T12:00:60Z", "2026-06-01T12:00:00+2400", "2026-06-01T12:00:00+24:00", "1969-12-31T23:59:59.999Z",
    "1970-01-01T00:30:00+01:00", "0001-01-01T00:00:00Z", str(NOW), [NOW],
])
def test_a_missing_malformed_or_negative_occurred_at_is_invalid_event(occurred_at: object) -> None:
    """Negative instants are invalid in both forms (was a bug: RFC 3339 before 1970 passed the
    shape check and then crashed the board actor in the calendar)."""
    assert reason_of(event(occurred_at=occurred_at)) == "invalid_event"


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-06-01T12:00:00Z", NOW),
    ("2026-06-01T12:00:00.000Z", NOW),
    ("2026-06-01t12:00:00z", NOW),
    ("2026-06-01T14:00:00+02:00", NOW),
    ("2026-06-01T06:30:00-05:30", NOW),
    ("2026-06-01T12:00:00-00:00", NOW),
    ("2026-06-01T12:00:00.9999Z", NOW + 999),  # finer than a millisecond is floored
    ("2026-06-01T12:00:00.1234567+00:00", NOW + 123),
    ("1970-01-01T00:00:00Z", 0),
    ("1970-01-01T05:30:00+05:30", 0),
])
def test_rfc3339_with_an_offset_is_read_as_epoch_milliseconds(text: str, expected: int) -> None:
    parsed = parse(event(occurred_at=text))
    assert isinstance(parsed, Event) and parsed.occurred_at == expected


def test_integer_occurred_at_zero_is_valid() -> None:
    parsed = parse(event(occurred_at=0))
    assert isinstance(parsed, Event) and parsed.occurred_at == 0


@pytest.mark.parametrize("meta", [[], [1], "text", 5, True, 1.5])
def test_meta_that_is_not_an_object_is_invalid_event(meta: object) -> None:
    assert reason_of(event(meta=meta)) == "invalid_event"


def test_null_meta_is_absent() -> None:
    for raw in (event(meta=None), event()):
        parsed = parse(raw)
        assert isinstance(parsed, Event) and parsed.meta is None


def test_meta_is_stored_as_compact_json() -> None:
    parsed = parse(event(meta={"level": 3, "tags": ["a", "b"], "x": {"y": None}}))
    assert isinstance(parsed, Event) and parsed.meta == '{"level":3,"tags":["a","b"],"x":{"y":null}}'


@pytest.mark.parametrize("meta", [{"k": "\ud800"}, {"\udc00": 1}, {"k": [{"deep": "x\udbffy"}]}, {"k": math.inf},
                                  {"k": [-math.inf]}, {"k": math.nan}])
def test_meta_that_json_text_cannot_carry_is_invalid_event(meta: dict[str, Any]) -> None:
    """A lone surrogate has no UTF-8 form; 1e400 reads as an infinity, which JSON cannot write."""
    assert reason_of(event(meta=meta)) == "invalid_event"


@pytest.mark.parametrize("number", [2**64, -(2**64) - 5, 10**40])
def test_meta_integers_beyond_64_bits_are_stored_exactly(number: int) -> None:
    parsed = parse(event(meta={"big": number, "n": None}))
    assert isinstance(parsed, Event) and parsed.meta == f'{{"big":{number},"n":null}}'


def test_meta_with_null_and_unicode_is_compact_utf8_json() -> None:
    parsed = parse(event(meta={"a": None, "é": "null ✓"}))
    assert isinstance(parsed, Event) and parsed.meta == '{"a":null,"é":"null ✓"}'


def test_meta_over_1024_bytes_of_compact_utf8_json_is_invalid_event() -> None:
    overhead = len(b'{"p":""}')
    fits = {"p": "x" * (MAX_META_BYTES - overhead)}
    assert len(orjson.dumps(fits)) == 1024
    assert isinstance(parse(event(meta=fits)), Event)
    assert reason_of(event(meta={"p": "x" * (MAX_META_BYTES - overhead + 1)})) == "invalid_event"
    # bytes, not code points: "é" is two bytes in UTF-8
    assert reason_of(event(meta={"p": "é" * ((MAX_META_BYTES - overhead) // 2 + 1)})) == "invalid_event"


def test_unknown_extra_fields_are_ignored() -> None:
    parsed = parse(event(extra=1, source="forged", seq=99))
    assert parsed == Event("b", "alice", 5, NOW, "k1", None)


def test_the_first_failing_shape_rule_rejects_and_echoes_the_key() -> None:
    parsed = parse(event(member=None, value=2.5, occurred_at="x"))
    assert verdict(parsed) == ("k1", Status.REJECTED, Reason.INVALID_EVENT)
    assert isinstance(parsed, Result) and parsed.message == "member: " + MEMBER_RULE + ", got null"


# -- step 4: duplicates and reused keys ---------------------------------------------------------


def test_the_same_key_and_payload_again_is_duplicate_and_changes_nothing() -> None:
    h = harness()
    assert outcome(h, event()) == ["accepted"]
    before = {k: t.digest() for k, t in h.engines["b"].tables.items()}
    assert outcome(h, event(), event(), now=NOW + 5) == ["duplicate", "duplicate"]
    assert {k: t.digest() for k, t in h.engines["b"].tables.items()} == before
    assert len(h.score_records("b")) == 1


def test_a_duplicate_is_decided_on_the_occurred_at_instant_not_its_spelling() -> None:
    h = harness()
    assert outcome(h, event()) == ["accepted"]
    assert outcome(h, event(occurred_at="2026-06-01T14:00:00.000+02:00"), event(occurred_at="2026-06-01T12:00:00.0009Z")) == [
        "duplicate", "duplicate"]


def test_a_duplicate_ignores_meta() -> None:
    h = harness()
    assert outcome(h, event(meta={"a": 1})) == ["accepted"]
    assert outcome(h, event(meta={"a": 2})) == ["duplicate"]


@pytest.mark.parametrize("change", [{"member": "bob"}, {"value": 6}, {"occurred_at": NOW + 1}])
def test_the_same_key_with_a_different_payload_is_idempotency_key_reused(change: dict[str, Any]) -> None:
    h = harness()
    assert outcome(h, event()) == ["accepted"]
    assert outcome(h, event(**change)) == ["idempotency_key_reused"]
    assert h.engines["b"].tables[(PeriodKind.ALLTIME, "alltime")].standing("alice") == (5, NOW, "")


def test_a_key_accepted_earlier_in_the_same_frame_counts() -> None:
    h = harness()
    assert outcome(h, event(), event(), event(value=7)) == ["accepted", "duplicate", "idempotency_key_reused"]


def test_a_key_accepted_earlier_in_the_same_batch_counts_across_frames() -> None:
    engine = BoardEngine(BOARDS["b"])
    e1 = Event("b", "alice", 5, NOW, "k1")
    e1_changed = Event("b", "alice", 6, NOW, "k1")
    plan = engine.decide([([e1], NOW, "gs"), ([e1, e1_changed], NOW + 1, "gs2")], {}, NOW + 1)
    assert [[r.status.value for r in results] for results in plan.results] == [["accepted"], ["duplicate", "rejected"]]
    assert len(accepted(plan)) == 1


def test_a_rejected_key_was_never_accepted_so_it_may_be_sent_again() -> None:
    h = harness()
    assert outcome(h, event(value=1000), event(value=5)) == ["value_out_of_range", "accepted"]
    assert outcome(h, event(idempotency_key="k2", value=1.5), event(idempotency_key="k2")) == ["invalid_event", "accepted"]


def test_keys_are_per_board() -> None:
    h = harness()
    assert outcome(h, event(), event(board="other")) == ["accepted", "accepted"]


@pytest.mark.parametrize(("late", "why"), [
    ({"value": 1000}, "out of range now"),
    ({}, "future now"),
    ({}, "closed now"),
])
def test_a_duplicate_beats_out_of_range_future_and_closed(late: dict[str, Any], why: str) -> None:
    """Step 4 comes first: a retry is a duplicate whatever the clock or config says now."""
    original = event(**late)
    known = {"k1": ("alice", original["value"], NOW, None)}
    spec = BOARDS["b"]
    now = NOW
    if why == "out of range now":  # accepted when max_value was 1000, then the bound tightened
        spec = BoardSpec("b", periods=spec.periods, max_value=100)
    elif why == "future now":  # a retry seen by a server whose clock is now behind
        now = NOW - 3_600_000
    else:  # the daily window closed long ago and the event's only window is closed
        spec = BoardSpec("b", periods=(PeriodKind.DAILY,))
        now = NOW + 3 * 86_400_000
    engine = BoardEngine(spec)
    raw = parse(original)
    assert isinstance(raw, Event)
    reused = Event(raw.board, "bob", raw.value, raw.occurred_at, raw.idempotency_key)
    plan = engine.decide([([raw, reused], now, "gs")], known, now)
    assert [(r.status.value, r.reason and r.reason.value) for r in plan.results[0]] == [
        ("duplicate", None), ("rejected", "idempotency_key_reused")]
    assert not accepted(plan)


def test_shape_beats_duplicate() -> None:
    h = harness()
    assert outcome(h, event()) == ["accepted"]
    assert outcome(h, event(value=5.0), event(board="nope")) == ["invalid_event", "unknown_board"]


# -- step 5: bounds ------------------------------------------------------------------------------


def test_value_above_max_is_value_out_of_range() -> None:
    assert outcome(harness(), event(value=101)) == ["value_out_of_range"]


def test_value_below_min_is_value_out_of_range() -> None:
    assert outcome(harness(), event(value=-11)) == ["value_out_of_range"]


def test_bounds_are_inclusive() -> None:
    assert outcome(harness(), event(value=-10), event(value=100, idempotency_key="k2")) == ["accepted", "accepted"]


def test_a_huge_integer_is_out_of_range_not_an_error() -> None:
    assert outcome(harness(), event(value=2**80), event(value=-(2**80), idempotency_key="k2")) == [
        "value_out_of_range", "value_out_of_range"]


def test_out_of_range_beats_future_and_closed() -> None:
    h = harness()
    assert outcome(h, event(value=1000, occurred_at=NOW + 86_400_000)) == ["value_out_of_range"]
    assert outcome(h, event(board="daily", value=-1, occurred_at=NOW - 3 * 86_400_000)) == ["value_out_of_range"]


# -- step 6: future ------------------------------------------------------------------------------


def test_occurred_at_past_now_plus_skew_is_occurred_in_future() -> None:
    assert outcome(harness(), event(occurred_at=NOW + 30_001)) == ["occurred_in_future"]


def test_occurred_at_exactly_now_plus_skew_is_accepted() -> None:
    assert outcome(harness(), event(occurred_at=NOW + 30_000)) == ["accepted"]


def test_future_is_judged_on_the_floored_millisecond() -> None:
    assert outcome(harness(), event(occurred_at="2026-06-01T12:00:30.0009Z")) == ["accepted"]
    assert outcome(harness(), event(occurred_at="2026-06-01T12:00:30.001Z")) == ["occurred_in_future"]


# -- step 7: closed ------------------------------------------------------------------------------


END = parse_rfc3339_ms("2026-06-02T00:00:00Z")


def test_an_event_for_a_closed_window_is_period_closed() -> None:
    h = harness()
    assert outcome(h, event(board="daily", occurred_at=NOW), now=END + 60_000) == ["period_closed"]


def test_an_event_received_just_before_the_close_moment_is_accepted() -> None:
    h = harness()
    assert outcome(h, event(board="daily", occurred_at=END - 1), now=END + 59_999) == ["accepted"]
    assert outcome(h, event(board="daily", occurred_at=END - 1, idempotency_key="k2"), now=END + 60_000) == [
        "period_closed"]


def test_routing_is_by_occurred_at_not_arrival() -> None:
    h = harness()
    assert outcome(h, event(board="daily", occurred_at=END - 1), now=END + 1) == ["accepted"]
    tables = h.engines["daily"].tables
    assert list(tables) == [(PeriodKind.DAILY, "2026-06-01")]


def test_period_closed_only_when_every_window_is_closed() -> None:
    h = harness()
    old = NOW - 10 * 86_400_000
    assert outcome(h, event(occurred_at=old)) == ["accepted"]  # "b" has alltime
    engine = h.engines["b"]
    assert (PeriodKind.DAILY, "2026-05-22") not in engine.tables
    assert engine.tables[(PeriodKind.ALLTIME, "alltime")].standing("alice") == (5, old, "")


def test_an_instant_with_no_nameable_window_counts_as_a_closed_window() -> None:
    """Was a bug: occurred_at in the first hours of 1970 on a board west of UTC (local date 1969)
    made the calendar raise inside decide, crashing the board actor on every retry."""
    west = {"ny": BoardSpec("ny", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY), timezone="America/New_York"),
            "nyd": BoardSpec("nyd", periods=(PeriodKind.DAILY, PeriodKind.MONTHLY), timezone="America/New_York")}
    h = EngineHarness(west)
    assert outcome(h, event(board="ny", occurred_at=1000), event(board="nyd", occurred_at=1000)) == [
        "accepted", "period_closed"]
    assert list(h.engines["ny"].tables) == [(PeriodKind.ALLTIME, "alltime")]
    assert h.engines["ny"].router.windows(1, 1000) == (h.engines["ny"].tables[(PeriodKind.ALLTIME, "alltime")].window,)


# -- step 8 / 9 and the frame --------------------------------------------------------------------


def test_an_accepted_event_is_journaled_once_and_applied_to_each_open_window() -> None:
    h = harness()
    assert outcome(h, event()) == ["accepted"]
    (record,) = h.score_records("b")
    assert (record.seq, record.received_at, record.source, record.event.member) == (1, NOW, "gs", "alice")
    assert sorted(h.engines["b"].tables) == [(PeriodKind.ALLTIME, "alltime"), (PeriodKind.DAILY, "2026-06-01")]


def test_unavailable_rejects_every_event_of_the_batch_with_its_key() -> None:
    """Step 9 is the actor's (journal write failed): nothing accepted, every key echoed."""
    events = [Event("b", "alice", 5, NOW, "k1"), Event("b", "bob", 5, NOW, "k2")]
    results = unavailable_results(events)
    assert [verdict(r) for r in results] == [("k1", Status.REJECTED, Reason.UNAVAILABLE), ("k2", Status.REJECTED, Reason.UNAVAILABLE)]
    assert all(r.message and r.message.startswith("board: cannot take events now") for r in results)


def test_a_bad_event_never_fails_its_neighbours_and_results_keep_submit_order() -> None:
    h = harness()
    frame = [event(), "junk", event(idempotency_key="k2", value=1000), event(board="nope", idempotency_key="k3"),
             event(idempotency_key="k4", member="bob"), event(), event(board="other", idempotency_key="k1")]
    results = h.submit("gs", frame, NOW)
    assert [(r.idempotency_key, r.status.value if r.reason is None else r.reason.value) for r in results] == [
        ("k1", "accepted"), (None, "invalid_event"), ("k2", "value_out_of_range"), ("k3", "unknown_board"),
        ("k4", "accepted"), ("k1", "duplicate"), ("k1", "accepted")]


def test_every_reason_code_is_covered_here() -> None:
    assert {r.value for r in Reason} == {
        "invalid_event", "unknown_board", "forbidden", "idempotency_key_reused", "value_out_of_range",
        "occurred_in_future", "outside_window", "period_closed", "unavailable", "board_retired"}


# -- a retired board: after rule 4 ------------------------------------------------------------------


def test_a_retired_board_rejects_new_events_after_the_duplicate_rule() -> None:
    h = harness()
    assert outcome(h, event(idempotency_key="k1", value=5)) == ["accepted"]
    engine = h.engines["b"]
    markers = engine.retirement(NOW + 1)
    assert {(m.window.kind, m.seq) for m in markers} == {(PeriodKind.ALLTIME, 2), (PeriodKind.DAILY, 3)} or \
        {(m.window.kind, m.seq) for m in markers} == {(PeriodKind.ALLTIME, 3), (PeriodKind.DAILY, 2)}
    for marker in markers:
        engine.close(marker)
    engine.last_seq = markers[-1].seq
    engine.retired = True
    assert all(table.closed for table in engine.tables.values())
    # a resend of an accepted event is still duplicate; a reused key still reused; value rules come after
    assert outcome(h, event(idempotency_key="k1", value=5), event(idempotency_key="k1", value=6),
                   event(idempotency_key="k2", value=5000)) == ["duplicate", "idempotency_key_reused", "board_retired"]
    assert engine.retirement(NOW + 2) == []  # nothing open is left to close


# -- messages: every rejection names the field and the rule, on one line --------------------------


def messages(h: EngineHarness, *events: object, now: int = NOW, server: str = "gs") -> list[str | None]:
    return [r.message for r in h.submit(server, list(events), now)]


@pytest.mark.parametrize(("fields", "message"), [
    ({"value": 3.5}, "value: must be an integer within [-10, 100], got 3.5"),
    ({"value": "5"}, 'value: must be an integer within [-10, 100], got "5"'),
    ({"value": True}, "value: must be an integer within [-10, 100], got true"),
    ({"occurred_at": _ABSENT}, "occurred_at: missing"),
    ({"occurred_at": "2026-12-06 02:00:00"}, f'occurred_at: {OCCURRED_AT_RULE}, got "2026-12-06 02:00:00"'),
    ({"occurred_at": -1}, f"occurred_at: {OCCURRED_AT_RULE}, got -1"),
    ({"member": ""}, f'member: {MEMBER_RULE}, got ""'),
    ({"idempotency_key": _ABSENT}, "idempotency_key: missing"),
    ({"idempotency_key": "k" * 129}, f'idempotency_key: {KEY_RULE}, got "{"k" * 58}…'),
    ({"meta": [1]}, "meta: must be an object, got [1]"),
    ({"meta": {"p": "x" * MAX_META_BYTES}}, f"meta: must be at most {MAX_META_BYTES} bytes as JSON, got"),
    ({"board": _ABSENT}, "board: missing"),
    ({"board": 5}, "board: must be a string, got 5"),
    ({"board": "nope"}, 'board: no board named "nope"'),
])
def test_a_shape_rejection_names_the_field_and_the_rule(fields: dict[str, Any], message: str) -> None:
    parsed = parse(event(**fields))
    assert isinstance(parsed, Result) and parsed.message is not None
    assert parsed.message.startswith(message) and "\n" not in parsed.message


def test_the_other_rejections_name_the_field_and_the_rule() -> None:
    assert parse("junk") == Result(None, Status.REJECTED, Reason.INVALID_EVENT, 'event: must be an object, got "junk"')
    assert parse(event(), may_write=False) == Result(
        "k1", Status.REJECTED, Reason.FORBIDDEN, 'board: this game server may not write board "b"')
    h = harness()
    assert messages(h, event(), event(value=6), event(value=101, idempotency_key="k2"),
                    event(occurred_at=NOW + 30_001, idempotency_key="k3")) == [
        None,
        "idempotency_key: was accepted before with another member, value or occurred_at",
        "value: must be an integer within [-10, 100], got 101",
        "occurred_at: must be at most 30s after the server's clock (2026-06-01T12:00:00.000Z), got 2026-06-01T12:00:30.001Z",
    ]
    assert messages(h, event(board="daily", occurred_at=NOW, idempotency_key="k4"), now=END + 60_000) == [
        "occurred_at: every period containing 2026-06-01T12:00:00.000Z is closed"]
