"""A board as configured: its scoring rules, periods, bounds and prizes."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from arena.engine.league import LeagueSpec
from arena.engine.periods import PeriodKind, Window
from arena.engine.prizes import Prizes, PrizeTier
from arena.engine.schedule import CustomPeriod, Schedule
from arena.engine.scoring import Aggregation, Order, Tie


@dataclass(frozen=True, slots=True)
class BoardSpec:
    """A board as configured. Only `definition` is fixed for the life of its journal."""

    name: str
    aggregation: Aggregation = Aggregation.BEST
    order: Order = Order.DESC
    tie: Tie = Tie.EARLIEST
    periods: tuple[PeriodKind, ...] = (PeriodKind.ALLTIME,)
    timezone: str = "UTC"
    min_value: int = 0
    max_value: int = 1_000_000_000
    close_grace_ms: int = 60_000
    max_future_skew_ms: int = 30_000
    keep_closed: int = 3
    custom_periods: tuple[CustomPeriod, ...] = ()
    prizes: Prizes = ()
    """Prize tiers by period name (never alltime); they may change: not in `definition`."""
    metadata: str | None = None
    """A JSON object as compact text (title, category...): shown by `GET /v1/boards`, never ranked."""
    regions: tuple[str, ...] = ()
    """The board's regions in config order: each a partition of every window's table. Names may
    be appended, never removed (`fixed_changes`)."""
    regional_prizes: bool = False
    """Whether each region's table is settled too (the global table always is)."""
    league: LeagueSpec | None = None
    """A league's divisions partition the season's tables (`arena.engine.league`): its tiers are
    fixed; its size, promote and relegate may change and apply from the next window."""

    @property
    def kinds(self) -> tuple[str, ...]:
        """Every period of the board by name: its built-in kinds, then its custom periods."""
        return (*self.periods, *(c.name for c in self.custom_periods))

    def schedule(self) -> Schedule:
        """The windows of every period of the board."""
        return Schedule(self.timezone, self.periods, self.custom_periods)

    def close_moment(self, window: Window) -> int | None:
        """When a window's table closes: its end plus the grace; None for alltime."""
        return None if window.end_ms is None else window.end_ms + self.close_grace_ms

    def partitions(self) -> tuple[str, ...]:
        """The partitions of every window's table, in the order they list (regions today; a
        league's divisions are made by its members, not named here)."""
        return self.regions

    def prize_tiers(self, period: str) -> tuple[PrizeTier, ...]:
        """The tiers of one period kind, in order; () when it has no prizes."""
        return next((tiers for name, tiers in self.prizes if name == period), ())

    def definition(self) -> dict[str, object]:
        """The fixed fields: what the journal stores and start-up compares, and what a change
        may not touch once the board's journal holds a record (a new board name instead). Every
        other field of `document` may change and applies from the next record on."""
        definition: dict[str, object] = {
            "aggregation": self.aggregation.value,
            "order": self.order.value,
            "tie": self.tie.value,
            "timezone": self.timezone,
            "periods": sorted(kind.value for kind in self.periods),
        }
        if self.custom_periods:  # absent otherwise: a board defined before custom periods keeps its definition
            definition["custom_periods"] = {c.name: c.definition() for c in self.custom_periods}
        if self.league is not None:  # its tiers: size, promote and relegate apply from the next window
            definition["league"] = {"tiers": list(self.league.tiers)}
        return definition

    @property
    def season(self) -> str | None:
        """A league board's season: its one period kind besides alltime; None without a league."""
        return None if self.league is None else next(kind for kind in self.kinds if kind != PeriodKind.ALLTIME)

    def fixed_changes(self, other: BoardSpec) -> list[str]:
        """The keys of `definition` that ``other`` changes: a change of a board whose journal
        holds records must leave this empty. The one place that tells fixed from mutable."""
        mine, theirs = self.definition(), other.definition()
        changes = [key for key in sorted(mine.keys() | theirs.keys()) if mine.get(key) != theirs.get(key)]
        if other.regions[: len(self.regions)] != self.regions:
            changes.append("regions")
        return changes

    def document(self) -> dict[str, object]:
        """The whole definition with the keys of a ``[boards.NAME]`` table, as `PUT /v1/boards/{board}`
        takes it and `GET .../definition` answers it: `arena.config.parse_board` reads it back to
        an equal spec."""
        document: dict[str, object] = {
            "aggregation": self.aggregation.value,
            "order": self.order.value,
            "tie": self.tie.value,
            "periods": [kind.value for kind in self.periods],
            "timezone": self.timezone,
            "min_value": self.min_value,
            "max_value": self.max_value,
            "close_grace_seconds": self.close_grace_ms // 1000,
            "max_future_skew_seconds": self.max_future_skew_ms // 1000,
            "keep_closed": self.keep_closed,
        }
        if self.custom_periods:
            document["custom_periods"] = {c.name: c.definition() for c in self.custom_periods}
        if self.prizes:
            document["prizes"] = {period: [tier.as_json() for tier in tiers] for period, tiers in self.prizes}
        if self.regions:
            document["regions"] = list(self.regions)
        if self.regional_prizes:
            document["regional_prizes"] = True
        if self.league is not None:
            document["league"] = self.league.document()
        if self.metadata is not None:
            document["metadata"] = orjson.loads(self.metadata)
        return document

    def document_text(self) -> str:
        """`document` as sorted-key JSON: what a definition record journals and the catalog
        stores, so that two equal definitions have equal texts."""
        return orjson.dumps(self.document(), option=orjson.OPT_SORT_KEYS).decode()
