"""The actor decides a batch while the batch ahead of it is being journaled. These tests drive
one BoardActor over a journal double whose calls the test holds and releases, so that the
overlap happens on purpose."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from arena.board.actor import BoardActor, BoardHandle
from arena.board.clock import Clock
from arena.engine.events import Event, Fingerprint, Result
from arena.engine.records import Record, ScoreRecord
from arena.engine.spec import BoardSpec
from arena.errors import JournalWriteFailed
from arena.metrics import Metrics
from support.memory_journal import MemoryJournal
from support.server import now_ms


class HeldJournal(MemoryJournal):
    """The first lookup (``looking_up`` is set) waits for ``lookup_gate``; the first append
    (``writing`` is set) waits for ``write_gate``, then fails (``fail``) or is written (``written``
    is set)."""

    def __init__(self, fail: bool) -> None:
        super().__init__()
        self.fail = fail
        self.lookup_gate = asyncio.Event()
        self.write_gate = asyncio.Event()
        self.looking_up = asyncio.Event()
        self.writing = asyncio.Event()
        self.written = asyncio.Event()
        self._lookups = 0
        self._appends = 0

    async def lookup(self, keys: Sequence[str]) -> dict[str, Fingerprint]:
        self._lookups += 1
        if self._lookups == 1:
            self.looking_up.set()
            await self.lookup_gate.wait()
        return await super().lookup(keys)

    async def append(self, records: Sequence[Record]) -> None:
        self._appends += 1
        if self._appends == 1:
            self.writing.set()
            await self.write_gate.wait()
            if self.fail:
                raise JournalWriteFailed("injected: nothing written")
        await super().append(records)
        self.written.set()


def outcomes(results: list[Result]) -> list[str]:
    return [r.status.value + (f":{r.reason.value}" if r.reason else "") for r in results]


async def run_overlapped(fail: bool) -> tuple[list[str], list[str]]:
    """Frame A (k1) is looked up; frame B (k1 again, k2) arrives meanwhile, so B is decided while
    A's write is held; then A's write is released (failing or not). Returns both frames' answers."""
    handle = BoardHandle(BoardSpec("b"), 10_000, Metrics())
    journal = HeldJournal(fail)
    actor = BoardActor(handle, journal, Clock())
    task = asyncio.create_task(actor.run())
    now = now_ms()
    k1 = Event("b", "alice", 5, now - 1_000, "k1")
    k2 = Event("b", "bob", 7, now - 1_000, "k2")
    try:
        a = handle.submit([k1], now, "gs")
        await asyncio.wait_for(journal.looking_up.wait(), 5)
        b = handle.submit([k1, k2], now, "gs")
        journal.lookup_gate.set()
        await asyncio.wait_for(journal.writing.wait(), 5)  # B is decided by now, with A ahead of it
        journal.write_gate.set()
        first, second = await asyncio.wait_for(asyncio.gather(a, b), 5)
    finally:
        actor.stop()
        await asyncio.wait_for(task, 5)
    # either way k1 and k2 are journaled once each, in order, and applied
    assert [(r.seq, r.event.idempotency_key) for r in journal.journaled if isinstance(r, ScoreRecord)] == [(1, "k1"), (2, "k2")]
    assert handle.engine is not None and handle.engine.last_seq == 2
    return outcomes(first), outcomes(second)


async def test_a_batch_decided_behind_a_write_that_fails_is_decided_again() -> None:
    first, second = await run_overlapped(fail=True)
    assert first == ["rejected:unavailable"]
    # decided behind A, k1 was a duplicate; A never reached the journal, so k1 is new after all
    assert second == ["accepted", "accepted"]


async def test_a_batch_decided_behind_a_write_that_succeeds_keeps_its_answers() -> None:
    first, second = await run_overlapped(fail=False)
    assert first == ["accepted"]
    assert second == ["duplicate", "accepted"]



class StaleLookupJournal(HeldJournal):
    """As HeldJournal (first lookup and first append held), and the second lookup reads the
    journal at once but answers only after ``release``: a read from before the first write."""

    def __init__(self) -> None:
        super().__init__(fail=False)
        self.release = asyncio.Event()
        self.second_lookup_read = asyncio.Event()

    async def lookup(self, keys: Sequence[str]) -> dict[str, Fingerprint]:
        if self._lookups != 1:
            return await super().lookup(keys)
        self._lookups += 1
        found = await MemoryJournal.lookup(self, keys)
        self.second_lookup_read.set()
        await self.release.wait()
        return found


async def test_a_retry_looked_up_before_the_batch_ahead_committed_is_still_a_duplicate() -> None:
    # B's lookup reads before A is journaled; A's write ends before B's lookup answers, so A is
    # applied first and B is decided with nothing ahead of it: A's keys must count all the same.
    handle = BoardHandle(BoardSpec("b"), 10_000, Metrics())
    journal = StaleLookupJournal()
    actor = BoardActor(handle, journal, Clock())
    task = asyncio.create_task(actor.run())
    now = now_ms()
    k1 = Event("b", "alice", 5, now - 1_000, "k1")
    try:
        first = handle.submit([k1], now, "gs")
        await asyncio.wait_for(journal.looking_up.wait(), 5)
        second = handle.submit([k1], now, "gs")  # taken after A is decided and its write begun
        journal.lookup_gate.set()
        await asyncio.wait_for(journal.second_lookup_read.wait(), 5)
        journal.write_gate.set()
        await asyncio.wait_for(journal.written.wait(), 5)
        journal.release.set()
        answers = await asyncio.wait_for(asyncio.gather(first, second), 5)
    finally:
        actor.stop()
        await asyncio.wait_for(task, 5)
    assert [outcomes(a) for a in answers] == [["accepted"], ["duplicate"]]
    assert [r.event.idempotency_key for r in journal.journaled if isinstance(r, ScoreRecord)] == ["k1"]
