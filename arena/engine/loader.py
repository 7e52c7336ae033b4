"""Replaying journaled score records into a board's tables (`arena.board.load` drives it).

Records are routed by the same rule as the live path (`Route.windows`) and folded by the same
merge (`ScoringRule.update` and `merge`), so a rebuild equals the live tables. Member states
accumulate in plain dicts, and each table is built at once from them: its entries without a
sort when they come in rank order (PostgreSQL's fold of one bucket), its names without one when
they come in code point order (sqlite's), the other in one sort, and a table fed the same rows
as one built before is a copy of it. That is what makes a rebuild fast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from arena.engine.board import BoardEngine, SeasonFirsts
from arena.engine.periods import Window
from arena.engine.routing import PartitionKey, ScoreRow, TableKey
from arena.engine.scoring import FoldRow, State
from arena.engine.table import RankedTable

_Target = tuple[dict[str, State], list[int]] | None
"""Where a window's records go in one pass: its member states and its count of records applied;
None for a window the pass leaves out."""


class Loader:
    """Replays journaled score records into the tables one pass includes."""

    def __init__(self, engine: BoardEngine, include: Callable[[Window], bool], voided: set[int], firsts: SeasonFirsts) -> None:
        self.engine = engine
        self.firsts = firsts
        """A league's season: each member's first seq in each window (`BoardEngine.season_firsts`)."""
        self.include = include
        self.voided = voided
        self.events = 0
        self._states: dict[TableKey, dict[str, State]] = {}
        self._windows: dict[TableKey, Window] = {}
        self.applied: dict[TableKey | PartitionKey, list[int]] = {}
        """Records applied to each table (`table_key`)."""
        # id(window) -> (window, target); the window is kept so that its id is not reused
        self._targets: dict[int, tuple[Window, _Target]] = {}
        # Tables fed the same rows so far (their states are equal) share a twin number: a
        # bucket's fresh windows get one, and the windows a later bucket feeds part of a set get
        # a new one. A table built from twin states is a copy of the first built. Only buckets
        # make twins, and a board with partitions has none (`arena.board.load`): the tables of
        # one partition fed the same rows are twins, never those of two.
        self._twins: dict[TableKey, int] = {}
        self._next_twin = 0
        self._built: dict[int, RankedTable] = {}  # the first table built of each twin number
        self._partitions: dict[PartitionKey, dict[str, State]] = {}
        """The member states of each partition of a window's table (a region's)."""

    def _target(self, window: Window) -> _Target:
        target: _Target = None
        if self.include(window):
            key = (window.kind, window.period_id)
            self._windows[key] = window
            target = (self._states.setdefault(key, {}), self.applied.setdefault(key, [0]))
        self._targets[id(window)] = (window, target)
        return target

    def _partition(self, window: Window, partition: str) -> tuple[dict[str, State], list[int]]:
        key = (window.kind, window.period_id, partition)
        return self._partitions.setdefault(key, {}), self.applied.setdefault(key, [0])

    def feed(self, rows: Iterable[ScoreRow]) -> None:
        """Apply rows (seq, member, value, occurred_at, key), in any order: merges commute, and
        a close marker excludes by seq. O(rows * kinds)."""
        update_of, merge = self.engine.rule.update, self.engine.rule.merge
        targets = self._targets
        count = 0
        if self.engine.league is not None:
            rows = list(rows)
            self.engine.season_firsts(rows, self.include, self.firsts)
        for windows, member, value, occurred_at, key, partition in self.engine.router.routed(rows, self.voided):
            count += 1
            update = None
            for window in windows:
                known = targets.get(id(window))
                target = known[1] if known is not None else self._target(window)
                if target is None:
                    continue
                if update is None:
                    update = update_of(member, value, occurred_at, key)
                for states, applied in (target,) if partition is None else (target, self._partition(window, partition)):
                    applied[0] += 1
                    new = merge(states.get(member), update)
                    if new is not None:
                        states[member] = new
        if count:
            self._twins.clear()  # which windows the rows went to is known only row by row
        self.events += count

    def twin(self) -> int:
        """A new twin number (see ``_twins``). O(1)."""
        self._next_twin += 1
        return self._next_twin

    def bucket(self, windows: Sequence[Window]) -> BucketFold:
        """Where one bucket's folded rows go (`BucketFold`): every one of ``windows`` the pass
        includes. O(1)."""
        return BucketFold(self, windows)

    def finish(self, tables: Iterable[Window] = (), only: Callable[[Window], bool] | None = None) -> Iterator[RankedTable]:
        """Build and install, one at a time, the tables ``only`` selects (all by default) plus
        empty ones for ``tables``; the caller may let other work run between two. Later rows
        must not reach a table built here. O(n log n)."""
        engine = self.engine
        for window in tables:
            key = (window.kind, window.period_id)
            self._windows.setdefault(key, window)
            self._states.setdefault(key, {})
        self._targets.clear()  # a later row looks its windows up again (and finds no states)
        built = self._built
        for key in [k for k in self._states if only is None or only(self._windows[k])]:
            states = self._states.pop(key)
            twin = self._twins.pop(key, None)
            like = None if twin is None else built.get(twin)
            window = self._windows[key]
            table = RankedTable.from_states(engine.rule, window, states, like=like)
            if twin is not None:
                built.setdefault(twin, table)
            engine.tables[key] = table
            engine.close_table(table)
            yield table
            for part_key in [p for p in self._partitions if p[:2] == key]:
                part = RankedTable.from_states(engine.rule, window, self._partitions.pop(part_key))
                part.partition = part_key[2]
                engine.partitions.setdefault(key, {})[part.partition] = part
                engine.close_table(part)
                yield part


class BucketFold:
    """One bucket's folded rows on their way into a pass's tables (`Loader.bucket`), fed a chunk
    at a time (the caller may let other work run between two), then `done`.

    Each row (`FoldRow`) is a member's events, and folds in as one event would into every window
    of the bucket the pass includes. The events must be unvoided and apply to all of those
    windows (seqs below every close marker of their route), and a member comes once a bucket.
    A chunk's states are made in bulk (`ScoringRule.states`); they are merged into the windows
    that earlier buckets fed, and gathered into one dict for the others, which `done` copies to
    each of them (a copy of a dict is a copy of its table)."""

    __slots__ = ("_loader", "_windows", "_fed", "_fresh", "_made")

    def __init__(self, loader: Loader, windows: Sequence[Window]) -> None:
        self._loader = loader
        self._windows = windows
        self._fed: list[tuple[dict[str, State], list[int]]] | None = None
        self._fresh: list[tuple[Window, list[int]]] = []
        self._made: dict[str, State] = {}

    def feed(self, rows: Sequence[FoldRow]) -> None:
        """Apply a chunk of the bucket's rows. About 1 us a row and window."""
        if not rows:
            return
        loader = self._loader
        fed = self._fed
        if fed is None:  # at the first row: a bucket without rows makes no table, as no event would
            fed = self._fed = []
            twins = loader._twins
            renumbered: dict[int, int] = {}
            for window in self._windows:
                known = loader._targets.get(id(window))
                target = known[1] if known is not None else loader._target(window)
                if target is None:
                    continue
                if target[0]:
                    fed.append(target)
                    key = (window.kind, window.period_id)
                    if key in twins:  # still a twin of those of its twins this bucket feeds too
                        twins[key] = renumbered.setdefault(twins[key], loader.twin())
                else:
                    self._fresh.append((window, target[1]))
        rule = loader.engine.rule
        if not fed:  # the rows go to fresh windows only (if any): straight into their states
            if self._fresh:
                rule.states(rows, self._made)
        else:
            made = rule.states(rows)  # what each member's row makes of nothing, and brings to a state
            if self._fresh:
                self._made.update(made)
            merge = rule.merge
            for states, _applied in fed:
                for member, update in made.items():
                    new = merge(states.get(member), update)
                    if new is not None:
                        states[member] = new
        count = sum([row[4] for row in rows])
        for _states, applied in fed:
            applied[0] += count
        for _window, applied in self._fresh:
            applied[0] += count
        loader.events += count

    def done(self) -> None:
        """Install the states gathered for the windows no earlier bucket fed, one copy each.
        O(members)."""
        loader = self._loader
        twin = loader.twin()
        for i, (window, applied) in enumerate(self._fresh):
            states = self._made if i == 0 else self._made.copy()
            key = (window.kind, window.period_id)
            loader._states[key] = states
            loader._twins[key] = twin
            loader._targets[id(window)] = (window, (states, applied))
        self._fresh = []
