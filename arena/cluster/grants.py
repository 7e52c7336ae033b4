"""Grants and fencing: which process may write a board's journal, in the ``board_owner`` rows.

A writable open of a server's journal is granted first, then fenced (`Fence`: its appends
commit only while the owner row holds the epoch granted):
- a single node (no ``[cluster]``) grants itself a new epoch in the transaction that finds no
  other node holding a live lease on the schema (`arena.cluster.lease`); else the open raises
  JournalUnavailable naming the holder;
- a node of a cluster grants only a board that no other live process owns (`_CLAIM`), else the
  open raises OwnedElsewhere.
The epochs granted to this process are kept in the node's `BoardStates` (`granted`). An append
refused by its fence raises OwnershipLost; `Grants` then forgets the board's epoch and queues it
(`fenced`) for the ownership loop, which disowns it at once. A board handed off is released
(`release`): its row names no live process, and the next node grants it. A cluster node's board
granted and not loaded (activated on demand) is opened again under the epoch it was granted
(`kept`): its activation, or the close markers journaled while it is inactive, change no owner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Iterable, Sequence

import asyncpg
from prometheus_client import CollectorRegistry, Counter, Gauge

from arena.board.state import BoardState, BoardStates
from arena.cluster.lease import HINT, LEASE_LOCK, OWNERSHIP_CHANNEL, other_holder
from arena.engine.records import Record
from arena.engine.spec import BoardSpec
from arena.errors import JournalError, JournalUnavailable, OwnedElsewhere, OwnershipLost
from arena.journal import Journal
from arena.journal.interface import JournalProxy
from arena.journal.postgresql import STORE_ERRORS, Fence, PostgresBackend

log = logging.getLogger("arena.cluster")

_CLAIM = (
    "INSERT INTO {s}.board_owner AS o SELECT $1, $2, $3, 1, false WHERE EXISTS (SELECT FROM {s}.node_lease"
    " WHERE node_id = $2 AND instance = $3 AND expires_at > now()) ON CONFLICT (board) DO UPDATE"
    " SET node_id = EXCLUDED.node_id, instance = EXCLUDED.instance, epoch = o.epoch + 1"
    " WHERE o.instance = EXCLUDED.instance OR NOT EXISTS (SELECT FROM {s}.node_lease l"
    " WHERE l.node_id = o.node_id AND l.instance = o.instance AND l.expires_at > now()) RETURNING epoch"
)
"""A cluster node's grant (`PostgresBackend.grant` is a single node's, once no other node holds
the schema): a new epoch only while this process holds a live lease and the board's owner row
names no other process holding one (a released row names none: its instance is empty). No row
comes back otherwise: a board never has two live owners, whatever each node believes of the
others. A board granted for the first time is not loaded anywhere (``active`` false); a board
granted again keeps what its last owner wrote (taken from a standby copy, it is loaded at once and
its standbys go on following it) until its new owner's beat says otherwise."""
_RELEASE = "UPDATE {s}.board_owner SET instance = '' WHERE board = $1 AND instance = $2 AND epoch = $3"
"""A graceful hand-off: the board keeps its epoch (the next grant grows it) and names no live
owner, so that the next node in its placement grants it at once (`OWNERSHIP_CHANNEL` hints it)."""


_KEPT = frozenset({BoardState.INACTIVE, BoardState.ACTIVATING})


