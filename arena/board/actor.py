"""One board as an asyncio actor: it owns the mailbox's consumer side, the tables and the journal.

Its loop drains the mailbox in batches into its `CommitPipeline`: look up the batch's keys,
decide (engine), journal in one transaction, apply, then answer every waiter. Queries read the
tables directly between two steps of an apply, where the tables are exactly the journal up to
a seq; after an ack every query sees the events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import assert_never

import orjson

from arena.board.clock import Clock
from arena.board.commands import Barrier, Order, Redefine, Retire, VoidEvent, VoidMember, VoidOutcome
from arena.board.feed import FeedWriter
from arena.board.flag import Flag
from arena.board.load import load
from arena.board.mailbox import Command, Mailbox, Submission
from arena.board.settling import Made, Settler, settlement_records
from arena.board.snapshots import Snapshotter
from arena.board.state import BoardEvent, BoardState, BoardStates
from arena.config import parse_board
from arena.engine.board import BoardEngine
from arena.engine.events import Event, Fingerprint, Reason, Result, Status, rejected
from arena.engine.records import BoardKind, BoardRecord, StoredEvent, VoidRecord
from arena.engine.routing import Plan, table_key
from arena.engine.settlement import log_item
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.errors import JournalError, JournalWriteFailed, OwnershipLost, QueryError, not_found, not_ready, unavailable
from arena.journal import FoldingJournal, Journal, SettlementLog
from arena.journal.snapshots import SnapshotStore
from arena.metrics import Metrics

log = logging.getLogger("arena.board")

MAX_DRAIN_EVENTS = 20_000
"""Events per group commit at most: bounds one transaction and one pause of the loop."""
JOURNAL_RETRY_SECONDS = 1.0
APPLY_STEP = 128
"""Records applied between two turns of the event loop (a few ms of work at most)."""




class BoardHandle:
    """A board as the edges see it: submit into its mailbox, read its tables, ask its state (in
    ``states``, the node's map: a board of its own on a single node when not given). Outlives
    actor restarts. `answer` is the one place a submission is answered. An idle board's handle
    is most of what it costs a node (a few hundred bytes): no event, no label child of its own."""

    __slots__ = ("spec", "name", "mailbox", "metrics", "states", "failure", "engine", "journal", "loaded", "demand",
                 "defined_by_api", "retired", "version")

    def __init__(self, spec: BoardSpec, mailbox_events: int, metrics: Metrics, states: BoardStates | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        self.mailbox = Mailbox(mailbox_events)
        self.metrics = metrics
        self.states = states if states is not None else BoardStates([spec.name])
        self.failure: str | None = None
        self.engine: BoardEngine | None = None
        self.journal: Journal | None = None
        self.loaded = Flag()
        """Set while the board's tables are loaded (SERVING)."""
        self.demand: Callable[[str], None] | None = None
        """Told of every event and command for the board when boards are activated on demand
        (`arena.board.activation.Activations.used`): it activates a dormant board."""
        self.defined_by_api = False
        """Created through the admin API: its actor journals each definition it serves."""
        self.retired = False
        """Retired, as the catalog says (the owner's engine knows it from the journal)."""
        self.version = 0
        """An API board's version in the catalog (0: a config board)."""

    @property
    def state(self) -> BoardState:
        return self.states.state(self.name)

    def move(self, event: BoardEvent) -> BoardState:
        """Move the board's state on ``event`` (`arena.board.state.MOVES`). Raises IllegalBoardMove."""
        return self.states.move(self.name, event)

    @property
    def answering(self) -> bool:
        """Whether queries and submits reach the board here (they are answered `unavailable`
        otherwise): its actor loads or serves, and this node answers for it (`BoardStates.local`)."""
        return self.states.answering(self.name)

    def submit(self, events: Sequence[Event], received_at: int, source: str) -> asyncio.Future[list[Result]]:
        """Queue one frame's events; the future resolves with their results. Never blocks."""
        submission = Submission(events, received_at, source)
        if self.demand is not None:
            self.demand(self.name)
        if not self.answering:
            self.answer(submission, unavailable_results(events))
        else:
            self.mailbox.put(submission)
        return submission.future

    def answer(self, submission: Submission, results: list[Result]) -> None:
        """Answer a submission and count its results by outcome (`arena_events_total`), once:
        a submission already answered is left as it is. O(events)."""
        if not submission.future.done():
            submission.future.set_result(results)
            self.metrics.count_results(self.name, results)

    async def command(self, order: Order) -> VoidOutcome | None:
        """Run an admin command in the actor, between two batches: its outcome (None for a
        `Barrier`). Raises QueryError (unavailable, unknown_event), JournalError."""
        if not self.answering:
            raise unavailable(self.name)
        if self.demand is not None:
            self.demand(self.name)
        command = Command(order)
        self.mailbox.put(command)
        return await command.future

    def view(self, kind: str, period_id: str | None, now: int, partition: str | None = None) -> RankedTable:
        """The table a query names; raises QueryError (unavailable, not_ready, unknown_period...)."""
        if not self.answering:
            raise unavailable(self.name)
        engine = self.engine
        if engine is None:
            raise not_ready(self.name)
        return engine.view(kind, period_id, now, partition)

    def fail(self, message: str, event: BoardEvent = BoardEvent.FAIL) -> None:
        """Mark the board failed on ``event`` (FAIL, or SHUT as the server stops): every queued and
        future submission gets `unavailable`."""
        self.move(event)
        self.failure = message
        self.loaded.clear()
        self.refuse_queued()

    def elsewhere(self, event: BoardEvent) -> None:
        """The board is served by another node now (its actor here has stopped, or was not
        restarted: ``event`` STOPPED, NOT_GRANTED): drop its tables (never answer from them
        again) and answer what is queued `unavailable`."""
        self.move(event)
        self.failure = None
        self.engine = None
        self.journal = None
        self.loaded.clear()
        self.refuse_queued()

    def refuse_queued(self) -> None:
        """Answer every queued submission `unavailable` (and fail every queued command): nothing
        can be journaled now."""
        for item in self.mailbox.take_all():
            if isinstance(item, Submission):
                self.answer(item, unavailable_results(item.events))
            elif not item.future.done():
                item.future.set_exception(unavailable(self.name))


UNAVAILABLE = "board: cannot take events now; nothing was journaled: resend with the same idempotency_key later"


def unavailable_results(events: Sequence[Event]) -> list[Result]:
    return [rejected(e.idempotency_key, Reason.UNAVAILABLE, UNAVAILABLE) for e in events]


def _unavailable_if_accepted(results: list[Result]) -> list[Result]:
    return [
        rejected(r.idempotency_key, Reason.UNAVAILABLE, UNAVAILABLE) if r.status is Status.ACCEPTED else r
        for r in results
    ]


@dataclass(slots=True)
class Batch:
    """Submissions drained together, and their plan, on their way through a `CommitPipeline`."""

    submissions: list[Submission]
    plan: Plan
    write: asyncio.Task[bool] | None = None
    """The journal write while the batch is in flight: True once landed, False when refused."""


def _consume(task: asyncio.Task[bool]) -> None:
    if not task.cancelled():
        task.exception()


class CommitPipeline:
    """One board's batches from decided to answered, with at most one journal write in flight:

        decided -> in flight -> landed | refused -> applied -> answered

    A batch is decided (validation, seqs, routes: `BoardEngine.decide`) while the batch ahead of
    it is in flight, so the journal's fsync overlaps the CPU work of the batches on both sides.
    A landed batch is applied to the tables in steps, then answered: an ack means journaled and
    visible. A refused batch answers its accepted events `unavailable`, and the batch decided
    behind it is decided again. Every answer goes through `BoardHandle.answer`.
    """

    def __init__(self, handle: BoardHandle, engine: BoardEngine, journal: Journal, clock: Clock) -> None:
        self.handle = handle
        self.engine = engine
        self.journal = journal
        self.clock = clock
        self.unanswered: list[Submission] = []
        """Taken from the mailbox and not answered yet: the supervisor answers them after a crash."""
        self._flight: Batch | None = None
        self._visible = handle.metrics.visibility_of(handle.name)

    @property
    def in_flight(self) -> bool:
        return self._flight is not None

    async def push(self, submissions: list[Submission]) -> None:
        """Decide a drained batch (with no submissions: the close markers now due) and start
        its write; land the batch ahead of it meanwhile. Raises only on an unexpected failure
        (a crash of the actor)."""
        self.unanswered.extend(submissions)
        try:
            # Every key asks the journal's UNIQUE index, in one query on the lookup connection's
            # thread. An in-memory cache of recent keys in front of it cost the main thread more
            # than the lookups it saved, even with half the events retried (measured; see the git history of the README).
            known = await self.journal.lookup([event.idempotency_key for s in submissions for event in s.events])
        except JournalError as exc:
            log.error("board %s: %s", self.handle.name, exc)
            self._answer(submissions, [unavailable_results(s.events) for s in submissions])
            return
        ahead = self._flight
        if ahead is not None and ahead.write is not None and ahead.write.done():
            landed = await self.land()  # acked now, not after the decide
            if landed:  # the lookup may have read the journal before that write: its keys count
                known = {**ahead.plan.seen, **known}
            ahead = None
        plan = self._decide(submissions, known)
        if ahead is not None:
            self._flight = None
            assert ahead.write is not None
            if not await ahead.write:
                self._refused(ahead)  # it was decided as if `ahead` were journaled
                plan = self._decide(submissions, known)
                ahead = None
        batch = Batch(submissions, plan)
        if plan.records:
            batch.write = asyncio.create_task(self._write(plan))
            self._flight = batch
        if ahead is not None:
            await self._apply(ahead)
        if not plan.records:
            await self._apply(batch)

    async def land(self) -> bool:
        """Wait for the write in flight and apply and answer its batch; False when the journal
        refused it (then answered too). True when nothing is in flight."""
        batch = self._flight
        if batch is None:
            return True
        self._flight = None
        assert batch.write is not None
        if not await batch.write:
            self._refused(batch)
            return False
        await self._apply(batch)
        return True

    def abandon(self) -> None:
        """The actor crashed: the write in flight ends alone (its outcome is read back from the
        journal at the next start); the supervisor answers `unanswered`."""
        if self._flight is not None and self._flight.write is not None:
            self._flight.write.add_done_callback(_consume)

    def _decide(self, submissions: list[Submission], known: dict[str, Fingerprint]) -> Plan:
        mailbox_next = self.handle.mailbox.first_received_at()
        close_until = self.clock.now() if mailbox_next is None else mailbox_next
        return self.engine.decide([(s.events, s.received_at, s.source) for s in submissions], known, close_until)

    async def _write(self, plan: Plan) -> bool:
        """Journal a plan; False when it is certain nothing was written. A write whose outcome
        is unknown is settled by reading the committed seq back (the `Journal.append` rule)."""
        try:
            await self.journal.append(plan.records)
            return True
        except OwnershipLost as exc:  # certain: nothing written (and another node may write now)
            log.error("board %s: %s; batch answered unavailable", self.handle.name, exc)
            return False
        except JournalWriteFailed as exc:
            self.handle.metrics.journal_failures.labels(self.handle.name).inc()
            log.error("board %s: %s; batch answered unavailable", self.handle.name, exc)
            committed = await self.journal.committed_seq()
            if committed == plan.last_seq:
                return True
            if committed == plan.base_seq:
                return False
            raise JournalError(f"{self.journal.path}: journal at seq {committed}, expected {plan.base_seq}") from exc

    def _refused(self, batch: Batch) -> None:
        """Answer a batch the journal refused: what it accepted is unavailable."""
        again = self.engine.refuse(batch.plan)
        assert len(again) <= 1  # at most the batch being decided behind it, which is decided again
        self._answer(batch.submissions, [_unavailable_if_accepted(results) for results in batch.plan.results])

    async def _apply(self, batch: Batch) -> None:
        # in steps, so that queries are answered while a large batch is applied
        for _ in self.engine.commit_steps(batch.plan, APPLY_STEP):
            await asyncio.sleep(0)
        self._answer(batch.submissions, batch.plan.results)
        now = self.clock.now()
        for submission in batch.submissions:
            self._visible(max(now - submission.received_at, 0) / 1000)

    def _answer(self, submissions: list[Submission], results: list[list[Result]]) -> None:
        for submission, answer in zip(submissions, results, strict=True):
            self.handle.answer(submission, answer)
        self.unanswered = [s for s in self.unanswered if not s.future.done()]


class BoardActor:
    """One life of a board's actor: load, then serve batches until stopped or crashed."""

    def __init__(self, handle: BoardHandle, journal: Journal, clock: Clock, snapshots: SnapshotStore | None = None,
                 snapshot_every: int = 0, engine: BoardEngine | None = None,
                 settlement_log: SettlementLog | None = None) -> None:
        self.handle = handle
        self.followed = engine
        """A standby's engine of the board, loaded up to its last_seq (`arena.cluster.standby`):
        the actor starts from it and applies only the journal's records after it."""
        self.journal = journal
        self.clock = clock
        self.metrics = handle.metrics
        self.stopping = False
        self.pipeline: CommitPipeline | None = None
        self.settler: Settler
        self.snapshots = snapshots if snapshot_every > 0 else None
        """Where the board's snapshots are kept; None: snapshots are off."""
        self.snapshot_every = snapshot_every
        self.feed = FeedWriter(handle.name, settlement_log, handle.metrics) if settlement_log is not None else None
        """Where the revisions this actor journals go after their commit; None: no settlement log."""

    @property
    def unanswered(self) -> list[Submission]:
        """Taken from the mailbox and not answered: the supervisor answers them after a crash."""
        return self.pipeline.unanswered if self.pipeline is not None else []

    async def run(self) -> None:
        """Load the board (`arena.board.load.load`), then drain the mailbox until `stop`.
        Unexpected exceptions propagate to the supervisor; `unanswered` then holds the
        submissions to fail."""
        handle = self.handle
        board = handle.name
        copy = self.followed is not None
        if handle.defined_by_api:
            await self._adopt_definition()
        engine = self.followed or BoardEngine(handle.spec)
        self.followed = None
        handle.engine = engine
        handle.move(BoardEvent.START)
        handle.loaded.clear()
        report = await load(engine, self.journal, self.clock.now(), copy=copy, snapshots=self.snapshots)
        self.metrics.snapshot_start.labels(board).set(report.snapshot_seq)
        self.metrics.rebuild.labels(board).set(report.seconds)
        self.metrics.replayed.labels(board).set(report.events)
        handle.move(BoardEvent.LOADED)
        handle.loaded.set()
        log.info("board %s ready: %d events replayed in %.3fs, last seq %d", board, report.events, report.seconds, engine.last_seq)
        if handle.defined_by_api or engine.league is not None:  # a league's parameters may change at a restart
            await self._record_definition(engine, handle.spec)
        pipeline = self.pipeline = CommitPipeline(handle, engine, self.journal, self.clock)
        settler = self.settler = Settler(engine, handle.mailbox.poke)
        snapshotter = None
        if self.snapshots is not None:
            snapshotter = Snapshotter(engine, self.journal, self.snapshots, self.snapshot_every, self.clock, report.snapshot_seq)
        if self.feed is not None:  # what a crash or a failed append left out of the log
            revisions = sorted((r for rs in engine.settlements.values() for r in rs), key=lambda r: r.seq)
            self.feed.add(log_item(board, r) for r in revisions)
        try:
            await self._catch_up(engine)
            await self._serve(engine, pipeline, handle.mailbox, snapshotter)
        except BaseException:
            pipeline.abandon()
            settler.abandon()
            if self.feed is not None:
                self.feed.abandon()
            if snapshotter is not None:
                snapshotter.abandon()
            raise
        if snapshotter is not None:
            await snapshotter.finish()
        if self.feed is not None:
            await self.feed.finish()

    async def _serve(self, engine: BoardEngine, pipeline: CommitPipeline, mailbox: Mailbox, snapshotter: Snapshotter | None) -> None:
        settler = self.settler
        while True:
            if snapshotter is not None:
                snapshotter.poll()
            settler.start()
            if settler.due:
                await pipeline.land()
                made = settler.take()
                if not await self._journal_settlements(made):
                    settler.refused(made, JOURNAL_RETRY_SECONDS)
                continue
            if engine.unrecorded:
                await pipeline.land()
                if not await self._journal_league(engine):
                    await mailbox.wait(JOURNAL_RETRY_SECONDS)
                continue
            now = self.clock.now()
            # Derived afresh each turn (a few µs): a batch may open a table, a pinned clock
            # may move back.
            deadline = engine.next_deadline(now)
            # A frame stamped before the deadline is applied first: its table was still open
            # when it arrived, and closing now would find nothing to close (and loop).
            first = mailbox.first_received_at()
            if deadline is not None and now >= deadline and (first is None or first >= deadline):
                if pipeline.in_flight:
                    await pipeline.land()  # the markers due may be in it
                    continue
                await pipeline.push([])
                if not await pipeline.land():
                    await mailbox.wait(JOURNAL_RETRY_SECONDS)  # the journal refused the close markers
                    continue
                engine.rotate(self.clock.now())
                continue
            item = mailbox.take(MAX_DRAIN_EVENTS)
            if item is None:
                if pipeline.in_flight:
                    await pipeline.land()
                elif self.stopping:
                    made = await settler.finish()
                    if not await self._journal_settlements(made):
                        log.error("board %s: stopping with settlements not journaled; the next start settles its closed tables"
                                  " again, not the revisions after a void", self.handle.name)
                    return
                else:
                    await mailbox.wait(None if deadline is None else (deadline - now) / 1000)
            elif isinstance(item, Command):
                await pipeline.land()
                # a command may void an event of a closed table: its pending revisions come first
                made = await settler.finish()
                if await self._journal_settlements(made):
                    await self._command(item)
                else:
                    settler.refused(made, JOURNAL_RETRY_SECONDS)
                    self._refuse(item)
            else:
                await pipeline.push(item)

    async def _catch_up(self, engine: BoardEngine) -> None:
        """What a stop or a crash left undone, at load (a takeover too): the close markers of
        windows with prizes that no table closed (`BoardEngine.missed_closes`), and the revision
        of each settled, retained table whose awards a void changed before its revision was
        journaled (only a disputed table can need one). A journal that refuses them now leaves
        them to the next load."""
        if not engine.retired:
            markers = engine.missed_closes(self.clock.now())
            if markers:
                try:
                    await self.journal.append(markers)
                except JournalError as exc:
                    log.error("board %s: %d missed close markers not journaled: %s", self.handle.name, len(markers), exc)
                    return
                for marker in markers:
                    engine.close(marker)
                engine.last_seq = markers[-1].seq
                log.info("board %s: %d tables no event reached closed at load, last at seq %d", self.handle.name,
                         len(markers), engine.last_seq)
        # a window's disputes: its global table's and its partitions'
        revised = [await self.settler.revision(key) for key in list(engine.settlements) if engine.disputes.get(key[:2])]
        made = [revision for revision in revised if revision is not None]
        if made and not await self._journal_settlements(made):
            self.settler.refused(made, JOURNAL_RETRY_SECONDS)

    def stop(self) -> None:
        """Finish what is queued, then return from `run`."""
        self.stopping = True
        self.handle.mailbox.poke()

    def _refuse(self, command: Command) -> None:
        if not command.future.done():
            command.future.set_exception(unavailable(self.handle.name))

    async def _journal_league(self, engine: BoardEngine) -> bool:
        """Journal the league records of the closed windows whose moves are not journaled yet
        (`BoardEngine.league_records`), in one transaction; False when the journal refused them
        (they stay to be journaled). Call with no plan in flight."""
        records = engine.league_records()
        if not await self._append_records(records, engine.last_seq, "league records not journaled; journaling them again"):
            return False
        engine.league_recorded(records)
        log.info("board %s: %d league records journaled, last at seq %d", self.handle.name, len(records), engine.last_seq)
        return True

    async def _append_records(self, records: list[BoardRecord], last_seq: int, refused: str) -> bool:
        """Append board ``records`` (their seqs following ``last_seq``) in one transaction: True
        once they are durable, False when the journal refused them (nothing written; ``refused``
        is logged). A write of unknown outcome is settled as `CommitPipeline._write` does."""
        try:
            await self.journal.append(records)
        except JournalWriteFailed as exc:
            log.error("board %s: %s: %s", self.handle.name, refused, exc)
            committed = await self.journal.committed_seq()
            if committed != records[-1].seq:
                if committed != last_seq:
                    raise JournalError(f"{self.journal.path}: journal at seq {committed}, expected {last_seq}") from exc
                return False
        return True

    async def _journal_settlements(self, made: list[Made]) -> bool:
        """Journal the settlement revisions ``made`` in one transaction and serve them; False
        when the journal refused them (nothing written: their tables stay unsettled, to be
        settled again). A write of unknown outcome is settled as `CommitPipeline._write` does.
        The one place a revision becomes durable: the settlement feed and the webhooks' outbox
        (issue 35, later steps) take each record from here, after the commit."""
        engine = self.handle.engine
        if not made or engine is None:
            return True
        settled = settlement_records(made, engine.last_seq)
        records = [BoardRecord(r.seq, BoardKind.SETTLEMENT, text) for r, (*_, text) in zip(settled, made, strict=True)]
        if not await self._append_records(records, engine.last_seq, "settlements not journaled; settling again"):
            return False
        for record in settled:
            engine.settled(record)
            self.metrics.settlements.inc()
            log.info("board %s: %s %s%s settled at seq %d: revision %d, %d awards", self.handle.name, record.window.kind,
                     record.window.period_id, "" if record.partition is None else f" {record.partition}", record.seq,
                     record.settlement.revision, len(record.settlement.awards))
        engine.last_seq = settled[-1].seq
        if self.feed is not None:
            self.feed.add(log_item(self.handle.name, record) for record in settled)
        return True

    async def _command(self, command: Command) -> None:
        try:
            result = await self._run(command.order)
        except Exception as exc:  # the admin route turns it into an error answer
            if not command.future.done():
                command.future.set_exception(exc)
            # an answer (unknown_event) or a refused journal is not a crash of the actor
            if not isinstance(exc, JournalError | QueryError):
                raise
        else:
            if not command.future.done():
                command.future.set_result(result)

    # -- admin commands (run inside the loop through `Command`) -------------------------------

    async def _run(self, order: Order) -> VoidOutcome | None:
        match order:
            case VoidEvent(key, reason, admin):
                return await self.void_key(key, reason, admin)
            case VoidMember(member, reason, admin):
                return await self.void_member(member, reason, admin)
            case Barrier():
                return None
            case Redefine(spec):
                await self.redefine(spec)
                return None
            case Retire():
                await self.retire()
                return None
            case _:
                assert_never(order)

    async def _adopt_definition(self) -> None:
        """Serve the definition the journal holds last, the truth, rather than what this node
        read from the catalog (which may lag a change made through another node)."""
        definitions = [r for r in await self.journal.board_records() if r.kind == BoardKind.DEFINITION]
        if definitions and definitions[-1].body != self.handle.spec.document_text():
            self.handle.spec = parse_board(self.handle.name, orjson.loads(definitions[-1].body))

    async def _record_definition(self, engine: BoardEngine, spec: BoardSpec) -> None:
        """Journal ``spec`` as a definition record unless the journal's last one is it already
        (a restart, an identical change): the journal says which definition held at each seq."""
        text = spec.document_text()
        definitions = [r for r in await self.journal.board_records() if r.kind == BoardKind.DEFINITION]
        if definitions and definitions[-1].body == text:
            return
        record = BoardRecord(engine.last_seq + 1, BoardKind.DEFINITION, text)
        await self.journal.append([record])
        engine.last_seq = record.seq
        if engine.league is not None and spec.league is not None:
            engine.league.define(record.seq, spec.league)
        log.info("board %s: definition journaled at seq %d", self.handle.name, record.seq)

    async def redefine(self, spec: BoardSpec) -> None:
        engine = self.handle.engine
        assert engine is not None
        fixed = engine.spec.fixed_changes(spec)
        if fixed and await self._holds_records():
            raise QueryError("definition_conflict", f"board {self.handle.name!r}: {', '.join(fixed)} cannot change once"
                             " its journal holds events; use a new board name", 409)
        await self._record_definition(engine, spec)
        engine.redefine(spec)
        engine.rotate(self.clock.now())
        self.handle.spec = spec

    async def _holds_records(self) -> bool:
        """Whether the journal holds a score event or a close marker (they name windows of the
        fixed fields). Two index probes."""
        journal = self.journal
        assert isinstance(journal, FoldingJournal)
        return bool(await journal.close_markers()) or await journal.next_instant(0, None) is not None

    async def retire(self) -> None:
        """Journal a close marker for every open table and the retirement, in one transaction;
        then the board takes no more events (`board_retired`). Retiring twice journals nothing."""
        engine = self.handle.engine
        assert engine is not None
        if engine.retired:
            return
        markers = engine.retirement(self.clock.now())
        record = BoardRecord(engine.last_seq + len(markers) + 1, BoardKind.RETIRED, "{}")
        await self.journal.append([*markers, record])
        for marker in markers:
            engine.close(marker)
        engine.last_seq = record.seq
        engine.retired = True
        log.info("board %s: retired at seq %d (%d tables closed)", self.handle.name, record.seq, len(markers))

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
        disputed = engine.void(records, targets, remaining)
        for window in disputed:
            self.metrics.disputes.labels(self.handle.name, str(window.kind)).inc()
        regions = {t.region for t in targets if t.region is not None}
        if engine.league is not None:  # a league settles the member's divisions
            settled = [table_key(w, engine.division(w, member)) for w in disputed if engine.division(w, member) is not None]
        else:
            settled = [table_key(w, partition) for w in disputed for partition in (None, *regions)]
        revised = [await self.settler.revision(key) for key in dict.fromkeys(settled)]
        made = [revision for revision in revised if revision is not None]
        if not await self._journal_settlements(made):
            self.settler.refused(made, JOURNAL_RETRY_SECONDS)  # journaled before the next command: no void revises twice
