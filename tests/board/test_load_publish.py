"""Never stale while a board loads (DESIGN.md, "Never stale"): a reader that asks between every
two turns of a load (a full replay with its short tables first, a snapshot and its tail, a
standby's copy and the tail at a takeover) gets either `not_ready` or the oracle's standings at
the seq the engine reports then, for every table it may name; after the load it gets them at the
journal's last seq. Both backends."""

from __future__ import annotations

import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.board.load import load
from arena.engine.board import BoardEngine
from arena.engine.events import Event
from arena.engine.periods import PeriodKind, period_name
from arena.engine.records import ScoreRecord
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.engine.times import parse_rfc3339_ms
from arena.errors import QueryError
from arena.journal.snapshots import SnapshotStore
from support.engine_harness import EngineHarness
from support.engines import Live, on_a_journal
from support.journals import BackendKind, stored_property
from support.oracle import DAY, Frame, OBoard, Oracle, Row, boards_and_frames, engine_rows, spec_of

PROPERTY = stored_property(40)
LOADS = ("replay", "snapshot", "standby")
T0 = parse_rfc3339_ms("2026-06-01T12:00:00Z")
ANSWERED_ELSEWHERE = {"unknown_period", "period_not_retained"}
"""What a query may answer but a table: the window is not a table of the board (any more)."""


class Reader:
    """Asks every table the oracle knows (and each kind's current one) between every two turns
    of the event loop, and checks each answer against the oracle at the answer's seq."""

    def __init__(self, engine: BoardEngine, oracle: Oracle, live: Live, now: int) -> None:
        self.engine = engine
        self.oracle = oracle
        self.now = now
        records = [r for r in live.harness.journals["b"] if isinstance(r, ScoreRecord)]
        self.seq_of = {r.event.idempotency_key: r.seq for r in records}
        self.voids: list[tuple[int, str]] = []
        self.standings: dict[int, dict[tuple[str, str], list[Row]]] = {}
        self.answers = 0
        self.not_ready = 0

    async def read_voids(self, live: Live) -> None:
        self.voids = [(v.seq, v.idempotency_key) for v, _ in await live.journal.voids(live.journal.last_seq)]

    def at(self, seq: int) -> dict[tuple[str, str], list[Row]]:
        """The oracle's tables as the journal up to ``seq`` makes them (computed once a seq: a
        load's turns are many, its seqs few)."""
        if seq not in self.standings:
            later = {key for key, at in self.seq_of.items() if at > seq}
            voided = {key for at, key in self.voids if at <= seq}
            self.standings[seq] = self.oracle.tables(frozenset(later | voided))
        return self.standings[seq]

    def ask_all(self) -> None:
        engine = self.engine
        names: list[tuple[str, str | None]] = [(kind, None) for kind in engine.kinds]
        names += [(period_name(kind), period_id) for kind, period_id in self.oracle.windows]
        for kind, period_id in names:
            try:
                table = engine.view(kind, period_id, self.now)
            except QueryError as exc:
                if exc.code == "not_ready":
                    self.not_ready += 1
                    continue
                assert exc.code in ANSWERED_ELSEWHERE, exc
                continue
            seq = engine.last_seq  # read with the table, as `arena.api.queries.view` does
            window = table.window
            want = self.at(seq).get((str(window.kind), window.period_id), [])
            assert engine_rows(table) == want, (kind, window.period_id, seq)
            self.answers += 1

    async def during(self, loading: Coroutine[Any, Any, Any]) -> None:
        """Run ``loading``, asking everything before each of its steps and after its last. Only
        its steps change the engine: asking at every turn of the loop instead, while a step
        waits for the journal's thread, spent minutes on identical answers."""
        await _stepped(loading, self.ask_all)
        self.ask_all()


@types.coroutine
def _stepped(coroutine: Coroutine[Any, Any, Any], between: Callable[[], None]) -> Generator[Any, Any, Any]:
    """Await ``coroutine`` in the current task, calling ``between`` before each of its steps."""
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        between()
        try:
            awaited = coroutine.send(sent) if thrown is None else coroutine.throw(thrown)
        except StopIteration as stop:
            return stop.value
        try:
            sent, thrown = (yield awaited), None
        except BaseException as exc:  # a cancellation goes on into the load
            sent, thrown = None, exc


def feed(oracle: Oracle, frames: list[Frame]) -> None:
    for frame in frames:
        oracle.submit(list(frame.events), frame.now)


@PROPERTY
@given(boards_and_frames(), st.sampled_from(LOADS), st.data())
def test_a_load_answers_not_ready_or_the_oracle_at_its_seq_at_every_turn(
    backend_kind: BackendKind, case: tuple[OBoard, list[Frame]], source: str, data: st.DataObject
) -> None:
    """Frames (and voids) are journaled in two parts, with a snapshot or a standby's copy made
    after the first; then a fresh engine loads from ``source`` as of a later instant while a reader
    asks between every two turns."""
    board, frames = case
    spec = spec_of(board)
    cut = data.draw(st.integers(0, len(frames)), label="snapshot or copy after frame")
    oracle = Oracle(board)
    feed(oracle, frames)

    async def body(live: Live, snapshots: SnapshotStore) -> None:
        journal = live.journal
        await live.play(frames[:cut])
        first_now = frames[cut - 1].now if cut else frames[0].now
        engine = BoardEngine(spec)
        if source == "snapshot":
            await live.snapshot(snapshots, first_now)
        elif source == "standby":
            await load(engine, journal, first_now)  # the copy a standby keeps
        await live.play(frames[cut:])
        now = frames[-1].now + data.draw(st.sampled_from([0, 1, DAY, 40 * DAY]), label="load later by")
        reader = Reader(engine, oracle, live, now)
        await reader.read_voids(live)
        loads: dict[str, Callable[[], Coroutine[Any, Any, Any]]] = {
            "replay": lambda: load(engine, journal, now),
            "snapshot": lambda: load(engine, journal, now, snapshots=snapshots),  # in full when nothing was journaled to snapshot
            "standby": lambda: load(engine, journal, now, copy=True),
        }
        await reader.during(loads[source]())
        assert engine.ready == frozenset(engine.kinds) and engine.last_seq == journal.last_seq

    on_a_journal(backend_kind, spec, data, body)


def test_a_live_apply_that_fails_halfway_hides_the_tables_and_one_between_steps_leaves_them() -> None:
    """The live path changes tables and seq together; a step that fails halfway (a bug: the
    actor crashes and its restart reloads) hides every table rather than show half of it."""
    spec = BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY))
    harness = EngineHarness({"b": spec})
    engine = harness.engines["b"]
    now = T0
    harness.submit("gs", [{"board": "b", "member": "m", "value": 1, "occurred_at": now, "idempotency_key": "k0"}], now)
    events = [Event("b", f"m{i}", i, now, f"k{i + 1}") for i in range(4)]
    plan = engine.decide([(events, now, "gs")], {}, now)
    steps = engine.commit_steps(plan, 2)
    next(steps)  # the first two events: a pause, where the tables are the journal up to a seq
    assert len(engine.view(PeriodKind.ALLTIME, None, now)) == 3 and engine.last_seq == 3
    with patch.object(RankedTable, "apply_updates", side_effect=RuntimeError("a bug")), pytest.raises(RuntimeError):
        next(steps)
    for kind in spec.periods:
        with pytest.raises(QueryError) as hidden:
            engine.view(kind, None, now)
        assert hidden.value.code == "not_ready"
