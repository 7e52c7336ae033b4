"""A board as configured: its scoring rules, periods, bounds and prizes."""

from __future__ import annotations

from dataclasses import dataclass

from arena.engine.periods import PeriodKind
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

    @property
    def kinds(self) -> tuple[str, ...]:
        """Every period of the board by name: its built-in kinds, then its custom periods."""
        return (*self.periods, *(c.name for c in self.custom_periods))

    def schedule(self) -> Schedule:
        """The windows of every period of the board."""
        return Schedule(self.timezone, self.periods, self.custom_periods)
    prizes: Prizes = ()
    """Prize tiers by period name (never alltime); they may change: not in `definition`."""

    def prize_tiers(self, period: str) -> tuple[PrizeTier, ...]:
        """The tiers of one period kind, in order; () when it has no prizes."""
        return next((tiers for name, tiers in self.prizes if name == period), ())

    def definition(self) -> dict[str, object]:
        """What the journal stores and start-up compares: changing it needs a new board name."""
        definition: dict[str, object] = {
            "aggregation": self.aggregation.value,
            "order": self.order.value,
            "tie": self.tie.value,
            "timezone": self.timezone,
            "periods": sorted(kind.value for kind in self.periods),
        }
        if self.custom_periods:  # absent otherwise: a board defined before custom periods keeps its definition
            definition["custom_periods"] = {c.name: c.definition() for c in self.custom_periods}
        return definition
