"""Splitting a frame's events by board and merging the parts' answers back, alone: against an
oracle that answers each event where it stands."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.cluster.split import Split, merge, split
from arena.engine.events import Event, Reason, Result, Status

BOARDS = ["a", "b", "c"]


def answer(event: Event) -> Result:
    """The oracle: a board's answer for one of its events, known from the event alone."""
    status = Status.ACCEPTED if event.value % 2 == 0 else Status.DUPLICATE
    return Result(event.idempotency_key, status)


events = st.one_of(
    st.builds(lambda board, value, n: (Event(board, f"m{n}", value, 0, f"k{n}"), board),
              st.sampled_from(BOARDS), st.integers(0, 9), st.integers(0, 10**6)),
    st.builds(lambda board, n: (Result(f"r{n}", Status.REJECTED, Reason.INVALID_EVENT), board),
              st.sampled_from([*BOARDS, None]), st.integers(0, 10**6)),
)


# a seed, not st.randoms(): that strategy imports a module lazily, and CPython 3.11.7's AST
# parser (pytest rewrites the import) failed with "recursion depth mismatch" in a full run
@given(st.lists(events, min_size=1, max_size=60), st.integers(0, 2**32).map(random.Random))
def test_the_merged_ack_is_each_events_answer_in_event_order(frame: list[tuple[Event | Result, str | None]],
                                                              rnd: random.Random) -> None:
    parts = split(frame)
    answered = [(part, [answer(e) for e in part.events]) for part in parts.parts.values()]
    rnd.shuffle(answered)  # parts come back in any order
    expected = [e if isinstance(e, Result) else answer(e) for e, _ in frame]
    assert merge(parts, answered) == expected


@given(st.lists(events, min_size=1, max_size=60))
def test_each_board_gets_one_part_with_its_events_in_frame_order(frame: list[tuple[Event | Result, str | None]]) -> None:
    parts = split(frame)
    valid = [(i, e) for i, (e, _) in enumerate(frame) if isinstance(e, Event)]
    assert list(parts.parts) == list(dict.fromkeys(e.board for _, e in valid))
    for board, part in parts.parts.items():
        assert [(i, e) for i, e in valid if e.board == board] == list(zip(part.indexes, part.events, strict=True))
    rejected = [(b or "", e) for e, b in frame if isinstance(e, Result)]
    assert sorted((b, r) for b, rs in parts.rejected.items() for r in rs) == sorted(rejected)


def test_a_part_answered_with_the_wrong_number_of_results_is_an_error() -> None:
    frame = split([(Event("a", "m", 1, 0, "k1"), "a"), (Event("a", "m", 1, 0, "k2"), "a")])
    with pytest.raises(ValueError):
        merge(frame, [(frame.parts["a"], [Result("k1", Status.ACCEPTED)])])
    with pytest.raises(ValueError):
        merge(frame, [])
    assert merge(Split(0), []) == []

