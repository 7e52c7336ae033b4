"""The outbox's pure rules: delivery ids, pages, the backoff schedule and a delivery's life as a
table of moves; and the signature rule the server signs with and a receiver verifies with."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.delivery.outbox import MOVES, PAGE_AWARDS, Delivery, Outcome, State, backoff_ms, deliveries, from_row, stored
from arena.engine.settlement import LogItem
from arena.errors import IllegalTransition
from arena_client import verify_signature
from arena_client.signature import sign


def item(awards: int, revision: int = 0, partition: str | None = None) -> LogItem:
    return LogItem(7, "hs", "weekly", "2027-W01", partition, revision, 12, "ab" * 32, awards)


def test_a_revision_is_one_delivery_up_to_a_page_then_one_per_page_and_none_when_empty() -> None:
    assert deliveries("w", item(0), 1000) == []
    (one,) = deliveries("w", item(PAGE_AWARDS), 1000)
    assert one.id == "hs/weekly/2027-W01/*/0" and one.offset == 0 and one.state is State.PENDING and one.next_at == 1000
    paged = deliveries("w", item(2 * PAGE_AWARDS + 1, revision=3, partition="eu"), 1000)
    assert [d.id for d in paged] == [f"hs/weekly/2027-W01/eu/3/{page}" for page in (1, 2, 3)]
    assert [d.offset for d in paged] == [0, PAGE_AWARDS, 2 * PAGE_AWARDS]


@given(st.integers(1, 100), st.floats(0.001, 10))
def test_the_backoff_doubles_from_the_first_wait_and_stops_at_ten_minutes(attempts: int, first: float) -> None:
    wait = backoff_ms(attempts, first)
    assert wait == round(min(600.0, first * 2 ** (attempts - 1)) * 1000)
    assert backoff_ms(attempts + 1, first) >= wait
    assert backoff_ms(1, 1.0) == 1000 and backoff_ms(11, 1.0) == 600_000


def test_a_delivery_moves_by_its_table_only() -> None:
    (d,) = deliveries("w", item(3), 1000)
    failed = d.moved(Outcome.ERROR, 2000, backoff_seconds=1.0, error="HTTP 500")
    assert (failed.state, failed.attempts, failed.next_at, failed.last_error) == (State.PENDING, 1, 3000, "HTTP 500")
    again = failed.moved(Outcome.ERROR, 3000, backoff_seconds=1.0, error="x" * 1000)
    assert again.next_at == 5000 and len(again.last_error or "") == 500
    done = again.moved(Outcome.DELIVERED, 5000)
    assert (done.state, done.attempts, done.delivered_at, done.last_error) == (State.DELIVERED, 3, 5000, None)
    with pytest.raises(IllegalTransition):
        done.moved(Outcome.ERROR, 6000)
    retried = done.moved(Outcome.RETRY, 9000)
    assert (retried.state, retried.next_at, retried.since_at, retried.delivered_at) == (State.PENDING, 9000, 9000, None)
    assert set(MOVES[State.FAILED]) == {Outcome.RETRY}


def test_a_failed_attempt_past_the_max_age_gives_the_delivery_up() -> None:
    (d,) = deliveries("w", item(3), 0)
    assert d.failed_outcome(3_599_999, 1.0) is Outcome.ERROR
    assert d.failed_outcome(3_600_000, 1.0) is Outcome.FAILED
    assert d.moved(Outcome.FAILED, 3_600_000, error="gone").state is State.FAILED


def test_a_delivery_is_stored_and_read_back_as_it_was() -> None:
    (d,) = deliveries("w", item(3, partition="eu"), 1000)
    row = stored(d)
    assert row[-1] == d.id
    assert from_row((*row[:-1], 5)) == Delivery(**{**{f: getattr(d, f) for f in d.__slots__}, "place": 5})
    (g,) = deliveries("w", item(3), 1000)
    assert stored(g)[4] == "*" and from_row((*stored(g)[:-1], 1)).partition is None


def test_a_signature_verifies_with_either_secret_and_not_when_changed_or_old() -> None:
    body = b'{"revision":0}'
    header = sign(["new", "old"], body, timestamp=1_800_000_000)
    assert header.startswith("t=1800000000,v1=") and header.count("v1=") == 2
    for secrets in ("new", "old", ["other", "old"]):
        assert verify_signature(secrets, {"Arena-Signature": header}, body, now=1_800_000_100)
    assert verify_signature("new", {"arena-signature": header}, body, now=1_800_000_000)  # any case of the name
    assert not verify_signature("other", {"Arena-Signature": header}, body, now=1_800_000_000)
    assert not verify_signature("new", {"Arena-Signature": header}, body + b" ", now=1_800_000_000)
    assert not verify_signature("new", {"Arena-Signature": header}, body, now=1_800_000_301)  # a replay, too old
    assert not verify_signature("new", {}, body)
    assert not verify_signature("new", {"Arena-Signature": "v1=00"}, body)
