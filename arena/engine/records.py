"""What a board journals. Score events, close markers, voids and board records share one seq
order per board, so replaying the records in seq order is the whole truth."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from arena.engine.events import Event
from arena.engine.periods import Window


class ScoreRecord(NamedTuple):  # one per accepted event: cheap to build
    seq: int
    event: Event
    received_at: int
    source: str


@dataclass(frozen=True, slots=True)
class CloseRecord:
    """The close marker of one table: records with a greater seq are never applied to it."""

    seq: int
    window: Window
    closed_at: int


@dataclass(frozen=True, slots=True)
class VoidRecord:
    """An admin void of one journaled score event (``target_seq``)."""

    seq: int
    target_seq: int
    idempotency_key: str
    reason: str
    admin: str
    voided_at: int


class BoardKind:
    """The kinds of `BoardRecord`: one table holds them all (later issues add league records
    as further kinds, not further tables)."""

    DEFINITION = "definition"
    """The board's whole definition (`BoardSpec.document`) from this seq on: what a rebuild reads
    to know which bounds held when."""
    RETIRED = "retired"
    """The board takes no event after this seq (its open tables were closed just before)."""
    SETTLEMENT = "settlement"
    """A revision of a closed table's settlement (`arena.engine.settlement.SettlementRecord`)."""


@dataclass(frozen=True, slots=True)
class BoardRecord:
    """A record about the board itself rather than its scores: ``kind`` (`BoardKind`) and a
    JSON ``body``. Replay never re-validates score events against it."""

    seq: int
    kind: str
    body: str


Record = ScoreRecord | CloseRecord | VoidRecord | BoardRecord


@dataclass(frozen=True, slots=True)
class Voided:
    """The void record of a voided event, as the audit shows it (``at``: epoch ms)."""

    seq: int
    reason: str
    admin: str
    at: int


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """A journaled score event as the audit route shows it."""

    seq: int
    member: str
    value: int
    occurred_at: int
    received_at: int
    source: str
    idempotency_key: str
    meta: str | None
    voided: Voided | None
    region: str | None = None
