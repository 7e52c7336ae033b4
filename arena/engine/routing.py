"""The routing rule, written once, and the plan a live decision makes by it.

Routing rule: a score record applies to the window of each period kind that holds its
``occurred_at``, unless that window's close marker has a smaller seq. Where a period has no
window (a custom period's gaps; the first hours of 1970 on a board west of UTC, which the calendar
cannot name and which closed decades before any event can arrive) it takes nothing.
`Route.windows` is that rule; the live path (`BoardEngine.decide`), the replay (`Router.routed`,
for `arena.engine.loader.Loader` and a snapshot's tail) and a void's recompute all call it, so a
rebuild equals the live tables. Whenever the live path finds a window closed by the clock, it
journals the marker first, so a replay never needs the clock or today's grace.

A `Plan` is what the live decision (`BoardEngine.decide`, validation steps 4-8 of a drained
batch) makes of a batch: results and records to journal, and the windows each record takes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from arena.engine.events import Event, Fingerprint, Result
from arena.engine.periods import Window
from arena.engine.records import CloseRecord, Record
from arena.engine.schedule import Schedule

TableKey = tuple[str, str]
"""(period name, period_id): one table of a board."""
NO_MARKER = math.inf
"""The marker seq of a window that has no close marker: every record applies to it."""


class Route:
    """The windows of every kind that hold the instants in ``[start, end)``, each with the seq of
    its close marker (`NO_MARKER` without one)."""

    __slots__ = ("start", "end", "legs", "outside", "first_marker", "_all", "_last_marker", "_after")

    def __init__(self, start: float, end: float, legs: tuple[tuple[Window, float], ...], outside: bool = False) -> None:
        self.start = start
        self.end = end
        self.legs = legs
        self.outside = outside
        """Validation rule 7's first half: no window of any of the board's periods holds these
        instants (`outside_window`). A window that holds them but cannot be named is not outside:
        it has no leg, as if closed."""
        markers = [marker for _window, marker in legs]
        self._all = tuple(window for window, _marker in legs)
        self.first_marker = min(markers, default=NO_MARKER)
        """Every record with a smaller seq applies to every window of the route."""
        self._last_marker = max((m for m in markers if m != NO_MARKER), default=-1)
        self._after = tuple(window for window, marker in legs if marker == NO_MARKER)

    def windows(self, seq: int) -> tuple[Window, ...]:
        """The routing rule: the windows a record with ``seq`` applies to. O(1) unless ``seq`` lies
        between two of the route's markers (O(kinds))."""
        if seq < self.first_marker:
            return self._all
        if seq > self._last_marker:
            return self._after
        return tuple(window for window, marker in self.legs if seq < marker)


NOWHERE = Route(0, -1, ())
"""A route holding no instant."""

ScoreRow = tuple[int, str, int, int, str, str | None]
"""(seq, member, value, occurred_at, idempotency_key, region): what replay needs of a score
event, as a journal scans it."""
Routed = tuple[tuple[Window, ...], str, int, int, str, str | None]
"""A score event with the windows it applies to: (windows, member, value, occurred_at, key,
partition). It applies to each window's global table and, with a partition, to that partition
of each window's table too."""
PartitionKey = tuple[str, str, str]
"""(period name, period_id, partition): one partition of a window's table."""


def table_key(window: Window, partition: str | None = None) -> TableKey | PartitionKey:
    """The key of a window's global table, or of one of its partitions."""
    return (window.kind, window.period_id) if partition is None else (window.kind, window.period_id, partition)


class Router:
    """Routes of instants for one board, given where its close markers stand. Keeps the last few
    routes: events mostly share their windows. Call `forget` when a marker is added."""

    __slots__ = ("schedule", "kinds", "marker_seq", "_recent")

    _KEEP = 8

    def __init__(self, schedule: Schedule, kinds: Sequence[str], marker_seq: Callable[[TableKey], float]) -> None:
        self.schedule = schedule
        self.kinds = tuple(kinds)
        self.marker_seq = marker_seq
        self._recent: list[Route] = []

    def route(self, occurred_at: int) -> Route:
        """The route of an instant. O(1) for an instant in a recent route, else O(kinds)."""
        for route in self._recent:
            if route.start <= occurred_at < route.end:
                return route
        legs = []
        start, end = -math.inf, math.inf
        unnamed = False
        for kind in self.kinds:
            window = window_at(self.schedule, kind, occurred_at)
            if window is None:
                gap = self.schedule.gap_at(kind, occurred_at)
                if gap is None:
                    unnamed = True
                    start = end = occurred_at  # an empty span: this route is not reused
                else:
                    start, end = max(start, gap[0]), min(end, gap[1])
                continue
            if window.start_ms is not None and window.start_ms > start:
                start = window.start_ms
            if window.end_ms is not None and window.end_ms < end:
                end = window.end_ms
            legs.append((window, self.marker_seq((kind, window.period_id))))
        route = Route(start, end, tuple(legs), outside=not legs and not unnamed)
        self._recent.insert(0, route)
        del self._recent[self._KEEP :]
        return route

    def windows(self, seq: int, occurred_at: int) -> tuple[Window, ...]:
        """The windows a journaled record applies to (`Route.windows`)."""
        return self.route(occurred_at).windows(seq)

    def routed(self, rows: Iterable[ScoreRow], voided: Container[int] = ()) -> Iterator[Routed]:
        """Journaled score rows routed: each one whose seq is not in ``voided``, with the windows
        it applies to (`Route.windows`), in order. O(1) a row while rows share their route."""
        route = NOWHERE
        for seq, member, value, occurred_at, key, region in rows:
            if seq in voided:
                continue
            if not route.start <= occurred_at < route.end:
                route = self.route(occurred_at)
            yield route.windows(seq), member, value, occurred_at, key, region

    def forget(self) -> None:
        """Drop the kept routes: a marker was added, so their marker seqs may be stale. O(1)."""
        self._recent.clear()


def window_at(schedule: Schedule, kind: str, ms: int) -> Window | None:
    """The window of ``kind`` holding the instant ``ms``, or None where there is none (see the
    module docstring). O(1) usually."""
    try:
        return schedule.window_at(kind, ms)
    except ValueError:
        return None


Intake = tuple[Sequence[Event], int, str]
"""One frame's events for this board, with the frame's received_at and the writing server."""


@dataclass(slots=True)
class Plan:
    """What one drained batch does: answers per intake, and records to journal in seq order.

    ``closing``, ``fresh`` and ``seen`` are the tables it closes and creates and the keys it
    accepts: a batch decided while this one is in flight is decided as if it were committed."""

    results: list[list[Result]]
    records: list[Record] = field(default_factory=list)
    routes: dict[int, tuple[Window, ...]] = field(default_factory=dict)
    base_seq: int = 0
    """The seq this plan's records follow: the journal holds exactly this much when it was not written."""
    last_seq: int = 0
    closing: dict[TableKey, CloseRecord] = field(default_factory=dict)
    fresh: dict[TableKey, Window] = field(default_factory=dict)
    seen: dict[str, Fingerprint] = field(default_factory=dict)
