"""Taking a board's snapshot in the background, and starting a board from one (DESIGN.md,
"Snapshots: a fast start"); the format and the validity rules are `arena.engine.snapshot`'s.

Taking one never stops the board: every table is frozen at one seq (`arena.engine.table.Freeze`,
O(1)); reading the frozen standings and encoding them run on the event loop in steps of at most
`TURN` seconds a turn, and the checksum and the write in a thread (hashing and writing release
the GIL). Encoding in a thread stalled the loop for tens of ms (its C calls hold the GIL, and
the OS pauses a thread holding it), and so did a copy of a table's entries (one C call, and a
young list of 10**6 entries for the garbage collector to walk).

A start loads the snapshot's tables, then replays only the journal's records after its seq; a
snapshot that may not serve is logged with the reason and ignored.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

from arena.board.clock import Clock
from arena.board.load import ReplayReport, TableReport, replay_tail
from arena.engine.board import BoardEngine, retained_by
from arena.engine.snapshot import Snapshot, SnapshotInvalid, decode, encode, record_identity, rejection, seal
from arena.engine.table import Freeze, RankedTable
from arena.errors import JournalError
from arena.journal import Journal, ScoreRow
from arena.journal.interface import definition_text
from arena.journal.snapshots import SnapshotStore

log = logging.getLogger("arena.board")
TURN = 0.002
"""Seconds of snapshot work per turn of the event loop: about what taking one adds to an ack."""


async def record_at(journal: Journal, seq: int) -> str | None:
    """`record_identity` of the journal's record at ``seq``; None when it has none. A few reads."""
    found: list[ScoreRow] = []
    async for rows in journal.scan(upto_seq=seq, min_seq=seq):
        found += rows
    if found:
        return "event " + found[0][4]
    markers = [m for m in await journal.close_markers(seq) if m.seq == seq]
    if markers:
        return record_identity(markers[0])
    voids = [v for v, _occurred_at in await journal.voids(seq) if v.seq == seq]
    return record_identity(voids[0]) if voids else None


class Snapshotter:
    """One board's snapshots while its actor runs: `poll` after each batch starts one in the
    background every ``every`` journaled records; `finish` writes the last one at a graceful stop."""

    def __init__(self, engine: BoardEngine, journal: Journal, store: SnapshotStore, every: int, clock: Clock,
                 seq: int = 0) -> None:
        self.engine = engine
        self.journal = journal
        self.store = store
        self.every = every
        self.clock = clock
        self.seq = seq
        """The seq of the newest snapshot written or loaded."""
        self._task: asyncio.Task[None] | None = None

    def poll(self) -> None:
        """Start a snapshot in the background when ``every`` records were journaled since the
        last one and none is being taken. O(1)."""
        if self.engine.last_seq - self.seq >= self.every and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self.take(), name=f"snapshot:{self.engine.spec.name}")

    async def finish(self) -> None:
        """At a graceful stop: wait for the snapshot under way, then write one of the board as it
        is now unless the newest one already is."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        await self.take()

    def abandon(self) -> None:
        """The actor crashed: stop the snapshot under way (its thread, if any, ends alone)."""
        if self._task is not None:
            self._task.cancel()

    async def take(self) -> None:
        """Write a snapshot of the board as of its current seq. A failure is logged: a snapshot
        is a cache, the board goes on."""
        engine = self.engine
        seq = engine.last_seq
        if seq == 0 or seq == self.seq:
            return
        board = engine.spec.name
        started = time.perf_counter()
        now = self.clock.now()
        floors = {kind.value: floor for kind, floor in engine.retention_floors(now).items()}
        disputes = dict(engine.disputes)
        freezes = [Freeze(table) for table in engine.tables.values()]  # all as of `seq`
        try:
            try:
                record = await record_at(self.journal, seq)
                if record is None:
                    raise JournalError(f"{self.journal.path}: no record at seq {seq}")

                body: list[bytes] = []
                await _in_turns(encode(Snapshot(board, definition_text(engine.spec), seq, record, floors, disputes, freezes), body))
            finally:
                for freeze in freezes:
                    freeze.end()
            pieces = await asyncio.to_thread(seal, body)
            await self.store.save(board, seq, pieces)
        except JournalError as exc:
            log.warning("board %s: snapshot at seq %d not written: %s", board, seq, exc)
            return
        self.seq = seq
        log.info("board %s: snapshot at seq %d written to %s (%d tables, %d bytes) in %.3fs",
                 board, seq, self.store.where(board), len(freezes), sum(map(len, pieces)), time.perf_counter() - started)


async def _in_turns(steps: Iterator[None]) -> None:
    """Run ``steps`` on the event loop, `TURN` seconds of them at a time."""
    until = time.perf_counter() + TURN
    for _ in steps:
        if time.perf_counter() >= until:
            await asyncio.sleep(0)
            until = time.perf_counter() + TURN


async def start_from_snapshot(
    engine: BoardEngine, journal: Journal, store: SnapshotStore, now: int
) -> tuple[ReplayReport, int] | None:
    """Load ``engine`` (fresh, empty) from its board's newest snapshot and the journal's records
    after its seq, as of ``now``: the report and the snapshot's seq; None (``engine`` untouched, a line logged saying why) when there
    is no snapshot or it may not serve: then the caller replays in full. Raises JournalError.
    O(members + records after the snapshot)."""
    board = engine.spec.name
    started = time.perf_counter()
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

    engine.unpublish()  # as every load: no table is seen before the tail is applied
    include = retained_by(floors)  # as a full replay: the tables retained today
    for image in snapshot.tables:  # one table a turn: each is O(n), about 0.3 s at 10**6 entries
        window = image.window
        if include(window) and image.entries:  # as a full replay: no table for a window without events
            engine.tables[(window.kind, window.period_id)] = RankedTable.from_entries(engine.rule, window, image.entries, image.keys)
            await asyncio.sleep(0)
    engine.disputes = dict(snapshot.disputes)
    for marker in await journal.close_markers(snapshot.seq):
        engine.close(marker)
    engine.last_seq = snapshot.seq
    upto = journal.last_seq
    events = await replay_tail(engine, journal, upto, now)  # publishes at its end
    seconds = time.perf_counter() - started
    log.info("board %s: started from the snapshot at seq %d and %d records after it", board, snapshot.seq, upto - snapshot.seq)
    return ReplayReport(board, events, seconds, [TableReport(t, 0, seconds) for t in engine.tables.values()]), snapshot.seq
