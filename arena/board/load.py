"""Rebuilding a board's tables from its journal: the one replay used by a starting actor, a
restarted actor and `arena rebuild`; and `replay_tail`, the records after a loaded seq (a
snapshot's, a standby copy's).

Every load hides the engine's tables from readers when it begins (`BoardEngine.unpublish`) and
ends in `finish_load`, which publishes them at the seq they hold: a reader gets `not_ready`
until then, never a partial table (DESIGN.md, "Never stale").

Current hourly/daily/weekly tables load first, from a pass over the events since the earliest
of their windows began; those tables (only they: not the older retained ones of their kinds)
answer while the second pass reads the older events for the alltime, monthly and retained closed
tables. Each event is read once: the first pass folds it into every table it belongs to.

A journal that can (`FoldingJournal`) folds the events itself, bucket by bucket: a bucket is the
span of instants whose records go to the same windows (one `Route`), and its events below the
route's first close marker come back as one row per member; the few later ones (late events of
a closed window) are replayed one by one. Same tables, a fraction of the rows.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from arena.engine.board import SHORT_KINDS, BoardEngine, retained_by
from arena.engine.loader import Loader
from arena.engine.periods import PeriodKind, Window
from arena.engine.table import RankedTable
from arena.journal import FoldingJournal, Journal


@dataclass(frozen=True, slots=True)
class TableReport:
    table: RankedTable
    events: int
    seconds: float


@dataclass(frozen=True, slots=True)
class ReplayReport:
    board: str
    events: int
    seconds: float
    tables: list[TableReport]


async def replay(
    engine: BoardEngine,
    journal: Journal,
    now: int,
    *,
    upto_seq: int | None = None,
    everything: bool = False,
    on_ready: Callable[[frozenset[PeriodKind]], None] | None = None,
    fold: bool = True,
) -> ReplayReport:
    """Load ``engine`` (fresh, empty) from ``journal`` as of ``now``, up to ``upto_seq``.

    ``everything`` loads every closed table, not only the retained ones. ``on_ready`` is told
    each time a set of kinds becomes queryable. ``fold`` False reads every event one by one even
    from a `FoldingJournal` (to measure the fold against). Raises JournalError (JournalCorrupt
    names the file).
    """
    started = time.perf_counter()
    engine.unpublish()
    upto = upto_seq if upto_seq is not None else journal.last_seq
    for marker in await journal.close_markers(upto):
        engine.close(marker)
    voids = await journal.voids(upto)
    voided = {void.target_seq for void, _occurred_at in voids}
    for void, occurred_at in voids:  # disputes count by markers alone: before any table is published
        engine.count_void(void.target_seq, occurred_at)

    short = [kind for kind in engine.kinds if kind in SHORT_KINDS]
    rest = [kind for kind in engine.kinds if kind not in SHORT_KINDS]
    first_windows = {w for kind in short for w in engine.open_windows(kind, now)}
    retained = retained_by(engine.retention_floors(now))

    def include(window: Window) -> bool:
        return window in first_windows or everything or retained(window)

    reports: list[TableReport] = []
    loader = Loader(engine, include, voided)
    pass_started = time.perf_counter()
    since: int | None = None
    if short:
        since = min(w.start_ms or 0 for w in first_windows)
        await _read(loader, journal, upto, since, None, fold)
        tables = await _one_by_one(loader.finish(first_windows, only=first_windows.__contains__))
        reports += _reports(loader, tables, time.perf_counter() - pass_started)
        # only these tables are complete: their kinds' older (retained) and later tables are not
        engine.publish(upto, (), first_windows)
        if on_ready:
            on_ready(frozenset(short))
    await _read(loader, journal, upto, None, since, fold)
    tables = await _one_by_one(loader.finish(engine.calendar.window_at(kind, now) for kind in rest))
    reports += _reports(loader, tables, time.perf_counter() - pass_started)
    finish_load(engine, upto, now, rotate=not everything)  # rotating would retire the older closed tables just loaded on purpose
    if on_ready:
        on_ready(frozenset(engine.kinds))
    return ReplayReport(engine.spec.name, loader.events, time.perf_counter() - started, reports)


def finish_load(engine: BoardEngine, upto: int, now: int, *, rotate: bool = True) -> None:
    """The last step of every load (a full replay, a snapshot and its tail, a standby's tail at a
    takeover or a hand-off, a restart): ``engine``'s tables now hold every record journaled up to
    seq ``upto``: open the current windows, retire what the retention drops, and publish every
    kind at ``upto`` (`BoardEngine.publish`), in one step. O(tables + kinds)."""
    engine.publish(upto, engine.kinds)
    if rotate:
        engine.rotate(now)


async def _read(loader: Loader, journal: Journal, upto: int, since: int | None, before: int | None, fold: bool) -> None:
    """Feed ``loader`` the score events up to seq ``upto`` with ``since <= occurred_at < before``."""
    if not fold or not isinstance(journal, FoldingJournal):
        async for rows in journal.scan(upto, min_occurred_at=since, before_occurred_at=before):
            loader.feed(rows)
        return
    at: int | None = since or 0  # no instant is before 1970 (validation)
    while at is not None and (start := await journal.next_instant(at, before)) is not None:
        route = loader.engine.router.route(start)
        end = None if route.end == math.inf else max(int(route.end), start + 1)  # an empty span: one instant
        if before is not None and (end is None or end > before):
            end = before
        below = upto + 1 if route.first_marker > upto else int(route.first_marker)
        bucket = loader.bucket(route.windows(0))
        async for folded in journal.fold(start, end, below, upto):
            bucket.feed(folded)
        bucket.done()
        if below <= upto:  # the late events of a closed window, each routed by its own seq
            async for events in journal.scan(upto, min_occurred_at=start, before_occurred_at=end, min_seq=below):
                loader.feed(events)
        at = end


async def _one_by_one(tables: Iterator[RankedTable]) -> list[RankedTable]:
    """The tables as they are built, with a turn of the event loop between two: each is one
    sort (about 0.8 s for 10**6 members) that would otherwise add up to one long stall of every
    other board on the server."""
    built = []
    for table in tables:
        built.append(table)
        await asyncio.sleep(0)
    return built


def _reports(loader: Loader, tables: list[RankedTable], seconds: float) -> list[TableReport]:
    return [
        TableReport(t, loader.applied.get((t.window.kind, t.window.period_id), [0])[0], seconds) for t in tables
    ]


async def replay_tail(engine: BoardEngine, journal: Journal, upto: int, now: int) -> int:
    """Apply ``journal``'s records after ``engine.last_seq`` up to seq ``upto`` to ``engine``
    (loaded up to its last_seq: a standby's copy, or a snapshot's tables), as of ``now``, and
    leave its tables as a full replay up to ``upto`` would; the score events applied. Readers
    see none of its tables until it ends (`finish_load`). Raises JournalError. O(records in the
    tail + members of its voids' events)."""
    engine.unpublish()
    after = engine.last_seq
    include = retained_by(engine.retention_floors(now))
    for marker in await journal.close_markers(upto):
        if marker.seq > after:
            engine.close(marker)
    voids = [(void, occurred_at) for void, occurred_at in await journal.voids(upto) if void.seq > after]
    voided = {void.target_seq for void, _ in voids}
    events = 0
    async for rows in journal.scan(upto, min_seq=after + 1):
        events += engine.fold(engine.router.routed(rows, voided), include)
        await asyncio.sleep(0)
    for key, table in engine.tables.items():  # a table the tail opened may be closed already
        closing = engine.markers.get(key)
        if closing is not None:
            table.closed_seq, table.closed_at = closing.seq, closing.closed_at
    for void, occurred_at in voids:
        if void.target_seq > after:  # the tail left its event out
            engine.count_void(void.target_seq, occurred_at)
            continue
        target = await journal.event_by_key(void.idempotency_key)
        assert target is not None, "a void's event is journaled"
        remaining = [e for e in await journal.member_events(target.member, before_seq=upto + 1) if not e.voided]
        engine.void([void], [target], remaining)
    for key, table in list(engine.tables.items()):  # as a replay leaves them out: past the retention, or closed empty
        if not include(table.window) or (table.closed and not len(table)):
            del engine.tables[key]
    finish_load(engine, upto, now)
    return events
