"""One board's tables and the rules that route, close and replay events. Pure: the actor
supplies the clock, the known idempotency keys and the journal; this module decides.

The live path is two steps so that nothing is applied that is not journaled:
`BoardEngine.decide` turns a drained batch into a `Plan` (results + records to journal, no
state change), the actor journals ``plan.records`` in one transaction, then
`BoardEngine.commit` applies them. Replay (`Loader`) applies journaled records with the same
routing and the same folds, so a rebuild equals the live tables.

Routing invariant: a score record applies to the window of each period kind that contains its
``occurred_at``, unless that window's close marker has a smaller seq. Whenever the live path
finds a window closed by the clock, it journals the marker first, so replay never needs the
clock or today's grace.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arena.engine.events import Event, Fingerprint, Reason, Result, Status
from arena.engine.periods import Calendar, PeriodKind, UnknownPeriod, Window
from arena.engine.rankkey import pack
from arena.engine.records import CloseRecord, Record, ScoreRecord, StoredEvent
from arena.engine.scoring import Aggregation, Order, ScoringRule, Tie
from arena.engine.table import RankedTable
from arena.errors import not_found, not_ready

TableKey = tuple[PeriodKind, str]

SHORT_KINDS = (PeriodKind.HOURLY, PeriodKind.DAILY, PeriodKind.WEEKLY)
"""The kinds whose current tables load (and answer) first after a restart."""


@dataclass(frozen=True, slots=True)
class BoardSpec:
    """A board as configured. Only `definition` is fixed for the life of its journal."""

    name: str
    aggregation: Aggregation = Aggregation.BEST
    order: Order = Order.DESC
    tie: Tie = Tie.EARLIEST
    periods: tuple[PeriodKind, ...] = (PeriodKind.ALLTIME,)
    timezone: str = "UTC"
    min_value: int = 0
    max_value: int = 1_000_000_000
    close_grace_ms: int = 60_000
    max_future_skew_ms: int = 30_000
    keep_closed: int = 3

    def definition(self) -> dict[str, object]:
        """What the journal stores and start-up compares: changing it needs a new board name."""
        return {
            "aggregation": self.aggregation.value,
            "order": self.order.value,
            "tie": self.tie.value,
            "timezone": self.timezone,
            "periods": sorted(kind.value for kind in self.periods),
        }


Intake = tuple[Sequence[Event], int, str]
"""One frame's events for this board, with the frame's received_at and the writing server."""


@dataclass(slots=True)
class Plan:
    """What one drained batch does: answers per intake, and records to journal in seq order.

    ``closing``, ``fresh`` and ``seen`` are the tables it closes and creates and the keys it
    accepts, so that the next batch can be decided before this one is committed
    (`BoardEngine.decide` with ``after``)."""

    results: list[list[Result]]
    records: list[Record] = field(default_factory=list)
    routes: dict[int, tuple[Window, ...]] = field(default_factory=dict)
    base_seq: int = 0
    """The seq this plan's records follow: the journal holds exactly this much when it was not written."""
    last_seq: int = 0
    closing: dict[TableKey, CloseRecord] = field(default_factory=dict)
    fresh: dict[TableKey, Window] = field(default_factory=dict)
    seen: dict[str, Fingerprint] = field(default_factory=dict)


