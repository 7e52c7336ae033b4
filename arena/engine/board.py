"""One board's in-memory state: its tables, close markers and disputes, what it retains, and
the plans in flight between a decision and its commit. Pure: the actor supplies the clock, the
known idempotency keys and the journal; the rules live in `arena.engine.routing` (which window
takes a record) and `arena.engine.scoring` (how a table folds events).

The live path is two steps so that nothing is applied that is not journaled: `decide` turns a
drained batch into a `Plan` (results + records to journal, no change to the tables), the actor
journals ``plan.records`` in one transaction, then `commit_steps` applies them, or `refuse`
drops the plan when the journal refused it. A batch may be decided while the plan ahead of it
is in flight: it is decided as if that plan were committed, and is void if that plan is refused.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TypeVar

from arena.engine.events import Fingerprint, Reason, Result, Status, instant, rejected, value_rule
from arena.engine.league import LEAGUE_RECORD, League, LeagueWindow, moves_text, parse_moves
from arena.engine.periods import PeriodKind, UnknownPeriod, Window
from arena.engine.prizes import PrizeTier
from arena.engine.records import BoardRecord, CloseRecord, Record, ScoreRecord, StoredEvent, VoidRecord
from arena.engine.routing import NO_MARKER, Intake, PartitionKey, Plan, Route, Routed, Router, ScoreRow, TableKey, window_at
from arena.engine.scoring import ScoringRule, State, Update
from arena.engine.settlement import SettlementRecord
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.errors import not_found, not_ready

LeagueStep = tuple[int, Window, str | None]
"""(seq, window of the season, member): a member's accepted event there; member None: the
window's close marker. A league is fed these in seq order (`BoardEngine.league_steps`)."""
SeasonFirsts = dict[TableKey, tuple[Window, dict[str, int]]]
"""Each window of a league's season: each member's first accepted seq there (a replay's)."""

K = TypeVar("K")
V = TypeVar("V")

KEY_REUSED = "idempotency_key: was accepted before with another member, value or occurred_at"
RETIRED = "board: was retired; it takes no more events (its tables stay queryable)"

SHORT_KINDS = (PeriodKind.HOURLY, PeriodKind.DAILY, PeriodKind.WEEKLY)
"""The kinds whose current tables load (and answer) first after a restart."""


def retained_by(floors: Mapping[str, int | None]) -> Callable[[Window], bool]:
    """Whether a window's table is retained under ``floors`` (`BoardEngine.retention_floors`), as
    a replay loads them: alltime, and windows that start at or after their kind's floor."""
    def retained(window: Window) -> bool:
        floor = floors[window.kind]
        return floor is None or window.start_ms is None or window.start_ms >= floor
    return retained


def _marker_seq(markers: Mapping[TableKey, CloseRecord], key: TableKey) -> float:
    """The seq of a window's close marker in ``markers``; `NO_MARKER` without one."""
    marker = markers.get(key)
    return NO_MARKER if marker is None else marker.seq


