"""The outbox's stores on both backends: deliveries are kept once (a second insert of one changes
nothing), a table's revisions are due one after the other (r+1 once r is delivered or failed),
only the boards asked for are due, a webhook's log position only moves forward, and the listing
pages in the order deliveries were made, by state and by table."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from arena.delivery.outbox import Delivery, Listing, Outbox, Outcome, State, deliveries
from arena.delivery.postgresql_outbox import PostgresOutbox
from arena.delivery.sqlite_outbox import SqliteOutbox
from arena.engine.settlement import LogItem
from arena.journal.postgresql import PostgresBackend
from arena.journal.sqlite import SqliteBackend
from support.journals import Store


@pytest.fixture
async def outbox(store: Store) -> AsyncIterator[Outbox]:
    backend = store.backend()
    made: Outbox
    if isinstance(backend, PostgresBackend):
        made = PostgresOutbox(backend.store)
    else:
        assert isinstance(backend, SqliteBackend)
        made = SqliteOutbox(backend.data_dir)
    yield made
    await made.close()


def revision(board: str, revision: int, awards: int = 3) -> list[Delivery]:
    return deliveries("w", LogItem(revision + 1, board, "weekly", "2027-W01", None, revision, 10 + revision, "x", awards), 1000)


async def test_a_tables_revisions_are_due_in_order_and_only_for_the_boards_asked(outbox: Outbox) -> None:
    assert await outbox.start("w", 5) == 5
    assert await outbox.start("w", 9) == 5  # the first position stays
    made = revision("a", 0) + revision("a", 1) + revision("b", 0)
    await outbox.add("w", made, 8)
    await outbox.add("w", made[:1], 7)  # again: kept as it was; the position does not go back
    assert await outbox.cursors() == {"w": 8}
    due = await outbox.due(1000, 10, ["a", "b"])
    assert [d.id for d in due] == ["a/weekly/2027-W01/*/0", "b/weekly/2027-W01/*/0"]
    assert [d.id for d in await outbox.due(1000, 10, ["b"])] == ["b/weekly/2027-W01/*/0"]
    assert await outbox.due(999, 10, ["a", "b"]) == []

    first = due[0]
    await outbox.save(first.moved(Outcome.ERROR, 1000, backoff_seconds=1.0, error="HTTP 500"))
    assert [d.id for d in await outbox.due(1500, 10, ["a"])] == []  # r0 waits for its backoff, r1 for r0
    await outbox.save(first.moved(Outcome.FAILED, 1000, error="gone"))
    (second,) = await outbox.due(1500, 10, ["a"])
    assert second.id == "a/weekly/2027-W01/*/1"  # r0 failed: r1 goes
    await outbox.save(second.moved(Outcome.DELIVERED, 1600))
    assert await outbox.due(5000, 10, ["a"]) == []

    got = await outbox.get("w", "a/weekly/2027-W01/*/0")
    assert got is not None and (got.state, got.attempts, got.last_error) == (State.FAILED, 1, "gone")
    assert await outbox.get("w", "nope") is None
    assert await outbox.counts() == {"w": {State.FAILED: 1, State.DELIVERED: 1, State.PENDING: 1}}
    assert await outbox.pending() == {"w": (1, 1000)}

    listed = await outbox.listing("w", Listing(), 0, 2)
    assert [d.id for d in listed] == [d.id for d in made[:2]]
    rest = await outbox.listing("w", Listing(), listed[-1].place, 10)
    assert [d.id for d in rest] == [made[2].id]
    assert [d.id for d in await outbox.listing("w", Listing(State.DELIVERED), 0, 10)] == [second.id]
    table = Listing(board="a", period="weekly", period_id="2027-W01", partition="*")
    assert [d.id for d in await outbox.listing("w", table, 0, 10)] == [made[0].id, made[1].id]
    assert [d.id for d in await outbox.listing("w", Listing(State.PENDING, board="b"), 0, 10)] == [made[2].id]
    assert await outbox.listing("w", Listing(board="a", period_id="2027-W02"), 0, 10) == []
    assert await outbox.listing("w", Listing(board="a", partition="eu"), 0, 10) == []


async def test_pages_of_a_revision_are_due_one_after_the_other(outbox: Outbox) -> None:
    await outbox.start("w", 0)
    pages = revision("a", 0, awards=25_000)
    await outbox.add("w", pages, 1)
    (page,) = await outbox.due(1000, 10, ["a"])
    assert page.page == 1
    await outbox.save(page.moved(Outcome.DELIVERED, 1000))
    assert [d.page for d in await outbox.due(1000, 10, ["a"])] == [2]
