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

What to do is a pure function of one read (`plan`); the loop only carries it out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable, Set
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Histogram

from arena.cluster.directory import Directory, Owner
from arena.cluster.lease import NodeLease
from arena.cluster.placement import preference
from arena.errors import JournalError, JournalUnavailable, OwnedElsewhere
from arena.journal.postgresql import STORE_ERRORS
from arena.metrics import Metrics
from arena.supervisor import Supervisor

log = logging.getLogger("arena.cluster")

LOADS_AT_ONCE = 4
"""Boards granted and loading at once on a node: a dead node's boards do not all replay at once."""

_NODES = "SELECT node_id, instance, url, expires_at > now(), extract(epoch FROM now() - expires_at)::float8 FROM {s}.node_lease"
_OWNERS = "SELECT board, node_id, instance, epoch FROM {s}.board_owner"


@dataclass(frozen=True, slots=True)
class OwnerRow:
    node_id: str
    instance: str
    epoch: int


@dataclass(frozen=True, slots=True)
class ClusterRead:
    """The leases and owner rows as one transaction read them."""

    live: dict[str, tuple[str, str]]
    """node_id -> (instance, url) of every node holding a live lease."""
    owners: dict[str, OwnerRow]
    expired_for: dict[str, float] = field(default_factory=dict)
    """node_id -> seconds since the lease of a node not live expired."""

    def owner(self, board: str) -> Owner | None:
        """The board's live owner: its owner row's process still holds its lease."""
        row = self.owners.get(board)
        if row is None:
            return None
        node = self.live.get(row.node_id)
        if node is None or node[0] != row.instance:
            return None
        return Owner(row.node_id, node[1], row.epoch)

    def ownerless_for(self, board: str) -> float:
        """Seconds since the board's last owner stopped being live, as far as this read knows
        (0: it had none, or it released the board)."""
        row = self.owners.get(board)
        return 0.0 if row is None else max(self.expired_for.get(row.node_id, 0.0), 0.0)


@dataclass(frozen=True, slots=True)
class Plan:
    take: list[str]
    disown: list[str]
    hand_off: list[str]
    release: list[tuple[str, int]]
    """Boards not served here whose owner rows still name this process (a release that failed),
    with their epochs."""


def plan(node_id: str, instance: str, read: ClusterRead, boards: Iterable[str], owned: dict[str, int],
         served: Set[str], busy: Set[str]) -> Plan:
    """What node ``node_id`` (process ``instance``) does after ``read``: the boards to take (its
    placement names this node, and no other live process owns it), the boards to disown (served
    here, and no longer granted to this process under the epoch it serves: ``owned``) and the
    boards to hand off (served here, placed on another live node) or to release (see `Plan`). ``busy``: boards being taken,
    given up or failed here, left alone. O(boards × nodes)."""
    take: list[str] = []
    disown: list[str] = []
    hand_off: list[str] = []
    release: list[tuple[str, int]] = []
    alive = list(read.live)
    for board in boards:
        if board in busy:
            continue
        row = read.owners.get(board)
        epoch = owned.get(board)
        placed = preference(board, alive)[:1]
        if board in served:
            if epoch is None or row is None or (row.instance, row.epoch) != (instance, epoch):
                disown.append(board)
            elif placed and placed != [node_id]:
                hand_off.append(board)
        elif placed == [node_id]:
            if read.owner(board) is None or (row is not None and row.instance == instance):
                take.append(board)
        elif row is not None and row.instance == instance:
            release.append((board, row.epoch))
    return Plan(take, disown, hand_off, release)