class BoardEngine:
    """The in-memory state of one board: open and retained tables, close markers, disputes."""

    def __init__(self, spec: BoardSpec, last_seq: int = 0) -> None:
        self.spec = spec
        self.rule = ScoringRule.for_board(spec.aggregation, spec.order, spec.tie)
        self.schedule = spec.schedule()
        self.kinds = self.schedule.kinds
        self.tables: dict[TableKey, RankedTable] = {}
        """The global table of each window with events."""
        self.partitions: dict[TableKey, dict[str, RankedTable]] = {}
        """Beside a global table, its partitions that hold events, by name (`table`)."""
        self.markers: dict[TableKey, CloseRecord] = {}
        self.disputes: dict[TableKey, int] = {}
        self.ready: frozenset[str] = frozenset()
        """The kinds whose tables readers may see (`view`); set only by `publish` and `unpublish`."""
        self.ready_windows: frozenset[Window] = frozenset()
        """Tables readers may see ahead of their kind (a replay's current short tables)."""
        self.last_seq = last_seq
        self.router = Router(self.schedule, self.kinds, partial(_marker_seq, self.markers))
        """Routes journaled records (replay, voids) by the markers installed here. Given the
        markers, not a method of this board: a board and its router make no reference cycle, so an
        unloaded board's tables are freed at once rather than at the next full collection (10,000
        boards loaded once each kept 3 KB each of tables garbage)."""
        self.retired = False
        """The board's journal holds its retirement: events after rule 4 are `board_retired`."""
        self.settlements: dict[TableKey | PartitionKey, list[SettlementRecord]] = {}
        """Every journaled revision of each settled table, in order; kept after the table leaves
        retention (its settlement stays readable)."""
        self.unsettled: dict[TableKey | PartitionKey, tuple[PrizeTier, ...]] = {}
        """Closed tables of kinds with prizes whose revision 0 is not journaled yet, with the
        tiers in force at their close: the actor settles them (`arena.board.settling`)."""
        self._in_flight: list[Plan] = []  # decided, neither committed nor refused; oldest first
        self._retained: dict[str, list[Window]] = {}  # see `retained_windows`
        self.league = None if spec.league is None else League(spec.league)
        """A league board's tiers and divisions (its partitions)."""
        self.unrecorded: dict[TableKey, dict[str, int]] = {}
        """Closed windows of a league's season whose moves are not journaled yet: the actor
        journals each as a league record (`arena.engine.league.moves_text`)."""

    # -- readers ---------------------------------------------------------------------------

    def publish(self, seq: int, kinds: Iterable[str], windows: Iterable[Window] = ()) -> None:
        """Let readers see the tables of ``kinds`` (every window) and of ``windows`` (ahead of
        their kind) as the journal up to ``seq``, which answers then report: the one rule for
        publishing a board's tables (DESIGN.md, "Never stale"). Call only when those tables hold
        every record of the board journaled up to ``seq`` and nothing else; from then on the
        live path changes tables and `last_seq` together (`commit_steps`, `void`). O(kinds)."""
        assert not self._in_flight, "a load publishes, with no plan in flight"
        self.last_seq = seq
        self.ready = frozenset(kinds)
        self.ready_windows = frozenset(windows)

    def unpublish(self) -> None:
        """Hide every table from readers (`view` answers not_ready) before a load changes them;
        `publish` shows them again. O(1)."""
        self.ready = frozenset()
        self.ready_windows = frozenset()

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Around one step of the live path that changes tables and `last_seq` together: if it
        fails halfway (a bug: the actor crashes, and its restart reloads), the tables hide, so
        that no reader sees a change half made. A crash anywhere else leaves them whole, and they
        answer until the restart begins (a PostgreSQL outage crashes the actor and keeps it
        reopening the journal for as long as it lasts)."""
        try:
            yield
        except BaseException:
            self.unpublish()
            raise

    # -- time ------------------------------------------------------------------------------

    def close_moment(self, window: Window) -> int | None:
        """When a window's table closes (`BoardSpec.close_moment`): its end plus the grace."""
        return self.spec.close_moment(window)

    def is_closed(self, key: TableKey) -> bool:
        return key in self.markers

    def next_deadline(self, now: int) -> int | None:
        """The next instant the actor must wake for: a close moment or a window start (or end)."""
        moments: list[int] = []
        for table in self.tables.values():
            moment = self.close_moment(table.window)
            if moment is not None and table.closed_seq is None:
                moments.append(moment)
        for kind in self.kinds:
            window = self.schedule.current(kind, now)
            moments.extend(edge for edge in (window.start_ms, window.end_ms) if edge is not None and edge > now)
        return min(moments) if moments else None

    # -- live path ---------------------------------------------------------------------------

    def decide(self, batch: Sequence[Intake], known: Mapping[str, Fingerprint], close_until: int) -> Plan:
        """Validation steps 4-8 for a batch (`_decide`), as if every plan in flight were
        committed; the plan is in flight until `commit_steps` or `refuse`."""
        plan = _decide(self, batch, known, close_until, self._in_flight)
        self._in_flight.append(plan)
        return plan

    def refuse(self, plan: Plan) -> list[Plan]:
        """Drop the oldest plan in flight, which the journal refused, and every plan decided
        after it (as if it were committed): returned, in order, for their batches to be decided
        again. O(1)."""
        assert self._in_flight and self._in_flight[0] is plan, "plans are refused in the order they were decided"
        voided = self._in_flight[1:]
        self._in_flight.clear()
        return voided

    def commit(self, plan: Plan) -> None:
        """Apply a journaled plan. O(accepted events * kinds + changed members * log n)."""
        for _ in self.commit_steps(plan, len(plan.records)):
            pass

    def commit_steps(self, plan: Plan, step: int) -> Iterator[None]:
        """Apply the oldest plan in flight, journaled, ``step`` records at a time, pausing
        (yielding) in between. At each pause the tables hold exactly the records up to
        ``last_seq``, so a query (a digest) may run there. Each event is turned into its
        `ScoringRule.update` once for all its tables; each table merges its share of a step in
        one pass (`fold`)."""
        assert self._in_flight and self._in_flight[0] is plan, "plans are committed in the order they were decided"
        records = plan.records
        step = max(step, 1)
        for begin in range(0, len(records), step):
            chunk = records[begin : begin + step]
            with self._changing():
                self.fold(self._routed(chunk, plan.routes))
                if self.league is not None:
                    self.league_steps(self._season_steps(chunk, plan.routes))
                self.last_seq = chunk[-1].seq
            if begin + step < len(records):
                yield
        self.last_seq = plan.last_seq
        self._in_flight.pop(0)

    def _routed(self, records: Sequence[Record], routes: Mapping[int, tuple[Window, ...]]) -> Iterator[Routed]:
        """The score records of a plan's ``records`` with the windows it decided for them,
        installing its close markers on the way."""
        for record in records:
            if isinstance(record, ScoreRecord):
                event = record.event
                yield routes[record.seq], event.member, event.value, event.occurred_at, event.idempotency_key, event.region
            elif isinstance(record, CloseRecord):
                self.close(record)

    def _season_steps(self, records: Sequence[Record], routes: Mapping[int, tuple[Window, ...]]) -> Iterator[LeagueStep]:
        """A league's steps (`LeagueStep`) of a plan's committed ``records``, in order."""
        season = self.spec.season
        for record in records:
            if isinstance(record, ScoreRecord):
                for window in routes[record.seq]:
                    if window.kind == season:
                        yield record.seq, window, record.event.member
            elif isinstance(record, CloseRecord) and record.window.kind == season:
                yield record.seq, record.window, None

    def season_firsts(self, rows: Sequence[ScoreRow], include: Callable[[Window], bool], into: SeasonFirsts) -> None:
        """Gather into ``into`` the first seq of each member in each window of a league's
        season that ``include`` keeps, from journaled rows, voided ones too (a first event fixes
        the division, voided or not). O(rows)."""
        season = self.spec.season
        for seq, member, _value, occurred_at, _key, _region in rows:
            for window in self.router.route(occurred_at).windows(seq):
                if window.kind == season and include(window):
                    firsts = into.setdefault((window.kind, window.period_id), (window, {}))[1]
                    if firsts.get(member, seq) >= seq:
                        firsts[member] = seq

    def league_replay(self, firsts: SeasonFirsts, recorded: Mapping[TableKey, dict[str, int]], after_seq: int) -> None:
        """Fill a league's divisions from journaled records after ``after_seq`` (a replay: 0; a
        tail after a snapshot: its seq), once the global tables hold them: each member's first
        event (``firsts``) and the season's close markers in seq order, a closed window's moves
        taken from its league record (``recorded``) where it has one. O(members log members)."""
        steps: list[LeagueStep] = [(seq, window, member) for window, members in firsts.values() for member, seq in members.items()]
        steps += [(m.seq, m.window, None) for m in self.markers.values() if m.window.kind == self.spec.season and m.seq > after_seq]
        steps.sort(key=lambda step: step[0])
        self.league_steps(steps, recorded)
        assert self.league is not None
        for at in self.league.windows.values():  # closed before a snapshot, and not settled then
            if (at.window.kind, at.window.period_id) in self.markers:
                self._settle_divisions(at.window)

    def league_steps(self, steps: Iterable[LeagueStep], recorded: Mapping[TableKey, dict[str, int]] | None = None) -> None:
        """Feed a league its steps in seq order, with the global tables holding their events:
        members join divisions (their division entry is their global one), closed windows move
        tiers (by their league record in ``recorded``, else by their divisions as they stand:
        then the moves are to be journaled, `unrecorded`). O(steps * log n)."""
        league = self.league
        assert league is not None
        for seq, window, member in steps:
            key = (window.kind, window.period_id)
            if member is not None:
                previous = self.previous(window)
                at = league.window(window, previous)
                marker = None if previous is None else self.markers.get((previous.kind, previous.period_id))
                league.played(at, member, seq, None if marker is None else marker.seq)
                self._division_entry(at, member)
                continue
            moves = None if recorded is None else recorded.get(key)
            if moves is None and key not in league.moved:
                divisions = self.partitions.get(key, {}).items()
                ranked = ((name, [e.member for e in t.entries()]) for name, t in divisions)
                moves = self.unrecorded[key] = league.moves(league.windows.get(key), ranked)
            for at, joined, _division in league.closed(key, moves or {}, seq):
                self._division_entry(at, joined)
            self._settle_divisions(window)

    def _settle_divisions(self, window: Window) -> None:
        """A league's closed window: each division with prize tiers for its tier is to settle
        (`unsettled`), unless it was. O(divisions)."""
        assert self.league is not None
        tiers = self.spec.prize_tiers(window.kind)
        for name in self.partition_names(window) if tiers else ():
            tier = name.rsplit("-", 1)[0]
            mine = tuple(t for t in tiers if t.tier in (None, tier))
            key = (window.kind, window.period_id, name)
            if mine and key not in self.settlements:
                self.unsettled[key] = mine

    def _division_entry(self, at: LeagueWindow, member: str) -> None:
        """Give a member of a division its global entry of the window there (none: none)."""
        division = at.divisions.get(member)
        if division is None:
            return
        key = (at.window.kind, at.window.period_id)
        table = self.tables.get(key)
        state = None if table is None else table.state(member)
        part = self.partitions.get(key, {}).get(division)
        if state is not None or part is not None:
            self._table(at.window, division).set_state(member, state)

    def league_records(self) -> list[BoardRecord]:
        """The league records of `unrecorded` to journal, at the seqs after `last_seq`; once
        journaled, `league_recorded` takes them. O(members moved)."""
        assert self.league is not None
        spec = self.league.spec
        return [BoardRecord(self.last_seq + i, LEAGUE_RECORD, moves_text(self.markers[key].window, moves, spec))
                for i, (key, moves) in enumerate(self.unrecorded.items(), 1)]

    def league_recorded(self, records: Sequence[BoardRecord]) -> None:
        """League records (`league_records`) were journaled. O(records)."""
        assert self.league is not None
        for record in records:
            del self.unrecorded[parse_moves(record.body, self.league.spec)[0]]
        self.last_seq = records[-1].seq

    def division(self, window: Window, member: str) -> str | None:
        """A league member's division in a window; None when it has none (yet). O(1)."""
        assert self.league is not None
        at = self.league.windows.get((window.kind, window.period_id))
        return None if at is None else at.divisions.get(member)

    def previous(self, window: Window) -> Window | None:
        """The window of the same kind before ``window``; None for the first, an alltime one or
        one after a gap between one-off windows. O(1) usually."""
        if window.start_ms is None:
            return None
        return window_at(self.schedule, window.kind, window.start_ms - 1)

    def fold(self, events: Iterable[Routed], include: Callable[[Window], bool] | None = None) -> int:
        """Apply score events to the tables of the windows each applies to (made when missing;
        ``include`` leaves windows out): an event's `ScoringRule.update` is made once for all
        its tables (a window's global table, and its partition's with one), and each table
        merges its share in one pass (`RankedTable.apply_updates`). Returns the events.
        O(events * kinds + changed members * log n)."""
        update_of = self.rule.update
        shares: dict[RankedTable, list[tuple[str, Update]]] = {}
        # id(window) -> (window, its table's share or None when left out): windows repeat, and
        # hashing one is slow; the window is kept so that its id is not reused meanwhile
        by_window: dict[int, tuple[Window, list[tuple[str, Update]] | None]] = {}
        by_partition: dict[tuple[int, str], tuple[Window, list[tuple[str, Update]]]] = {}  # the same, per partition
        count = 0
        for windows, member, value, occurred_at, key, partition in events:
            count += 1
            update = None
            for window in windows:
                known = by_window.get(id(window))
                if known is None:
                    share = shares.setdefault(self._table(window), []) if include is None or include(window) else None
                    known = by_window[id(window)] = (window, share)
                if known[1] is None:
                    continue
                if update is None:
                    update = (member, update_of(member, value, occurred_at, key))
                known[1].append(update)
                if partition is not None:
                    place = (id(window), partition)
                    part = by_partition.get(place)
                    if part is None:
                        part = by_partition[place] = (window, shares.setdefault(self._table(window, partition), []))
                    part[1].append(update)
        for table, share in shares.items():
            table.apply_updates(share)
        return count

    def _table(self, window: Window, partition: str | None = None) -> RankedTable:
        """The table of a window (``partition`` None: its global table), made when missing."""
        key = (window.kind, window.period_id)
        if partition is not None:
            parts = self.partitions.setdefault(key, {})
            table = parts.get(partition)
            if table is None:
                table = parts[partition] = RankedTable(self.rule, window)
                table.partition = partition
                self.close_table(table)
            return table
        table = self.tables.get(key)
        if table is None:
            table = self.tables[key] = RankedTable(self.rule, window)
        return table

    def close_table(self, table: RankedTable) -> None:
        """Give a table its window's close, if the window's marker is installed: a table made
        after its marker (a replay's table, a partition's first event of a tail). O(1)."""
        marker = self.markers.get((table.window.kind, table.window.period_id))
        if marker is not None:
            table.closed_seq, table.closed_at = marker.seq, marker.closed_at

    def table(self, window: Window, partition: str | None = None) -> RankedTable | None:
        """The one lookup of a window's table: its global one (``partition`` None) or one of its
        partitions; None when no event reached it. O(1)."""
        key = (window.kind, window.period_id)
        if partition is None:
            return self.tables.get(key)
        return self.partitions.get(key, {}).get(partition)

    def partition_names(self, window: Window) -> tuple[str, ...]:
        """The partitions of a window's table, in the order they list: the board's regions, or
        a league's divisions of the window (by tier, then k)."""
        if self.league is None:
            return self.spec.partitions()
        at = self.league.windows.get((window.kind, window.period_id))
        return () if at is None else at.names()

    def has_partition(self, window: Window, partition: str) -> bool:
        """Whether ``partition`` is one of `partition_names` (a league's: without listing its
        divisions). O(regions) or O(tiers)."""
        if self.league is None:
            return partition in self.spec.partitions()
        at = self.league.windows.get((window.kind, window.period_id))
        return at is not None and at.has(partition)

    def partition_of(self, table: RankedTable, partition: str) -> RankedTable:
        """A partition of a global table: an empty table, closed as the global one, when no
        event reached it. O(1)."""
        part = self.table(table.window, partition)
        if part is None:
            part = RankedTable(self.rule, table.window)
            part.partition, part.closed_seq, part.closed_at = partition, table.closed_seq, table.closed_at
        return part

    def partition_tables(self, table: RankedTable) -> list[RankedTable]:
        """Every partition of a global table in `partition_names` order (`partition_of`): what
        `arena rebuild` prints and `arena verify` compares. O(partitions)."""
        return [self.partition_of(table, name) for name in self.partition_names(table.window)]

    def close(self, marker: CloseRecord) -> None:
        """Install a close marker; the table stays queryable until `rotate` retires it. O(1)."""
        window = marker.window
        key = (window.kind, window.period_id)
        self.markers[key] = marker
        self.router.forget()
        for table in (self.tables.get(key), *self.partitions.get(key, {}).values()):
            if table is not None:
                table.closed_seq = marker.seq
                table.closed_at = marker.closed_at
        tiers = self.spec.prize_tiers(window.kind)
        settled: list[TableKey | PartitionKey] = [] if self.league is not None else [key]  # a league's: its divisions
        if self.spec.regional_prizes:  # each region's table too, on its own
            settled += [(window.kind, window.period_id, name) for name in self.partition_names(window)]
        for settled_key in settled:
            if tiers and settled_key not in self.settlements:
                self.unsettled[settled_key] = tiers

    def settled(self, record: SettlementRecord) -> None:
        """Install a journaled settlement revision (again: a standby's next load reads it once
        more, and keeps it once). O(1)."""
        revisions = self.settlements.setdefault(record.key, [])
        if len(revisions) == record.settlement.revision:
            revisions.append(record)
        self.unsettled.pop(record.key, None)

    def rotate(self, now: int) -> None:
        """Open the current window's table of every loaded kind, and retire closed tables older
        than the retention (once settled, when their kind has prizes). Call when `next_deadline`
        passes. O(tables + kinds)."""
        floors = self.retention_floors(now)
        unsettled = {key[:2] for key in self.unsettled}  # a window with a partition to settle is kept whole
        for key, table in list(self.tables.items()):
            floor = floors[key[0]]
            if table.closed and floor is not None and (table.window.start_ms or 0) < floor and key not in unsettled:
                del self.tables[key]
                self.partitions.pop(key, None)
                if self.league is not None:
                    self.league.windows.pop(key, None)
        for kind in () if self.retired else self.ready:
            window = window_at(self.schedule, kind, now)
            if window is not None and (kind, window.period_id) not in self.markers:
                self._table(window)

    def redefine(self, spec: BoardSpec) -> None:
        """Serve ``spec`` from the next decision on. Its mutable fields (bounds, skew, grace,
        retention, metadata, a league's parameters: `League.define` says from which seq) may
        always change; its fixed fields (`BoardSpec.fixed_changes`) only while the board holds
        no record: its empty tables are made again under them. Call with no plan in flight.
        O(kinds)."""
        assert not self._in_flight, "a board is redefined between two batches"
        if self.spec.fixed_changes(spec):
            assert not self.markers and not any(len(t) for t in self.tables.values()), "fixed fields of a board with records"
            self.rule = ScoringRule.for_board(spec.aggregation, spec.order, spec.tie)
            self.schedule = spec.schedule()
            self.kinds = self.schedule.kinds
            self.router = Router(self.schedule, self.kinds, partial(_marker_seq, self.markers))
            self.tables.clear()
            self.partitions.clear()
            self.league = None if spec.league is None else League(spec.league)
            if self.ready:
                self.ready = frozenset(self.kinds)
        self.spec = spec
        self._retained.clear()

    def retirement(self, now: int) -> list[CloseRecord]:
        """The close markers a retirement journals at ``now`` (seqs after `last_seq`): one for
        every open table, alltime and the current windows without events included. Call with no
        plan in flight; `close` installs them once journaled. O(tables + kinds)."""
        assert not self._in_flight, "a retirement is decided with no plan in flight"
        windows = {key: table.window for key, table in self.tables.items()}
        for kind in self.kinds:
            for window in self.open_windows(kind, now):
                windows.setdefault((kind, window.period_id), window)
        open_windows = [w for key, w in windows.items() if key not in self.markers and (w.start_ms or 0) <= now]
        open_windows.sort(key=lambda w: (w.start_ms or 0, w.kind))
        return [CloseRecord(self.last_seq + i + 1, window, now) for i, window in enumerate(open_windows)]

    # -- voids -------------------------------------------------------------------------------

    def void(self, records: Sequence[VoidRecord], targets: Sequence[StoredEvent], remaining: Sequence[StoredEvent]) -> list[Window]:
        """Apply journaled voids of one member's events ``targets``: each counts as a dispute of
        every window its event was applied to, where the member's state is merged again from
        its ``remaining`` events. Returns the windows disputed, once per void. Call with no plan
        in flight. O(remaining events * kinds)."""
        with self._changing():
            self.last_seq = records[-1].seq
            disputed = [window for target in targets for window in self.count_void(target.seq, target.occurred_at)]
            partitions = {target.region for target in targets if target.region is not None}
            self._recompute_member(targets[0].member, set(disputed), partitions, remaining)
            if self.league is not None:  # a division entry is the global one (the division stays)
                for window in set(disputed):
                    at = self.league.windows.get((window.kind, window.period_id))
                    if at is not None:
                        self._division_entry(at, targets[0].member)
        return disputed

    def count_void(self, target_seq: int, occurred_at: int) -> tuple[Window, ...]:
        """Count a void as a dispute of every window its event was applied to."""
        windows = self.router.windows(target_seq, occurred_at)
        for window in windows:
            key = (window.kind, window.period_id)
            self.disputes[key] = self.disputes.get(key, 0) + 1
        return windows

    def _recompute_member(
        self, member: str, windows: Iterable[Window], partitions: Iterable[str], events: Sequence[StoredEvent]
    ) -> None:
        """Merge a member's state in the given loaded tables (the windows' global ones and
        their ``partitions``) again from its remaining events, routed exactly as a rebuild
        would. O(len(events) * kinds)."""
        merge, update_of = self.rule.merge, self.rule.update
        states: dict[tuple[Window, str | None], State | None] = {
            (w, part): None for w in windows for part in (None, *partitions)}
        for e in events:
            if e.voided:
                continue
            update = update_of(member, e.value, e.occurred_at, e.idempotency_key)
            for window in self.router.windows(e.seq, e.occurred_at):
                for place in ((window, None),) if e.region is None else ((window, None), (window, e.region)):
                    if place in states:
                        states[place] = merge(states[place], update) or states[place]
        for (window, part), state in states.items():
            table = self.table(window, part)
            if table is not None:
                table.set_state(member, state)

    # -- queries -------------------------------------------------------------------------------

    def _before(self, window: Window) -> Window | None:
        """The window before ``window``, or None at the calendar's start (1970) or before a
        custom period's first window."""
        try:
            return self.schedule.previous(window)
        except ValueError:
            return None

    def open_windows(self, kind: str, now: int) -> list[Window]:
        """The current window of a kind (`Schedule.current`) and the earlier ones still in their
        grace, newest first. O(windows in grace): one or two unless the grace outlasts a window."""
        window = self.schedule.current(kind, now)
        if window.start_ms is None:
            return [window]
        windows = [window]
        before = self._before(window)
        while before is not None and not self.window_closed(before, now):
            windows.append(before)
            before = self._before(before)
        return windows

    def retained_windows(self, kind: str, now: int) -> list[Window]:
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

    def missed_closes(self, now: int) -> list[CloseRecord]:
        """The close markers due at ``now`` that no table will journal (numbered after
        `last_seq`, each closed at its close moment, in that order): the retained windows of the
        kinds with prizes that no loaded table holds and no marker closes, such as the windows
        of a stop or of a clock's jump, which no event reached. Only within the board's life: from
        the earliest window a marker closes (a board that never closed a table has none).
        Installed with `close`, they settle with no award. O(markers + kinds × keep_closed)."""
        born = min((m.window.start_ms for m in self.markers.values() if m.window.start_ms is not None), default=None)
        if born is None:
            return []
        missed: list[tuple[int, Window]] = []
        for kind in self.kinds:
            if not self.spec.prize_tiers(kind):
                continue
            for window in self.retained_windows(kind, now):
                key = (kind, window.period_id)
                moment = self.close_moment(window)
                if (window.start_ms or 0) >= born and moment is not None and key not in self.markers and key not in self.tables:
                    missed.append((moment, window))
        missed.sort(key=lambda m: (m[0], m[1].kind))
        return [CloseRecord(self.last_seq + i + 1, window, moment) for i, (moment, window) in enumerate(missed)]

    def retention_floor(self, kind: str, now: int) -> int | None:
        """Start of the oldest window of a kind still queryable: every open window, then the
        last ``keep_closed`` closed ones. None for alltime. Cost: `retained_windows`."""
        oldest = (self.retained_windows(kind, now) or self.open_windows(kind, now))[-1]
        return oldest.start_ms

    def retention_floors(self, now: int) -> dict[str, int | None]:
        """`retention_floor` of every kind of the board."""
        return {kind: self.retention_floor(kind, now) for kind in self.kinds}

    def listed_windows(self, kind: str, now: int) -> list[Window]:
        """Open and retained windows of a kind, newest first (the periods route): tables of
        windows after the current one (a clock moved back) too. O(listed windows + tables)."""
        current = self.schedule.current(kind, now)
        if current.start_ms is None:
            return [current]
        later = {t.window for k, t in self.tables.items() if k[0] == kind and (t.window.start_ms or 0) > current.start_ms}
        return sorted(later, key=lambda w: w.start_ms or 0, reverse=True) + self.open_windows(kind, now) + self.retained_windows(kind, now)

    def window_closed(self, window: Window, now: int) -> bool:
        if (window.kind, window.period_id) in self.markers:
            return True
        moment = self.close_moment(window)
        return moment is not None and now >= moment

    def view(self, kind: str, period_id: str | None, now: int, partition: str | None = None) -> RankedTable:
        """The table a query names (`Schedule.current` when ``period_id`` is None): the
        window's global table, or its ``partition``.

        Raises QueryError: unknown_period, period_not_retained, not_ready, unknown_partition.
        O(keep_closed).
        """
        table = self._view(kind, period_id, now)
        if partition is None:
            return table
        if not self.has_partition(table.window, partition):
            raise not_found("unknown_partition", f"{kind} period {table.window.period_id} has no partition {partition!r}")
        return self.partition_of(table, partition)

    def _view(self, kind: str, period_id: str | None, now: int) -> RankedTable:
        if kind not in self.kinds:
            raise not_found("unknown_period", f"board {self.spec.name!r} has no {kind} table")
        if not self.ready and not self.ready_windows:
            raise not_ready(self.spec.name)
        if period_id is None:
            window = self.schedule.current(kind, now)
        else:
            try:
                window = self.schedule.window_by_id(kind, period_id)
            except UnknownPeriod as exc:
                raise not_found("unknown_period", f"{period_id!r} is not a {kind} period id") from exc
        if kind not in self.ready and window not in self.ready_windows:
            raise not_ready(self.spec.name)
        key = (kind, window.period_id)
        table = self.tables.get(key)
        if table is not None:
            return table
        floor = self.retention_floor(kind, now)
        if window.start_ms is not None and window.start_ms > now and window != self.schedule.current(kind, now):
            raise not_found("unknown_period", f"{kind} period {window.period_id} has not begun")
        if floor is not None and window.start_ms is not None and window.start_ms < floor:
            raise not_found("period_not_retained", f"{kind} period {window.period_id} is no longer retained")
        return self._empty_table(window, now)

    def listed_tables(self, kind: str, now: int) -> list[RankedTable]:
        """The tables of `listed_windows`, an empty one for a window no event reached: what the
        periods route lists and `arena rebuild` prints. Raises QueryError not_ready until every
        table of the kind is published. O(listed windows)."""
        if kind not in self.ready:
            raise not_ready(self.spec.name)
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


