"""The webhooks' outbox: one delivery per (webhook, settlement revision, page), kept in the store
beside the journals and outside every board's seq order (DESIGN.md "Webhooks"). This module is
its rules, pure, and the interface of its stores (`arena.delivery.sqlite_outbox`,
`arena.delivery.postgresql_outbox`).

A delivery's life is a table (`MOVES`): it is made pending; an attempt that the receiver answers
2xx delivers it; a failed attempt leaves it pending with the next attempt `backoff_ms` later,
until `max_age_hours` after it was made (or retried), when it fails; an admin's retry makes a
delivered or failed one pending again.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from arena.config import WEBHOOK_BACKOFF_CAP_SECONDS
from arena.engine.settlement import LogItem
from arena.errors import IllegalTransition

PAGE_AWARDS = 10_000
"""Awards in one delivery: a revision with more is sent in pages of this many, each its own delivery."""
ERROR_CHARS = 500
"""The longest `Delivery.last_error` kept."""


class State(enum.StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class Outcome(enum.StrEnum):
    """What happens to a delivery (the ``outcome`` of ``arena_webhook_deliveries_total`` but `RETRY`)."""

    DELIVERED = "delivered"
    """The receiver answered 2xx."""
    ERROR = "error"
    """An attempt failed (an answer other than 2xx, a timeout, no connection); it is tried again."""
    FAILED = "failed"
    """An attempt failed past the delivery's max age: given up."""
    RETRY = "retry"
    """An admin asked for it again."""


MOVES: dict[State, dict[Outcome, State]] = {
    State.PENDING: {Outcome.DELIVERED: State.DELIVERED, Outcome.ERROR: State.PENDING, Outcome.FAILED: State.FAILED,
                    Outcome.RETRY: State.PENDING},
    State.DELIVERED: {Outcome.RETRY: State.PENDING},
    State.FAILED: {Outcome.RETRY: State.PENDING},
}


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of a webhook: a settlement revision of a table (``page``: which
    `PAGE_AWARDS` of its awards; None: all of them), and where it stands. Times are epoch ms;
    ``place`` is its position in the outbox (0 before it is stored): the order deliveries are listed in."""

    webhook: str
    board: str
    period: str
    period_id: str
    partition: str | None
    revision: int
    page: int | None
    created_at: int
    state: State = State.PENDING
    attempts: int = 0
    next_at: int = 0
    last_error: str | None = None
    delivered_at: int | None = None
    since_at: int = 0
    """When its max age started: when it was made, or when an admin retried it."""
    place: int = 0

    @property
    def id(self) -> str:
        """The ``Arena-Delivery`` header: the receiver's idempotency key."""
        return delivery_id(self.board, self.period, self.period_id, self.partition, self.revision, self.page)

    @property
    def table(self) -> tuple[str, str, str, str | None]:
        """The table it settles: its revisions reach a webhook in order."""
        return (self.board, self.period, self.period_id, self.partition)

    @property
    def offset(self) -> int:
        """The first of its awards (in rank order)."""
        return 0 if self.page is None else (self.page - 1) * PAGE_AWARDS

    def moved(self, outcome: Outcome, now: int, *, backoff_seconds: float = 0.0, error: str | None = None) -> Delivery:
        """The delivery after ``outcome`` at ``now``. Raises IllegalTransition for a move the table lacks."""
        state = MOVES[self.state].get(outcome)
        if state is None:
            raise IllegalTransition(f"delivery {self.id} to {self.webhook}: cannot {outcome} when {self.state}")
        if outcome is Outcome.DELIVERED:
            return replace(self, state=state, attempts=self.attempts + 1, last_error=None, delivered_at=now)
        if outcome is Outcome.RETRY:
            return replace(self, state=state, next_at=now, since_at=now, delivered_at=None)
        attempts = self.attempts + 1
        return replace(self, state=state, attempts=attempts, next_at=now + backoff_ms(attempts, backoff_seconds),
                       last_error=(error or "failed")[:ERROR_CHARS])

    def failed_outcome(self, now: int, max_age_hours: float) -> Outcome:
        """What a failed attempt at ``now`` makes of it: tried again, or given up past its max age."""
        return Outcome.FAILED if now - self.since_at >= max_age_hours * 3_600_000 else Outcome.ERROR

    def as_json(self) -> dict[str, object]:
        """The delivery as the admin routes answer it."""
        return {"delivery": self.id, "state": str(self.state), "attempts": self.attempts, "next_at": self.next_at,
                "last_error": self.last_error, "board": self.board, "period": self.period, "period_id": self.period_id,
                "partition": self.partition, "revision": self.revision, "page": self.page,
                "created_at": self.created_at, "delivered_at": self.delivered_at}


def delivery_id(board: str, period: str, period_id: str, partition: str | None, revision: int, page: int | None) -> str:
    """``<board>/<period>/<period_id>/<partition or *>/<revision>[/<page>]``."""
    key = f"{board}/{period}/{period_id}/{partition or '*'}/{revision}"
    return key if page is None else f"{key}/{page}"