class Ownership:
    """The loop of one node (`run`, cancelled to stop); `beat` once at start, before it serves."""

    def __init__(self, lease: NodeLease, directory: Directory, supervisor: Supervisor, metrics: Metrics) -> None:
        self.lease = lease
        self.backend = lease.backend
        self.directory = directory
        self.supervisor = supervisor
        self._loads = asyncio.Semaphore(LOADS_AT_ONCE)
        self._busy: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._away = False  # the last beat failed (logged once per streak)
        self.takeover = Histogram(
            "arena_takeover_seconds", "From a board's owner lease expiring (or its release) to this node serving it",
            buckets=(0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 7.5, 10, 20, 60), registry=metrics.registry,
        )
        self.backend.on_lost = self._fenced

    async def run(self) -> None:
        """Beat every ``lease_seconds`` / 3 until cancelled; then stop what it started."""
        period = self.lease.lease_seconds / 3
        try:
            while True:
                started = time.monotonic()
                await self.beat()
                await asyncio.sleep(max(0.0, started + period - time.monotonic()))
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def beat(self) -> None:
        """One renewal and read, then carry out its `plan`. A store that cannot be reached is
        logged (once until it is back): the lease then goes stale on this node's clock, and the
        directory stops answering for its boards."""
        sent = time.monotonic()
        try:
            holder, read = await self._read()
        except JournalError as exc:
            if not self._away:
                log.warning("node %s: lease not renewed: %s", self.backend.node_id, exc)
            self._away = True
            return
        if self._away:
            log.info("node %s: lease renewed again", self.backend.node_id)
            self._away = False
        if holder is not None:
            log.error("node %s: another process of this node id holds its lease: %s", self.backend.node_id, holder[0])
            return
        self.directory.renewed(sent)
        boards = list(self.supervisor.handles)
        for board in boards:
            if board not in self._busy:
                self.directory.set(board, read.owner(board))
        failed = {b for b, h in self.supervisor.handles.items() if h.failure is not None}
        served = {b for b in boards if self.supervisor.serving(b)}
        todo = plan(self.backend.node_id, self.backend.instance, read, boards, self.backend.owned, served,
                    self._busy | failed)
        for board in todo.disown:
            self._start(board, self._disown(board))
        for board in todo.hand_off:
            self._start(board, self.hand_off(board))
        for board, epoch in todo.release:
            self._start(board, self._release(board, epoch))
        for board in todo.take:
            self._start(board, self._take(board, read.ownerless_for(board), sent))

    async def _read(self) -> tuple[tuple[str, float] | None, ClusterRead]:
        store = self.backend.store
        try:
            async with store.connection() as conn, conn.transaction():
                holder = await self.lease.hold(conn)
                nodes = await conn.fetch(store.sql(_NODES))
                owners = await conn.fetch(store.sql(_OWNERS))
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(store.where, exc, "cannot read the cluster") from exc
        return holder, ClusterRead(
            live={n: (instance, url) for n, instance, url, live, _ in nodes if live},
            owners={board: OwnerRow(n, instance, int(epoch)) for board, n, instance, epoch in owners},
            expired_for={n: float(ago) for n, _, _, live, ago in nodes if not live},
        )

    def _start(self, board: str, work: Coroutine[Any, Any, None]) -> None:
        self._busy.add(board)
        task = asyncio.create_task(work, name=f"ownership:{board}")
        self._tasks.add(task)

        def done(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            self._busy.discard(board)
        task.add_done_callback(done)

    async def _take(self, board: str, ownerless_for: float, read_at: float) -> None:
        async with self._loads:
            try:
                await self.supervisor.serve(board)
            except OwnedElsewhere as exc:
                log.info("board %s: not taken: %s", board, exc)
                return
            except JournalError as exc:
                log.warning("board %s: not taken: %s", board, exc)
                return
            epoch = self.backend.owned.get(board)
            if epoch is not None:
                self.directory.set(board, Owner(self.backend.node_id, self.lease.url, epoch))
            log.info("board %s: granted to node %s (epoch %s); loading", board, self.backend.node_id, epoch)
            if await self.supervisor.until_loaded(board):
                self.takeover.observe(ownerless_for + time.monotonic() - read_at)

    async def hand_off(self, board: str) -> None:
        """Stop serving ``board`` gracefully and release it (`Supervisor.hand_off`): meanwhile the
        directory names no owner, so the edges hold its frames for the next one."""
        log.info("board %s: handing it off to the next node in its placement", board)
        self.directory.set(board, None)
        epoch = self.backend.owned.get(board)
        await self.supervisor.hand_off(board)
        if epoch is not None:
            await self._release(board, epoch)

    async def _release(self, board: str, epoch: int) -> None:
        if not await self.backend.release(board, epoch):
            log.warning("board %s: not released yet (tried again at the next beat)", board)

    async def _disown(self, board: str) -> None:
        log.warning("board %s: granted to another node; its actor here stops", board)
        self.directory.set(board, None)
        await self.supervisor.disown(board)

    def _fenced(self, board: str) -> None:
        """An append of ``board`` was refused by its fence: disown it now, not at the next beat
        (the supervisor must not restart it and grant it again)."""
        if board not in self._busy:
            self._start(board, self._disown(board))
