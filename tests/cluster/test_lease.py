"""A node's lease on the schema (arena.cluster.lease), judged by the database's clock: a live lease
keeps every other process off for good, a dead one (no renewals: a SIGKILLed holder) is taken
once it expires, and one given up is taken at once. What each
attempt found (`attempts`) says so, not a stopwatch."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable

import pytest

from arena.cluster.lease import NodeLease
from arena.config import JournalSettings
from arena.errors import SchemaHeld
from arena.journal.postgresql import PostgresBackend
from support.server import until

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


Holder = tuple[str, float] | None
"""What one attempt found: the node holding a live lease and its seconds left, or None (taken)."""


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> dict[NodeLease, list[Holder]]:
    """Every attempt of every `NodeLease` to take (or renew) its lease, by lease, in order."""
    seen: dict[NodeLease, list[Holder]] = {}
    take = NodeLease._take

    async def recorded(lease: NodeLease) -> Holder:
        holder = await take(lease)
        seen.setdefault(lease, []).append(holder)
        return holder

    monkeypatch.setattr(NodeLease, "_take", recorded)
    return seen


async def holders(backend: PostgresBackend) -> list[tuple[str, bool]]:
    async with backend.store.connection() as conn:
        rows = await conn.fetch(backend.store.sql("SELECT node_id, expires_at > now() FROM {s}.node_lease ORDER BY node_id"))
    return [(r[0], r[1]) for r in rows]


async def test_a_lease_on_a_free_schema_is_taken_at_once_and_kept_by_renewals(
    backends: Callable[[str], PostgresBackend], attempts: dict[NodeLease, list[Holder]]
) -> None:
    backend = backends("node-a")
    lease = NodeLease(backend, LEASE)
    await lease.acquire()  # the tables are created on the way
    assert attempts[lease] == [None]  # the first attempt took it
    renewals = asyncio.create_task(lease.keep())
    await until(lambda: len(attempts[lease]) > 1 + 9, "renewals through three lease lengths")
    assert await holders(backend) == [("node-a", True)]
    assert set(attempts[lease]) == {None}  # every renewal found no other holder
    renewals.cancel()


async def test_a_live_lease_keeps_another_server_off_and_names_its_holder(
    backends: Callable[[str], PostgresBackend], attempts: dict[NodeLease, list[Holder]]
) -> None:
    holder = NodeLease(backends("node-a"), LEASE)
    await holder.acquire()
    renewals = asyncio.create_task(holder.keep())
    refused = NodeLease(backends("node-b"), LEASE)
    try:
        with pytest.raises(SchemaHeld) as raised:
            await refused.acquire()
    finally:
        renewals.cancel()
    found = attempts[refused]
    assert len(found) > 1 and all(h is not None and h[0] == "node-a" for h in found)  # it waited, finding node-a each time
    left = [h[1] for h in found if h is not None]
    assert any(later > earlier for earlier, later in itertools.pairwise(left))  # and gave up only after seeing a renewal
    message = str(raised.value)
    assert "is held by node node-a" in message and "\n" not in message


@pytest.mark.parametrize("node_id", ["node-a", "node-b"], ids=["same-node-restarted", "another-node"])
async def test_a_dead_holders_lease_is_taken_once_it_expires(
    backends: Callable[[str], PostgresBackend], attempts: dict[NodeLease, list[Holder]], node_id: str
) -> None:
    dead = backends("node-a")
    await NodeLease(dead, LEASE).acquire()  # and never renewed: its process was SIGKILLed
    successor = backends(node_id)
    lease = NodeLease(successor, LEASE)
    await lease.acquire()
    *waiting, taken = attempts[lease]
    assert waiting and all(h is not None and h[0] == "node-a" for h in waiting) and taken is None  # waited for it, then took it
    left = [h[1] for h in waiting if h is not None]
    assert left == sorted(left, reverse=True)  # never renewed meanwhile: it expired
    async with successor.store.connection() as conn:
        instance = await conn.fetchval(successor.store.sql("SELECT instance FROM {s}.node_lease WHERE node_id = $1"), node_id)
    assert instance == successor.instance


async def test_a_lease_given_up_is_taken_at_once(
    backends: Callable[[str], PostgresBackend], attempts: dict[NodeLease, list[Holder]]
) -> None:
    first = NodeLease(backends("node-a"), 30)
    await first.acquire()
    await first.release()
    second = NodeLease(backends("node-b"), 30)
    await second.acquire()
    assert attempts[second] == [None]