def backoff_ms(attempts: int, first_seconds: float) -> int:
    """The wait after the ``attempts``-th failed attempt: ``first_seconds``, doubling, capped at
    `WEBHOOK_BACKOFF_CAP_SECONDS`."""
    return round(min(WEBHOOK_BACKOFF_CAP_SECONDS, first_seconds * 2.0 ** min(attempts - 1, 40)) * 1000)


def deliveries(webhook: str, item: LogItem, now: int) -> list[Delivery]:
    """The deliveries of settlement revision ``item`` to ``webhook``: none for an empty table, one
    for up to `PAGE_AWARDS` awards, else one per page (pages numbered from 1)."""
    if item.awards == 0:
        return []
    pages: Sequence[int | None] = [None] if item.awards <= PAGE_AWARDS else range(1, -(-item.awards // PAGE_AWARDS) + 1)
    return [Delivery(webhook, item.board, item.period, item.period_id, item.partition, item.revision, page, now,
                     next_at=now, since_at=now) for page in pages]


@dataclass(frozen=True, slots=True)
class Listing:
    """Which of a webhook's deliveries an admin listing gives: those in ``state`` and of the
    tables named by ``board``, ``period``, ``period_id`` and ``partition`` ('*': the global
    table); each None: any."""

    state: State | None = None
    board: str | None = None
    period: str | None = None
    period_id: str | None = None
    partition: str | None = None

    def params(self) -> tuple[str | None, ...]:
        """The values of `listed`'s placeholders, in order: each filter's twice (None: any)."""
        values = (None if self.state is None else str(self.state), self.board, self.period, self.period_id, self.partition)
        return tuple(v for value in values for v in (value, value))


def listed(mark: Callable[[int], str]) -> str:
    """The `Listing` filter of a store's listing query; ``mark(i)`` is the backend's placeholder
    of the i-th of `Listing.params` (from 0)."""
    columns = ("state", "board", "period", "period_id", "partition")
    return " AND ".join(f"(CAST({mark(2 * i)} AS TEXT) IS NULL OR {column} = {mark(2 * i + 1)})" for i, column in enumerate(columns))


COLUMNS = ("webhook, board, period, period_id, partition, revision, page, created_at, state, attempts, next_at,"
           " last_error, delivered_at, since_at, place")
"""The outbox's columns in `Delivery`'s field order (``partition`` '*': the global table)."""


def stored(delivery: Delivery) -> tuple[object, ...]:
    """``delivery`` as a row of `COLUMNS` with its id instead of its place: ``(*columns[:-1], delivery id)``."""
    d = delivery
    return (d.webhook, d.board, d.period, d.period_id, d.partition or "*", d.revision, d.page, d.created_at,
            str(d.state), d.attempts, d.next_at, d.last_error, d.delivered_at, d.since_at, d.id)


def from_row(row: Sequence[object]) -> Delivery:
    """A row of `COLUMNS` as a delivery."""
    values = list(row)
    values[4] = None if values[4] == "*" else values[4]
    values[8] = State(str(values[8]))
    return Delivery(*values)  # type: ignore[arg-type]  # the columns are the fields, in order


class Outbox(Protocol):
    """The deliveries of every webhook and how far each webhook has read the settlement log.
    Every method raises JournalError."""

    async def cursors(self) -> dict[str, int]:
        """Each webhook's position in the settlement log: the items up to it have their deliveries."""

    async def start(self, webhook: str, cursor: int) -> int:
        """Record ``cursor`` as ``webhook``'s position unless it has one; its position."""

    async def add(self, webhook: str, made: Sequence[Delivery], cursor: int) -> None:
        """Store ``made`` (those already there are kept as they are) and move ``webhook``'s
        position to ``cursor`` (never back), in one transaction."""

    async def due(self, now: int, limit: int, boards: Sequence[str]) -> list[Delivery]:
        """Up to ``limit`` pending deliveries of ``boards`` whose next attempt is at ``now`` or
        before, each the first pending one of its table (revision, then page) for its webhook."""

    async def save(self, delivery: Delivery) -> None:
        """Write ``delivery``'s state, attempts, times and error."""

    async def get(self, webhook: str, delivery: str) -> Delivery | None:
        """The delivery with that ``Arena-Delivery`` id."""

    async def listing(self, webhook: str, which: Listing, after: int, limit: int) -> list[Delivery]:
        """Up to ``limit`` of ``webhook``'s deliveries that ``which`` names, after place ``after``, in that order."""

    async def counts(self) -> dict[str, dict[State, int]]:
        """Each webhook's deliveries per state."""

    async def pending(self) -> dict[str, tuple[int, int]]:
        """Each webhook's pending deliveries: how many, and the oldest one's ``created_at``
        (read through the index on state: cheap however many were delivered)."""

    async def close(self) -> None:
        """Release what it holds."""