class BoardEngine:
    """The in-memory state of one board: open and retained tables, close markers, disputes."""

    def __init__(self, spec: BoardSpec, last_seq: int = 0) -> None:
        self.spec = spec
        self.rule = ScoringRule.for_board(spec.aggregation, spec.order, spec.tie)
        self.calendar = Calendar(spec.timezone)
        self.kinds = spec.periods
        self.tables: dict[TableKey, RankedTable] = {}
        self.markers: dict[TableKey, CloseRecord] = {}
        self.disputes: dict[TableKey, int] = {}
        self.ready: set[PeriodKind] = set()
        self.last_seq = last_seq
        self._retained: dict[PeriodKind, list[Window]] = {}  # see `retained_windows`

    # -- time ------------------------------------------------------------------------------

    def close_moment(self, window: Window) -> int | None:
        """When a window's table closes: its end plus the grace; None for alltime."""
        return None if window.end_ms is None else window.end_ms + self.spec.close_grace_ms

    def is_closed(self, key: TableKey) -> bool:
        return key in self.markers

    def window_at(self, kind: PeriodKind, ms: int) -> Window | None:
        """The window of ``kind`` holding the instant ``ms``, or None when the calendar cannot
        name it. That happens only in the first hours of 1970 on a board west of UTC (the local
        date is still 1969): such a window closed decades before any event can arrive, so
        routing treats it as closed, without a marker, live and in replay alike. O(1) usually.
        """
        try:
            return self.calendar.window_at(kind, ms)
        except ValueError:
            return None

    def next_deadline(self, now: int) -> int | None:
        """The next instant the actor must wake for: a close moment or a window start."""
        moments: list[int] = []
        for (kind, _pid), table in self.tables.items():
            moment = self.close_moment(table.window)
            if moment is not None and table.closed_seq is None:
                moments.append(moment)
        for kind in self.kinds:
            end = self.calendar.window_at(kind, now).end_ms
            if end is not None:
                moments.append(end)
        return min(moments) if moments else None

    # -- live path ---------------------------------------------------------------------------

    def decide(
        self, batch: Sequence[Intake], known: Mapping[str, Fingerprint], close_until: int, after: Plan | None = None
    ) -> Plan:
        """Validation steps 4-8 for a batch, in order; no state changes. O(events * kinds).

        ``known`` holds the journaled fingerprints of the batch's keys (from the journal's index);
        ``close_until`` is the instant up to which tables may be closed after the batch.
        ``after`` is a plan being journaled and not yet committed: this one is decided as if it
        were (its seqs, keys, closed and new tables), and is void if it fails.
        """
        base_seq = self.last_seq if after is None else after.last_seq
        plan = Plan(results=[], base_seq=base_seq, last_seq=base_seq)
        # `after`'s tables count as closed and created here; the plan keeps only its own
        closing = dict(after.closing) if after is not None else plan.closing
        fresh = dict(after.fresh) if after is not None else plan.fresh
        seen, earlier = plan.seen, after.seen if after is not None else {}
        spec = self.spec
        # The last route and the span of instants it holds for: a batch's events mostly share
        # their windows, and a route depends only on those and on received_at.
        route: tuple[Window, ...] = ()
        span: tuple[float, float] = (0, 0)
        routed_at: int | None = None
        for events, received_at, source in batch:
            self._close_due(received_at, plan, closing, fresh)
            results: list[Result] = []
            for event in events:
                key = event.idempotency_key
                fingerprint = event.fingerprint
                prior = seen.get(key) or earlier.get(key) or known.get(key)
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
                if received_at != routed_at or not span[0] <= event.occurred_at < span[1]:
                    route, span = self._route(event.occurred_at, received_at, plan, closing, fresh)
                    routed_at = received_at
                windows = route
                if not windows:
                    results.append(Result(key, Status.REJECTED, Reason.PERIOD_CLOSED))
                    continue
                plan.last_seq += 1
                plan.records.append(ScoreRecord(plan.last_seq, event, received_at, source))
                plan.routes[plan.last_seq] = windows
                seen[key] = fingerprint
                results.append(Result(key, Status.ACCEPTED))
            plan.results.append(results)
        self._close_due(close_until, plan, closing, fresh)
        if after is not None:
            plan.closing = {k: v for k, v in closing.items() if k not in after.closing}
            plan.fresh = {k: v for k, v in fresh.items() if k not in after.fresh}
        return plan

    def _route(
        self,
        occurred_at: int,
        received_at: int,
        plan: Plan,
        closing: dict[TableKey, CloseRecord],
        fresh: dict[TableKey, Window],
    ) -> tuple[tuple[Window, ...], tuple[float, float]]:
        """The open windows an event goes to (closing those whose moment ``received_at`` has
        reached), and the span [start, end) of instants in the same window of every kind."""
        open_windows: list[Window] = []
        start, end = -math.inf, math.inf
        for kind in self.kinds:
            window = self.window_at(kind, occurred_at)
            if window is None:
                start = end = occurred_at  # an empty span: this route is not reused
                continue
            if window.start_ms is not None and window.start_ms > start:
                start = window.start_ms
            if window.end_ms is not None and window.end_ms < end:
                end = window.end_ms
            key = (kind, window.period_id)
            if key in self.markers or key in closing:
                continue
            moment = self.close_moment(window)
            if moment is not None and received_at >= moment:
                self._add_marker(window, moment, plan, closing)
                continue
            if key not in self.tables:
                fresh[key] = window
            open_windows.append(window)
        return tuple(open_windows), (start, end)

    def _close_due(
        self, until: int, plan: Plan, closing: dict[TableKey, CloseRecord], fresh: Mapping[TableKey, Window]
    ) -> None:
        due = []
        for key, window in itertools.chain(((k, t.window) for k, t in self.tables.items()), fresh.items()):
            moment = self.close_moment(window)
            if moment is not None and moment <= until and key not in self.markers and key not in closing:
                due.append((moment, window))
        for moment, window in sorted(due, key=lambda d: (d[0], d[1].kind)):
            self._add_marker(window, moment, plan, closing)

    @staticmethod
    def _add_marker(window: Window, moment: int, plan: Plan, closing: dict[TableKey, CloseRecord]) -> None:
        plan.last_seq += 1
        marker = CloseRecord(plan.last_seq, window, moment)
        closing[(window.kind, window.period_id)] = marker
        plan.records.append(marker)

    def commit(self, plan: Plan) -> None:
        """Apply a journaled plan. O(accepted events * kinds + changed members * log n)."""
        for _ in self.commit_steps(plan, len(plan.records)):
            pass

    def commit_steps(self, plan: Plan, step: int) -> Iterator[None]:
        """Apply a journaled plan ``step`` records at a time, pausing (yielding) in between.
        At each pause the tables hold exactly the records up to ``last_seq``, so a query (a
        digest) may run there. Each table folds its share of a step in one pass
        (`RankedTable.apply_all`; when the rule `improves_by_key`, `apply_entries` with each
        event packed once for all its tables, which then share the entry object)."""
        routes = plan.routes
        records = plan.records
        step = max(step, 1)
        sort_key = self.rule.sort_key if self.rule.improves_by_key else None
        for begin in range(0, len(records), step):
            shares: dict[RankedTable, list[Any]] = {}
            by_window: dict[int, list[Any]] = {}  # id(window): windows repeat, hashing one is slow
            chunk = records[begin : begin + step]
            for record in chunk:
                if isinstance(record, ScoreRecord):
                    event = record.event
                    update = (
                        event[1:5] if sort_key is None  # member, value, occurred_at, idempotency_key
                        else (event.member, pack(sort_key(event.value, event.occurred_at), event.member))
                    )
                    for window in routes[record.seq]:
                        share = by_window.get(id(window))
                        if share is None:
                            share = by_window[id(window)] = shares.setdefault(self._table(window), [])
                        share.append(update)
                elif isinstance(record, CloseRecord):
                    self.close(record)
            for table, share in shares.items():
                if sort_key is None:
                    table.apply_all(share)
                else:
                    table.apply_entries(share)
            self.last_seq = chunk[-1].seq
            if begin + step < len(records):
                yield
        self.last_seq = plan.last_seq

    def _table(self, window: Window) -> RankedTable:
        key = (window.kind, window.period_id)
        table = self.tables.get(key)
        if table is None:
            table = self.tables[key] = RankedTable(self.rule, window)
        return table

    def close(self, marker: CloseRecord) -> None:
        """Install a close marker; the table stays queryable until `rotate` retires it. O(1)."""
        window = marker.window
        key = (window.kind, window.period_id)
        self.markers[key] = marker
        table = self.tables.get(key)
        if table is not None:
            table.closed_seq = marker.seq
            table.closed_at = marker.closed_at

    def rotate(self, now: int) -> None:
        """Open the current window's table of every loaded kind, and retire closed tables older
        than the retention. Call when `next_deadline` passes. O(tables + kinds * keep_closed)."""
        floors = {kind: self.retention_floor(kind, now) for kind in self.kinds}
        for key, table in list(self.tables.items()):
            floor = floors[key[0]]
            if table.closed and floor is not None and (table.window.start_ms or 0) < floor:
                del self.tables[key]
        for kind in self.ready:
            window = self.calendar.window_at(kind, now)
            if (kind, window.period_id) not in self.markers:
                self._table(window)

    # -- voids -------------------------------------------------------------------------------

    def applied_windows(self, seq: int, occurred_at: int) -> list[Window]:
        """The windows a journaled score record was applied to (by the routing invariant)."""
        windows = []
        for kind in self.kinds:
            window = self.window_at(kind, occurred_at)
            if window is None:
                continue
            marker = self.markers.get((kind, window.period_id))
            if marker is None or seq < marker.seq:
                windows.append(window)
        return windows

    def count_void(self, target_seq: int, occurred_at: int) -> list[Window]:
        """Count a void as a dispute of every window its event was applied to."""
        windows = self.applied_windows(target_seq, occurred_at)
        for window in windows:
            key = (window.kind, window.period_id)
            self.disputes[key] = self.disputes.get(key, 0) + 1
        return windows

    def recompute_member(self, member: str, windows: Iterable[Window], events: Sequence[StoredEvent]) -> None:
        """Re-fold a member's standing in the given loaded tables from its remaining events,
        exactly as a rebuild would. O(len(events) * tables)."""
        for window in windows:
            table = self.tables.get((window.kind, window.period_id))
            if table is None:
                continue
            limit = table.closed_seq if table.closed_seq is not None else math.inf
            start = window.start_ms
            end = window.end_ms
            remaining = [
                (e.value, e.occurred_at, e.idempotency_key)
                for e in events
                if not e.voided
                and e.seq < limit
                and (start is None or end is None or start <= e.occurred_at < end)
            ]
            table.set_standing(member, self.rule.fold_all(remaining))

    # -- queries -------------------------------------------------------------------------------

    def _before(self, window: Window) -> Window | None:
        """The window before ``window``, or None at the calendar's start (1970)."""
        try:
            return self.calendar.previous(window)
        except ValueError:
            return None

    def open_windows(self, kind: PeriodKind, now: int) -> list[Window]:
        """The current window of a kind and the earlier ones still in their grace, newest first.
        O(windows in grace): one or two unless the grace outlasts a window."""
        window = self.calendar.window_at(kind, now)
        if window.start_ms is None:
            return [window]
        windows = [window]
        before = self._before(window)
        while before is not None and not self.window_closed(before, now):
            windows.append(before)
            before = self._before(before)
        return windows

    def retained_windows(self, kind: PeriodKind, now: int) -> list[Window]:
        """The last ``keep_closed`` closed windows of a kind, newest first; fewer near the
        calendar's start (1970). Memoised per kind until a newer window closes, so a query pays
        O(windows in grace); the first call after a close pays O(keep_closed)."""
        open_windows = self.open_windows(kind, now)
        newest = self._before(open_windows[-1]) if open_windows[-1].start_ms is not None else None
        if newest is None or self.spec.keep_closed == 0:
            return []
        memo = self._retained.get(kind)
        if memo is not None and memo[0] == newest:
            return memo
        retained = [newest]
        while len(retained) < self.spec.keep_closed:
            before = self._before(retained[-1])
            if before is None:
                break
            retained.append(before)
        self._retained[kind] = retained
        return retained

    def retention_floor(self, kind: PeriodKind, now: int) -> int | None:
        """Start of the oldest window of a kind still queryable: every open window, then the
        last ``keep_closed`` closed ones. None for alltime. Cost: `retained_windows`."""
        oldest = (self.retained_windows(kind, now) or self.open_windows(kind, now))[-1]
        return oldest.start_ms

    def listed_windows(self, kind: PeriodKind, now: int) -> list[Window]:
        """Open and retained windows of a kind, newest first (the periods route): tables of
        windows after the current one (a clock moved back) too. O(listed windows + tables)."""
        current = self.calendar.window_at(kind, now)
        if current.start_ms is None:
            return [current]
        later = {t.window for k, t in self.tables.items() if k[0] is kind and (t.window.start_ms or 0) > current.start_ms}
        return sorted(later, key=lambda w: w.start_ms or 0, reverse=True) + self.open_windows(kind, now) + self.retained_windows(kind, now)

    def window_closed(self, window: Window, now: int) -> bool:
        if (window.kind, window.period_id) in self.markers:
            return True
        moment = self.close_moment(window)
        return moment is not None and now >= moment

    def view(self, kind: PeriodKind, period_id: str | None, now: int) -> RankedTable:
        """The table a query names (current window when ``period_id`` is None).

        Raises QueryError: unknown_period, period_not_retained, not_ready. O(keep_closed).
        """
        if kind not in self.kinds:
            raise not_found("unknown_period", f"board {self.spec.name!r} has no {kind.value} table")
        if kind not in self.ready:
            raise not_ready(self.spec.name)
        if period_id is None:
            window = self.calendar.window_at(kind, now)
        else:
            try:
                window = self.calendar.window_by_id(kind, period_id)
            except UnknownPeriod as exc:
                raise not_found("unknown_period", f"{period_id!r} is not a {kind.value} period id") from exc
        key = (kind, window.period_id)
        table = self.tables.get(key)
        if table is not None:
            return table
        floor = self.retention_floor(kind, now)
        if window.start_ms is not None and window.start_ms > now:
            raise not_found("unknown_period", f"{kind.value} period {window.period_id} has not begun")
        if floor is not None and window.start_ms is not None and window.start_ms < floor:
            raise not_found("period_not_retained", f"{kind.value} period {window.period_id} is no longer retained")
        return self._empty_table(window, now)

    def listed_tables(self, kind: PeriodKind, now: int) -> list[RankedTable]:
        """The tables of `listed_windows`, an empty one for a window no event reached: what the
        periods route lists and `arena rebuild` prints. O(listed windows)."""
        listed = []
        for window in self.listed_windows(kind, now):
            table = self.tables.get((kind, window.period_id))
            listed.append(table if table is not None else self._empty_table(window, now))
        return listed

    def _empty_table(self, window: Window, now: int) -> RankedTable:
        empty = RankedTable(self.rule, window)
        marker = self.markers.get((window.kind, window.period_id))
        if marker is not None:
            empty.closed_seq, empty.closed_at = marker.seq, marker.closed_at
        elif self.window_closed(window, now):  # no event ever came: closed by the clock, no marker
            empty.closed_seq, empty.closed_at = self.last_seq, self.close_moment(window)
        return empty


