"""A board's one load path: `load` fills a board's engine from its journal, as of an instant and
up to a seq, for a starting actor, a restarted one, a standby's copy at each beat and at a
takeover or a hand-off, and `arena rebuild` (also `arena verify` and `arena migrate`). It chooses
the source:

- a standby's copy (``copy``): the engine already holds the journal up to its last_seq; only the
  records after it are applied (the tail);
- the board's newest snapshot (``snapshots``; DESIGN.md, "Snapshots: a fast start"), when it may
  serve: its tables, then the tail after its seq; one that may not is logged with the reason and
  ignored;
- else a full replay of the journal.

Every load hides the engine's tables from readers when it begins (`BoardEngine.unpublish`) and
publishes them when it ends, at the seq they hold, in one step (`BoardEngine.publish`): a reader
gets `not_ready` until then, never a partial table (DESIGN.md, "Never stale"). The one exception
is a full replay's current short tables below, each published once complete.

A journal whose integrity check runs beside the load (sqlite after an unclean stop:
`Journal.checked`) is waited for before any table is published, and a load that fails for any
reason raises the check's JournalCorrupt when the check failed: a damaged file fails its board
as an open that checked it would.

A full replay loads the current hourly/daily/weekly tables first, from a pass over the events
since the earliest of their windows began; those tables (only they: not the older retained ones
of their kinds) answer while the second pass reads the older events for the alltime, monthly and
retained closed tables. Each event is read once: the first pass folds it into every table it
belongs to.

A journal that can (`FoldingJournal`) folds the events itself, bucket by bucket: a bucket is the
span of instants whose records go to the same windows (one `Route`), and its events below the
route's first close marker come back as one row per member; the few later ones (late events of
a closed window) are replayed one by one. Same tables, a fraction of the rows.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson

from arena.board.snapshots import record_at
from arena.config import parse_board
from arena.engine.board import SHORT_KINDS, BoardEngine, SeasonFirsts, retained_by
from arena.engine.league import LEAGUE_RECORD, League, parse_moves
from arena.engine.loader import Loader
from arena.engine.periods import Window
from arena.engine.records import BoardKind
from arena.engine.routing import Routed, TableKey, table_key, window_at
from arena.engine.settlement import SettlementRecord
from arena.engine.snapshot import SnapshotInvalid, decode, rejection
from arena.engine.table import RankedTable
from arena.errors import JournalError
from arena.journal import FoldingJournal, Journal
from arena.journal.interface import definition_text
from arena.journal.snapshots import SnapshotStore

log = logging.getLogger("arena.board")


@dataclass(frozen=True, slots=True)
class TableReport:
    table: RankedTable
    events: int
    seconds: float


@dataclass(frozen=True, slots=True)
class LoadReport:
    board: str
    events: int
    """Score events applied: every one of a full replay, those of the tail after a snapshot or a copy."""
    seconds: float
    tables: list[TableReport]
    """The tables built (what `arena rebuild` prints); a snapshot's start lists every table with
    0 events, a copy's none."""
    snapshot_seq: int = 0
    """The seq the load started from without replaying (`arena_start_snapshot_seq`, and where
    the board's next snapshot is counted from): a snapshot's, or the seq a standby's copy was
    brought up to; 0: a full replay."""


