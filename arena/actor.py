"""One board as an asyncio actor: it owns the mailbox's consumer side, the tables and the journal.

Its loop drains the mailbox in batches: look up the batch's keys, decide (engine), journal in
one transaction, apply, then answer every waiter. Queries read the tables directly between
batches (the loop never yields while applying), so after an ack every query sees the events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from arena.clock import Clock
from arena.engine.board import BoardEngine, BoardSpec, Plan
from arena.engine.events import Event, Fingerprint, Reason, Result, Status
from arena.engine.periods import PeriodKind
from arena.engine.records import StoredEvent, VoidRecord
from arena.engine.table import RankedTable
from arena.errors import JournalError, JournalWriteFailed, QueryError, not_found, not_ready, unavailable
from arena.journal import Journal
from arena.mailbox import Command, Mailbox, Submission
from arena.metrics import Metrics
from arena.replay import replay

log = logging.getLogger("arena.actor")

MAX_DRAIN_EVENTS = 20_000
"""Events per group commit at most: bounds one transaction and one pause of the loop."""
JOURNAL_RETRY_SECONDS = 1.0
APPLY_STEP = 128
"""Records applied between two turns of the event loop (a few ms of work at most)."""


class BoardState(Enum):
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


class InjectedCrash(RuntimeError):
    """Raised inside an actor by the fault-injection hook (tests only)."""


class BoardHandle:
    """A board as the edges see it: submit into its mailbox, read its tables, ask its state.
    Outlives actor restarts."""

    def __init__(self, spec: BoardSpec, mailbox_events: int) -> None:
        self.spec = spec
        self.name = spec.name
        self.mailbox = Mailbox(mailbox_events)
        self.state = BoardState.LOADING
        self.failure: str | None = None
        self.engine: BoardEngine | None = None
        self.journal: Journal | None = None
        self.crashes_pending = 0  # fault injection

    def submit(self, events: Sequence[Event], received_at: int, source: str) -> asyncio.Future[list[Result]]:
        """Queue one frame's events; the future resolves with their results. Never blocks."""
        submission = Submission(events, received_at, source)
        if self.state is BoardState.FAILED:
            submission.future.set_result(unavailable_results(events))
        else:
            self.mailbox.put(submission)
        return submission.future

    async def command(self, command: Command) -> object:
        if self.state is BoardState.FAILED:
            raise unavailable(self.name)
        self.mailbox.put(command)
        return await command.future

    def view(self, kind: PeriodKind, period_id: str | None, now: int) -> RankedTable:
        """The table a query names; raises QueryError (unavailable, not_ready, unknown_period...)."""
        if self.state is BoardState.FAILED:
            raise unavailable(self.name)
        engine = self.engine
        if engine is None:
            raise not_ready(self.name)
        return engine.view(kind, period_id, now)

    def fail(self, message: str) -> None:
        """Mark the board failed: every queued and future submission gets `unavailable`."""
        self.state = BoardState.FAILED
        self.failure = message
        for item in self.mailbox.take_all():
            if isinstance(item, Submission):
                resolve(item, unavailable_results(item.events))
            elif not item.future.done():
                item.future.set_exception(unavailable(self.name))


def unavailable_results(events: Sequence[Event]) -> list[Result]:
    return [Result(e.idempotency_key, Status.REJECTED, Reason.UNAVAILABLE) for e in events]


def resolve(submission: Submission, results: list[Result]) -> None:
    if not submission.future.done():
        submission.future.set_result(results)


@dataclass(frozen=True, slots=True)
class Flight:
    """A decided batch whose journal write is under way; at most one per board."""

    batch: list[Submission]
    plan: Plan
    write: asyncio.Task[bool]


def _consume(task: asyncio.Task[bool]) -> None:
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True, slots=True)
class VoidOutcome:
    voided: int
    already_voided: bool = False


