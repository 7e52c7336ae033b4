"""A cluster node's ownership loop: which boards this node serves, decided from the journal's tables.

Every ``lease_seconds`` / 3 a beat, in one transaction, renews this node's lease and reads the
live nodes and the boards' owner rows (judged by the database's clock). Then:
- the `Directory` learns every board's owner (None while its owner's lease has expired);
- a board whose placement (rendezvous over the live nodes) names this node, and whose owner's
  lease has expired (or that has no owner), is granted to this node (`Supervisor.serve`: a
  conditional grant that cannot give a board two live owners) and loaded, a few at a time;
- a board this node serves whose owner row names another process or epoch is disowned: its
  actor stops and what it holds is answered `unavailable`, never acked;
- a board this node serves whose placement names another live node (a node joined) is handed
  off: no new work reaches its actor, which journals and answers what it took, then the owner
  row is released and that node grants it at its next beat.
An append refused by its fence disowns its board at once, without waiting for the next beat.
A release or a node's arrival is notified (`OWNERSHIP_CHANNEL`): the listening nodes beat at
once; a node that missed it (its listener was away) acts at its next beat anyway. On SIGTERM
(`leave`) the node hands every board off before it gives its lease up.

What to do is a pure function of one read and the placements it gives (`arena.cluster.plan`);
the loop only carries it out. Every board's state is in the node's `BoardStates`
(`arena.board.state`): the loop moves a board as it starts a move (take, follow, hand off,
disown, release), so that the next beats leave it alone until that move ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import asyncpg
from prometheus_client import Gauge, Histogram

from arena.board.clock import wait_set
from arena.board.state import MOVING, OWNED, SHIFTING, BoardEvent, BoardState
from arena.board.supervisor import Supervisor
from arena.cluster.directory import Directory, Owner
from arena.cluster.grants import Grants
from arena.cluster.lease import OWNERSHIP_CHANNEL, NodeLease, hint
from arena.cluster.membership import ClusterRead, activity_changes, read_cluster, write_activity
from arena.cluster.node import NodeLife, NodeState
from arena.cluster.plan import Held, Plan, plan
from arena.cluster.standby import Follower
from arena.errors import ConfigError, JournalError, JournalUnavailable, OwnedElsewhere
from arena.journal.postgresql import STORE_ERRORS
from arena.metrics import Metrics

log = logging.getLogger("arena.cluster")

LOADS_AT_ONCE = 4
"""Boards granted and loading at once on a node: a dead node's boards do not all replay at once."""

FOLLOWS_AT_ONCE = 2
"""Standby copies catching up at once on a node, apart from `LOADS_AT_ONCE`. A copy's first
(full) load also waits while this node takes boards over: the death of a node makes others the
standbys of new boards at the moment they take its boards, and those loads would take the CPU
from the takeovers."""

EXPIRY_MARGIN_SECONDS = 0.02


@dataclass(slots=True)
class StandbyCopy:
    """The I/O handles of a board followed here (FOLLOWING): its `Follower`, and the catch-up
    under way, if any (one at a time)."""

    follower: Follower
    catching_up: asyncio.Task[None] | None = None


