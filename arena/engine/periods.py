"""Period windows: which hourly, daily, weekly, monthly and yearly table an instant belongs to.

A board's windows are aligned in its IANA timezone and half-open, ``[start_ms, end_ms)``. One rule
defines all of them, DST included: the window of a local unit (an hour, a date, an ISO week from
Monday 00:00, a month) starts at the first instant at which the local wall clock reads at least the
unit's first local time, and ends where the next unit starts (a year starts on January 1st). Consequences:

- where local midnight does not exist (a jump at 00:00), the day starts when the clock jumps;
- a repeated local hour (clocks going back) is one hourly window of two hours — it ends at the
  first instant the clock reads the next hour, after the repetition;
- a skipped local hour (or day: Pacific/Apia 2011-12-30) has an empty window, so it has no window at
  all: :meth:`Calendar.window_by_id` raises :class:`UnknownPeriod`, :meth:`Calendar.window_at`
  never returns it, and :meth:`Calendar.next`/:meth:`Calendar.previous` step over it;
- partial shifts are handled the same way: Australia/Lord_Howe's 02:00 -> 02:30 makes a 30-minute
  hourly window.

Supported windows are those whose ``period_id`` names a year in 1970..9999 (the ISO year for weekly)
and that end by 10000-01-01T00:00:00Z; the last window of each kind (whose end would be a local time
in year 10000) is not supported. Instants are epoch milliseconds (``int``).

Errors: :class:`UnknownPeriod` (a ``ValueError``) for ids; plain ``ValueError`` for instants and
windows outside the supported range and for an unknown timezone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Final
from zoneinfo import ZoneInfo

from arena.engine.times import MAX_MS

__all__ = ["Calendar", "PeriodKind", "UnknownPeriod", "Window", "period_name"]


class PeriodKind(StrEnum):
    ALLTIME = "alltime"
    HOURLY = "hourly"
    DAILY = "daily"
    WEEKLY = "weekly"
    MONTHLY = "monthly"
    YEARLY = "yearly"


@dataclass(frozen=True, slots=True)
class Window:
    """One window of one period kind: the span of one table. Compare with ``==``.

    ``kind`` is a `PeriodKind` for the built-in kinds and the period's name for a board's custom
    period (`arena.engine.schedule`); both are ``str``, so either compares and hashes as its name."""

    kind: str
    period_id: str  # "alltime", "2026-12-02T13", "2026-12-02", "2026-W49", "2026-12", "2026"
    start_ms: int | None  # inclusive; None for alltime
    end_ms: int | None  # exclusive; None for alltime


def period_name(name: str) -> str:
    """A period named in a request or read back from a store: its `PeriodKind` for a built-in
    kind, else the name itself (a board's custom period)."""
    return _KINDS.get(name, name)


class UnknownPeriod(ValueError):
    """A malformed ``period_id``, or one naming no window (a skipped local hour, a year out of range)."""


ALLTIME_WINDOW: Final = Window(PeriodKind.ALLTIME, "alltime", None, None)

_MIN_YEAR = 1970
_MAX_YEAR = 9999
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_ONE_HOUR = timedelta(hours=1)
_ONE_DAY = timedelta(days=1)
_ONE_WEEK = timedelta(weeks=1)
_RECENT_PER_KIND = 4
_TWO_DIGITS: Final = tuple(f"{i:02d}" for i in range(100))
# Normalises a kind given as its plain string value too, without the cost of an Enum call.
_KINDS: Final[dict[str, PeriodKind]] = {kind: kind for kind in PeriodKind}
_MEMO_LIMIT = 8192

_HOURLY_ID = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2})", re.ASCII)
_DAILY_ID = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", re.ASCII)
_WEEKLY_ID = re.compile(r"([0-9]{4})-W([0-9]{2})", re.ASCII)
_MONTHLY_ID = re.compile(r"([0-9]{4})-([0-9]{2})", re.ASCII)
_YEARLY_ID = re.compile(r"([0-9]{4})", re.ASCII)
_ID_PATTERNS: Final = {
    PeriodKind.HOURLY: _HOURLY_ID,
    PeriodKind.DAILY: _DAILY_ID,
    PeriodKind.WEEKLY: _WEEKLY_ID,
    PeriodKind.MONTHLY: _MONTHLY_ID,
    PeriodKind.YEARLY: _YEARLY_ID,
}


