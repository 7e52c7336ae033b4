"""What the engine tests compare: an engine's state as queries and digests see it, a full replay
of a journal, a void journaled and applied as `BoardActor.void_key` does, and a live engine
whose frames and voids are journaled as it goes (`Live`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from hypothesis import strategies as st

from arena.board.clock import Clock
from arena.board.load import load
from arena.board.snapshots import Snapshotter
from arena.engine.board import BoardEngine
from arena.engine.records import ScoreRecord, VoidRecord
from arena.engine.spec import BoardSpec
from arena.journal import Journal
from arena.journal.snapshots import SnapshotStore, snapshot_store
from support.engine_harness import EngineHarness
from support.journals import BackendKind, journal_store
from support.oracle import Frame


def state(engine: BoardEngine) -> dict[str, Any]:
    """What the queries and digests see of an engine."""
    return {
        "tables": {key: (t.digest(), len(t), t.closed_seq, t.closed_at) for key, t in engine.tables.items() if len(t) or t.closed},
        # the search index and each member's standing (a latest table's deciding keys), which no digest shows
        "members": {key: (t.search("", len(t)), [t.standing(e.member) for e in t.entries()])
                    for key, t in engine.tables.items() if len(t)},
        "markers": engine.markers,
        "disputes": engine.disputes,
        "last_seq": engine.last_seq,
    }


async def full_replay(journal: Journal, spec: BoardSpec, now: int) -> BoardEngine:
    engine = BoardEngine(spec)
    await load(engine, journal, now)
    return engine


async def void(engine: BoardEngine, journal: Journal, target: ScoreRecord, now: int) -> None:
    """What BoardActor.void_key does: journal a VoidRecord and apply it to the live engine."""
    stored = await journal.event_by_key(target.event.idempotency_key)
    assert stored is not None
    if stored.voided:
        return
    record = VoidRecord(engine.last_seq + 1, stored.seq, stored.idempotency_key, "cheating", "ops", now)
    remaining = [e for e in await journal.member_events(stored.member) if e.seq != stored.seq and not e.voided]
    await journal.append([record])
    engine.void([record], [stored], remaining)


def pinned(now: int) -> Clock:
    clock = Clock()
    clock.set(now)
    return clock


def on_a_journal(backend_kind: BackendKind, spec: BoardSpec, data: st.DataObject,
                 body: Callable[[Live, SnapshotStore], Awaitable[None]]) -> None:
    """Run ``body`` with a `Live` engine on a fresh journal of the backend, and its snapshot store."""
    async def run() -> None:
        async with journal_store(*backend_kind) as store:
            journal = await store.open(spec)
            try:
                await body(Live(spec, journal, data), snapshot_store(store.backend()))
            finally:
                await journal.close()

    asyncio.run(run())


class Live:
    """A live engine fed frames through an EngineHarness, each frame's records journaled, and
    voids of its events (drawn by hypothesis) journaled and applied."""

    def __init__(self, spec: BoardSpec, journal: Journal, data: st.DataObject) -> None:
        self.harness = EngineHarness({"b": spec})
        self.engine = self.harness.engines["b"]
        self.journal = journal
        self.data = data

    async def play(self, part: list[Frame], *, turns: bool = False) -> None:
        """Run ``part``, then void up to two events; ``turns``: give a turn to other tasks after
        each frame, and void up to one event there instead."""
        harness, journal = self.harness, self.journal
        for frame in part:
            if frame.tick:
                harness.tick("b", frame.now)
            else:
                harness.submit("gs", [e.raw("b") for e in frame.events], frame.now)
            await journal.append([r for r in harness.journals["b"] if r.seq > journal.last_seq])
            if turns:
                await asyncio.sleep(0)
                await self.voids(frame.now, 1)
        if part and not turns:
            await self.voids(part[-1].now, 2)

    async def snapshot(self, snapshots: SnapshotStore, now: int) -> None:
        """Snapshot the engine as it is, at ``now``."""
        await Snapshotter(self.engine, self.journal, snapshots, 1, pinned(now)).take()

    async def snapshot_after(self, frames: list[Frame], cut: int, snapshots: SnapshotStore) -> int:
        """Play ``frames[:cut]``, then snapshot the engine at the last one's instant (the first
        frame's when ``cut`` is 0), which it returns."""
        await self.play(frames[:cut])
        taken_at = frames[cut - 1].now if cut else frames[0].now
        await self.snapshot(snapshots, taken_at)
        return taken_at

    async def redefine(self, spec: BoardSpec, now: int) -> None:
        """A change of the board's definition at ``now``, its definition record journaled."""
        self.harness.redefine("b", spec, now)
        await self.journal.append([r for r in self.harness.journals["b"] if r.seq > self.journal.last_seq])

    async def voids(self, now: int, most: int) -> None:
        scores = self.harness.score_records("b")
        if scores:
            for target in self.data.draw(st.lists(st.sampled_from(scores), max_size=most), label="voided"):
                await void(self.engine, self.journal, target, now)