class Ownership:
    """The loop of one node (`run`, cancelled to stop); `beat` once at start, before it serves."""

    def __init__(self, lease: NodeLease, grants: Grants, directory: Directory, supervisor: Supervisor, metrics: Metrics,
                 standbys: int = 1) -> None:
        self.lease = lease
        self.grants = grants
        self.standbys = standbys
        self.backend = lease.backend
        self.directory = directory
        self.supervisor = supervisor
        self.states = supervisor.states
        self._copies: dict[str, StandbyCopy] = {}
        """The standby copies' handles, by board (FOLLOWING; a board being taken keeps its copy
        until its turn to load comes)."""
        self._loads = asyncio.Semaphore(LOADS_AT_ONCE)
        self._follows = asyncio.Semaphore(FOLLOWS_AT_ONCE)
        self._tasks: set[asyncio.Task[None]] = set()
        self._moves: dict[str, asyncio.Task[None]] = {}
        """The task of each board's move under way (a state of `MOVING`), to wait for on leaving."""
        self._failed_beats = 0  # in a row: logged at the first, and once the lease is renewed again
        self.life = NodeLife()
        """This process's life: ``joining`` or ``serving`` as the last beat read its lease, once
        ``leaving`` for good."""
        self.catalog: Callable[[], Awaitable[bool]] | None = None
        """Reads the catalog of API boards again at each beat (before placing): a board created,
        changed or retired through another node is served here too (its change hints a beat)."""
        self._hinted = asyncio.Event()
        self._listener: asyncpg.Connection | None = None
        self._started = time.monotonic()
        self.takeover = Histogram(
            "arena_takeover_seconds", "From a board's owner lease expiring (or its release) to this node serving it",
            buckets=(0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 7.5, 10, 20, 60), registry=metrics.registry,
        )
        self.followed_seq = Gauge("arena_standby_seq", "The journal seq up to which this node's standby copy of a"
                                  " board is loaded", ["board"], registry=metrics.registry)
        Gauge("arena_lease_fresh", "1 while this node's lease is fresh on its own clock (it answers for its boards),"
              " 0 once it could not renew it in time", registry=metrics.registry
              ).set_function(lambda: 1.0 if self.states.lease_fresh else 0.0)

    async def run(self) -> None:
        """Beat every ``lease_seconds`` / 3 until cancelled; then stop what it started."""
        period = self.lease.lease_seconds / 3
        self._spawn(self._disowning_fenced())
        try:
            while True:
                started = time.monotonic()
                expiry = await self.beat()
                # a beat also right after the next lease of another node expires, should it not be
                # renewed: its boards are taken over up to one period sooner
                wait = period if expiry is None else min(period, expiry + EXPIRY_MARGIN_SECONDS)
                await wait_set(self._hinted, max(0.0, started + wait - time.monotonic()))
                self._hinted.clear()
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            copies, self._copies = list(self._copies.values()), {}
            await asyncio.gather(*(c.follower.close() for c in copies), return_exceptions=True)
            if self._listener is not None:
                self._listener.terminate()

    async def leave(self) -> None:
        """Hand every board served here off (SIGTERM), and take none any more: its actors drain
        and commit what they took, then each owner row is released for the next node."""
        if self.life.state is NodeState.LEAVING:
            return
        self.life.move(NodeState.LEAVING)
        await self.lease.mark(NodeState.LEAVING)
        served = self.states.boards(BoardState.LOADING, BoardState.SERVING, BoardState.INACTIVE)
        log.info("node %s leaving: handing off %d boards", self.backend.node_id, len(served))
        for board in served:
            # moving while it goes: the beats leave its directory entry alone; then they name the
            # next owner (its grant hints them), to whom this node forwards until it stops
            self._hand_off(board)
        handing_off = self.states.boards(BoardState.HANDING_OFF, BoardState.RELEASING)
        await asyncio.gather(*(task for board, task in self._moves.items() if board in handing_off), return_exceptions=True)

    async def _listen(self) -> None:
        """(Re)open the connection that hears the hints, when it is away; quietly, as it is
        only a hint."""
        if self._listener is not None and not self._listener.is_closed():
            return
        try:
            async with asyncio.timeout(self.lease.lease_seconds / 3):  # a cut link: the beat goes on without it
                self._listener = await self.backend.store.listen(OWNERSHIP_CHANNEL, self._hinted.set)
        except (JournalUnavailable, TimeoutError) as exc:
            log.debug("node %s: not listening for ownership hints: %r", self.backend.node_id, exc)

    async def beat(self) -> float | None:
        """One renewal and read, then carry out its `plan`; the seconds until the next lease of
        another node expires (`ClusterRead.next_expiry`). A store that cannot be reached is
        logged (once until it is back): the lease then goes stale on this node's clock, and the
        directory stops answering for its boards."""
        # listening before this node joins: the others answer its join with releases whose
        # hints it must hear, or it takes those boards only at its next beat
        await self._listen()
        sent = time.monotonic()
        try:
            holder, read = await self._read()
        except JournalError as exc:
            self._failed_beats += 1
            if self._failed_beats == 1:
                log.warning("node %s: lease not renewed: %s", self.backend.node_id, exc)
            return None
        if self._failed_beats:
            log.info("node %s: lease renewed again, after %d beats that could not", self.backend.node_id, self._failed_beats)
            self._failed_beats = 0
        if holder is not None:
            log.error("node %s: another process of this node id holds its lease: %s", self.backend.node_id, holder[0])
            return None
        self.directory.renewed(sent)
        self.directory.seen_nodes({n: row.url for n, row in read.nodes.items() if row.alive})
        if self.life.state is NodeState.STARTING:  # the others hand this node its boards now, not at their next beat
            self.life.move(NodeState.JOINING)
            await hint(self.backend.store)
        if self.catalog is not None:
            try:
                await self.catalog()
            except (JournalError, ConfigError) as exc:
                log.warning("node %s: board catalog not read: %s", self.backend.node_id, exc)
        boards = list(self.states)
        # a board that moved since the read began may be stale in it (a release just committed
        # would be released again, and named this node's in the directory): the next beat has it
        moving = self.states.boards(*MOVING) | self.states.moved_since(sent)
        for board in boards:
            if board not in moving:
                self.directory.set(board, read.owner(board), released=read.released(board))
        if self.life.state is NodeState.LEAVING:
            return None
        held = Held(self.states.epochs, self.states.boards(*OWNED), moving | self.states.boards(BoardState.FAILED, *SHIFTING),
                    {b: self._copies[b].follower.engine is not None for b in self.states.boards(BoardState.FOLLOWING)},
                    time.monotonic() - self._started)
        todo = plan(self.backend.node_id, self.backend.instance, read, read.placements(boards, self.standbys), held)
        for board in todo.disown:
            self.states.move(board, BoardEvent.DISOWN)
            self._start(board, self._disown(board))
        for board in todo.hand_off:
            self._hand_off(board)
        for board, epoch in todo.release:
            if self.states.state(board) is BoardState.FOLLOWING:  # a grant given back that could not be
                self._unfollow(board)
            self.states.move(board, BoardEvent.RELEASE)
            self._start(board, self._release(board, epoch))
        for board in todo.take:
            self.states.move(board, BoardEvent.TAKE)
            self._start(board, self._take(board, read.ownerless_for(board), sent))
        self._follow(todo)
        stored = read.nodes[self.backend.node_id].state
        if stored is not self.life.state:  # joining or serving: it is never leaving while the node is not
            self.life.move(stored)
        if self.life.state is NodeState.JOINING:
            await self._join(todo)
        return read.next_expiry(self.backend.node_id)

    async def _join(self, todo: Plan) -> None:
        """Serve (`NodeRow.state`) once the plan says so: the owners of the boards coming here then
        hand them off to this node."""
        if not todo.serve:
            return
        if todo.behind:
            log.warning("node %s: serving after %.0fs without having caught up with %d boards (%s): they"
                        " replay in full when taken", self.backend.node_id, time.monotonic() - self._started,
                        len(todo.behind), ", ".join(todo.behind[:5]))
        if await self.lease.mark(NodeState.SERVING):
            log.info("node %s: serving (caught up with the boards its owners hand it off)", self.backend.node_id)

    def _follow(self, todo: Plan) -> None:
        """Stop following the boards the plan drops; follow its others (start, or bring up to date)."""
        for board in todo.unfollow:
            self._unfollow(board)
        now = self.supervisor.clock.now()
        for board in todo.follow:
            copy = self._copies.get(board)
            if copy is None:
                self.states.move(board, BoardEvent.FOLLOW)
                copy = self._copies[board] = StandbyCopy(Follower(self.supervisor.handles[board].spec))
            if copy.catching_up is None or copy.catching_up.done():
                copy.catching_up = self._spawn(self._catch_up(copy.follower, now))

    def _unfollow(self, board: str) -> None:
        self.states.move(board, BoardEvent.UNFOLLOW)
        self._spawn(self._copies.pop(board).follower.close())
        with contextlib.suppress(KeyError):  # no copy of it here any more
            self.followed_seq.remove(board)

    async def _catch_up(self, follower: Follower, now: int) -> None:
        async with self._follows:
            loaded = follower.engine is not None
            if not loaded and self.states.boards(BoardState.TAKING, BoardState.LOADING):  # a full load: at a later beat
                return
            try:
                await follower.catch_up(self.supervisor.backend, now)
            except JournalError as exc:
                log.warning("board %s: not followed now: %s", follower.spec.name, exc)
                return
            if follower.engine is not None:
                self.followed_seq.labels(follower.spec.name).set(follower.engine.last_seq)
        if self.life.state is NodeState.JOINING and not loaded:  # a first load done: beat now, this node may have caught up
            self._hinted.set()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _read(self) -> tuple[tuple[str, float] | None, ClusterRead]:
        """The renewal and read of one beat, given up (TimeoutError) after ``lease_seconds``:
        a renewal that commits later renews nothing (the lease is stale by then on this node's
        clock), and a connection cut off mid-way would hold every later beat until TCP gives up,
        long after the link is back. It also writes which of this node's boards are in memory
        (`write_activity`), so that their standbys follow them, or stop."""
        store = self.backend.store
        active = {board: self.states.active(board) for board in self.states.epochs}
        try:
            async with asyncio.timeout(self.lease.lease_seconds), store.connection() as conn, conn.transaction():
                holder, read = await self.lease.hold(conn), await read_cluster(conn, store)
                if holder is None:
                    await write_activity(conn, store, self.backend.instance, activity_changes(read, self.backend.instance, active))
                return holder, read
        except (*STORE_ERRORS, JournalUnavailable) as exc:  # TimeoutError is an OSError
            raise store.failure(store.where, exc, "cannot read the cluster") from exc

    def _start(self, board: str, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work``, the move of ``board`` just made (a state of `MOVING`)."""
        task = self._moves[board] = self._spawn(work)
        task.add_done_callback(lambda _: self._moves.pop(board) if self._moves.get(board) is task else None)

    async def _take(self, board: str, ownerless_for: float, read_at: float) -> None:
        """Take ``board`` (TAKING), a few at a time: from its standby copy when it has one."""
        async with self._loads:
            copy = self._copies.pop(board, None)
            follower = None if copy is None else copy.follower
            try:
                await self.supervisor.serve(board, None if follower is None else follower.take)
            except JournalError as exc:
                log.log(logging.INFO if isinstance(exc, OwnedElsewhere) else logging.WARNING, "board %s: not taken: %s", board, exc)
                self.states.move(board, BoardEvent.NOT_GRANTED)
                if copy is not None:  # not granted: its engine was not taken
                    self.states.move(board, BoardEvent.FOLLOW)
                    self._copies[board] = copy
                return
            epoch = self.states.epoch(board)
            inactive = self.states.state(board) is BoardState.INACTIVE
            if epoch is not None:
                self.directory.set(board, Owner(self.backend.node_id, self.lease.url, epoch, not inactive))
            log.info("board %s: granted to node %s (epoch %s)%s", board, self.backend.node_id, epoch,
                     ", inactive (activated on demand)" if inactive else "" if follower is None else ", from its standby copy")
            if inactive:
                self._hinted.set()  # a beat now writes that it is not loaded: its standbys drop their copies
            if inactive or await self.supervisor.until_loaded(board):
                self.takeover.observe(ownerless_for + time.monotonic() - read_at)

    def _hand_off(self, board: str) -> None:
        """Start handing ``board`` off (HANDING_OFF). From this moment the directory names no
        owner, released: the edges hold its frames and queries for the next one (no request
        reaches the actor that stops taking new work)."""
        self.states.move(board, BoardEvent.HAND_OFF)
        self.directory.set(board, None, released=True)
        self._start(board, self.hand_off(board))

    async def hand_off(self, board: str) -> None:
        """Stop serving ``board`` gracefully and release it (`Supervisor.hand_off`)."""
        log.info("board %s: handing it off to the next node in its placement", board)
        epoch = self.states.epoch(board)
        await self.supervisor.hand_off(board)
        if epoch is not None:
            self.states.move(board, BoardEvent.RELEASE)
            await self._release(board, epoch)

    async def _release(self, board: str, epoch: int) -> None:
        """Release ``board`` (RELEASING); ELSEWHERE after, released or not."""
        try:
            if not await self.grants.release(board, epoch):
                log.warning("board %s: not released yet (tried again at the next beat)", board)
        finally:
            self.states.move(board, BoardEvent.RELEASED)

    async def _disown(self, board: str) -> None:
        """Stop ``board``'s actor at once (DISOWNING): another node owns it now."""
        log.warning("board %s: granted to another node; its actor here stops", board)
        self.directory.set(board, None)
        await self.supervisor.disown(board)

    async def _disowning_fenced(self) -> None:
        """Disown each board whose append was refused by its fence (`Grants.fenced`) now, not at
        the next beat (the supervisor must not restart it and grant it again)."""
        while True:
            board = await self.grants.fenced.get()
            if self.states.can(board, BoardEvent.DISOWN):
                self.states.move(board, BoardEvent.DISOWN)
                self._start(board, self._disown(board))
