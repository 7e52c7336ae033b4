"""The engine against a from-scratch oracle (support/oracle.py): acks, standings, closes, retention.

Random boards (every aggregation, order, tie rule, period set, fixed-offset timezones, grace and
skew), a five-member alphabet, a few distinct occurred_at values (so equal scores and equal
timestamps happen), negative values, exact retries, reused keys, and a clock that walks across the
close moments of hourly, daily, weekly and monthly windows.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.engine_harness import EngineHarness
from support.oracle import (
    MEMBERS,
    Frame,
    OBoard,
    OEvent,
    Oracle,
    boards_and_frames,
    check_engine,
    drive,
    engine_rows,
    local_base,
    oboards,
    slots,
    spec_of,
    wire,
)

PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(boards_and_frames())
def test_acks_tables_closes_and_retention_match_the_oracle(case: tuple[OBoard, list[Frame]]) -> None:
    board, frames = case
    harness, oracle = drive(board, frames)  # asserts every ack on the way
    last_tick = max((f.now for f in frames if f.tick), default=None)
    check_engine(harness.engines["b"], oracle, frames[-1].now, last_tick)


@st.composite
def open_event_sets(draw: st.DrawFn) -> tuple[OBoard, list[OEvent]]:
    """A board whose windows all stay open, and events with one payload per key plus retries."""
    board = draw(oboards(grace=2 * 86_400_000, skew=86_400_000))
    times = slots(board.timezone)
    distinct = draw(st.lists(
        st.tuples(st.sampled_from(MEMBERS), st.integers(-5, 5), st.sampled_from(times)), min_size=1, max_size=25,
    ))
    events = [OEvent(m, v, t, f"k{i}") for i, (m, v, t) in enumerate(distinct)]
    retries = draw(st.lists(st.sampled_from(events), max_size=10))
    return board, events + retries


@PROPERTY
@given(open_event_sets(), st.randoms(use_true_random=False), st.integers(1, 8))
def test_standings_of_open_tables_do_not_depend_on_arrival_order(
    case: tuple[OBoard, list[OEvent]], rnd: random.Random, frame_size: int
) -> None:
    board, events = case
    now = local_base(board.timezone) + 4 * 3_600_000
    digests = []
    for attempt in range(2):
        order = list(events)
        if attempt:
            rnd.shuffle(order)
        harness = EngineHarness({"b": spec_of(board)})
        oracle = Oracle(board)
        for i in range(0, len(order), frame_size):
            frame = order[i : i + frame_size]
            assert wire(harness.submit("gs", [e.raw("b") for e in frame], now)) == oracle.submit(frame, now)
        tables = harness.engines["b"].tables
        assert {(str(k), p): engine_rows(t) for (k, p), t in tables.items() if len(t)} == oracle.tables()
        partitions = harness.engines["b"].partitions
        assert {(str(k), p, r): engine_rows(t) for (k, p), parts in partitions.items() for r, t in parts.items() if len(t)} == (
            oracle.partitions())
        digests.append({key: t.digest() for key, t in tables.items()})
    assert digests[0] == digests[1]


@PROPERTY
@given(boards_and_frames(), st.integers(0, 3))
def test_retries_and_reused_keys_change_nothing_whatever_the_clock(
    case: tuple[OBoard, list[Frame]], later_hours: int
) -> None:
    board, frames = case
    harness, oracle = drive(board, frames)
    engine = harness.engines["b"]
    before = {key: t.digest() for key, t in engine.tables.items()}
    accepted = [r.event for r in harness.score_records("b")]
    later = frames[-1].now + later_hours * 3_600_000  # possibly after every close
    retries: list[dict[str, Any]] = [
        {"board": "b", "member": e.member, "value": e.value, "occurred_at": e.occurred_at, "idempotency_key": e.idempotency_key,
         **({"region": e.region} if e.region is not None else {})}
        for e in accepted
    ]
    assert {r.status.value for r in harness.submit("gs", retries, later)} <= {"duplicate"}
    changed = [dict(r, value=r["value"] + 1) for r in retries] + [dict(r, member=r["member"] + "x") for r in retries]
    if board.regions:  # the region is part of the payload: another one, or none, is another event
        changed += [{k: v for k, v in r.items() if k != "region"} if "region" in r else dict(r, region=board.regions[0])
                    for r in retries]
    results = harness.submit("gs", changed, later)
    assert {(r.status.value, r.reason and r.reason.value) for r in results} <= {("rejected", "idempotency_key_reused")}
    assert len(harness.score_records("b")) == len(accepted)
    after = {key: t.digest() for key, t in engine.tables.items() if key in before}
    assert after == before


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["best", "sum", "latest"]),
    st.sampled_from(["desc", "asc"]),
    st.sampled_from(["earliest", "latest"]),
    st.lists(st.tuples(st.sampled_from(MEMBERS), st.integers(-3, 3), st.integers(0, 3)), min_size=1, max_size=30),
)
def test_ties_break_on_reached_at_then_member_string(
    aggregation: str, order: str, tie: str, raw: list[tuple[str, int, int]]
) -> None:
    """Few values and four instants: nearly every pair of members ties on score, many on both."""
    board = OBoard(aggregation=aggregation, order=order, tie=tie, min_value=-3, max_value=3)
    base = local_base("UTC")
    events = [OEvent(m, v, base + t, f"k{i}") for i, (m, v, t) in enumerate(raw)]
    harness = EngineHarness({"b": spec_of(board)})
    harness.submit("gs", [e.raw("b") for e in events], base + 10)
    (table,) = harness.engines["b"].tables.values()
    assert engine_rows(table) == Oracle(board, applied={("alltime", "alltime"): events}).tables()[("alltime", "alltime")]


def test_the_oracle_reads_the_worked_example_like_the_contract() -> None:
    """Guard for the oracle itself: DESIGN.md's worked example, by hand."""
    h = 3_600_000
    base = local_base("UTC")
    ev = [OEvent("A", 50, base + 10 * h, "1"), OEvent("B", 50, base + 9 * h, "2"), OEvent("C", 40, base + 8 * h, "3"),
          OEvent("A", 60, base + 11 * h, "4"), OEvent("B", 20, base + 12 * h, "5")]

    def ranks(**kw: Any) -> list[tuple[str, int]]:
        oracle = Oracle(OBoard(**kw), applied={("alltime", "alltime"): ev})
        return [(m, s) for _r, m, s, _t in oracle.tables()[("alltime", "alltime")]]

    assert ranks() == [("A", 60), ("B", 50), ("C", 40)]
    assert ranks(aggregation="sum") == [("A", 110), ("B", 70), ("C", 40)]
    assert ranks(aggregation="latest") == [("A", 60), ("C", 40), ("B", 20)]
    ev[4] = OEvent("B", 60, base + 10 * h + h // 2, "5")
    assert ranks() == [("B", 60), ("A", 60), ("C", 40)]
    assert ranks(tie="latest") == [("A", 60), ("B", 60), ("C", 40)]
