"""A node's lease on the journal schema: its row in ``node_lease``, whose ``expires_at`` is judged
by the database's clock (``now()``), never by a node's own.

`arena serve` on postgresql takes the lease before it opens a journal and renews it every third
of `LEASE_SECONDS`. A second server finds it live and refuses to start with one line naming the
holder; a server started right after the holder was SIGKILLed waits for the dead lease to expire
(up to the lease's length + 1 s), then takes it. A graceful stop gives the lease up at once.

The lease only keeps servers apart; what makes a stale writer harmless is the ownership epoch
that every append checks in its own transaction (`arena.cluster.grants`): a writable open
grants a new epoch only while no other node holds a live lease (`other_holder`).

In a cluster (``[cluster]``) every node holds a lease row of its own, and only another live
process under the same node id keeps a node from starting; the node's ownership loop
(`arena.cluster.ownership`) renews it with `hold`, in the transaction that reads the cluster.
"""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg

from arena.cluster.node import NodeState
from arena.config import ClusterSettings
from arena.errors import JournalError, JournalUnavailable, SchemaHeld
from arena.journal.postgresql import STORE_ERRORS, PostgresBackend, PostgresStore

log = logging.getLogger("arena.cluster")

LEASE_SECONDS = ClusterSettings().lease_seconds
"""A single node's (no ``[cluster]``): the contract's default."""
_RENEW = (
    "INSERT INTO {s}.node_lease AS l VALUES ($1, $2, now() + make_interval(secs => $3), $4, $5)"
    " ON CONFLICT (node_id) DO UPDATE SET instance = EXCLUDED.instance, expires_at = EXCLUDED.expires_at,"
    " url = EXCLUDED.url, state = CASE WHEN l.instance = EXCLUDED.instance THEN l.state ELSE EXCLUDED.state END"
)
"""A process's lease starts ``joining`` ($5: `NodeState.JOINING`; see `arena.cluster.node`)."""
OWNERSHIP_CHANNEL = "arena_ownership"
"""Notified (payload: the schema) when a board is released or a node joins: the nodes listening
beat at once instead of at their next beat. A hint only: a node that missed it beats anyway."""
HINT = "SELECT pg_notify($1, $2)"
LEASE_LOCK = "SELECT pg_advisory_xact_lock(hashtext('arena-lease:' || $1))"
"""Taken by every transaction that reads or moves leases and ownership of a schema, so that two
nodes never both find the schema free."""
_OTHER_HOLDER = (
    "SELECT node_id, extract(epoch FROM expires_at - now())::float8 FROM {s}.node_lease"
    " WHERE instance <> $1 AND ($2::text IS NULL OR node_id = $2) AND expires_at > now() ORDER BY expires_at DESC LIMIT 1"
)
"""The node holding a live lease on the schema other than process ``$1`` (of node id ``$2``, unless
NULL), and its seconds left."""
_GIVE_UP = "DELETE FROM {s}.node_lease WHERE node_id = $1 AND instance = $2"
_STATE = "UPDATE {s}.node_lease SET state = $3 WHERE node_id = $1 AND instance = $2"


async def other_holder(conn: asyncpg.Connection, backend: PostgresBackend, clustered: bool) -> tuple[str, float] | None:
    """Inside a transaction: take the schema's lease lock (until it ends) and name the node other
    than ``backend``'s process holding a live lease, with its seconds left; None when there is
    none. In a cluster, only another process of its node id counts (nodes of other ids share the
    schema). Raises what asyncpg raises."""
    store = backend.store
    await conn.execute(LEASE_LOCK, store.schema)
    row = await conn.fetchrow(store.sql(_OTHER_HOLDER), backend.instance, backend.node_id if clustered else None)
    return None if row is None else (str(row[0]), float(row[1]))


async def hint(store: PostgresStore) -> None:
    """Notify the listening nodes that ownership may move (`OWNERSHIP_CHANNEL`); a failure is
    ignored: it is only a hint."""
    try:
        async with store.connection() as conn:
            await conn.execute(HINT, OWNERSHIP_CHANNEL, store.schema)
    except (*STORE_ERRORS, JournalUnavailable):
        pass