class BoardActor:
    """One life of a board's actor: replay, then serve batches until stopped or crashed."""

    def __init__(self, handle: BoardHandle, journal: Journal, clock: Clock, metrics: Metrics) -> None:
        self.handle = handle
        self.journal = journal
        self.clock = clock
        self.metrics = metrics
        self.stopping = False
        self.in_flight: list[Submission] = []
        """Taken from the mailbox and not answered yet: the supervisor answers them after a crash."""
        self._flight: Flight | None = None
        self._lag = metrics.visibility.labels(handle.name)

    async def run(self) -> None:
        """Replay the journal, then drain the mailbox until `stop`. Unexpected exceptions
        propagate to the supervisor; ``in_flight`` then holds the submissions to fail."""
        handle = self.handle
        board = handle.name
        engine = BoardEngine(handle.spec)
        handle.engine = engine
        handle.state = BoardState.LOADING
        self.metrics.board_state.labels(board).set(0)
        report = await replay(engine, self.journal, self.clock.now())
        self.metrics.rebuild.labels(board).set(report.seconds)
        self.metrics.replayed.labels(board).set(report.events)
        handle.state = BoardState.READY
        self.metrics.board_state.labels(board).set(1)
        log.info("board %s ready: %d events replayed in %.3fs, last seq %d", board, report.events, report.seconds, engine.last_seq)
        mailbox = handle.mailbox
        try:
            await self._serve(engine, mailbox)
        except BaseException:
            if self._flight is not None:  # the supervisor answers its batch; the write ends alone
                self._flight.write.add_done_callback(_consume)
            raise

    async def _serve(self, engine: BoardEngine, mailbox: Mailbox) -> None:
        while True:
            now = self.clock.now()
            # Derived afresh each turn (a few µs): a batch may open a table, a pinned test clock
            # may move back.
            deadline = engine.next_deadline(now)
            # A frame stamped before the deadline is applied first: its table was still open
            # when it arrived, and closing now would find nothing to close (and loop).
            first = mailbox.first_received_at()
            if deadline is not None and now >= deadline and (first is None or first >= deadline):
                if self._flight is not None:
                    await self._land(engine)  # the markers due may be in it
                    continue
                await self._process(engine, [])
                if not await self._land(engine):
                    await mailbox.wait(JOURNAL_RETRY_SECONDS)  # the journal refused the close markers
                    continue
                engine.rotate(self.clock.now())
                continue
            item = mailbox.take(MAX_DRAIN_EVENTS)
            if item is None:
                if self._flight is not None:
                    await self._land(engine)
                elif self.stopping:
                    return
                else:
                    await mailbox.wait(None if deadline is None else (deadline - now) / 1000)
            elif isinstance(item, Command):
                await self._land(engine)
                await self._command(item)
            else:
                await self._process(engine, item)

    def stop(self) -> None:
        """Finish what is queued, then return from `run`."""
        self.stopping = True
        self.handle.mailbox.poke()

    async def _command(self, command: Command) -> None:
        try:
            result = await command.run(self)
        except Exception as exc:  # the admin route turns it into an error answer
            if not command.future.done():
                command.future.set_exception(exc)
            # an answer (unknown_event) or a refused journal is not a crash of the actor
            if not isinstance(exc, JournalError | QueryError):
                raise
        else:
            if not command.future.done():
                command.future.set_result(result)

    async def _known_keys(self, batch: list[Submission]) -> dict[str, Fingerprint]:
        # Every key asks the journal's UNIQUE index, in one query on the lookup connection's
        # thread. An in-memory cache of recent keys in front of it cost the main thread more
        # than the lookups it saved, even with half the events retried (README, Performance).
        return await self.journal.lookup([event.idempotency_key for s in batch for event in s.events])

    async def _process(self, engine: BoardEngine, batch: list[Submission]) -> None:
        """Decide a batch while the one ahead of it is being journaled; then start journaling
        this one and apply the one ahead (its events become visible, its frames are acked).
        So the journal's fsync overlaps the CPU work of the batches on either side of it."""
        self.in_flight.extend(batch)
        board = self.handle.name
        try:
            known = await self._known_keys(batch)
        except JournalError as exc:
            log.error("board %s: %s", board, exc)
            self._answer(batch, [unavailable_results(s.events) for s in batch])
            return
        landing = self._flight
        if landing is not None and landing.write.done() and await self._land(engine):  # acked now, not after decide
            # the lookup may have read the journal before that write: its keys count all the same
            known = {**landing.plan.seen, **known}
        ahead = self._flight
        mailbox_next = self.handle.mailbox.first_received_at()
        close_until = self.clock.now() if mailbox_next is None else mailbox_next
        intakes = [(s.events, s.received_at, s.source) for s in batch]
        plan = engine.decide(intakes, known, close_until, after=None if ahead is None else ahead.plan)
        if self.handle.crashes_pending:
            self.handle.crashes_pending -= 1
            raise InjectedCrash(f"fault injection: crash of board {board}")
        written = True
        if ahead is not None:
            written = await ahead.write
            self._flight = None
            if not written:
                self._refused(ahead)
                plan = engine.decide(intakes, known, close_until)  # it was decided as if `ahead` were journaled
        if plan.records:
            self._flight = Flight(batch, plan, asyncio.create_task(self._journal(plan)))
        if ahead is not None and written:
            await self._apply(engine, ahead.batch, ahead.plan)
        if not plan.records:
            await self._apply(engine, batch, plan)

    async def _land(self, engine: BoardEngine) -> bool:
        """Wait for the batch being journaled and apply it; False when the journal refused it."""
        flight = self._flight
        if flight is None:
            return True
        written = await flight.write
        self._flight = None
        if written:
            await self._apply(engine, flight.batch, flight.plan)
        else:
            self._refused(flight)
        return written

    def _refused(self, flight: Flight) -> None:
        """Answer a batch whose write the journal refused: what it accepted is unavailable."""
        self._answer(flight.batch, [_unavailable_if_accepted(results) for results in flight.plan.results])

    async def _apply(self, engine: BoardEngine, batch: list[Submission], plan: Plan) -> None:
        # in steps, so that queries are answered while a large batch is applied
        for _ in engine.commit_steps(plan, APPLY_STEP):
            await asyncio.sleep(0)
        self._answer(batch, plan.results)
        now = self.clock.now()
        for submission in batch:
            self._lag.observe(max(now - submission.received_at, 0) / 1000)

    async def _journal(self, plan: Plan) -> bool:
        """Journal a plan; False when it is certain nothing was written. A write whose outcome
        is unknown is settled by reading the committed seq back."""
        try:
            await self.journal.append(plan.records)
            return True
        except JournalWriteFailed as exc:
            self.metrics.journal_failures.labels(self.handle.name).inc()
            log.error("board %s: %s; batch answered unavailable", self.handle.name, exc)
            committed = await self.journal.committed_seq()
            if committed == plan.last_seq:
                return True
            if committed == plan.base_seq:
                return False
            raise JournalError(f"{self.journal.path}: journal at seq {committed}, expected {plan.base_seq}") from exc

    def _answer(self, batch: list[Submission], results: list[list[Result]]) -> None:
        for submission, answer in zip(batch, results):
            resolve(submission, answer)
            self.metrics.count_results(self.handle.name, answer)
        self.in_flight = [s for s in self.in_flight if not s.future.done()]

    # -- admin commands (run inside the loop through `Command`) -------------------------------

    async def void_key(self, key: str, reason: str, admin: str) -> VoidOutcome:
        target = await self.journal.event_by_key(key)
        if target is None:
            raise not_found("unknown_event", f"no event with idempotency key {key!r} on board {self.handle.name!r}")
        if target.voided:
            return VoidOutcome(0, already_voided=True)
        await self._void([target], reason, admin)
        return VoidOutcome(1)

    async def void_member(self, member: str, reason: str, admin: str) -> VoidOutcome:
        targets = [e for e in await self.journal.member_events(member) if not e.voided]
        if targets:
            await self._void(targets, reason, admin)
        return VoidOutcome(len(targets))

    async def _void(self, targets: list[StoredEvent], reason: str, admin: str) -> None:
        engine = self.handle.engine
        assert engine is not None
        now = self.clock.now()
        records = [
            VoidRecord(engine.last_seq + i + 1, t.seq, t.idempotency_key, reason, admin, now) for i, t in enumerate(targets)
        ]
        member = targets[0].member
        voided = {t.seq for t in targets}
        # Read before the append and apply after it with no await between: a query (a digest!)
        # never sees the void's seq without its effect, and a failed read changes nothing.
        remaining = [e for e in await self.journal.member_events(member) if e.seq not in voided]
        await self.journal.append(records)
        engine.last_seq = records[-1].seq
        touched = []
        for target in targets:
            for window in engine.count_void(target.seq, target.occurred_at):
                self.metrics.disputes.labels(self.handle.name, window.kind.value).inc()
                touched.append(window)
        engine.recompute_member(member, set(touched), remaining)


def _unavailable_if_accepted(results: list[Result]) -> list[Result]:
    return [
        Result(r.idempotency_key, Status.REJECTED, Reason.UNAVAILABLE) if r.status is Status.ACCEPTED else r
        for r in results
    ]

