"""The routing rule, written once, and the live decision it drives.

Routing rule: a score record applies to the window of each period kind that holds its
``occurred_at``, unless that window's close marker has a smaller seq. A window the calendar
cannot name (the first hours of 1970 on a board west of UTC; it closed decades before any event
can arrive) takes nothing. `Route.windows` is that rule; the live path (`decide`), the replay
(`Router.routed`, for `arena.engine.loader.Loader` and a snapshot's tail) and a void's recompute
all call it, so a rebuild equals the live tables. Whenever the live path finds a window closed by the clock, it journals the marker first,
so a replay never needs the clock or today's grace.

`decide` is validation steps 4-8 of a drained batch: results and records to journal, no state
change (`BoardEngine.decide` keeps the plans in flight; `BoardEngine.commit_steps` applies one).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from arena.engine.events import Event, Fingerprint, Reason, Result, Status
from arena.engine.periods import Calendar, PeriodKind, Window
from arena.engine.records import CloseRecord, Record, ScoreRecord

if TYPE_CHECKING:
    from arena.engine.board import BoardEngine

TableKey = tuple[PeriodKind, str]
K = TypeVar("K")
V = TypeVar("V")
NO_MARKER = math.inf
"""The marker seq of a window that has no close marker: every record applies to it."""


class Route:
    """The windows of every kind that hold the instants in ``[start, end)``, each with the seq of
    its close marker (`NO_MARKER` without one)."""

    __slots__ = ("start", "end", "legs", "first_marker", "_all", "_last_marker", "_after")

    def __init__(self, start: float, end: float, legs: tuple[tuple[Window, float], ...]) -> None:
        self.start = start
        self.end = end
        self.legs = legs
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

ScoreRow = tuple[int, str, int, int, str]
"""(seq, member, value, occurred_at, idempotency_key): what replay needs of a score event, as a
journal scans it."""
Routed = tuple[tuple[Window, ...], str, int, int, str]
"""A score event with the windows it applies to: (windows, member, value, occurred_at, key)."""


class Router:
    """Routes of instants for one board, given where its close markers stand. Keeps the last few
    routes: events mostly share their windows. Call `forget` when a marker is added."""

    __slots__ = ("calendar", "kinds", "marker_seq", "_recent")

    _KEEP = 8

    def __init__(self, calendar: Calendar, kinds: Sequence[PeriodKind], marker_seq: Callable[[TableKey], float]) -> None:
        self.calendar = calendar
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
        for kind in self.kinds:
            window = window_at(self.calendar, kind, occurred_at)
            if window is None:
                start = end = occurred_at  # an empty span: this route is not reused
                continue
            if window.start_ms is not None and window.start_ms > start:
                start = window.start_ms
            if window.end_ms is not None and window.end_ms < end:
                end = window.end_ms
            legs.append((window, self.marker_seq((kind, window.period_id))))
        route = Route(start, end, tuple(legs))
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
        for seq, member, value, occurred_at, key in rows:
            if seq in voided:
                continue
            if not route.start <= occurred_at < route.end:
                route = self.route(occurred_at)
            yield route.windows(seq), member, value, occurred_at, key

    def forget(self) -> None:
        """Drop the kept routes: a marker was added, so their marker seqs may be stale. O(1)."""
        self._recent.clear()


def window_at(calendar: Calendar, kind: PeriodKind, ms: int) -> Window | None:
    """The window of ``kind`` holding the instant ``ms``, or None when the calendar cannot name
    it (see the module docstring). O(1) usually."""
    try:
        return calendar.window_at(kind, ms)
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


def decide(
    board: BoardEngine, batch: Sequence[Intake], known: Mapping[str, Fingerprint], close_until: int, ahead: Sequence[Plan]
) -> Plan:
    """Validation steps 4-8 for a batch, in order, as if the plans ``ahead`` (in flight, in
    order) were committed; no state changes. O(events * kinds) at worst, O(events) when they
    share their windows.

    ``known`` holds the journaled fingerprints of the batch's keys (from the journal's index);
    ``close_until`` is the instant up to which tables may be closed after the batch.
    """
    base_seq = ahead[-1].last_seq if ahead else board.last_seq
    plan = Plan(results=[], base_seq=base_seq, last_seq=base_seq)
    closing, fresh, seen = plan.closing, plan.fresh, plan.seen
    closing_ahead = _union([p.closing for p in ahead])
    fresh_ahead = _union([p.fresh for p in ahead])
    seen_ahead = _union([p.seen for p in ahead])
    markers = board.markers

    def marker_seq(key: TableKey) -> float:
        marker = markers.get(key) or closing.get(key) or closing_ahead.get(key)
        return NO_MARKER if marker is None else marker.seq

    router = Router(board.calendar, board.kinds, marker_seq)

    def add_marker(window: Window, moment: int) -> None:
        plan.last_seq += 1
        marker = CloseRecord(plan.last_seq, window, moment)
        closing[(window.kind, window.period_id)] = marker
        plan.records.append(marker)
        router.forget()

    def close_due(until: int) -> None:
        due = []
        tables = ((k, t.window) for k, t in board.tables.items())
        for key, window in itertools.chain(tables, fresh_ahead.items(), fresh.items()):
            moment = board.close_moment(window)
            if moment is not None and moment <= until and marker_seq(key) == NO_MARKER:
                due.append((moment, window))
        for moment, window in sorted(due, key=lambda d: (d[0], d[1].kind)):
            add_marker(window, moment)

    def open_windows(occurred_at: int, received_at: int) -> tuple[Route, tuple[Window, ...]]:
        """The route of an event received at ``received_at`` (closing first the windows whose
        moment it has reached) and the windows its record takes."""
        route = router.route(occurred_at)
        for window, marker in route.legs:
            moment = board.close_moment(window)
            if marker == NO_MARKER and moment is not None and received_at >= moment:
                add_marker(window, moment)
        route = router.route(occurred_at)
        windows = route.windows(plan.last_seq + 1)
        for window in windows:
            key = (window.kind, window.period_id)
            if key not in board.tables and key not in fresh_ahead:
                fresh[key] = window
        return route, windows

    spec = board.spec
    # The last route and the windows it gives: a route depends only on the instant's windows and
    # on received_at, and a batch's events mostly share both.
    route: Route | None = None
    windows: tuple[Window, ...] = ()
    routed_at: int | None = None
    for events, received_at, source in batch:
        close_due(received_at)
        results: list[Result] = []
        for event in events:
            key = event.idempotency_key
            fingerprint = event.fingerprint
            prior = seen.get(key) or seen_ahead.get(key) or known.get(key)
            if prior is not None:
                if prior == fingerprint:
                    results.append(Result(key, Status.DUPLICATE))
                else:
                    results.append(Result(key, Status.REJECTED, Reason.IDEMPOTENCY_KEY_REUSED))
                continue
            if not spec.min_value <= event.value <= spec.max_value:
                results.append(Result(key, Status.REJECTED, Reason.VALUE_OUT_OF_RANGE))
                continue
            if event.occurred_at > received_at + spec.max_future_skew_ms:
                results.append(Result(key, Status.REJECTED, Reason.OCCURRED_IN_FUTURE))
                continue
            if received_at != routed_at or route is None or not route.start <= event.occurred_at < route.end:
                route, windows = open_windows(event.occurred_at, received_at)
                routed_at = received_at
            if not windows:
                results.append(Result(key, Status.REJECTED, Reason.PERIOD_CLOSED))
                continue
            plan.last_seq += 1
            plan.records.append(ScoreRecord(plan.last_seq, event, received_at, source))
            plan.routes[plan.last_seq] = windows
            seen[key] = fingerprint
            results.append(Result(key, Status.ACCEPTED))
        plan.results.append(results)
    close_due(close_until)
    return plan


def _union(maps: list[dict[K, V]]) -> dict[K, V]:
    """One dict of ``maps`` (disjoint keys): the map itself when only one has entries, the
    common case of one plan in flight."""
    full = [m for m in maps if m]
    if len(full) == 1:
        return full[0]
    return {k: v for m in full for k, v in m.items()}
