"""A board as configured: its scoring rules, periods, bounds and prizes."""

from __future__ import annotations

from dataclasses import dataclass

from arena.engine.periods import PeriodKind
from arena.engine.prizes import Prizes, PrizeTier
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
    prizes: Prizes = ()
    """Prize tiers by period name (never alltime); they may change: not in `definition`."""

    def prize_tiers(self, period: str) -> tuple[PrizeTier, ...]:
        """The tiers of one period kind, in order; () when it has no prizes."""
        return next((tiers for name, tiers in self.prizes if name == period), ())

    def definition(self) -> dict[str, object]:
        """What the journal stores and start-up compares: changing it needs a new board name."""
        return {
            "aggregation": self.aggregation.value,
            "order": self.order.value,
            "tie": self.tie.value,
            "timezone": self.timezone,
            "periods": sorted(kind.value for kind in self.periods),
        }
