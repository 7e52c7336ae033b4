"""A board's periods: the built-in calendar kinds it keeps and its own named custom periods.

Custom periods (DESIGN.md, "Custom periods") have three window rules:

- `EveryDays`: windows of N local days from a local anchor date, each starting at the local
  midnight of ``anchor + k·N days`` (k >= 0) exactly as a daily window starts (`Calendar.day_start`:
  where midnight is skipped, when the clock jumps); ``period_id`` is the local start date.
- `EveryHours`: windows of exactly N hours of absolute time from an anchor instant; ``period_id`` is
  the UTC start hour with ``Z`` (``2026-01-05T06Z``).
- `OneOff`: one window ``[start, end)``, a tournament; ``period_id`` as for `EveryHours`.

Unlike a built-in kind, a custom period has gaps: no window before its anchor, none outside a
tournament. A `Schedule` answers every period of one board by its name, built-in or custom, with
one interface (`window_at`, `window_by_id`, `previous`, `next`, `current`), so callers never tell
the two apart. Errors as in `arena.engine.periods`: ``ValueError`` when no window holds an instant
or follows a window, `UnknownPeriod` for an id naming no window.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Final, Protocol

from arena.engine.periods import Calendar, PeriodKind, UnknownPeriod, Window
from arena.engine.times import MAX_MS, format_ms, parse_rfc3339_ms

__all__ = ["CustomPeriod", "EveryDays", "EveryHours", "OneOff", "Schedule"]

_HOUR_MS: Final = 3_600_000
_DATE_ID = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
_HOUR_ID = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2})Z", re.ASCII)


@dataclass(frozen=True, slots=True)
class EveryDays:
    days: int
    anchor: date


@dataclass(frozen=True, slots=True)
class EveryHours:
    hours: int
    anchor_ms: int


@dataclass(frozen=True, slots=True)
class OneOff:
    start_ms: int
    end_ms: int


@dataclass(frozen=True, slots=True)
class CustomPeriod:
    """A board's named period and the rule of its windows."""

    name: str
    rule: EveryDays | EveryHours | OneOff

    def definition(self) -> dict[str, object]:
        """The rule as stored in the board's definition (and accepted back by the config parser)."""
        rule = self.rule
        if isinstance(rule, EveryDays):
            return {"every_days": rule.days, "anchor": rule.anchor.isoformat()}
        if isinstance(rule, EveryHours):
            return {"every_hours": rule.hours, "anchor": format_ms(rule.anchor_ms)}
        return {"start": format_ms(rule.start_ms), "end": format_ms(rule.end_ms)}


def _hour_id(ms: int) -> str:
    """The ``period_id`` of a custom window starting at ``ms``: its UTC start hour with ``Z``."""
    return format_ms(ms)[:13] + "Z"


class _Windows(Protocol):
    """The windows of one custom period."""

    def window_at(self, ms: int) -> Window: ...
    def window_by_id(self, period_id: str) -> Window: ...
    def previous(self, window: Window) -> Window: ...
    def next(self, window: Window) -> Window: ...
    def first(self) -> Window: ...


