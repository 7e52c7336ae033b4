"""Journal write faults for tests, used only by `arena serve --fault-injection`: a backend that
wraps the configured one and hands out journals whose writes fail as on a full disk or a read-only
file, until healed. It touches nothing below it, so it works the same on every backend, and reads
keep being served."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Sequence

from prometheus_client import CollectorRegistry

from arena.engine.records import Record
from arena.engine.spec import BoardSpec
from arena.errors import JournalWriteFailed
from arena.journal.interface import Journal, JournalBackend, JournalProxy

FAULTS = {"full": "no space left on device", "readonly": "read-only file"}
"""The faults that can be injected, and what a write refused by each says."""


class FaultyJournal(JournalProxy):
    """A journal that delegates everything to another, except that while `fault` is set an
    append of records raises JournalWriteFailed and writes nothing, as a full disk does."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal)
        self.fault: str | None = None

    async def append(self, records: Sequence[Record]) -> None:
        if records and self.fault is not None:
            raise JournalWriteFailed(f"{self.path}: write failed: {FAULTS[self.fault]} (injected)")
        await self.journal.append(records)

    async def append_all(self, chunks: AsyncIterable[Sequence[Record]]) -> None:
        if self.fault is not None:
            raise JournalWriteFailed(f"{self.path}: write failed: {FAULTS[self.fault]} (injected)")
        await self.journal.append_all(chunks)


class WriteFaults:
    """A JournalBackend around ``backend`` whose journals take faults by board name."""

    def __init__(self, backend: JournalBackend) -> None:
        self.backend = backend
        self._journals: dict[str, FaultyJournal] = {}

    def where(self, board: str) -> str:
        return self.backend.where(board)

    async def open(self, spec: BoardSpec, *, readonly: bool = False) -> FaultyJournal:
        journal = FaultyJournal(await self.backend.open(spec, readonly=readonly))
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
