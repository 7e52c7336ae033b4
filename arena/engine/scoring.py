"""How a board turns a member's events into one score, and how scores are ordered.

Everything here is a pure function chosen once per board (`ScoringRule.for_board`), so the live
actor and `arena rebuild` share one definition of a standing.

A standing is ``(score, reached_at, latest_key)``: ``latest_key`` is only used by the ``latest``
aggregation, where equal ``occurred_at`` instants are decided by the greater idempotency key.
Each standing maps to one packed integer sort key, so a table orders ``(sort_key, member)``
tuples: score first, then the tie rule on ``reached_at``, then the member string.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from operator import itemgetter
from typing import Any

from arena.engine.rankkey import pack, pack_all


class Aggregation(StrEnum):
    BEST = "best"
    SUM = "sum"
    LATEST = "latest"


class Order(StrEnum):
    DESC = "desc"
    ASC = "asc"


class Tie(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"


Standing = tuple[int, int, str]
"""(score, reached_at_ms, latest_key) — latest_key is "" except for the latest aggregation."""

Fold = Callable[[Standing | None, int, int, str], Standing | None]
"""fold(current, value, occurred_at, key) -> the new standing, or None when it does not change."""

Update = Any
"""What one event brings to a member's state in every table it goes to (`ScoringRule.update`):
made once per event and shared by those tables."""

State = Any
"""A member's state in a table being built or applied to: a packed entry (`rankkey.pack`) for a
rule that `improves_by_key`, a `Standing` otherwise."""

FoldRow = tuple[str, int, int, str, int]
"""(member, score, reached_at, key, events): a member's events folded by `ScoringRule.fold`
(key: the deciding idempotency key of ``latest``, else ""), and how many there were. It folds
into a standing as one event of value ``score`` at ``reached_at`` with ``key`` would, which is
what lets a journal fold events in its own query engine (`arena.journal.FoldingJournal`)."""

_SHIFT = 64
_OFFSET = 1 << 63
_MASK = (1 << 64) - 1


def _fold_best_high(cur: Standing | None, value: int, occurred_at: int, key: str) -> Standing | None:
    if cur is None or value > cur[0] or (value == cur[0] and occurred_at < cur[1]):
        return (value, occurred_at, "")
    return None


def _fold_best_low(cur: Standing | None, value: int, occurred_at: int, key: str) -> Standing | None:
    if cur is None or value < cur[0] or (value == cur[0] and occurred_at < cur[1]):
        return (value, occurred_at, "")
    return None


def _fold_sum(cur: Standing | None, value: int, occurred_at: int, key: str) -> Standing | None:
    if cur is None:
        return (value, occurred_at, "")
    return (cur[0] + value, occurred_at if occurred_at > cur[1] else cur[1], "")


def _fold_latest(cur: Standing | None, value: int, occurred_at: int, key: str) -> Standing | None:
    if cur is None or occurred_at > cur[1] or (occurred_at == cur[1] and key > cur[2]):
        return (value, occurred_at, key)
    return None


def _merge_entry(cur: bytes | None, entry: bytes) -> bytes | None:
    return entry if cur is None or entry < cur else None


def _merging(fold: Fold) -> Callable[[Standing | None, tuple[int, int, str]], Standing | None]:
    def merge(cur: Standing | None, update: tuple[int, int, str]) -> Standing | None:
        return fold(cur, update[0], update[1], update[2])

    return merge


@dataclass(frozen=True, slots=True)
class ScoringRule:
    """The aggregation, order and tie rule of one board.

    ``fold`` folds one event into a member's standing; ``sort_key`` packs a standing into an
    integer whose ascending order is the rank order (ties left to the member string).
    ``improves_by_key``: ``fold`` changes a standing exactly when the event's own sort key is
    smaller than the standing's (best with the earliest tie), so a table may compare keys
    instead of folding.

    ``update`` and ``merge`` are the one way the live tables, a replay and a table build fold
    events: ``merge(state, update(member, value, occurred_at, key))`` is the member's new
    `State`, or None when the event does not change it. For a rule that `improves_by_key` the
    state is the packed entry itself, so merging is one bytes comparison and the tables an event
    goes to share its entry object.
    """

    aggregation: Aggregation
    order: Order
    tie: Tie
    fold: Fold
    score_sign: int
    reached_sign: int
    improves_by_key: bool
    merge: Callable[[State | None, Update], State | None]

    @classmethod
    def for_board(cls, aggregation: Aggregation, order: Order, tie: Tie) -> ScoringRule:
        if aggregation is Aggregation.BEST:
            fold: Fold = _fold_best_high if order is Order.DESC else _fold_best_low
        elif aggregation is Aggregation.SUM:
            fold = _fold_sum
        else:
            fold = _fold_latest
        improves_by_key = aggregation is Aggregation.BEST and tie is Tie.EARLIEST
        return cls(
            aggregation=aggregation,
            order=order,
            tie=tie,
            fold=fold,
            score_sign=-1 if order is Order.DESC else 1,
            reached_sign=1 if tie is Tie.EARLIEST else -1,
            improves_by_key=improves_by_key,
            merge=_merge_entry if improves_by_key else _merging(fold),
        )

    def update(self, member: str, value: int, occurred_at: int, key: str) -> Update:
        """What one event brings to every table it goes to (see the class docstring). O(1)."""
        if self.improves_by_key:
            return pack(self.sort_key(value, occurred_at), member)
        return (value, occurred_at, key)

    def states(self, standings: Sequence[FoldRow], into: dict[str, State] | None = None) -> dict[str, State]:
        """The states of members each given once as (member, score, reached_at, key, _): what
        ``merge(None, update(member, score, reached_at, key))`` makes of each, in bulk, added to
        ``into`` (a new dict by default), which is returned. Each is also that update:
        ``merge(state, it)`` folds the row into another state. O(n)."""
        into = {} if into is None else into
        if not self.improves_by_key:
            into.update((member, (score, reached_at, key)) for member, score, reached_at, key, _ in standings)
            return into
        members = list(map(itemgetter(0), standings))  # a tenth of unpacking each row's tail
        shift, score_sign, reached_sign = _SHIFT, self.score_sign, self.reached_sign
        keys = [((score * score_sign) << shift) + reached_at * reached_sign + _OFFSET for _, score, reached_at, _, _ in standings]
        into.update(zip(members, pack_all(keys, members), strict=True))
        return into

    def sort_key(self, score: int, reached_at: int) -> int:
        """Pack a standing into one int ordered like the ranks. O(1)."""
        return ((score * self.score_sign) << _SHIFT) + reached_at * self.reached_sign + _OFFSET

    def unpack(self, sort_key: int) -> tuple[int, int]:
        """The (score, reached_at) a sort key was packed from. O(1)."""
        return (
            (sort_key >> _SHIFT) * self.score_sign,
            ((sort_key & _MASK) - _OFFSET) * self.reached_sign,
        )
