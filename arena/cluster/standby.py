"""Standby copies: a node next in a board's placement follows its journal by seq, so that when it
takes the board over it replays only the records journaled since its last beat.

A `Follower` holds a read-only engine of the board: loaded once in full (`arena.replay.replay`),
then brought up to the journal's committed seq at each beat (`follow`: the records after the
engine's seq, applied as a start from a snapshot applies the journal's tail). The new owner's
actor starts from it (`arena.actor.BoardActor`'s ``engine``) and applies the last tail itself,
after its grant: nothing can be journaled between that read and its first append but by itself.
"""

from __future__ import annotations

import asyncio
import logging

from arena.engine.board import BoardEngine
from arena.engine.periods import Window
from arena.engine.spec import BoardSpec
from arena.errors import JournalError
from arena.journal import Journal, JournalBackend
from arena.replay import ReplayReport, replay

log = logging.getLogger("arena.cluster")


async def follow(engine: BoardEngine, journal: Journal, upto: int, now: int) -> int:
    """Apply ``journal``'s records after ``engine.last_seq`` up to seq ``upto`` to ``engine``
    (loaded up to its last_seq), as of ``now``; the score events applied. Raises JournalError.
    O(records in the tail + members of its voids' events)."""
    after = engine.last_seq
    floors = {kind: engine.retention_floor(kind, now) for kind in engine.kinds}

    def include(window: Window) -> bool:  # the tables retained today, as a replay loads them
        floor = floors[window.kind]
        return floor is None or window.start_ms is None or window.start_ms >= floor

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
    engine.last_seq = upto
    for key, table in list(engine.tables.items()):  # as a replay leaves them out: past the retention, or closed empty
        if not include(table.window) or (table.closed and not len(table)):
            del engine.tables[key]
    engine.rotate(now)
    return events


class Follower:
    """A board followed by this node (a standby): `catch_up` at each beat; `engine` once caught up."""

    def __init__(self, spec: BoardSpec) -> None:
        self.spec = spec
        self.engine: BoardEngine | None = None
        """Loaded up to ``engine.last_seq``; None until the first catch-up ends."""
        self._journal: Journal | None = None
        self._closed = False
        self._lock = asyncio.Lock()

    async def catch_up(self, backend: JournalBackend, now: int) -> None:
        """Bring the engine up to the journal's committed seq: the first time a full replay,
        then the tail. Raises JournalError (the engine is then dropped: the next catch-up
        starts again in full)."""
        async with self._lock:
            if self._closed:  # taken or dropped while this catch-up waited its turn
                return
            try:
                if self._journal is None:
                    self._journal = await backend.open(self.spec, readonly=True)
                upto = await self._journal.committed_seq()
                if self.engine is None:
                    engine = BoardEngine(self.spec)
                    report: ReplayReport = await replay(engine, self._journal, now, upto_seq=upto)
                    self.engine = engine
                    log.info("board %s: followed as a standby from seq %d (%d events in %.3fs)",
                             self.spec.name, upto, report.events, report.seconds)
                else:
                    await follow(self.engine, self._journal, upto, now)
            except JournalError:
                self.engine = None
                raise

    async def take(self) -> BoardEngine | None:
        """The engine, for the board's new actor (once: the follower is done), or None when it
        never caught up. Waits for a catch-up under way."""
        async with self._lock:
            engine, self.engine = self.engine, None
            await self._close()
            return engine

    async def close(self) -> None:
        """Stop following: close its journal, after a catch-up under way."""
        async with self._lock:
            await self._close()

    async def _close(self) -> None:
        self._closed = True
        if self._journal is not None:
            journal, self._journal = self._journal, None
            await journal.close()
