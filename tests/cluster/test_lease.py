"""A node's lease on the schema (arena.cluster.lease), judged by the database's clock: a live lease
keeps every other process off for good, a dead one (no renewals: a SIGKILLed holder) is taken
once it expires, within the lease's length + 1 s, and one given up is taken at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest

from arena.cluster.lease import NodeLease
from arena.config import JournalSettings
from arena.errors import SchemaHeld
from arena.journal.postgresql import PostgresBackend

LEASE = 0.6


@pytest.fixture
async def backends(pg_journal: JournalSettings) -> AsyncIterator[Callable[[str], PostgresBackend]]:
    """Backends on one schema, each a process of its own (its own instance), named as asked."""
    made: list[PostgresBackend] = []

    def make(node_id: str) -> PostgresBackend:
        made.append(PostgresBackend(pg_journal, node_id=node_id))
        return made[-1]

    yield make
    for backend in made:
        await backend.close()


async def holders(backend: PostgresBackend) -> list[tuple[str, bool]]:
    async with backend.store.connection() as conn:
        rows = await conn.fetch(backend.store.sql("SELECT node_id, expires_at > now() FROM {s}.node_lease ORDER BY node_id"))
    return [(r[0], r[1]) for r in rows]


async def test_a_lease_on_a_free_schema_is_taken_at_once_and_kept_by_renewals(backends: Callable[[str], PostgresBackend]) -> None:
    backend = backends("node-a")
    lease = NodeLease(backend, LEASE)
    started = time.monotonic()
    await lease.acquire()  # the tables are created on the way
    assert time.monotonic() - started < LEASE
    renewals = asyncio.create_task(lease.keep())
    await asyncio.sleep(3 * LEASE)
    assert await holders(backend) == [("node-a", True)]
    renewals.cancel()


async def test_a_live_lease_keeps_another_server_off_and_names_its_holder(backends: Callable[[str], PostgresBackend]) -> None:
    holder = NodeLease(backends("node-a"), LEASE)
    await holder.acquire()
    renewals = asyncio.create_task(holder.keep())
    try:
        started = time.monotonic()
        with pytest.raises(SchemaHeld) as raised:
            await NodeLease(backends("node-b"), LEASE).acquire()
        waited = time.monotonic() - started
    finally:
        renewals.cancel()
    assert LEASE + 1 <= waited < LEASE + 2
    message = str(raised.value)
    assert "is held by node node-a" in message and "\n" not in message


@pytest.mark.parametrize("node_id", ["node-a", "node-b"], ids=["same-node-restarted", "another-node"])
async def test_a_dead_holders_lease_is_taken_once_it_expires(backends: Callable[[str], PostgresBackend], node_id: str) -> None:
    dead = backends("node-a")
    await NodeLease(dead, LEASE).acquire()  # and never renewed: its process was SIGKILLed
    started = time.monotonic()
    successor = backends(node_id)
    await NodeLease(successor, LEASE).acquire()
    waited = time.monotonic() - started
    assert 0.3 * LEASE < waited <= LEASE + 1
    async with successor.store.connection() as conn:
        instance = await conn.fetchval(successor.store.sql("SELECT instance FROM {s}.node_lease WHERE node_id = $1"), node_id)
    assert instance == successor.instance


async def test_a_lease_given_up_is_taken_at_once(backends: Callable[[str], PostgresBackend]) -> None:
    first = NodeLease(backends("node-a"), 30)
    await first.acquire()
    await first.release()
    started = time.monotonic()
    await NodeLease(backends("node-b"), 30).acquire()
    assert time.monotonic() - started < 1
