"""What the engine tests compare: an engine's state as queries and digests see it, a full replay
of a journal, and a void journaled and applied as `BoardActor.void_key` does."""

from __future__ import annotations

from typing import Any

from arena.engine.board import BoardEngine
from arena.engine.records import ScoreRecord, VoidRecord
from arena.engine.spec import BoardSpec
from arena.journal import Journal
from arena.replay import replay


def state(engine: BoardEngine) -> dict[str, Any]:
    """What the queries and digests see of an engine."""
    return {
        "tables": {key: (t.digest(), len(t), t.closed_seq, t.closed_at) for key, t in engine.tables.items() if len(t) or t.closed},
        "markers": engine.markers,
        "disputes": engine.disputes,
        "last_seq": engine.last_seq,
    }


async def full_replay(journal: Journal, spec: BoardSpec, now: int) -> BoardEngine:
    engine = BoardEngine(spec)
    await replay(engine, journal, now)
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
