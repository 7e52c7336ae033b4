"""Journal faults for tests: a backend that wraps the configured one (`Arena`'s ``wrap_backend``)
and hands out journals that fail on demand, by board name:

- writes that fail as on a full disk or a read-only file, until healed (`FaultyBackend.inject`);
  reads keep being served;
- a crash of the board's actor in its next batches (`FaultyBackend.crash`): the actor looks up a
  batch's keys before it decides and writes it (`arena.board.actor.CommitPipeline.push`), so a
  lookup that raises an unexpected exception takes that batch down, unwritten, as a bug would;
- writable opens of a board's journal that wait until released (`FaultyBackend.hold`): a slow
  load, e.g. of a board activated on demand.

It touches nothing below it, so it works the same on every backend."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterable, Iterable, Sequence

from prometheus_client import CollectorRegistry

from arena.engine.events import Fingerprint
from arena.engine.records import Record
from arena.engine.spec import BoardSpec
from arena.errors import JournalWriteFailed
from arena.journal import Journal, JournalBackend
from arena.journal.interface import JournalProxy

FAULTS = {"full": "no space left on device", "readonly": "read-only file"}
"""The write faults that can be injected, and what a write refused by each says."""


class InjectedCrash(RuntimeError):
    """Raised inside a board's actor, from its journal, when a test crashes the board."""


class FaultyJournal(JournalProxy):
    """A journal that delegates everything to another, except that while `fault` is set an
    append of records raises JournalWriteFailed and writes nothing, as a full disk does, and
    that a lookup raises InjectedCrash while its board has crashes pending."""

    def __init__(self, journal: Journal, board: str, crashes: Counter[str]) -> None:
        super().__init__(journal)
        self.fault: str | None = None
        self._board = board
        self._crashes = crashes

    async def lookup(self, keys: Sequence[str]) -> dict[str, Fingerprint]:
        if self._crashes[self._board]:
            self._crashes[self._board] -= 1
            raise InjectedCrash(f"fault injection: crash of board {self._board}")
        return await self.journal.lookup(keys)

    async def append(self, records: Sequence[Record]) -> None:
        if records and self.fault is not None:
            raise JournalWriteFailed(f"{self.path}: write failed: {FAULTS[self.fault]} (injected)")
        await self.journal.append(records)

    async def append_all(self, chunks: AsyncIterable[Sequence[Record]]) -> None:
        if self.fault is not None:
            raise JournalWriteFailed(f"{self.path}: write failed: {FAULTS[self.fault]} (injected)")
        await self.journal.append_all(chunks)


class FaultyBackend:
    """A JournalBackend around ``backend`` whose journals take faults by board name."""

    def __init__(self, backend: JournalBackend) -> None:
        self.backend = backend
        self._journals: dict[str, FaultyJournal] = {}
        self._crashes: Counter[str] = Counter()
        self._held: dict[str, asyncio.Event] = {}

    def where(self, board: str) -> str:
        return self.backend.where(board)

    async def open(self, spec: BoardSpec, *, readonly: bool = False) -> FaultyJournal:
        held = self._held.get(spec.name)
        if held is not None and not readonly:
            await held.wait()
        journal = FaultyJournal(await self.backend.open(spec, readonly=readonly), spec.name, self._crashes)
        self._journals[spec.name] = journal
        return journal

    def watch(self, registry: CollectorRegistry, boards: Iterable[str]) -> None:
        self.backend.watch(registry, boards)

    async def close(self) -> None:
        await self.backend.close()

    def inject(self, board: str, fault: str | None) -> bool:
        """Make the writes of ``board``'s journal fail with ``fault`` (a key of FAULTS), or heal
        them (None). Lasts until healed or the journal is opened again (an actor restart).
        False when ``board`` has never had a journal opened."""
        journal = self._journals.get(board)
        if journal is None:
            return False
        journal.fault = fault
        return True

    def hold(self, board: str, held: bool) -> None:
        """Make the next writable opens of ``board``'s journal wait (``held``) until released."""
        if held:
            self._held.setdefault(board, asyncio.Event())
        elif board in self._held:
            self._held.pop(board).set()

    def crash(self, board: str, times: int) -> None:
        """Make ``board``'s actor crash in its next ``times`` batches (across its restarts)."""
        self._crashes[board] = times
