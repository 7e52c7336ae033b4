"""Starts one actor per board and restarts a crashed one by replaying its journal.

Restart intensity: more than ``max_restarts`` crashes within ``restart_window_seconds`` marks
the board failed (queries 503 `unavailable`, /readyz fails) instead of looping. A journal that
cannot be read fails its board at once; other boards are never affected.

In a cluster (``[cluster]``) a node serves only the boards it owns: `start` opens none, the
node's ownership loop (`arena.cluster.ownership`) calls `serve` for a board granted to it and
`disown` for one found granted to another; every other board is ELSEWHERE. A crashed actor's
board is granted again only while no other live node owns it; else it goes ELSEWHERE too.

A board's state lives in the node's `BoardStates` (`arena.board.state`): the supervisor moves it
as its actors start, load, fail and stop, and keeps each board's task only as the handle of that
I/O.

With ``idle_unload_seconds`` > 0 boards are activated on demand (`arena.board.activation`): on a
single node `start` only checks each journal's definition and closes it again; in a cluster
`serve` grants a board without loading it (INACTIVE) unless a standby copy of it is at hand. The
next event, query or subscription of a board activates it (`activate`), and an idle one is
unloaded (`unload`); the supervisor is that module's `Carrier`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from arena.board.activation import ACTIVATION_WAIT_SECONDS, Activations, Unloaded, due_markers
from arena.board.actor import BoardActor, BoardHandle, unavailable_results
from arena.board.clock import Clock
from arena.board.feed import journaled_items
from arena.board.heap import HeapTrimmer
from arena.board.state import RUNNING, STOPPING, BoardEvent, BoardState, BoardStates
from arena.config import Config
from arena.engine.board import BoardEngine
from arena.engine.settlement import LogItem
from arena.engine.spec import BoardSpec
from arena.errors import BoardDefinitionChanged, JournalCorrupt, JournalError, JournalUnavailable, OwnedElsewhere
from arena.journal import Journal, JournalBackend, SettlementLog
from arena.journal.snapshots import SnapshotStore
from arena.metrics import Metrics

log = logging.getLogger("arena.board")

REOPEN_RETRY_SECONDS = 1.0


class Supervisor:
    def __init__(self, config: Config, clock: Clock, metrics: Metrics, backend: JournalBackend,
                 snapshots: SnapshotStore | None = None, states: BoardStates | None = None,
                 settlement_log: SettlementLog | None = None) -> None:
        self.config = config
        self.snapshots = snapshots
        self.settlement_log = settlement_log
        """Where every actor appends the settlement revisions it journals; None: nowhere."""
        self.clock = clock
        self.metrics = metrics
        self.backend = backend
        settings = config.server
        self.clustered = config.cluster is not None
        self.states = states if states is not None else BoardStates(
            config.boards, node_id=config.node_id if self.clustered else None, on_demand=settings.idle_unload_seconds > 0)
        """Every board's state on this node (the node's one map)."""
        self.activations: Activations | None = None
        """Boards activated on demand and unloaded when idle; None: every board stays loaded."""
        if self.states.on_demand:
            self.activations = Activations(self, settings.idle_unload_seconds, settings.max_active_boards,
                                           self.states.state, clock.now)
            metrics.watch_activations(lambda: self.activations.active if self.activations else 0)
        self.handles: dict[str, BoardHandle] = {}
        self.actors: dict[str, BoardActor] = {}
        self.runs: dict[str, int] = {}
        self._supervising: dict[str, asyncio.Task[None]] = {}
        """Each board's supervising task while it has one: the I/O handle, not its state."""
        self._sweeping: asyncio.Task[None] | None = None
        self._heap = HeapTrimmer()
        """Gives the memory of unloaded boards back to the OS."""
        self._stopping = False
        self._started = False
        for spec in config.boards.values():
            self._handle(spec)
        backend.watch(metrics.registry, self.handles)
        metrics.watch_boards(lambda: [(name, self.states.readiness(name), h.mailbox.depth) for name, h in self.handles.items()])
        clock.on_change(self._poke_all)

    def _handle(self, spec: BoardSpec) -> BoardHandle:
        self.states.add(spec.name)
        handle = self.handles[spec.name] = BoardHandle(spec, self.config.server.mailbox_events, self.metrics, self.states)
        self.runs[spec.name] = 0
        if self.activations is not None:
            handle.demand = self.activations.used
        return handle

    async def add(self, spec: BoardSpec) -> BoardHandle:
        """A board created at runtime (the admin API, or the catalog read at start or from
        another node): its handle. On a single node that has started, its journal is opened and
        its actor started (it loads in the background; before `start`, `start` does it), unless
        boards are activated on demand (it starts inactive); in a cluster the ownership loop
        places it. A journal that cannot be opened fails the board."""
        handle = self._handle(spec)
        if self._started and not self.clustered and self.activations is None:
            try:
                journal = await self.backend.open(spec)
            except JournalError as exc:
                log.error("board %s failed: %s", spec.name, exc)
                handle.fail(str(exc))
                return handle
            self._supervising[spec.name] = asyncio.create_task(self._supervise(handle, journal), name=f"board:{spec.name}")
        return handle

    def _poke_all(self) -> None:
        for handle in self.handles.values():
            handle.mailbox.poke()
        if self.activations is not None:
            self.activations.poke()

    async def start(self) -> None:
        """Open every journal and start the actors (they replay in the background).

        Raises BoardDefinitionChanged: a board's definition no longer matches its journal;
        JournalUnavailable: the journals' store cannot be used (PostgreSQL unreachable).
        In a cluster, opens nothing: boards are served as they are granted (`serve`). With boards
        activated on demand, each journal is opened (its definition checked) and closed again.
        """
        self._started = True
        if self.clustered:
            if self.activations is not None:
                self._sweeping = asyncio.create_task(self.activations.run(), name="activations")
            return
        if self.activations is not None:
            await self._check_journals(self.activations)
            self._sweeping = asyncio.create_task(self.activations.run(), name="activations")
            return
        journals: dict[str, Journal] = {}
        try:
            for name, handle in self.handles.items():
                try:
                    journals[name] = await self.backend.open(handle.spec)
                except (BoardDefinitionChanged, JournalUnavailable):
                    raise
                except JournalError as exc:
                    log.error("board %s failed: %s", name, exc)
                    handle.fail(str(exc))
        except (BoardDefinitionChanged, JournalUnavailable):
            for journal in journals.values():
                await journal.close()
            raise
        for name, journal in journals.items():
            self._supervising[name] = asyncio.create_task(self._supervise(self.handles[name], journal), name=f"board:{name}")

    async def _check_journals(self, activations: Activations) -> None:
        """Open and close every board's journal: a changed definition or an unreachable store stops
        the start, an unreadable journal fails its board, as a start that loads them would. What
        each open reads is recorded as if the board had been unloaded (`Unloaded.at_start`), so
        the close markers of a board never activated are journaled on time too."""
        now = self.clock.now()
        revisions: list[LogItem] = []  # what a crash left out of the settlement log is appended now, not at an activation
        for name, handle in self.handles.items():
            try:
                journal = await self.backend.open(handle.spec)
            except (BoardDefinitionChanged, JournalUnavailable):
                raise
            except JournalError as exc:
                log.error("board %s failed: %s", name, exc)
                handle.fail(str(exc))
                continue
            try:
                activations.unloaded[name] = await _at_start(handle, journal, now)
                if self.settlement_log is not None:
                    revisions += journaled_items(name, await journal.board_records())
            except JournalError as exc:
                log.error("board %s failed: %s", name, exc)
                handle.fail(str(exc))
            finally:
                await journal.close()
        if revisions and self.settlement_log is not None:
            try:
                await self.settlement_log.append(revisions)
            except JournalError as exc:  # each board's activation appends its own again
                self.metrics.settlement_log_failures.inc()
                log.warning("%d settlement revisions may be missing from the settlement log: %s", len(revisions), exc)

    # -- activation on demand (`arena.board.activation.Carrier`) ---------------------------------

    async def activate(self, name: str) -> None:
        handle = self.handles[name]
        if self._stopping:
            handle.refuse_queued()
            return
        handle.move(BoardEvent.ACTIVATE)
        self.metrics.activations.inc()
        refusing = asyncio.create_task(_refuse_while_activating(handle))
        try:
            try:
                journal = await self.backend.open(handle.spec)
            except JournalUnavailable as exc:  # the store is away, the journal is fine: the next request tries again
                log.warning("board %s not activated: %s; what waits for it is answered unavailable", name, exc)
                handle.refuse_queued()
                if handle.state is BoardState.ACTIVATING:
                    handle.move(BoardEvent.STOPPED)
                return
            except JournalError as exc:
                log.error("board %s failed to activate: %s", name, exc)
                handle.fail(str(exc))
                return
            if handle.state is not BoardState.ACTIVATING:  # disowned meanwhile (a cluster)
                await journal.close()
                return
            task = self._supervising[name] = asyncio.create_task(self._supervise(handle, journal), name=f"board:{name}")
            loaded = asyncio.ensure_future(handle.loaded.wait())
            try:
                await asyncio.wait([loaded, task], return_when=asyncio.FIRST_COMPLETED)
            finally:
                loaded.cancel()
        finally:
            refusing.cancel()

    async def unload(self, name: str, reason: str) -> Unloaded | None:
        handle = self.handles[name]
        actor = self.actors.get(name)
        if handle.state is not BoardState.SERVING or actor is None or self._stopping:
            return None
        handle.move(BoardEvent.UNLOAD)
        actor.stop()  # it answers what it took and writes a snapshot
        task = self._supervising.pop(name, None)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)  # its journal is closed then
        self.actors.pop(name, None)
        engine = handle.engine
        unloaded = None if engine is None else Unloaded.of(engine, self.clock.now())
        handle.engine = None
        handle.journal = None
        handle.loaded.clear()
        handle.move(BoardEvent.STOPPED)
        self.metrics.unloads.labels(reason).inc()
        self.metrics.unloaded(name)
        self._heap.soon()
        log.info("board %s unloaded (%s) at seq %d", name, reason, unloaded.seq if unloaded else 0)
        if len(handle.mailbox) and self.activations is not None:  # came after its actor's last look
            self.activations.used(name)
        return unloaded

    async def close_inactive(self, name: str, unloaded: Unloaded) -> Unloaded:
        """Journal the due close markers of an inactive board; a board with a table to settle
        among them is activated instead: its actor journals them and settles, and it is unloaded
        again once idle. Raises JournalError (nothing journaled)."""
        spec = self.handles[name].spec
        now = self.clock.now()
        if self.activations is not None and any(spec.prize_tiers(w.kind) for m, w in unloaded.closing if m <= now):
            log.info("board %s (inactive): activated to close and settle its tables", name)
            self.activations.used(name)
            return unloaded
        journal = await self.backend.open(spec)
        try:
            markers = due_markers(unloaded, journal.last_seq, self.clock.now())
            if markers:
                await journal.append(markers)
                log.info("board %s (inactive): %d close markers journaled, last at seq %d", name, len(markers), markers[-1].seq)
            return unloaded.closed(markers, journal.last_seq)
        finally:
            await journal.close()

    def serving(self, name: str) -> bool:
        """Whether an actor of ``name`` runs here (loading, serving, restarting, or stopping)."""
        return self.states.state(name) in RUNNING

    async def serve(self, name: str, followed: Callable[[], Awaitable[BoardEngine | None]] | None = None) -> None:
        """In a cluster: open the journal of ``name`` (TAKING), which grants it to this node,
        and start its actor (LOADING: it replays in the background; ``handle.loaded`` is set once
        it serves), from the engine ``followed`` gives once granted (a standby's: only the tail is
        replayed). With boards activated on demand and no such engine, it is granted INACTIVE
        instead: its journal is closed again, what its open read recorded (`Unloaded.at_start`,
        so its close markers are journaled on time). Raises OwnedElsewhere (another live node
        owns it), JournalError (the board is then still TAKING, for the caller to move),
        IllegalBoardMove (it is not TAKING)."""
        self.states.check(name, BoardEvent.GRANTED)
        handle = self.handles[name]
        journal = await self.backend.open(handle.spec)
        engine = None if followed is None else await followed()
        if engine is None and self.activations is not None:
            try:
                self.activations.unloaded[name] = await _at_start(handle, journal, self.clock.now())
            finally:
                await journal.close()
            handle.move(BoardEvent.GRANTED_INACTIVE)
            self.activations.poke()  # a close marker may be due
            if len(handle.mailbox):  # frames came while it was taken
                self.activations.used(name)
            return
        handle.move(BoardEvent.GRANTED)
        if self.activations is not None:  # loaded from its copy: unloaded once idle
            self.activations.used(name)
        self._supervising[name] = asyncio.create_task(self._supervise(handle, journal, engine), name=f"board:{name}")

    async def until_loaded(self, name: str) -> bool:
        """Wait until ``name``'s actor serves (True), or ends first: failed or disowned (False)."""
        handle = self.handles[name]
        task = self._supervising.get(name)
        if task is None:
            return handle.loaded.is_set()
        loaded = asyncio.ensure_future(handle.loaded.wait())
        try:
            await asyncio.wait([loaded, task], return_when=asyncio.FIRST_COMPLETED)
        finally:
            loaded.cancel()
        return handle.loaded.is_set()

    async def hand_off(self, name: str) -> None:
        """In a cluster: stop serving ``name`` (HANDING_OFF: nothing new reaches its mailbox, the
        directory no longer names this node) gracefully: its actor journals, applies and answers
        what it took, then stops; the board is ELSEWHERE. The caller then releases its owner row.
        Raises IllegalBoardMove (it is not HANDING_OFF). The close markers of an inactive board being
        journaled are journaled first."""
        self.states.check(name, BoardEvent.STOPPED)
        if self.activations is not None:
            await self.activations.settled(name)
        task = self._supervising.get(name)
        actor = self.actors.get(name)
        try:
            if actor is not None:
                actor.stop()
            if task is not None:
                await asyncio.gather(task, return_exceptions=True)
        finally:
            self._supervising.pop(name, None)
        self._elsewhere(self.handles[name], BoardEvent.STOPPED)

    async def disown(self, name: str) -> None:
        """In a cluster: ``name`` is granted to another node now (DISOWNING): stop its actor at
        once (its appends cannot commit any more: their epoch is fenced) and answer everything
        it took or has queued `unavailable`, never acked; then it is ELSEWHERE. Raises
        IllegalBoardMove (it is not DISOWNING)."""
        self.states.check(name, BoardEvent.STOPPED)
        task = self._supervising.pop(name, None)
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._elsewhere(self.handles[name], BoardEvent.STOPPED)

    def _elsewhere(self, handle: BoardHandle, event: BoardEvent) -> None:
        actor = self.actors.pop(handle.name, None)
        if actor is not None:
            for submission in actor.unanswered:
                handle.answer(submission, unavailable_results(submission.events))
        log.info("board %s: served by another node now", handle.name)
        handle.elsewhere(event)
        if self.activations is not None:
            self.activations.forget(handle.name)

    async def _supervise(self, handle: BoardHandle, journal: Journal, engine: BoardEngine | None = None) -> None:
        settings = self.config.server
        crashes: deque[float] = deque()
        try:
            while True:
                actor = BoardActor(handle, journal, self.clock, self.snapshots, settings.snapshot_every_events, engine,
                                   self.settlement_log)
                engine = None  # a restart replays
                self.actors[handle.name] = actor
                if handle.state is BoardState.HANDING_OFF:  # handed off before its actor started
                    actor.stop()
                self.runs[handle.name] += 1
                handle.journal = journal
                try:
                    await actor.run()
                    return
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # any crash: fail the batch in flight, then restart or give up
                    for submission in actor.unanswered:
                        handle.answer(submission, unavailable_results(submission.events))
                    if handle.state in STOPPING:
                        log.warning("board %s: its actor crashed while the board leaves this node: %r", handle.name, exc)
                        return
                    if isinstance(exc, JournalCorrupt):
                        log.error("board %s failed: %s", handle.name, exc)
                        handle.fail(str(exc))
                        return
                    log.exception("board %s actor crashed", handle.name)
                    now = time.monotonic()
                    crashes.append(now)
                    while crashes and crashes[0] < now - settings.restart_window_seconds:
                        crashes.popleft()
                    if len(crashes) > settings.max_restarts:
                        message = (
                            f"board {handle.name} crashed {len(crashes)} times within "
                            f"{settings.restart_window_seconds:g}s; last error: {exc!r}"
                        )
                        log.error("%s; marked failed", message)
                        handle.fail(message)
                        return
                    self.metrics.restarts.labels(handle.name).inc()  # restarts, not crashes: the last one failed it
                    await journal.close()
                    try:
                        journal = await self._reopen(handle)
                    except OwnedElsewhere as reopen:
                        log.warning("board %s: not restarted here: %s", handle.name, reopen)
                        if handle.state not in STOPPING:  # else its hand-off or disown ends it
                            self._elsewhere(handle, BoardEvent.NOT_GRANTED)
                        return
                    except JournalError as reopen:
                        log.error("board %s failed: %s", handle.name, reopen)
                        if handle.state not in STOPPING:
                            handle.fail(str(reopen))
                        return
        finally:
            await journal.close()

    async def _reopen(self, handle: BoardHandle) -> Journal:
        """Open a crashed board's journal again. While its store is unreachable (PostgreSQL down)
        try again every `REOPEN_RETRY_SECONDS`, answering what queues meanwhile `unavailable`:
        the board recovers by itself once the store is back. Raises JournalError."""
        while True:
            try:
                return await self.backend.open(handle.spec)
            except JournalUnavailable as exc:
                log.warning("board %s: %s; opening its journal again in %gs", handle.name, exc, REOPEN_RETRY_SECONDS)
                handle.refuse_queued()
                await asyncio.sleep(REOPEN_RETRY_SECONDS)

    def abandon_loading(self) -> None:
        """Stop the replays still running and answer their boards' queued frames `unavailable`
        (the client sends them again): a stopping server does not wait for a board to load, and
        a replay only reads, so stopping one loses nothing."""
        for name, task in self._supervising.items():
            handle = self.handles[name]
            if handle.state in (BoardState.LOADING, BoardState.ACTIVATING):
                log.info("board %s: replay stopped, the server is stopping", name)
                task.cancel()
                handle.fail("server stopped while the board was loading")

    async def stop(self) -> None:
        """Let every loaded actor finish its queued batches, then close the journals."""
        self._stopping = True
        self._heap.cancel()
        if self._sweeping is not None:
            self._sweeping.cancel()
            await asyncio.gather(self._sweeping, return_exceptions=True)
        self.abandon_loading()
        for actor in self.actors.values():
            actor.stop()
        if self._supervising:
            await asyncio.gather(*self._supervising.values(), return_exceptions=True)
        if self.activations is not None:
            await self.activations.close()
        for handle in self.handles.values():
            if handle.state is not BoardState.FAILED:
                handle.fail("server stopped", BoardEvent.SHUT)