class Grants:
    """The journal backend of a server on PostgreSQL: ``backend``'s journals, each writable one
    granted to this process (as one node of a cluster when ``clustered``) and fenced; the epochs
    granted are told to ``states`` (`BoardStates.granted`; a map of its own when not given)."""

    def __init__(self, backend: PostgresBackend, states: BoardStates | None = None, *, clustered: bool = False) -> None:
        self.backend = backend
        self.states = states if states is not None else BoardStates()
        self.clustered = clustered
        self.fenced: asyncio.Queue[str] = asyncio.Queue()
        """The boards whose appends were refused by their fences, for the ownership loop."""
        self._changes: Counter | None = None

    def where(self, board: str) -> str:
        return self.backend.where(board)

    async def open(self, spec: BoardSpec, *, readonly: bool = False) -> Journal:
        if readonly:
            return await self.backend.open(spec, readonly=True)
        epoch = self.kept(spec.name)
        if epoch is not None:  # a fence that no longer holds refuses its first append, as for any
            return FencedJournal(await self.backend.open(spec, fence=Fence(spec.name, epoch)), self, spec.name)
        epoch = await self._grant(spec.name)
        try:
            journal = await self.backend.open(spec, fence=Fence(spec.name, epoch))
        except JournalError:
            await self._ungrant(spec.name, epoch)
            raise
        self._owner_changed(spec.name, epoch)
        return FencedJournal(journal, self, spec.name)

    def kept(self, board: str) -> int | None:
        """The epoch under which a cluster node opens ``board`` again without a new grant: that
        of its grant, while it is inactive or being activated here; else None."""
        if not self.clustered or board not in self.states or self.states.state(board) not in _KEPT:
            return None
        return self.states.epoch(board)

    async def _grant(self, board: str) -> int:
        """A new epoch of ``board`` for this process, by the rules of a single node or of a
        cluster node. Raises JournalUnavailable (another node holds the schema, or the store is
        away), OwnedElsewhere, JournalCorrupt."""
        store = self.backend.store
        path = self.where(board)
        await store.prepare(readonly=False)
        holder = None
        try:
            async with store.connection() as conn, conn.transaction():
                if self.clustered:
                    return await self._claim(conn, board)
                holder = await other_holder(conn, self.backend, clustered=False)
                if holder is None:
                    return await self.backend.grant(conn, board)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(path, exc, "not a readable Arena journal") from exc
        raise JournalUnavailable(f"{path}: node {holder[0]} holds the schema (its lease is live)")

    async def _claim(self, conn: asyncpg.Connection, board: str) -> int:
        """Inside the grant's transaction: grant ``board`` to this process (`_CLAIM`). Raises
        OwnedElsewhere (the transaction then writes nothing)."""
        store = self.backend.store
        await conn.execute(LEASE_LOCK, store.schema)
        epoch = await conn.fetchval(store.sql(_CLAIM), board, self.backend.node_id, self.backend.instance)
        if epoch is None:
            raise OwnedElsewhere(f"board {board}: another live node owns it (or this node's lease expired)")
        # sent at commit: the other nodes name the new owner in their directories now, not at
        # their next beat (a node handing the board off forwards its frames here meanwhile)
        await conn.execute(HINT, OWNERSHIP_CHANNEL, store.schema)
        return int(epoch)

    async def _ungrant(self, board: str, epoch: int) -> None:
        """Give back a grant whose journal could not be opened (its definition changed, the
        store went away), quietly: a row left naming this process dies with its lease anyway."""
        try:
            async with self.backend.store.connection() as conn:
                await conn.execute(self.backend.store.sql(_RELEASE), board, self.backend.instance, epoch)
        except (*STORE_ERRORS, JournalUnavailable):
            pass

    async def release(self, board: str, epoch: int) -> bool:
        """Give up ``board``, granted to this process under ``epoch``, after its actor stopped (a
        graceful hand-off): its owner row then names no live process, and the next node in its
        placement grants it at once. False when it was not released (granted again meanwhile, or
        the store away). Never raises."""
        if self.states.ungranted(board) is not None and self._changes is not None:
            self._changes.labels(board).inc()
        store = self.backend.store
        try:
            async with store.connection() as conn, conn.transaction():
                done: bool = await conn.execute(store.sql(_RELEASE), board, self.backend.instance, epoch) == "UPDATE 1"
                await conn.execute(HINT, OWNERSHIP_CHANNEL, store.schema)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            log.warning("board %s: not released (it is once this node's lease expires): %s", board, store.redact(str(exc)))
            return False
        return done

    def lost(self, board: str) -> None:
        """An append of ``board`` was refused by its fence: it is granted to another epoch."""
        if self.states.epoch(board) is not None:
            self._owner_changed(board, None)
        self.fenced.put_nowait(board)

    def _owner_changed(self, board: str, epoch: int | None) -> None:
        """``board`` granted to this process under ``epoch``, or found granted again (None)."""
        if epoch is not None:
            self.states.granted(board, epoch)
        else:
            self.states.ungranted(board)
        if self._changes is not None:
            self._changes.labels(board).inc()

    def watch(self, registry: CollectorRegistry, boards: Iterable[str]) -> None:
        Gauge("arena_boards_owned", "Boards this node owns: it alone appends to their journals", registry=registry
              ).set_function(lambda: len(self.states.epochs))
        self._changes = Counter("arena_ownership_changes", "Times this node was granted a board or found it granted"
                                " to another (each grant is a new epoch)", ["board"], registry=registry)
        for board in boards:
            self._changes.labels(board)

    async def close(self) -> None:
        await self.backend.close()


class FencedJournal(JournalProxy):
    """A journal granted by `Grants`: an append refused by its fence (OwnershipLost) tells them."""

    def __init__(self, journal: Journal, grants: Grants, board: str) -> None:
        super().__init__(journal)
        self._grants = grants
        self._board = board

    async def append(self, records: Sequence[Record]) -> None:
        try:
            await self.journal.append(records)
        except OwnershipLost:
            self._grants.lost(self._board)
            raise

    async def append_all(self, chunks: AsyncIterable[Sequence[Record]]) -> None:
        try:
            await self.journal.append_all(chunks)
        except OwnershipLost:
            self._grants.lost(self._board)
            raise