async def load(
    engine: BoardEngine,
    journal: Journal,
    now: int,
    *,
    copy: bool = False,
    snapshots: SnapshotStore | None = None,
    upto_seq: int | None = None,
    everything: bool = False,
    on_ready: Callable[[frozenset[str]], None] | None = None,
    fold: bool = True,
) -> LoadReport:
    """Load ``engine`` from ``journal`` as of ``now``, up to seq ``upto_seq`` (default: the
    journal's last), and publish its tables at that seq.

    ``copy``: ``engine`` is a standby's copy, loaded up to its last_seq: only the tail is applied.
    Otherwise ``engine`` is fresh and empty, and starts from the newest snapshot in ``snapshots``
    when one may serve (a load up to the journal's last seq only: ``upto_seq`` None), else
    replays in full. ``everything`` loads every closed table, not only the retained ones (a full
    replay). ``on_ready`` is told each time a set of kinds becomes queryable. ``fold`` False
    reads every event one by one even from a `FoldingJournal` (to measure the fold against).
    Raises JournalError (JournalCorrupt names the file). O(records read + members of the tables
    built).
    """
    started = time.perf_counter()
    held = engine.last_seq if copy else 0
    engine.unpublish()  # before the first await: no reader sees a table while the load changes it
    board = engine.spec.name
    upto = journal.last_seq if upto_seq is None else upto_seq
    try:
        started_from = None if copy or snapshots is None else await _snapshot(engine, journal, snapshots, now)
        snapshot_seq = None if started_from is None else started_from[0]
        tables: list[TableReport] = []
        firsts: SeasonFirsts = {}
        if copy or started_from is not None:
            events = await _tail(engine, journal, upto, now, firsts, None if started_from is None else started_from[1])
        else:
            events, tables = await _replay(engine, journal, upto, now, everything, on_ready, fold, firsts)
        board_records = await journal.board_records(upto)
        engine.retired = any(r.kind == BoardKind.RETIRED for r in board_records)
        for record in board_records:
            if record.kind == BoardKind.SETTLEMENT and record.seq > held:  # a copy holds those up to its seq
                engine.settled(SettlementRecord.parse(record.seq, record.body))
        if engine.league is not None:
            defined = [(r.seq, parse_board(board, orjson.loads(r.body)).league) for r in board_records if r.kind == BoardKind.DEFINITION]
            engine.league.defined_by([(seq, league) for seq, league in defined if league is not None])
            spec = engine.league.spec
            recorded = dict(parse_moves(r.body, spec) for r in board_records if r.kind == LEAGUE_RECORD)
            engine.league_replay(firsts, recorded, held if copy else snapshot_seq or 0)
        await _checked(journal, board)
    except Exception:
        await journal.checked()  # a damaged journal is named by its check, whichever read failed first
        raise
    # The one end of every load: the tables now hold every record journaled up to `upto`. Open
    # the current windows and retire what the retention drops (not when loading `everything`:
    # that would retire the older closed tables just loaded on purpose), and publish every kind.
    engine.publish(upto, engine.kinds)
    if not everything:
        retained = retained_by(engine.retention_floors(now))
        for key in [key for key in engine.unsettled if not retained(engine.markers[key[:2]].window)]:
            log.warning("board %s: %s closed unsettled and is no longer retained: it is not settled", board, "/".join(key))
            del engine.unsettled[key]  # its table was not loaded: nothing left to settle from
        engine.rotate(now)
    if on_ready:
        on_ready(frozenset(engine.kinds))
    seconds = time.perf_counter() - started
    if snapshot_seq is not None:
        log.info("board %s: started from the snapshot at seq %d and %d records after it", board, snapshot_seq, upto - snapshot_seq)
        tables = [TableReport(t, 0, seconds) for t in engine.tables.values()]
    return LoadReport(board, events, seconds, tables, upto if copy else snapshot_seq or 0)


async def _checked(journal: Journal, board: str) -> None:
    """Wait for the journal's integrity check (sqlite after an unclean stop: begun at the open,
    running in its own thread beside the load) before a table of the board answers. Raises
    JournalCorrupt when it failed."""
    started = time.perf_counter()
    await journal.checked()
    waited = time.perf_counter() - started
    if waited >= 0.01:
        log.info("board %s: loaded; waited %.2fs more for its journal's integrity check", board, waited)