async def _at_start(handle: BoardHandle, journal: Journal, now: int) -> Unloaded:
    """What the open ``journal`` of ``handle``'s board reads, recorded as if the board had been
    unloaded (`Unloaded.at_start`): a retired board, or an API board whose definition is not
    journaled yet, has nothing to close. Raises JournalError (JournalCorrupt: the journal's
    integrity check at the open failed, as a load's would)."""
    await journal.checked()
    closes = not handle.retired and not (handle.defined_by_api and journal.last_seq == 0)
    unloaded = Unloaded.at_start(handle.spec, journal.last_seq, (), closes, now)
    if unloaded.closing:  # else no marker can matter (alltime only, say): no read
        unloaded = Unloaded.at_start(handle.spec, journal.last_seq, await journal.close_markers(), closes, now)
    return unloaded


async def _refuse_while_activating(handle: BoardHandle) -> None:
    """Every `ACTIVATION_WAIT_SECONDS` while ``handle``'s board activates, answer what waits for
    it: events `unavailable` (nothing was journaled), commands failed. No event waits longer."""
    while True:
        await asyncio.sleep(ACTIVATION_WAIT_SECONDS)
        if handle.state is not BoardState.ACTIVATING:
            return
        if len(handle.mailbox):
            log.warning("board %s: still activating after %gs; what waits for it is answered unavailable",
                        handle.name, ACTIVATION_WAIT_SECONDS)
            handle.refuse_queued()
