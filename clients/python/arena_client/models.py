"""The values the client takes and returns (events, submit results, tables, counters) and the
parsing of the server's answer bodies into them."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from typing import Any, NotRequired, TypeAlias, TypedDict

from arena_client.errors import EventRejected

OccurredAt: TypeAlias = int | str | datetime
"""Epoch milliseconds, an RFC 3339 string with an offset, or an aware `datetime`."""

Json: TypeAlias = None | bool | int | float | str | Sequence["Json"] | Mapping[str, "Json"]
"""A JSON value, such as an event's ``meta``."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)


class SubmitStatus(StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class SubmitResult:
    """The server's answer for one event. ``duplicate`` means it was already journaled (a retry
    of an event the server had recorded): as good as ``accepted``."""

    idempotency_key: str
    status: SubmitStatus
    reason: str | None = None
    message: str | None = None
    """A rejection's line for a person (the field and the rule); match on ``reason``, never on it."""

    @property
    def recorded(self) -> bool:
        """True when the event is in the journal: accepted now, or before (duplicate)."""
        return self.status is not SubmitStatus.REJECTED

    def raise_for_status(self) -> SubmitResult:
        """Return self, or raise `EventRejected` when the event was rejected."""
        if self.status is SubmitStatus.REJECTED:
            raise EventRejected(self.reason or "rejected", self.idempotency_key, self.message)
        return self


@dataclass(frozen=True, slots=True)
class ScoreEvent:
    """One event for `ArenaClient.submit_many`. ``occurred_at`` defaults to now and
    ``idempotency_key`` to a new UUIDv7, both fixed when the event is submitted."""

    board: str
    member: str
    value: int
    occurred_at: OccurredAt | None = None
    idempotency_key: str | None = None
    meta: Mapping[str, Json] | None = None
    region: str | None = None
    """One of the board's regions: the event counts in that region's table too."""


class EventFields(TypedDict):
    """A `ScoreEvent` as a mapping, for `ArenaClient.submit_many`: the same names."""

    board: str
    member: str
    value: int
    occurred_at: NotRequired[OccurredAt | None]
    idempotency_key: NotRequired[str | None]
    meta: NotRequired[Mapping[str, Json] | None]
    region: NotRequired[str | None]


@dataclass(frozen=True, slots=True)
class Entry:
    """One row of a table."""

    rank: int
    member: str
    score: int
    reached_at: datetime  # aware, UTC, millisecond precision

    @property
    def reached_at_ms(self) -> int:
        return to_ms(self.reached_at)


@dataclass(frozen=True, slots=True)
class TableInfo:
    """Which table answered: one window of one period kind of a board."""

    board: str
    period: str
    period_id: str
    start: datetime | None  # None for alltime
    end: datetime | None
    closed: bool
    size: int
    seq: int
    """The board's last journal seq the answer reflects: it holds every event acked before the
    query was sent, and on one connection answers about one board never go back in seq."""
    partition: str | None = field(default=None, kw_only=True)
    """The partition of the window's table that answered (a region); None: the global table."""


@dataclass(frozen=True, slots=True)
class Table(TableInfo):
    """A slice of standings (`ArenaClient.top`, `ArenaClient.around`)."""

    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class Members(TableInfo):
    """A set of members, such as a player's friends (`ArenaClient.members`): those in the table
    in rank order, each with its global rank, and the others in ``missing`` (first occurrences,
    in the order asked)."""

    entries: tuple[Entry, ...]
    missing: tuple[str, ...]
    divisions: Mapping[str, str | None] = field(default_factory=dict, kw_only=True)
    """On a league board's global table, each entry's member's division (None: none yet);
    empty elsewhere."""


@dataclass(frozen=True, slots=True)
class Standing(TableInfo):
    """One member's row (`ArenaClient.rank`); ``entry`` is None while the member is not in the
    table (no event of it counts there yet): a state, not an error."""

    entry: Entry | None
    division: str | None = field(default=None, kw_only=True)
    """On a league board's global table, the member's division in the window (such as
    ``silver-2``); None while it has none, and on any other table."""


@dataclass(frozen=True, slots=True)
class Percentile(TableInfo):
    """One member's row and ``top_percent`` = 100 * rank / size (rank 1 of 1000: 0.1). Both are
    None in a live update while the member is not in the table (`ArenaClient.percentile` raises
    `QueryFailed` member_not_found instead)."""

    entry: Entry | None
    top_percent: float | None


@dataclass(frozen=True, slots=True)
class ScoreAtPercentile(TableInfo):
    """The entry at rank ceil(p / 100 * size); None on an empty table."""

    p: float
    entry: Entry | None


@dataclass(frozen=True, slots=True)
class ClientStats:
    """Counters since the client was created (a snapshot)."""

    frames_sent: int  # submit frames
    events_sent: int  # events in those frames, resends included
    events_resent: int  # after a reconnect or an `unavailable` answer
    queries_sent: int
    connections: int  # successful handshakes
    peak_in_flight: int  # most frames sent and not yet answered at one time


def new_idempotency_key() -> str:
    """A new UUIDv7 string: 48 bits of epoch milliseconds, then 74 random bits. Unique (the
    random part) and time-ordered, which keeps the journal's key index append-mostly."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64 | 0b10 << 62 | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def to_ms(moment: datetime) -> int:
    """Epoch milliseconds of an aware datetime. Raises ValueError for a naive one."""
    if moment.tzinfo is None:
        raise ValueError("occurred_at must be an aware datetime (with a timezone)")
    return (moment - _EPOCH) // _MS


def _from_rfc3339(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _optional_time(text: str | None) -> datetime | None:
    return None if text is None else _from_rfc3339(text)


def parse_entry(body: Mapping[str, Any]) -> Entry:
    """An `Entry` from an entry of a query answer."""
    return Entry(body["rank"], body["member"], body["score"], _from_rfc3339(body["reached_at"]))


def parse_info(body: Mapping[str, Any]) -> dict[str, Any]:
    """The `TableInfo` fields of a query answer, as keyword arguments for its subclasses."""
    return {
        "board": body["board"],
        "period": body["period"],
        "period_id": body["period_id"],
        "start": _optional_time(body["start"]),
        "end": _optional_time(body["end"]),
        "closed": body["closed"],
        "size": body["size"],
        "seq": body["seq"],
        "partition": body.get("partition"),
    }



@dataclass(frozen=True, slots=True)
class SettlementItem:
    """One settlement revision in the feed (`ArenaClient.settlements`): its ``cursor`` (its
    position in the server's settlement log) and its header. ``partition`` None: the global
    table; ``awards``: how many (read them with the table's settlement route, and check them
    against ``sha256``); ``seq``: the board's journal seq of the revision."""

    cursor: int
    board: str
    period: str
    period_id: str
    partition: str | None
    revision: int
    seq: int
    sha256: str
    awards: int

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> SettlementItem:
        return cls(item["cursor"], item["board"], item["period"], item["period_id"], item["partition"], item["revision"],
                   item["seq"], item["sha256"], item["awards"])