def _decide(
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

    router = Router(board.schedule, board.kinds, marker_seq)

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
        if board.league is not None:
            season_before(windows, received_at)
            route = router.route(occurred_at)
            windows = route.windows(plan.last_seq + 1)
        for window in windows:
            key = (window.kind, window.period_id)
            if key not in board.tables and key not in fresh_ahead:
                fresh[key] = window
        return route, windows

    def season_before(windows: tuple[Window, ...], received_at: int) -> None:
        """On a league board, the season's window before an event's gets its close marker for
        sure, which the event's members may wait for (`arena.engine.league`): now when its
        moment has passed (no event reached it), else at its moment with the tables."""
        for window in windows:
            previous = board.previous(window) if window.kind == board.spec.season else None
            if previous is None:
                continue
            key = (previous.kind, previous.period_id)
            moment = board.close_moment(previous)
            if marker_seq(key) != NO_MARKER or moment is None:
                continue
            if received_at >= moment:
                add_marker(previous, moment)
            elif key not in board.tables and key not in fresh_ahead:
                fresh[key] = previous

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
                    results.append(rejected(key, Reason.IDEMPOTENCY_KEY_REUSED, KEY_REUSED))
                continue
            if board.retired:
                results.append(rejected(key, Reason.BOARD_RETIRED, RETIRED))
                continue
            if not spec.min_value <= event.value <= spec.max_value:
                results.append(rejected(key, Reason.VALUE_OUT_OF_RANGE, f"value: {value_rule(spec)}, got {event.value}"))
                continue
            if event.occurred_at > received_at + spec.max_future_skew_ms:
                results.append(rejected(key, Reason.OCCURRED_IN_FUTURE, (
                    f"occurred_at: must be at most {spec.max_future_skew_ms / 1000:g}s after the server's clock "
                    f"({instant(received_at)}), got {instant(event.occurred_at)}")))
                continue
            if received_at != routed_at or route is None or not route.start <= event.occurred_at < route.end:
                route, windows = open_windows(event.occurred_at, received_at)
                routed_at = received_at
            if route.outside:
                results.append(rejected(key, Reason.OUTSIDE_WINDOW, (
                    f"occurred_at: no period of board {spec.name!r} has a window containing {instant(event.occurred_at)}")))
                continue
            if not windows:
                results.append(rejected(key, Reason.PERIOD_CLOSED,
                                        f"occurred_at: every period containing {instant(event.occurred_at)} is closed"))
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
