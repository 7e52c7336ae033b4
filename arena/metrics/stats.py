"""The last ten minutes, second by second, for `GET /v1/stats` (the console's charts).

A ring buffer of one slot per second: events by outcome, event→visibility lag and query latency.
`arena.metrics.Metrics` feeds it at the same call sites that feed Prometheus, so the charts and
`/metrics` count the same facts once each. A slot whose second has passed out of the window is
reset when its second comes round again, so memory stays fixed whatever the traffic.
In a cluster, `merged` makes one body of every node's.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from arena.engine.times import format_ms, parse_rfc3339_ms

SECONDS = 600


class Sample:
    """Durations observed in one second: how many, their sum and the largest (milliseconds)."""

    __slots__ = ("count", "total", "peak")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.peak = 0.0

    def add(self, ms: float) -> None:
        self.count += 1
        self.total += ms
        if ms > self.peak:
            self.peak = ms


class Second:
    """One slot of the ring: what happened during the wall-clock second ``second``."""

    __slots__ = ("second", "outcomes", "lag", "query")

    def __init__(self, second: int) -> None:
        self.second = second
        self.outcomes: Counter[tuple[str, str]] = Counter()  # (status, reason or "")
        self.lag = Sample()
        self.query = Sample()


class Stats:
    """Per-second series of the last ``seconds`` seconds of wall-clock time (``now``: epoch
    seconds, `time.time` unless a test gives its own clock). Recording is O(1); `answer` is
    O(seconds × series)."""

    def __init__(self, seconds: int = SECONDS, now: Callable[[], float] = time.time) -> None:
        self.seconds = seconds
        self._now = now
        self._ring = [Second(-1) for _ in range(seconds)]

    def _slot(self) -> Second:
        second = int(self._now())
        slot = self._ring[second % self.seconds]
        if slot.second != second:
            slot = self._ring[second % self.seconds] = Second(second)
        return slot

    def count(self, outcomes: Mapping[tuple[str, str], int]) -> None:
        """Add counts of (status, reason or "") to the current second."""
        self._slot().outcomes.update(outcomes)

    def visible(self, seconds: float) -> None:
        """A batch became queryable ``seconds`` after its frame was read."""
        self._slot().lag.add(seconds * 1000)

    def query(self, seconds: float) -> None:
        """A query took ``seconds`` inside the server."""
        self._slot().query.add(seconds * 1000)

    def answer(self) -> dict[str, object]:
        """The body of `GET /v1/stats`: every series oldest second first, one value per second of
        [start, end); a second with nothing recorded counts 0 (and has null durations)."""
        last = int(self._now())
        first = last - self.seconds + 1
        slots = [self._ring[s % self.seconds] for s in range(first, last + 1)]
        slots = [slot if slot.second == first + i else Second(first + i) for i, slot in enumerate(slots)]
        reasons = sorted({reason for slot in slots for status, reason in slot.outcomes if status == "rejected"})
        return {
            "seconds": self.seconds,
            "start": format_ms(first * 1000),
            "end": format_ms((last + 1) * 1000),
            "events": {
                "accepted": [slot.outcomes["accepted", ""] for slot in slots],
                "duplicate": [slot.outcomes["duplicate", ""] for slot in slots],
                "rejected": {reason: [slot.outcomes["rejected", reason] for slot in slots] for reason in reasons},
            },
            "visibility_ms": _durations([slot.lag for slot in slots]),
            "query_ms": _durations([slot.query for slot in slots]),
        }


def _durations(samples: list[Sample]) -> dict[str, list[int] | list[float | None]]:
    return {
        "count": [s.count for s in samples],
        "mean": [round(s.total / s.count, 3) if s.count else None for s in samples],
        "max": [round(s.peak, 3) if s.count else None for s in samples],
    }


def merged(answers: Sequence[Mapping[str, Any]]) -> dict[str, object]:
    """One body of several nodes' `Stats.answer` bodies, on the first one's seconds: counts
    summed second by second; durations' ``count`` summed, their ``mean`` and ``max`` the largest
    of any node that second (the slowest node is what a player waits for). Each answer's values
    are placed by its own ``start``, so a node whose clock is a second off adds to the right
    seconds; those outside the first answer's window are left out. O(nodes × seconds × series)."""
    first = answers[0]
    seconds: int = first["seconds"]
    start = parse_rfc3339_ms(first["start"])
    accepted, duplicate = [0] * seconds, [0] * seconds
    rejected: dict[str, list[int]] = {}
    durations: dict[str, dict[str, list[Any]]] = {key: {"count": [0] * seconds, "mean": [None] * seconds, "max": [None] * seconds}
                 for key in ("visibility_ms", "query_ms")}
    for answer in answers:
        shift = (parse_rfc3339_ms(answer["start"]) - start) // 1000
        events = answer["events"]
        _fold(accepted, events["accepted"], shift, sum)
        _fold(duplicate, events["duplicate"], shift, sum)
        for reason, values in events["rejected"].items():
            _fold(rejected.setdefault(reason, [0] * seconds), values, shift, sum)
        for key, series in durations.items():
            _fold(series["count"], answer[key]["count"], shift, sum)
            _fold(series["mean"], answer[key]["mean"], shift, max)
            _fold(series["max"], answer[key]["max"], shift, max)
    return {
        "seconds": seconds,
        "start": first["start"],
        "end": first["end"],
        "events": {"accepted": accepted, "duplicate": duplicate, "rejected": dict(sorted(rejected.items()))},
        **durations,
    }


def _fold(into: list[Any], values: Sequence[Any], shift: int, combine: Callable[[tuple[Any, Any]], Any]) -> None:
    """Combine ``values`` (one a second, from ``shift`` seconds into ``into``'s window) into
    ``into``; a null is no value."""
    for i, value in enumerate(values, shift):
        if 0 <= i < len(into) and value is not None:
            into[i] = value if into[i] is None else combine((into[i], value))