async def _replay(
    engine: BoardEngine,
    journal: Journal,
    upto: int,
    now: int,
    everything: bool,
    on_ready: Callable[[frozenset[str]], None] | None,
    fold: bool,
    firsts: SeasonFirsts,
) -> tuple[int, list[TableReport]]:
    """Fill ``engine`` (fresh, empty) with the journal up to seq ``upto``, in two passes, and
    publish the current short tables after the first; the score events read and the tables built.
    A league's season's ``firsts`` are gathered, and its divisions made at the end (`load`): its
    tables are published together, in one pass."""
    for marker in await journal.close_markers(upto):
        engine.close(marker)
    voids = await journal.voids(upto)
    voided = {void.target_seq for void, _occurred_at in voids}
    for void, occurred_at in voids:  # disputes count by markers alone: before any table is published
        engine.count_void(void.target_seq, occurred_at)

    short = [kind for kind in engine.kinds if kind in SHORT_KINDS and engine.league is None]
    rest = [kind for kind in engine.kinds if kind not in SHORT_KINDS]
    first_windows = {w for kind in short for w in engine.open_windows(kind, now)}
    retained = retained_by(engine.retention_floors(now))

    def include(window: Window) -> bool:
        return window in first_windows or everything or retained(window)

    reports: list[TableReport] = []
    loader = Loader(engine, include, voided, firsts)
    pass_started = time.perf_counter()
    since: int | None = None
    if short:
        since = min(w.start_ms or 0 for w in first_windows)
        await _read(loader, journal, upto, since, None, fold)
        tables = await _one_by_one(loader.finish(first_windows, only=first_windows.__contains__))
        reports += _reports(loader, tables, time.perf_counter() - pass_started)
        # only these tables are complete: their kinds' older (retained) and later tables are not
        await _checked(journal, engine.spec.name)
        engine.publish(upto, (), first_windows)
        if on_ready:
            on_ready(frozenset(short))
    await _read(loader, journal, upto, None, since, fold)
    current = (window_at(engine.schedule, kind, now) for kind in rest)
    tables = await _one_by_one(loader.finish(w for w in current if w is not None))
    reports += _reports(loader, tables, time.perf_counter() - pass_started)
    return loader.events, reports


async def _read(loader: Loader, journal: Journal, upto: int, since: int | None, before: int | None, fold: bool) -> None:
    """Feed ``loader`` the score events up to seq ``upto`` with ``since <= occurred_at < before``.
    A board with partitions reads them one by one: a journal's fold groups by member alone."""
    if not fold or not isinstance(journal, FoldingJournal) or loader.engine.spec.partitions() or loader.engine.league:
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
        TableReport(t, loader.applied.get(table_key(t.window, t.partition), [0])[0], seconds) for t in tables
    ]


Twins = dict[TableKey, tuple[Window, TableKey]]
"""Tables a snapshot holds as repeats of another (``same_as``), not built yet: each one's window
and the key of the table it repeats, which the tail feeds alone while it feeds them alike."""


async def _snapshot(engine: BoardEngine, journal: Journal, store: SnapshotStore, now: int) -> tuple[int, Twins] | None:
    """Fill ``engine`` (fresh, empty) from its board's newest snapshot, as of ``now``: its seq and
    the tables it repeats (`Twins`, for `_tail` to build); None (``engine`` untouched, a line
    logged saying why) when there is none or it may not serve. O(members)."""
    board = engine.spec.name
    try:
        data = await store.load(board)
        if data is None:
            log.info("board %s: no snapshot at %s; replaying the journal in full", board, store.where(board))
            return None
        snapshot = await asyncio.to_thread(decode, data)
    except (JournalError, SnapshotInvalid) as exc:
        log.warning("board %s: snapshot at %s ignored: %s; replaying the journal in full", board, store.where(board), exc)
        return None
    floors = engine.retention_floors(now)
    reason = rejection(snapshot, board, definition_text(engine.spec), await record_at(journal, snapshot.seq), floors)
    if reason is not None:
        log.warning("board %s: snapshot at seq %d ignored: %s; replaying the journal in full", board, snapshot.seq, reason)
        return None

    include = retained_by(floors)  # as a full replay: the tables retained today
    # repeats of a global table wait as twins for the tail; a board with partitions builds each
    # table (a partition's is fed only with its window's global table, never apart from it)
    partitioned = bool(engine.spec.partitions()) or engine.league is not None
    built: dict[int, RankedTable] = {}  # by index in the snapshot
    twins: Twins = {}
    for index, image in enumerate(snapshot.tables):  # one table a turn: each is O(n), about 0.3 s at 10**6 entries
        window = image.window
        key = (window.kind, window.period_id)
        if include(window) and image.entries:  # as a full replay: no table for a window without events
            like = None if image.same_as is None else built.get(image.same_as)
            if like is not None and not partitioned:
                twins[key] = (window, (like.window.kind, like.window.period_id))
                continue
            try:
                table = like.copy(window) if like is not None else RankedTable.from_sorted(
                    engine.rule, window, image.names, image.entries, image.order, image.keys)
            except ValueError as exc:  # a checksum holding over a bad section: a bug
                engine.tables.clear()
                engine.partitions.clear()
                log.warning("board %s: snapshot at seq %d ignored: %s; replaying the journal in full", board, snapshot.seq, exc)
                return None
            built[index] = table
            if image.partition is None:
                engine.tables[key] = table
            else:
                table.partition = image.partition
                engine.partitions.setdefault(key, {})[image.partition] = table
            await asyncio.sleep(0)
    if engine.league is not None:
        try:
            if snapshot.league is None:
                raise ValueError("it holds no league")
            # O(members): in a thread, so that the loop gets turns meanwhile (about 3 s at 10**6)
            await asyncio.to_thread(engine.league.load, snapshot.league, engine.schedule.window_by_id)
        except (KeyError, ValueError, TypeError) as exc:
            engine.tables.clear()
            engine.partitions.clear()
            engine.league = League(engine.league.spec)
            log.warning("board %s: snapshot at seq %d ignored: %s; replaying the journal in full", board, snapshot.seq, exc)
            return None
    engine.disputes = dict(snapshot.disputes)
    for marker in await journal.close_markers(snapshot.seq):
        engine.close(marker)
    engine.last_seq = snapshot.seq
    return snapshot.seq, twins