class _EveryDaysWindows:
    __slots__ = ("name", "days", "anchor", "calendar")

    def __init__(self, name: str, rule: EveryDays, calendar: Calendar) -> None:
        self.name, self.days, self.anchor, self.calendar = name, rule.days, rule.anchor, calendar

    def _window(self, k: int) -> Window:
        """The k-th window; an empty one (every day of it skipped) raises ``ValueError``."""
        if k < 0:
            raise ValueError(f"{self.name}: no window before its anchor {self.anchor}")
        try:
            first = self.anchor + timedelta(days=k * self.days)
            start = self.calendar.day_start(first)
            end = self.calendar.day_start(first + timedelta(days=self.days))
        except OverflowError as exc:
            raise ValueError(f"{self.name}: window {k} is outside the supported years") from exc
        if start == end or end > MAX_MS:
            raise ValueError(f"{self.name}: no window starting on {first} in {self.calendar.timezone}")
        return Window(self.name, first.isoformat(), start, end)

    def _index(self, window: Window) -> int:
        return (date.fromisoformat(window.period_id) - self.anchor).days // self.days

    def window_at(self, ms: int) -> Window:
        day = date.fromisoformat(self.calendar.window_at(PeriodKind.DAILY, ms).period_id)
        return self._window((day - self.anchor).days // self.days)

    def window_by_id(self, period_id: str) -> Window:
        if not _DATE_ID.fullmatch(period_id):
            raise UnknownPeriod(f"not a {self.name} period id (a local start date): {period_id!r}")
        try:
            offset = (date.fromisoformat(period_id) - self.anchor).days
            if offset % self.days:
                raise ValueError(f"{period_id} does not start a window")
            return self._window(offset // self.days)
        except ValueError as exc:
            raise UnknownPeriod(f"no {self.name} period {period_id!r}: {exc}") from exc

    def previous(self, window: Window) -> Window:
        return self._step(self._index(window), -1)

    def next(self, window: Window) -> Window:
        return self._step(self._index(window), 1)

    def first(self) -> Window:
        return self._step(-1, 1)

    def _step(self, k: int, n: int) -> Window:
        """The first non-empty window after (n = 1) or before (n = -1) the k-th: the next one, or
        the one after it when every day of the next is skipped (Pacific/Apia's 2011-12-30)."""
        try:
            return self._window(k + n)
        except ValueError:
            if k + n < 0:
                raise
            return self._window(k + 2 * n)


class _EveryHoursWindows:
    __slots__ = ("name", "span", "anchor")

    def __init__(self, name: str, rule: EveryHours) -> None:
        self.name, self.span, self.anchor = name, rule.hours * _HOUR_MS, rule.anchor_ms

    def _window(self, k: int) -> Window:
        start = self.anchor + k * self.span
        if k < 0 or start + self.span > MAX_MS:
            raise ValueError(f"{self.name}: no window {k}")
        return Window(self.name, _hour_id(start), start, start + self.span)

    def window_at(self, ms: int) -> Window:
        return self._window((ms - self.anchor) // self.span)

    def window_by_id(self, period_id: str) -> Window:
        m = _HOUR_ID.fullmatch(period_id)
        try:
            if m is None:
                raise ValueError("not a UTC start hour like 2026-01-05T06Z")
            hour = parse_rfc3339_ms(m.group(1) + ":00:00Z")
            window = self._window(max(0, -((self.anchor - hour) // self.span)))
        except ValueError as exc:
            raise UnknownPeriod(f"no {self.name} period {period_id!r}: {exc}") from exc
        if window.period_id != period_id:
            raise UnknownPeriod(f"no {self.name} period starts in the hour {period_id!r}")
        return window

    def previous(self, window: Window) -> Window:
        assert window.start_ms is not None
        return self._window((window.start_ms - self.anchor) // self.span - 1)

    def next(self, window: Window) -> Window:
        assert window.start_ms is not None
        return self._window((window.start_ms - self.anchor) // self.span + 1)

    def first(self) -> Window:
        return self._window(0)


class _OneOffWindows:
    __slots__ = ("window",)

    def __init__(self, name: str, rule: OneOff) -> None:
        self.window = Window(name, _hour_id(rule.start_ms), rule.start_ms, rule.end_ms)

    def window_at(self, ms: int) -> Window:
        assert self.window.start_ms is not None and self.window.end_ms is not None
        if not self.window.start_ms <= ms < self.window.end_ms:
            raise ValueError(f"{self.window.kind}: {ms} ms is outside its window")
        return self.window

    def window_by_id(self, period_id: str) -> Window:
        if period_id != self.window.period_id:
            raise UnknownPeriod(f"{self.window.kind} has one period, {self.window.period_id}, not {period_id!r}")
        return self.window

    def previous(self, window: Window) -> Window:
        raise ValueError(f"{self.window.kind} has one window")

    next = previous

    def first(self) -> Window:
        return self.window


class Schedule:
    """The windows of every period of one board, by period name. Not thread-safe (one per actor,
    like its `Calendar`). Costs: as `Calendar` for a built-in kind; O(1) for a custom period."""

    __slots__ = ("calendar", "kinds", "_custom")

    def __init__(self, timezone: str, periods: Sequence[PeriodKind], custom: Sequence[CustomPeriod] = ()) -> None:
        self.calendar = Calendar(timezone)
        self.kinds: tuple[str, ...] = (*periods, *(c.name for c in custom))
        """Every period of the board: its built-in kinds, then its custom periods."""
        self._custom: dict[str, _Windows] = {c.name: _windows(c, self.calendar) for c in custom}

    def window_at(self, kind: str, ms: int) -> Window:
        """The window of ``kind`` that holds ``ms``; ``ValueError`` when there is none."""
        custom = self._custom.get(kind)
        if custom is None:
            return self.calendar.window_at(kind, ms)
        return custom.window_at(ms)

    def window_by_id(self, kind: str, period_id: str) -> Window:
        """The window of ``kind`` named ``period_id``; `UnknownPeriod` when there is none."""
        custom = self._custom.get(kind)
        if custom is None:
            return self.calendar.window_by_id(kind, period_id)
        if not isinstance(period_id, str):
            raise UnknownPeriod(f"period id must be a string, got {period_id!r}")
        return custom.window_by_id(period_id)

    def previous(self, window: Window) -> Window:
        """The window of the same period before ``window``; ``ValueError`` when there is none."""
        custom = self._custom.get(window.kind)
        return self.calendar.previous(window) if custom is None else custom.previous(window)

    def next(self, window: Window) -> Window:
        """The window of the same period after ``window``; ``ValueError`` when there is none."""
        custom = self._custom.get(window.kind)
        return self.calendar.next(window) if custom is None else custom.next(window)

    def current(self, kind: str, now: int) -> Window:
        """The window a route without ``period_id`` names: the one holding ``now``; for a custom
        period in a gap, the next one (open and empty); after its last, the last one."""
        try:
            return self.window_at(kind, now)
        except ValueError:
            custom = self._custom.get(kind)
            if custom is None:
                raise
        # Custom windows follow each other without a gap from the first one to the end of the
        # supported years, except a one-off's single window: outside them is before the first
        # window or after a one-off's, and both name the first.
        return custom.first()

    def gap_at(self, kind: str, ms: int) -> tuple[float, float] | None:
        """Where `window_at` has no window of ``kind`` for ``ms``: the span around it that no
        window holds (before a custom period's first window, after a one-off's), or None when
        a window holds ``ms`` but cannot be named (the unsupported hours at the ends of the
        supported years: a window long closed, or never to open)."""
        custom = self._custom.get(kind)
        if custom is None:
            return None
        first = custom.first()
        assert first.start_ms is not None and first.end_ms is not None
        if ms < first.start_ms:
            return -math.inf, first.start_ms
        try:
            custom.next(first)
        except ValueError:
            return first.end_ms, math.inf
        return None


def _windows(period: CustomPeriod, calendar: Calendar) -> _Windows:
    rule = period.rule
    if isinstance(rule, EveryDays):
        return _EveryDaysWindows(period.name, rule, calendar)
    if isinstance(rule, EveryHours):
        return _EveryHoursWindows(period.name, rule)
    return _OneOffWindows(period.name, rule)