class _Target:
    """The last window a replay pass saw for one kind, and where its events go."""

    __slots__ = ("start", "end", "standings", "limit", "applied")

    def __init__(
        self, start: float, end: float, standings: dict[str, Any] | None, limit: float, applied: list[int]
    ) -> None:
        self.start = start
        self.end = end
        self.standings = standings
        self.limit = limit
        self.applied = applied  # shared per table: [events applied]


class Loader:
    """Replays journaled score records into the tables one pass includes.

    Standings accumulate in plain dicts (one fold per event and table) and each table is sorted
    once at `finish`, which is what makes a rebuild fast.
    """

    def __init__(self, engine: BoardEngine, include: Callable[[Window], bool], voided: set[int]) -> None:
        self.engine = engine
        self.include = include
        self.voided = voided
        self.events = 0
        # member -> Standing; for a rule that `improves_by_key`, member -> packed entry instead:
        # each event is packed once for all its tables, which then share the entry object
        self._standings: dict[TableKey, dict[str, Any]] = {}
        self._windows: dict[TableKey, Window] = {}
        self.applied: dict[TableKey, list[int]] = {}
        self._last = self._no_targets()

    def _no_targets(self) -> list[_Target]:
        """One empty target per kind: the next row of each kind looks its window up."""
        return [_Target(0, -1, None, 0, [0]) for _ in self.engine.kinds]

    def _target(self, kind: PeriodKind, occurred_at: int) -> _Target:
        window = self.engine.window_at(kind, occurred_at)
        if window is None:  # a window the calendar cannot name was never routed to
            return _Target(occurred_at, occurred_at, None, 0, [0])
        standings: dict[str, Any] | None = None
        limit = math.inf
        applied = [0]
        if self.include(window):
            key = (window.kind, window.period_id)
            marker = self.engine.markers.get(key)
            standings = self._standings.setdefault(key, {})
            applied = self.applied.setdefault(key, [0])
            self._windows[key] = window
            limit = marker.seq if marker is not None else math.inf
        start = window.start_ms if window.start_ms is not None else -math.inf
        end = window.end_ms if window.end_ms is not None else math.inf
        return _Target(start, end, standings, limit, applied)

    def feed(self, rows: Iterable[tuple[int, str, int, int, str]]) -> None:
        """Apply rows (seq, member, value, occurred_at, key), in any order: folds commute, and a
        close marker excludes by seq. O(rows * kinds)."""
        rule = self.engine.rule
        fold = rule.fold
        sort_key = rule.sort_key if rule.improves_by_key else None
        kinds = list(enumerate(self.engine.kinds))
        last = self._last
        voided = self.voided
        count = 0
        for seq, member, value, occurred_at, key in rows:
            if seq in voided:
                continue
            count += 1
            item = None
            for i, kind in kinds:
                target = last[i]
                if not target.start <= occurred_at < target.end:
                    target = last[i] = self._target(kind, occurred_at)
                standings = target.standings
                if standings is None or seq >= target.limit:
                    continue
                target.applied[0] += 1
                if sort_key is None:
                    new = fold(standings.get(member), value, occurred_at, key)
                    if new is not None:
                        standings[member] = new
                    continue
                if item is None:
                    item = pack(sort_key(value, occurred_at), member)
                old = standings.get(member)
                if old is None or item < old:
                    standings[member] = item
        self.events += count

    def finish(self, tables: Iterable[Window] = (), only: Callable[[Window], bool] | None = None) -> Iterator[RankedTable]:
        """Build and install, one at a time, the tables ``only`` selects (all by default) plus
        empty ones for ``tables``; the caller may let other work run between two. Later rows
        must not reach a table built here. O(n log n)."""
        engine = self.engine
        for window in tables:
            key = (window.kind, window.period_id)
            self._windows.setdefault(key, window)
            self._standings.setdefault(key, {})
        self._last = self._no_targets()
        build = RankedTable.from_entries if engine.rule.improves_by_key else RankedTable.from_standings
        for key in [k for k in self._standings if only is None or only(self._windows[k])]:
            table = build(engine.rule, self._windows[key], self._standings.pop(key))
            marker = engine.markers.get(key)
            if marker is not None:
                table.closed_seq, table.closed_at = marker.seq, marker.closed_at
            engine.tables[key] = table
            yield table