async def _tail(engine: BoardEngine, journal: Journal, upto: int, now: int, firsts: SeasonFirsts,
                twins: Twins | None = None) -> int:
    """Apply ``journal``'s records after ``engine.last_seq`` up to seq ``upto`` to ``engine``
    (loaded up to its last_seq: a standby's copy, or a snapshot's tables and its ``twins``), as
    of ``now``, and leave its tables as a full replay up to ``upto`` would; the score events
    applied. A twin is fed with the table it repeats, once, while the tail feeds them alike, and
    is then a copy of it: a board's current tables often hold the same events. O(records in the
    tail + members of its voids' events + members of a twin)."""
    after = engine.last_seq
    include = retained_by(engine.retention_floors(now))
    twins = dict(twins or {})
    for marker in await journal.close_markers(upto):
        if marker.seq > after:
            engine.close(marker)
    voids = [(void, occurred_at) for void, occurred_at in await journal.voids(upto) if void.seq > after]
    voided = {void.target_seq for void, _ in voids}

    def fed(window: Window) -> bool:
        return include(window) and (window.kind, window.period_id) not in twins

    events = 0
    async for rows in journal.scan(upto, min_seq=after + 1):
        if engine.league is not None:
            engine.season_firsts(rows, include, firsts)
        routed = list(engine.router.routed(rows, voided))
        if twins:
            _part(engine, twins, _fed_apart(twins, routed, include))
        events += engine.fold(routed, fed)
        await asyncio.sleep(0)
    _part(engine, twins, list(twins))
    for table in engine.tables.values():  # a table the tail opened may be closed already
        engine.close_table(table)
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
            engine.partitions.pop(key, None)
    for parts in engine.partitions.values():
        for name, part in list(parts.items()):
            if part.closed and not len(part):
                del parts[name]
    return events


def _fed_apart(twins: Twins, routed: list[Routed], include: Callable[[Window], bool]) -> list[TableKey]:
    """The twins that ``routed`` would not feed as the table they repeat. O(rows + routes * kinds)."""
    routes = {id(windows): windows for windows, *_ in routed}.values()  # events of a span share their windows
    fed = [{(w.kind, w.period_id) for w in windows if include(w)} for windows in routes]
    return [key for key, (_window, like) in twins.items() if any((key in keys) != (like in keys) for keys in fed)]


def _part(engine: BoardEngine, twins: Twins, keys: list[TableKey]) -> None:
    """Build the twins of ``keys`` as copies of the tables they repeat, as they are now. O(members)."""
    for key in keys:
        window, like = twins.pop(key)
        engine.tables[key] = engine.tables[like].copy(window)
