"""Grants and fencing (`arena.cluster.grants`) without a second node: a server's writable open
is granted a new epoch, an append refused by its fence raises OwnershipLost and queues the board
for the ownership loop, a cluster node is not granted a board another live process owns, and a
grant whose journal cannot be opened is given back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from arena.cluster.grants import Grants
from arena.cluster.lease import NodeLease
from arena.config import JournalSettings
from arena.engine.events import Event
from arena.engine.records import ScoreRecord
from arena.engine.scoring import Aggregation
from arena.errors import BoardDefinitionChanged, OwnedElsewhere, OwnershipLost
from arena.journal.postgresql import PostgresBackend
from support.journals import SPEC

T = 1_780_315_200_000


def score(seq: int) -> ScoreRecord:
    return ScoreRecord(seq, Event("b", "a", seq, T, f"k{seq}"), T, "gs")


@pytest.fixture
async def grants(pg_journal: JournalSettings) -> AsyncIterator[Grants]:
    granted = Grants(PostgresBackend(pg_journal, node_id="node-a"))
    yield granted
    await granted.close()


async def test_an_append_refused_by_its_fence_raises_and_queues_the_board(grants: Grants, pg_journal: JournalSettings) -> None:
    journal = await grants.open(SPEC)
    await journal.append([score(1)])
    assert grants.states.epochs == {"b": 1} and grants.fenced.empty()
    other = PostgresBackend(pg_journal, node_id="node-b")
    try:
        await (await other.open(SPEC)).close()  # a sole writer's open grants it again: epoch 2
    finally:
        await other.close()
    with pytest.raises(OwnershipLost, match="granted again since its epoch 1"):
        await journal.append([score(2)])
    assert grants.states.epochs == {} and grants.fenced.get_nowait() == "b"
    assert await journal.committed_seq() == 1


async def test_a_cluster_node_is_not_granted_a_board_another_live_process_owns(pg_journal: JournalSettings) -> None:
    a, b = (Grants(PostgresBackend(pg_journal, node_id=n), clustered=True) for n in ("node-a", "node-b"))
    try:
        for grants in (a, b):
            await NodeLease(grants.backend, 30, clustered=True).acquire()
        await (await a.open(SPEC)).close()
        with pytest.raises(OwnedElsewhere):
            await b.open(SPEC)
        assert (a.states.epochs, b.states.epochs) == ({"b": 1}, {})
        assert await a.release("b", 1) and a.states.epochs == {}
        await (await b.open(SPEC)).close()  # released: the next node is granted it at once
        assert b.states.epochs == {"b": 2}
    finally:
        await a.close()
        await b.close()


async def test_a_grant_whose_journal_cannot_be_opened_is_given_back(grants: Grants) -> None:
    """As when the grant and the open were one transaction: a board whose definition changed is
    left to no process (another node may open it), and this one owns nothing of it."""
    journal = await grants.open(SPEC)
    await journal.append([score(1)])
    await journal.close()
    with pytest.raises(BoardDefinitionChanged):
        await grants.open(replace(SPEC, aggregation=Aggregation.SUM))
    async with grants.backend.store.connection() as conn:
        row = await conn.fetchrow(grants.backend.store.sql("SELECT instance, epoch FROM {s}.board_owner WHERE board = 'b'"))
    assert (row[0], row[1]) == ("", 2)
