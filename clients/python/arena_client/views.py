"""The table queries as values: each view names its op and fields (``partition``: a region's
table of the window; default the global one) and turns the server's answer into its dataclass.
A query (`ArenaClient.top`...) asks a view once; `ArenaClient.subscribe`
follows one, and every update is parsed by the same view, so an update is the query's answer."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from arena_client.models import (
    Entry,
    Members,
    Percentile,
    ScoreAtPercentile,
    Standing,
    Table,
    parse_entry,
    parse_info,
)

T_co = TypeVar("T_co", covariant=True)


class View(ABC, Generic[T_co]):
    """A table query: `fields` is what goes on the wire, `parse` reads an answer (a
    query's result or a live update) into the view's dataclass."""

    __slots__ = ()
    op: ClassVar[str]

    @abstractmethod
    def fields(self) -> dict[str, object]:
        """The query's fields besides ``op`` (None values are left out)."""

    @abstractmethod
    def parse(self, body: Mapping[str, Any]) -> T_co:
        """The answer ``body`` as the view's dataclass."""

    def frame_fields(self) -> dict[str, object]:
        return {"op": self.op, **{k: v for k, v in self.fields().items() if v is not None}}


def _entry_or_none(body: Mapping[str, Any]) -> Entry | None:
    found = body.get("entry")
    return None if found is None else parse_entry(found)


def _table(body: Mapping[str, Any]) -> Table:
    return Table(**parse_info(body), entries=tuple(parse_entry(e) for e in body["entries"]))


@dataclass(frozen=True, slots=True)
class TopView(View[Table]):
    """Ranks offset+1 .. offset+limit (limit 1..1000)."""

    op: ClassVar[str] = "top"
    board: str
    period: str
    limit: int = 10
    offset: int = 0
    period_id: str | None = None
    partition: str | None = None

    def fields(self) -> dict[str, object]:
        return {"board": self.board, "period": self.period, "limit": self.limit, "offset": self.offset,
                "period_id": self.period_id,
                "partition": self.partition}

    def parse(self, body: Mapping[str, Any]) -> Table:
        return _table(body)


@dataclass(frozen=True, slots=True)
class RankView(View[Standing]):
    """One member's row; ``entry`` None while the member is not in the table."""

    op: ClassVar[str] = "rank"
    board: str
    period: str
    member: str
    period_id: str | None = None
    partition: str | None = None

    def fields(self) -> dict[str, object]:
        return {"board": self.board, "period": self.period, "member": self.member, "period_id": self.period_id,
                "partition": self.partition}

    def parse(self, body: Mapping[str, Any]) -> Standing:
        return Standing(**parse_info(body), entry=_entry_or_none(body), division=body.get("division"))


@dataclass(frozen=True, slots=True)
class RankQuery(View[Standing]):
    """`ArenaClient.rank` on the wire: the ``members`` op with one member, which answers a member
    not in the table as the live view does (``entry`` None) where the ``rank`` op answers
    member_not_found, and in one round trip."""

    op: ClassVar[str] = "members"
    view: RankView

    def fields(self) -> dict[str, object]:
        return {"board": self.view.board, "period": self.view.period, "members": [self.view.member],
                "period_id": self.view.period_id, "partition": self.view.partition}

    def parse(self, body: Mapping[str, Any]) -> Standing:
        entries = body["entries"]
        division = body.get("divisions", {}).get(self.view.member)
        return Standing(**parse_info(body), entry=parse_entry(entries[0]) if entries else None, division=division)


@dataclass(frozen=True, slots=True)
class AroundView(View[Table]):
    """The entries within ``radius`` (0..100) ranks of ``member`` or of ``rank`` (exactly one),
    clipped at both ends; no entries while the member is not in the table."""

    op: ClassVar[str] = "around"
    board: str
    period: str
    member: str | None = None
    rank: int | None = None
    radius: int = 5
    period_id: str | None = None
    partition: str | None = None

    def __post_init__(self) -> None:
        if (self.member is None) == (self.rank is None):
            raise ValueError("give exactly one of member or rank")

    def fields(self) -> dict[str, object]:
        return {"board": self.board, "period": self.period, "member": self.member, "rank": self.rank,
                "radius": self.radius, "period_id": self.period_id,
                "partition": self.partition}

    def parse(self, body: Mapping[str, Any]) -> Table:
        return _table(body)


@dataclass(frozen=True, slots=True)
class PercentileView(View[Percentile]):
    """A member's row and top_percent (100 * rank / size)."""

    op: ClassVar[str] = "percentile"
    board: str
    period: str
    member: str
    period_id: str | None = None
    partition: str | None = None

    def fields(self) -> dict[str, object]:
        return {"board": self.board, "period": self.period, "member": self.member, "period_id": self.period_id,
                "partition": self.partition}

    def parse(self, body: Mapping[str, Any]) -> Percentile:
        return Percentile(**parse_info(body), entry=_entry_or_none(body), top_percent=body.get("top_percent"))


@dataclass(frozen=True, slots=True)
class ScoreAtPercentileView(View[ScoreAtPercentile]):
    """The entry at rank ceil(p / 100 * size), 0 < p <= 100 (None on an empty table)."""

    op: ClassVar[str] = "score_at_percentile"
    board: str
    period: str
    p: float
    period_id: str | None = None
    partition: str | None = None

    def fields(self) -> dict[str, object]:
        return {"board": self.board, "period": self.period, "p": self.p, "period_id": self.period_id,
                "partition": self.partition}

    def parse(self, body: Mapping[str, Any]) -> ScoreAtPercentile:
        return ScoreAtPercentile(**parse_info(body), p=body["p"], entry=_entry_or_none(body))


@dataclass(frozen=True, slots=True)
class MembersView(View[Members]):
    """A set of members (1..1000), such as a player's friends: those in the table in rank order,
    with their global rank, and the others in ``missing``."""

    op: ClassVar[str] = "members"
    board: str
    period: str
    members: tuple[str, ...]
    period_id: str | None = None
    partition: str | None = None

    def fields(self) -> dict[str, object]:
        return {"board": self.board, "period": self.period, "members": list(self.members), "period_id": self.period_id,
                "partition": self.partition}

    def parse(self, body: Mapping[str, Any]) -> Members:
        return Members(**parse_info(body), entries=tuple(parse_entry(e) for e in body["entries"]),
                       missing=tuple(body["missing"]), divisions=body.get("divisions", {}))
