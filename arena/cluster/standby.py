"""Standby copies: a node next in a board's placement follows its journal by seq, so that when it
takes the board over it replays only the records journaled since its last beat.

A `Follower` holds a read-only engine of the board, loaded by the one load path
(`arena.board.load.load`): once in full, then brought up to the journal's committed seq at each
beat as a copy (the records after the engine's seq, applied as a start from a snapshot applies
the journal's tail). The new owner's actor starts from it (`arena.board.actor.BoardActor`'s
``engine``) and applies the last tail itself, after its grant: nothing can be journaled between
that read and its first append but by itself.
"""

from __future__ import annotations

import asyncio
import logging

from arena.board.load import load
from arena.engine.board import BoardEngine
from arena.engine.spec import BoardSpec
from arena.errors import JournalError
from arena.journal import Journal, JournalBackend

log = logging.getLogger("arena.cluster")


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
                copy = self.engine is not None
                engine = self.engine or BoardEngine(self.spec)
                report = await load(engine, self._journal, now, copy=copy, upto_seq=upto)
                if not copy:
                    log.info("board %s: followed as a standby from seq %d (%d events in %.3fs)",
                             self.spec.name, upto, report.events, report.seconds)
                self.engine = engine
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
