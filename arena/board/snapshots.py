"""Taking a board's snapshot in the background (DESIGN.md, "Snapshots: a fast start"); the format
and the validity rules are `arena.engine.snapshot`'s, a start from one is `arena.board.load`'s.

Taking one never stops the board: every table is frozen at one seq (`arena.engine.table.Freeze`,
O(1)); reading the frozen standings and encoding them run on the event loop in steps of at most
`TURN` seconds a turn, and the checksum and the write in a thread (hashing and writing release
the GIL). Encoding in a thread stalled the loop for tens of ms (its C calls hold the GIL, and
the OS pauses a thread holding it), and so did a copy of a table's entries (one C call, and a
young list of 10**6 entries for the garbage collector to walk). A league's tiers and divisions
are read the same way (`arena.engine.league.League.image`): taking them in one go stalled the
loop 0.6-0.8 s at 10**6 members.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Generator, Iterator
from dataclasses import replace

from arena.board.clock import Clock
from arena.engine.board import BoardEngine
from arena.engine.snapshot import Snapshot, encode, record_identity, seal
from arena.engine.table import Freeze
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
    if voids:
        return record_identity(voids[0])
    others = [r for r in await journal.board_records(seq) if r.seq == seq]
    return record_identity(others[0]) if others else None


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
        floors = {str(kind): floor for kind, floor in engine.retention_floors(now).items()}
        disputes = dict(engine.disputes)
        tables = [*engine.tables.values(), *(part for parts in engine.partitions.values() for part in parts.values())]
        freezes = [Freeze(table) for table in tables]  # all as of `seq`
        league = None if engine.league is None else engine.league.image()
        try:
            try:
                record = await record_at(self.journal, seq)
                if record is None:
                    raise JournalError(f"{self.journal.path}: no record at seq {seq}")

                body: list[bytes] = []
                await _in_turns(_encoded(Snapshot(board, definition_text(engine.spec), seq, record, floors, disputes, freezes),
                                         league, body))
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


def _encoded(snapshot: Snapshot[Freeze, list[bytes]], league: Generator[None, None, list[bytes]] | None,
             body: list[bytes]) -> Iterator[None]:
    """`encode` of ``snapshot`` with the league image ``league`` makes, in steps both."""
    if league is not None:
        snapshot = replace(snapshot, league=(yield from league))
    yield from encode(snapshot, body)


async def _in_turns(steps: Iterator[None]) -> None:
    """Run ``steps`` on the event loop, `TURN` seconds of them at a time."""
    until = time.perf_counter() + TURN
    for _ in steps:
        if time.perf_counter() >= until:
            await asyncio.sleep(0)
            until = time.perf_counter() + TURN