class NodeLease:
    """This process's lease on ``backend``'s schema, as node ``backend.node_id`` (one node of a
    cluster when ``clustered``), reached by other nodes at ``url``."""

    def __init__(self, backend: PostgresBackend, lease_seconds: float = LEASE_SECONDS, url: str = "", *,
                 clustered: bool = False) -> None:
        self.backend = backend
        self.lease_seconds = lease_seconds
        self.url = url
        self.clustered = clustered

    async def acquire(self) -> None:
        """Take the lease (the tables are created first when missing). While another node holds
        a live one, try again for up to ``lease_seconds`` + 1 s: a dead node's lease expires
        meanwhile. Raises SchemaHeld (one line naming the holder), JournalUnavailable,
        JournalCorrupt."""
        await self.backend.store.prepare(readonly=False)
        deadline = time.monotonic() + self.lease_seconds + 1
        waiting = False
        while (holder := await self._take()) is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SchemaHeld(
                    f"{self.backend.store.where} is held by node {holder[0]} (its lease is live: another arena serve"
                    " uses this schema); stop it, or use another [journal] schema"
                )
            if not waiting:
                log.info("node %s holds %s for %.1fs more; waiting for its lease to expire", holder[0],
                         self.backend.store.where, holder[1])
                waiting = True
            await asyncio.sleep(min(left, 0.1))
        log.info("node %s holds the lease on %s", self.backend.node_id, self.backend.store.where)

    async def keep(self) -> None:
        """Renew the lease every ``lease_seconds`` / 3, until cancelled. A renewal that fails (the
        server is away) is logged and tried at the next beat; one that finds another node holding
        the schema is logged as an error: this node's appends are then refused by their epochs."""
        lost = False
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                holder = await self._take()
            except JournalError as exc:
                log.warning("node %s: lease not renewed: %s", self.backend.node_id, exc)
                continue
            if holder is not None and not lost:
                log.error("node %s lost its lease: node %s holds %s now", self.backend.node_id, holder[0], self.backend.store.where)
            lost = holder is not None

    async def release(self) -> None:
        """Give the lease up (a graceful stop), so that the next server starts without waiting.
        A failure is logged: the lease then expires by itself."""
        backend = self.backend
        try:
            async with backend.store.connection() as conn:
                await conn.execute(backend.store.sql(_GIVE_UP), backend.node_id, backend.instance)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            log.warning("node %s: lease not given up (it expires by itself): %s", backend.node_id, exc)
            return
        if self.clustered:  # the others place its boards without it now
            await hint(backend.store)

    async def mark(self, state: NodeState) -> bool:
        """Set this process's `NodeRow.state` (``serving``, ``leaving``) and hint the other
        nodes. False, logged, when the store cannot be reached."""
        backend = self.backend
        try:
            async with backend.store.connection() as conn, conn.transaction():
                await conn.execute(backend.store.sql(_STATE), backend.node_id, backend.instance, state.value)
                await conn.execute(HINT, OWNERSHIP_CHANNEL, backend.store.schema)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            log.warning("node %s: not marked as %s: %s", backend.node_id, state.value, exc)
            return False
        return True

    async def hold(self, conn: asyncpg.Connection) -> tuple[str, float] | None:
        """Inside a transaction: the other node holding a live lease (and its seconds left),
        or None once this process holds the lease for ``lease_seconds`` from now (when the
        transaction commits). Raises what asyncpg raises."""
        backend = self.backend
        holder = await other_holder(conn, backend, self.clustered)
        if holder is None:
            await conn.execute(backend.store.sql(_RENEW), backend.node_id, backend.instance, self.lease_seconds, self.url,
                               NodeState.JOINING.value)
        return holder

    async def _take(self) -> tuple[str, float] | None:
        """One attempt, one transaction (`hold`)."""
        store = self.backend.store
        try:
            async with store.connection() as conn, conn.transaction():
                return await self.hold(conn)
        except (*STORE_ERRORS, JournalUnavailable) as exc:
            raise store.failure(store.where, exc, "cannot take the lease") from exc
