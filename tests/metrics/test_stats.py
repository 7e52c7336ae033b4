"""The per-second ring behind `GET /v1/stats`, on a test clock: each fact lands in its second,
seconds that left the window read as nothing, and the series agree with a plain dict oracle."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given
from hypothesis import strategies as st

from arena.metrics.stats import Stats, merged

T0 = 1_796_083_200  # 2026-12-01T00:00:00Z


class TestClock:
    __test__ = False

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_counts_land_in_their_second_oldest_first() -> None:
    clock = TestClock(T0 + 0.2)
    stats = Stats(5, clock)
    stats.count({("accepted", ""): 3})
    clock.now = T0 + 2.9
    stats.count({("accepted", ""): 1, ("duplicate", ""): 2, ("rejected", "value_out_of_range"): 4})
    body = stats.answer()
    assert body["seconds"] == 5
    assert body["start"] == "2026-11-30T23:59:58.000Z" and body["end"] == "2026-12-01T00:00:03.000Z"
    events = body["events"]
    assert isinstance(events, dict)
    assert events["accepted"] == [0, 0, 3, 0, 1]
    assert events["duplicate"] == [0, 0, 0, 0, 2]
    assert events["rejected"] == {"value_out_of_range": [0, 0, 0, 0, 4]}


def test_a_second_that_left_the_window_reads_zero_even_before_its_slot_is_reused() -> None:
    clock = TestClock()
    stats = Stats(3, clock)
    stats.count({("accepted", ""): 7})
    stats.visible(0.002)
    clock.now = T0 + 3  # the same slot, not written again
    body = stats.answer()
    assert body["events"] == {"accepted": [0, 0, 0], "duplicate": [0, 0, 0], "rejected": {}}
    assert body["visibility_ms"] == {"count": [0, 0, 0], "mean": [None, None, None], "max": [None, None, None]}
    stats.count({("accepted", ""): 1})  # now it is reused: the old count is gone
    assert stats.answer()["events"] == {"accepted": [0, 0, 1], "duplicate": [0, 0, 0], "rejected": {}}


def test_durations_are_count_mean_and_max_in_milliseconds() -> None:
    clock = TestClock()
    stats = Stats(2, clock)
    for seconds in (0.001, 0.003, 0.0005):
        stats.query(seconds)
    stats.visible(0.010)
    body = stats.answer()
    assert body["query_ms"] == {"count": [0, 3], "mean": [None, 1.5], "max": [None, 3.0]}
    assert body["visibility_ms"] == {"count": [0, 1], "mean": [None, 10.0], "max": [None, 10.0]}


@given(st.lists(st.tuples(st.integers(0, 20), st.sampled_from(["accepted", "duplicate", "forbidden"]), st.integers(1, 5))))
def test_series_match_a_dict_of_seconds(steps: list[tuple[int, str, int]]) -> None:
    """Any sequence of waits and counts: each series holds, per second of the window, the sum of
    what was counted in that second (a dict keyed by second is the oracle)."""
    clock = TestClock()
    stats = Stats(10, clock)
    oracle: dict[tuple[int, str], int] = defaultdict(int)
    for wait, outcome, n in steps:
        clock.now += wait / 4
        key = ("rejected", outcome) if outcome == "forbidden" else (outcome, "")
        stats.count({key: n})
        oracle[int(clock.now), outcome] += n
    body = stats.answer()
    window = range(int(clock.now) - 9, int(clock.now) + 1)
    events = body["events"]
    assert isinstance(events, dict)
    assert events["accepted"] == [oracle[s, "accepted"] for s in window]
    assert events["duplicate"] == [oracle[s, "duplicate"] for s in window]
    forbidden = [oracle[s, "forbidden"] for s in window]
    assert events["rejected"] == ({"forbidden": forbidden} if any(forbidden) else {})


# -- a cluster's figures: `merged` -----------------------------------------------------------------


def test_merged_sums_counts_and_takes_the_largest_duration_of_any_node() -> None:
    a, b = TestClock(T0 + 0.5), TestClock(T0 + 0.5)
    here, there = Stats(3, a), Stats(3, b)
    here.count({("accepted", ""): 2, ("rejected", "forbidden"): 1})
    there.count({("accepted", ""): 5, ("rejected", "value_out_of_range"): 1})
    here.query(0.002)
    there.query(0.001)
    there.query(0.009)
    body = merged([here.answer(), there.answer()])
    assert body["events"] == {"accepted": [0, 0, 7], "duplicate": [0, 0, 0],
                              "rejected": {"forbidden": [0, 0, 1], "value_out_of_range": [0, 0, 1]}}
    assert body["query_ms"] == {"count": [0, 0, 3], "mean": [None, None, 5.0], "max": [None, None, 9.0]}
    assert (body["start"], body["end"]) == (here.answer()["start"], here.answer()["end"])


@given(st.lists(st.tuples(st.integers(-2, 2), st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4),
                                                                   st.integers(1, 50)), max_size=8)),
                min_size=1, max_size=4))
def test_merged_equals_a_dict_of_seconds_over_every_node(nodes: list[tuple[int, list[tuple[int, int, int]]]]) -> None:
    """Nodes whose clocks are off by up to 2 s, each with counts and query times in some seconds:
    the merge, on the first node's window, holds per second the sum of the counts and the largest
    mean and max of any node (dicts keyed by absolute second are the oracle)."""
    seconds = 6
    now = T0 + 10
    answers = []
    counts: dict[int, int] = defaultdict(int)
    means: dict[int, list[float]] = defaultdict(list)
    peaks: dict[int, list[float]] = defaultdict(list)
    for skew, steps in nodes:
        clock = TestClock(now + skew)
        stats = Stats(seconds, clock)
        per_second: dict[int, list[float]] = defaultdict(list)
        for back, n, ms in steps:
            clock.now = now + skew - back
            stats.count({("accepted", ""): n})
            stats.query(ms / 1000)
            counts[int(clock.now)] += n
            per_second[int(clock.now)].append(float(ms))
        for second, values in per_second.items():
            means[second].append(round(sum(values) / len(values), 3))
            peaks[second].append(max(values))
        clock.now = now + skew
        answers.append(stats.answer())
    window = range(now + nodes[0][0] - seconds + 1, now + nodes[0][0] + 1)
    body = merged(answers)
    assert body["events"]["accepted"] == [counts[s] for s in window]  # type: ignore[index]
    query = body["query_ms"]
    assert query["mean"] == [max(means[s]) if means[s] else None for s in window]  # type: ignore[index]
    assert query["max"] == [max(peaks[s]) if peaks[s] else None for s in window]  # type: ignore[index]
