"""Instants on the wire: RFC 3339 text <-> integer epoch milliseconds.

Every instant inside Arena is an ``int`` of epoch milliseconds (UTC). This module is the one place
that turns the RFC 3339 form of ``occurred_at`` into that integer, and that integer into the
``2026-12-02T13:00:00.000Z`` form used in every answer. Both directions are pure integer
arithmetic (plus the C ``date`` type for calendar checks), because both run once per event or per
answered entry.
"""

from __future__ import annotations

import re
from datetime import date

__all__ = ["MAX_MS", "MIN_MS", "format_ms", "format_optional_ms", "parse_rfc3339_ms"]

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()

#: The first instant :func:`format_ms` can write: 0001-01-01T00:00:00.000Z.
MIN_MS = (date(1, 1, 1).toordinal() - _EPOCH_ORDINAL) * 86_400_000
#: One past the last instant :func:`format_ms` can write: 10000-01-01T00:00:00.000Z.
MAX_MS = (date(9999, 12, 31).toordinal() + 1 - _EPOCH_ORDINAL) * 86_400_000

# RFC 3339 section 5.6 `date-time`, strictly: four-digit year, colon in the offset, a fraction of at
# least one digit. re.ASCII keeps `\d`-like classes from matching non-ASCII digits such as "٣",
# which int() would otherwise happily convert.
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]+))?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))",
    re.ASCII,
)


def parse_rfc3339_ms(text: str) -> int:
    """Return the epoch milliseconds of an RFC 3339 timestamp that carries an offset.

    Accepts ``Z``/``z`` or ``±hh:mm`` and ``T``/``t`` between date and time; any number of
    fractional digits, floored to the millisecond (digits past the third are dropped, which floors
    the exact value because the fraction is never negative). ``-00:00`` is read as UTC.

    Raises ``ValueError`` for anything else: no offset, a space separator, garbage, impossible
    calendar values (month 13, Feb 30, hour 24, offset hour 24) and year 0000.

    A leap second (second ``60``, which RFC 3339 allows and epoch milliseconds cannot name) is read
    as the last millisecond of its minute, ``:59.999``, whatever its fraction: the instant stays
    in the minute, hour, day and month it was written in, and before every later instant. It is
    valid only where leap seconds are inserted: the last second of a month in UTC
    (``2016-12-31T23:59:60Z``, ``2016-12-31T18:59:60-05:00``).

    Cost: one compiled-regex match and a few integer operations, about a microsecond.
    """
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise ValueError(f"not an RFC 3339 timestamp with an offset: {text!r}")
    year, month, day, hour, minute, second, frac, sign, off_h, off_m = m.groups()
    try:
        ordinal = date(int(year), int(month), int(day)).toordinal()
    except ValueError as exc:
        raise ValueError(f"not a calendar date: {text!r}") from exc
    h, mi, s = int(hour), int(minute), int(second)
    if h > 23 or mi > 59 or s > 60:
        raise ValueError(f"not a time of day: {text!r}")
    leap = s == 60
    if leap:
        s = 59
    seconds = (ordinal - _EPOCH_ORDINAL) * 86_400 + h * 3_600 + mi * 60 + s
    if sign is not None:
        oh, om = int(off_h), int(off_m)
        if oh > 23 or om > 59:
            raise ValueError(f"not a UTC offset: {text!r}")
        offset = oh * 3_600 + om * 60
        seconds = seconds - offset if sign == "+" else seconds + offset
    if leap:
        if (seconds + 1) % 86_400 or date.fromordinal(_EPOCH_ORDINAL + (seconds + 1) // 86_400).day != 1:
            raise ValueError(f"not the last second of a month in UTC, so not a leap second: {text!r}")
        return seconds * 1_000 + 999
    millis = 0 if frac is None else int((frac + "00")[:3])
    return seconds * 1_000 + millis


# "YYYY-MM-DDT" by day number since the epoch. Answers cluster on a few days (a table's window), so
# a small dict turns the calendar conversion into one lookup. Cleared when full: no LRU bookkeeping.
_DAY_PREFIX: dict[int, str] = {}
_DAY_PREFIX_LIMIT = 4096
# "HH:MM:SS." for every second of a day would be 86,400 strings; two small tables are enough.
_HOURS = tuple(f"{h:02d}:" for h in range(24))
_MINUTE_SECONDS = tuple(f"{m:02d}:{s:02d}." for m in range(60) for s in range(60))
_MILLIS = tuple(f"{ms:03d}Z" for ms in range(1000))


def _day_prefix(day: int) -> str:
    if not MIN_MS // 86_400_000 <= day < MAX_MS // 86_400_000:
        raise ValueError(f"instant outside years 0001..9999: day {day} since 1970-01-01")
    d = date.fromordinal(day + _EPOCH_ORDINAL)
    prefix = f"{d.year:04d}-{d.month:02d}-{d.day:02d}T"
    if len(_DAY_PREFIX) >= _DAY_PREFIX_LIMIT:
        _DAY_PREFIX.clear()
    _DAY_PREFIX[day] = prefix
    return prefix


def format_ms(ms: int) -> str:
    """Return epoch milliseconds as RFC 3339 UTC with exactly three fractional digits and ``Z``.

    ``format_ms(1796216400000) == "2026-12-02T13:00:00.000Z"``. Negative values (before 1970) are
    fine; ``ValueError`` outside ``[MIN_MS, MAX_MS)`` (years 0001..9999).

    Cost: three ``divmod`` and a dict lookup on a warm day, about half a microsecond; a day not
    seen recently adds one ``date.fromordinal``.
    """
    seconds, millis = divmod(ms, 1_000)
    day, second_of_day = divmod(seconds, 86_400)
    prefix = _DAY_PREFIX.get(day)
    if prefix is None:
        prefix = _day_prefix(day)
    hour, second_of_hour = divmod(second_of_day, 3_600)
    return prefix + _HOURS[hour] + _MINUTE_SECONDS[second_of_hour] + _MILLIS[millis]


def format_optional_ms(ms: int | None) -> str | None:
    """:func:`format_ms`, passing ``None`` through (the alltime table has no start or end)."""
    return None if ms is None else format_ms(ms)
