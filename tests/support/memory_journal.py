"""An in-memory `Journal`: the interface as a test double, and proof it is small enough to swap."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Sequence

from arena.engine.events import Fingerprint
from arena.engine.records import BoardRecord, CloseRecord, Record, ScoreRecord, StoredEvent, Voided, VoidRecord
from arena.journal import ScoreRow


class MemoryJournal:
    def __init__(self, path: str = "memory") -> None:
        self.path = path
        self.last_seq = 0
        self.journaled: list[Record] = []

    def _scores(self) -> list[ScoreRecord]:
        return [r for r in self.journaled if isinstance(r, ScoreRecord)]

    def _voided(self) -> dict[int, Voided]:
        return {r.target_seq: Voided(r.seq, r.reason, r.admin, r.voided_at) for r in self.journaled if isinstance(r, VoidRecord)}

    async def lookup(self, keys: Sequence[str]) -> dict[str, Fingerprint]:
        wanted = set(keys)
        return {r.event.idempotency_key: r.event.fingerprint for r in self._scores() if r.event.idempotency_key in wanted}

    async def append(self, records: Sequence[Record]) -> None:
        self.journaled.extend(records)
        if records:
            self.last_seq = records[-1].seq

    async def append_all(self, chunks: AsyncIterable[Sequence[Record]]) -> None:
        copied = [r async for records in chunks for r in records]
        await self.append(copied)

    async def records(self, upto_seq: int | None = None) -> AsyncIterator[list[Record]]:
        upto = self.last_seq if upto_seq is None else upto_seq
        yield [r for r in self.journaled if r.seq <= upto]

    async def committed_seq(self) -> int:
        return self.last_seq

    async def scan(
        self,
        upto_seq: int | None = None,
        min_occurred_at: int | None = None,
        before_occurred_at: int | None = None,
        min_seq: int | None = None,
    ) -> AsyncIterator[list[ScoreRow]]:
        upto = self.last_seq if upto_seq is None else upto_seq
        rows = [
            (r.seq, r.event.member, r.event.value, r.event.occurred_at, r.event.idempotency_key, r.event.region)
            for r in self._scores()
            if (min_seq or 0) <= r.seq <= upto
            and (min_occurred_at is None or r.event.occurred_at >= min_occurred_at)
            and (before_occurred_at is None or r.event.occurred_at < before_occurred_at)
        ]
        yield rows

    async def close_markers(self, upto_seq: int | None = None) -> list[CloseRecord]:
        upto = self.last_seq if upto_seq is None else upto_seq
        return [r for r in self.journaled if isinstance(r, CloseRecord) and r.seq <= upto]

    async def voids(self, upto_seq: int | None = None) -> list[tuple[VoidRecord, int]]:
        upto = self.last_seq if upto_seq is None else upto_seq
        occurred = {r.seq: r.event.occurred_at for r in self._scores()}
        return [(r, occurred[r.target_seq]) for r in self.journaled if isinstance(r, VoidRecord) and r.seq <= upto]

    async def board_records(self, upto_seq: int | None = None) -> list[BoardRecord]:
        upto = self.last_seq if upto_seq is None else upto_seq
        return [r for r in self.journaled if isinstance(r, BoardRecord) and r.seq <= upto]

    def _stored(self, r: ScoreRecord) -> StoredEvent:
        e = r.event
        return StoredEvent(r.seq, e.member, e.value, e.occurred_at, r.received_at, r.source, e.idempotency_key, e.meta,
                           self._voided().get(r.seq), e.region)

    async def event_by_key(self, key: str) -> StoredEvent | None:
        return next((self._stored(r) for r in self._scores() if r.event.idempotency_key == key), None)

    async def member_events(self, member: str, limit: int | None = None, before_seq: int | None = None) -> list[StoredEvent]:
        found = [self._stored(r) for r in reversed(self._scores())
                 if r.event.member == member and (before_seq is None or r.seq < before_seq)]
        return found[:limit] if limit is not None else found

    async def checked(self) -> None:
        pass

    async def close(self) -> None:
        pass