class _OutOfRange(Exception):
    """A unit whose window cannot be supported; each public method re-raises it as its own error."""


# A unit is named by its first local time as a naive datetime ("unit start"). The four helpers below
# are the whole difference between period kinds.


def _unit_containing(kind: PeriodKind, local: datetime) -> datetime:
    if kind is PeriodKind.HOURLY:
        return datetime(local.year, local.month, local.day, local.hour)
    if kind is PeriodKind.DAILY:
        return datetime(local.year, local.month, local.day)
    if kind is PeriodKind.WEEKLY:
        return datetime(local.year, local.month, local.day) - timedelta(days=local.weekday())
    if kind is PeriodKind.MONTHLY:
        return datetime(local.year, local.month, 1)
    return datetime(local.year, 1, 1)


def _step(kind: PeriodKind, unit: datetime, n: int) -> datetime:
    """The unit ``n`` (+1 or -1) after ``unit``; raises _OutOfRange past datetime's years 1..9999."""
    try:
        if kind is PeriodKind.HOURLY:
            return unit + n * _ONE_HOUR
        if kind is PeriodKind.DAILY:
            return unit + n * _ONE_DAY
        if kind is PeriodKind.WEEKLY:
            return unit + n * _ONE_WEEK
        if kind is PeriodKind.YEARLY:
            return datetime(unit.year + n, 1, 1)
        months = unit.year * 12 + unit.month - 1 + n
        return datetime(months // 12, months % 12 + 1, 1)
    except (OverflowError, ValueError) as exc:
        raise _OutOfRange(f"no {kind} window after/before {unit}") from exc


def _id_year(kind: PeriodKind, unit: datetime) -> int:
    return unit.isocalendar().year if kind is PeriodKind.WEEKLY else unit.year


def _period_id(kind: PeriodKind, unit: datetime) -> str:
    # Years are 1000..9999 here (1969 at the least), so str() already gives four digits; the table
    # avoids format-spec parsing, which is most of the cost of an f-string with ":02d".
    if kind is PeriodKind.HOURLY:
        return f"{unit.year}-{_TWO_DIGITS[unit.month]}-{_TWO_DIGITS[unit.day]}T{_TWO_DIGITS[unit.hour]}"
    if kind is PeriodKind.DAILY:
        return f"{unit.year}-{_TWO_DIGITS[unit.month]}-{_TWO_DIGITS[unit.day]}"
    if kind is PeriodKind.WEEKLY:
        iso = unit.isocalendar()
        return f"{iso.year}-W{_TWO_DIGITS[iso.week]}"
    if kind is PeriodKind.MONTHLY:
        return f"{unit.year}-{_TWO_DIGITS[unit.month]}"
    return str(unit.year)


def _parse_period_id(kind: PeriodKind, period_id: str) -> datetime:
    """The unit start named by ``period_id``; raises UnknownPeriod for a malformed or unreal id."""
    m = _ID_PATTERNS[kind].fullmatch(period_id)
    if m is None:
        raise UnknownPeriod(f"not a {kind} period id: {period_id!r}")
    fields = [int(g) for g in m.groups()]
    if not _MIN_YEAR <= fields[0] <= _MAX_YEAR:
        raise UnknownPeriod(f"{kind} period {period_id!r}: year outside {_MIN_YEAR}..{_MAX_YEAR}")
    try:
        if kind is PeriodKind.HOURLY:
            return datetime(fields[0], fields[1], fields[2], fields[3])
        if kind is PeriodKind.DAILY:
            return datetime(fields[0], fields[1], fields[2])
        if kind is PeriodKind.WEEKLY:
            monday = date.fromisocalendar(fields[0], fields[1], 1)
            return datetime(monday.year, monday.month, monday.day)
        if kind is PeriodKind.YEARLY:
            return datetime(fields[0], 1, 1)
        return datetime(fields[0], fields[1], 1)
    except ValueError as exc:
        raise UnknownPeriod(f"no such {kind} period: {period_id!r}") from exc


class Calendar:
    """The windows of every period kind in one IANA timezone. Cheap to call per event.

    Keeps the last few windows returned per kind, so :meth:`window_at` for an instant in one of them
    costs a dict lookup and two integer comparisons. Not thread-safe (one calendar per actor).
    """

    __slots__ = ("timezone", "_zone", "_last", "_recent", "_first_memo", "_by_id")

    def __init__(self, timezone: str) -> None:
        """Raises ``ValueError`` for a name that is not a zone in the installed tz database."""
        try:
            zone = ZoneInfo(timezone)
        except (ValueError, KeyError, OSError, TypeError) as exc:
            raise ValueError(f"unknown IANA timezone {timezone!r}") from exc
        self.timezone: Final = timezone
        self._zone = zone
        # kind -> (start_ms, end_ms, window) of the window returned last. The empty (0, 0) sentinel
        # keeps the hot path free of a None check; alltime holds every supported instant.
        self._last: dict[str, tuple[int, int, Window]] = {
            kind: (0, 0, ALLTIME_WINDOW) for kind in PeriodKind
        }
        self._last[PeriodKind.ALLTIME] = (0, MAX_MS, ALLTIME_WINDOW)
        self._recent: dict[PeriodKind, list[tuple[int, int, Window]]] = {
            kind: [] for kind in PeriodKind
        }
        self._first_memo: dict[datetime, int] = {}
        self._by_id: dict[tuple[PeriodKind, str], Window] = {}

    def __repr__(self) -> str:
        return f"Calendar({self.timezone!r})"

    # -- public API ---------------------------------------------------------------------------

    def window_at(self, kind: str, ms: int) -> Window:
        """The window of ``kind`` (a `PeriodKind` or its name) that contains the instant ``ms``
        (epoch milliseconds).

        Raises ``ValueError`` for an unknown kind, for ``ms`` outside ``[0, MAX_MS)`` (1970 to the
        end of 9999 UTC) and when the window holding ``ms`` is unsupported: that happens only within
        a day of those ends, e.g. ``ms = 0`` in America/New_York is local 1969-12-31, so its daily
        and monthly windows name 1969.

        Cost: about 0.1 µs when ``ms`` falls in one of the last 4 windows returned for ``kind``
        (the usual case: events arrive near "now" or, in a rebuild, in time order); otherwise a
        few µs of zoneinfo work.
        """
        try:
            start, end, window = self._last[kind]
        except KeyError:
            raise ValueError(f"unknown period kind {kind!r}") from None
        if start <= ms < end:
            return window
        return self._window_at_slow(_KINDS[kind], ms)

    def window_by_id(self, kind: str, period_id: str) -> Window:
        """The window of ``kind`` named ``period_id``, as written in answers and table names.

        Ids are strict: ``alltime``, ``2026-12-02T13``, ``2026-12-02``, ``2026-W49`` (ISO year and
        week), ``2026-12``, ``2026``. Raises :class:`UnknownPeriod` for a malformed id, an id of another kind,
        an unreal date or ISO week, a year outside 1970..9999, a skipped local hour or day, and the
        unsupported last window of each kind. Cost: a dict lookup for an id asked recently,
        otherwise a regex match and a few µs.
        """
        try:
            kind = PeriodKind(kind)
        except ValueError:
            raise UnknownPeriod(f"unknown period kind {kind!r}") from None
        if not isinstance(period_id, str):
            raise UnknownPeriod(f"period id must be a string, got {period_id!r}")
        if kind is PeriodKind.ALLTIME:
            if period_id != "alltime":
                raise UnknownPeriod(f"not an alltime period id: {period_id!r}")
            return ALLTIME_WINDOW
        key = (kind, period_id)
        window = self._by_id.get(key)
        if window is not None:
            return window
        unit = _parse_period_id(kind, period_id)
        try:
            start = self._first_instant(unit)
            end = self._first_instant(_step(kind, unit, 1))
            window = self._window(kind, unit, start, end)
        except _OutOfRange as exc:
            raise UnknownPeriod(f"{kind} period {period_id!r} is out of range") from exc
        if start == end:
            raise UnknownPeriod(
                f"{kind} period {period_id!r} does not exist in {self.timezone} (clocks skip it)"
            )
        if len(self._by_id) >= _MEMO_LIMIT:
            self._by_id.clear()
        self._by_id[key] = window
        return window

    def previous(self, window: Window) -> Window:
        """The window of the same kind that ends where ``window`` starts (skipping empty ones).

        Raises ``ValueError`` for alltime, for a window this calendar did not make, and before the
        first supported window (1970). Cost: a few µs.
        """
        kind, unit = self._unit_of(window)
        try:
            end = self._first_instant(unit)
            before = _step(kind, unit, -1)
            start = self._first_instant(before)
            while start == end:
                before = _step(kind, before, -1)
                start = self._first_instant(before)
            return self._window(kind, before, start, end)
        except _OutOfRange as exc:
            raise ValueError(f"no {kind} window before {window.period_id}") from exc

    def next(self, window: Window) -> Window:
        """The window of the same kind that starts where ``window`` ends (skipping empty ones).

        Raises ``ValueError`` for alltime, for a window this calendar did not make, and past the
        last supported window (9999). Cost: a few µs.
        """
        kind, unit = self._unit_of(window)
        try:
            after = _step(kind, unit, 1)
            start = self._first_instant(after)
            following = _step(kind, after, 1)
            end = self._first_instant(following)
            while start == end:
                after = following
                following = _step(kind, following, 1)
                end = self._first_instant(following)
            return self._window(kind, after, start, end)
        except _OutOfRange as exc:
            raise ValueError(f"no {kind} window after {window.period_id}") from exc

    def day_start(self, day: date) -> int:
        """The first instant (epoch ms) at which the local clock reads ``day`` 00:00 or later: where
        a daily window starts, whether or not that day is skipped. Raises ``ValueError`` outside
        the supported years. Cost: a dict lookup for a day asked recently, else a few µs."""
        if not _MIN_YEAR <= day.year <= _MAX_YEAR:
            raise ValueError(f"day {day} is outside the supported years")
        try:
            return self._first_instant(datetime(day.year, day.month, day.day))
        except _OutOfRange as exc:
            raise ValueError(f"day {day} is outside the supported years") from exc

    # -- internals ----------------------------------------------------------------------------

    def _window_at_slow(self, kind: PeriodKind, ms: int) -> Window:
        if not 0 <= ms < MAX_MS:
            raise ValueError(f"instant {ms} ms is outside 1970-01-01..9999-12-31 UTC")
        if kind is PeriodKind.ALLTIME:
            return ALLTIME_WINDOW
        recent = self._recent[kind]
        for i, hit in enumerate(recent):
            if hit[0] <= ms < hit[1]:
                if i:
                    recent.insert(0, recent.pop(i))
                self._last[kind] = hit
                return hit[2]
        try:
            local = datetime.fromtimestamp(ms // 1000, self._zone)
            unit = _unit_containing(kind, local)
            start = self._first_instant(unit)
            after = _step(kind, unit, 1)
            end = self._first_instant(after)
            # Usually done at once. Not when clocks went back across a unit boundary (Chatham
            # 03:45 -> 02:45): the second 02:45..02:59 belongs to the 03 window, which started at
            # the first 03:00, so walk forward to the unit whose window really holds ms.
            while end <= ms:
                unit, start = after, end
                after = _step(kind, after, 1)
                end = self._first_instant(after)
            window = self._window(kind, unit, start, end)
        # OverflowError/ValueError/OSError: the local time is past year 9999 (UTC+14 on 9999-12-31).
        except (_OutOfRange, OverflowError, ValueError, OSError) as exc:
            raise ValueError(f"instant {ms} ms has no supported {kind} window") from exc
        hit = (start, end, window)
        # A window reaching before 0 ms is never cached, so a cache hit always means 0 <= ms.
        if start >= 0:
            recent.insert(0, hit)
            del recent[_RECENT_PER_KIND:]
            self._last[kind] = hit
        return window

    def _window(self, kind: PeriodKind, unit: datetime, start: int, end: int) -> Window:
        if not _MIN_YEAR <= _id_year(kind, unit) <= _MAX_YEAR or end > MAX_MS:
            raise _OutOfRange(f"{kind} window at {unit} is outside the supported years")
        return Window(kind, _period_id(kind, unit), start, end)

    def _unit_of(self, window: Window) -> tuple[PeriodKind, datetime]:
        kind = PeriodKind(window.kind)
        if kind is PeriodKind.ALLTIME:
            raise ValueError("the alltime window has no previous or next window")
        unit = _parse_period_id(kind, window.period_id)
        if self._first_instant(unit) != window.start_ms:
            raise ValueError(f"{window!r} is not a window of {self!r}")
        return kind, unit

    def _first_instant(self, unit: datetime) -> int:
        """Epoch ms of the first instant at which the local wall clock reads ``unit`` or later.

        Memoised: the same boundary serves several kinds (a Monday's 00:00 starts an hour, a day
        and a week) and both windows that meet at it.
        """
        first = self._first_memo.get(unit)
        if first is not None:
            return first
        zone = self._zone
        # fold=0 (PEP 495) reads a repeated local time as its first occurrence, which is the one we
        # want, and a local time inside a gap with the offset in force before the jump. The
        # instant that gives is then already past the jump, where another offset applies: that is
        # how a gap shows, and the window starts at the jump itself.
        offset = zone.utcoffset(unit)
        assert offset is not None  # a ZoneInfo always answers utcoffset
        wall = (unit.toordinal() - _EPOCH_ORDINAL) * 86_400 + unit.hour * 3_600
        candidate = wall - offset.days * 86_400 - offset.seconds
        try:
            actual = datetime.fromtimestamp(candidate, zone).utcoffset()
        except (OverflowError, ValueError, OSError) as exc:
            raise _OutOfRange(f"local {unit} is outside datetime's range") from exc
        if actual == offset:
            first = candidate * 1000
        else:
            assert actual is not None
            after = actual.days * 86_400 + actual.seconds
            first = self._gap_end(wall, lo=wall - after, hi=candidate) * 1000
        if len(self._first_memo) >= _MEMO_LIMIT:
            self._first_memo.clear()
        self._first_memo[unit] = first
        return first

    def _gap_end(self, wall: int, lo: int, hi: int) -> int:
        """The transition (epoch s) that jumps the clock over local ``wall``.

        The wall clock is below ``wall`` at ``lo`` and past it at ``hi``; tz transitions fall on
        whole seconds, so bisecting seconds finds the jump exactly (about 17 steps for a 1-hour
        gap; this runs once per skipped boundary thanks to the memo).
        """
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                offset = datetime.fromtimestamp(mid, self._zone).utcoffset()
            except (OverflowError, ValueError, OSError) as exc:
                raise _OutOfRange(f"instant {mid} s is outside datetime's range") from exc
            assert offset is not None
            if mid + offset.days * 86_400 + offset.seconds >= wall:
                hi = mid
            else:
                lo = mid
        return hi
