"""What the admin API asks of a board's actor: commands as values, run by the actor between two
batches (so that each sees a consistent board), and their outcomes. The actor dispatches on the
command's type (`arena.board.actor.BoardActor`); a command carries no code of its own."""

from __future__ import annotations

from dataclasses import dataclass

from arena.engine.spec import BoardSpec


@dataclass(frozen=True, slots=True)
class VoidEvent:
    """Void the event of idempotency key ``key`` (`POST /v1/boards/{board}/void`)."""

    key: str
    reason: str
    admin: str


@dataclass(frozen=True, slots=True)
class VoidMember:
    """Void every event of ``member`` not voided yet (`POST /v1/boards/{board}/members/{member}/void`)."""

    member: str
    reason: str
    admin: str


@dataclass(frozen=True, slots=True)
class Barrier:
    """Nothing but a turn in the mailbox: once answered, the actor has finished what came before it
    and closed what was due (the clock of the test routes)."""


@dataclass(frozen=True, slots=True)
class Redefine:
    """Serve ``spec`` from the next record on and journal it as a definition record
    (`PUT /v1/boards/{board}` on an API board). Refused with 409 `definition_conflict` when it
    changes a fixed field (`BoardSpec.fixed_changes`) of a board whose journal holds a record."""

    spec: BoardSpec


@dataclass(frozen=True, slots=True)
class Retire:
    """Close every open table and take no more events (`DELETE /v1/boards/{board}`)."""


Order = VoidEvent | VoidMember | Barrier | Redefine | Retire


@dataclass(frozen=True, slots=True)
class VoidOutcome:
    voided: int
    already_voided: bool = False
