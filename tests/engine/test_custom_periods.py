"""Custom periods (every_days, every_hours, one-off) and yearly windows against an oracle.

The oracle knows nothing of the engine: it finds a local midnight by walking UTC instants on a
15-minute grid with `zoneinfo` until the wall clock reads that midnight or later (every offset and
every transition of the zones below lies on that grid), and steps absolute hours with aware
`datetime` arithmetic in UTC. Instants and anchors are drawn around the zones' clock changes.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.config import parse_board
from arena.engine.periods import PeriodKind, UnknownPeriod, Window
from arena.engine.schedule import Schedule
from arena.engine.times import format_ms, parse_rfc3339_ms

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Kolkata", "UTC"]
GRID = timedelta(minutes=15)
HOUR = timedelta(hours=1)


def ms_of(t: datetime) -> int:
    return int(t.timestamp()) * 1000


# -- the oracle ----------------------------------------------------------------------------------


@cache
def first_at_or_after(zone: str, day: date) -> int:
    """Epoch ms of the first instant at which the local clock in ``zone`` reads ``day`` 00:00 or
    later: a walk from 15 hours before that wall time read as UTC (no zone is ahead of UTC+14)."""
    tz = ZoneInfo(zone)
    wall = datetime.combine(day, time())
    t = datetime.combine(day, time(), tzinfo=UTC) - timedelta(hours=15)
    for _ in range(40 * 4):
        if t.astimezone(tz).replace(tzinfo=None) >= wall:
            return ms_of(t)
        t += GRID
    raise AssertionError("no such instant within 25 hours")


def oracle_every_days(zone: str, days: int, anchor: date, at: int) -> tuple[str, int, int] | None:
    """(period_id, start, end) of the every-``days`` window holding ``at``, None before the anchor."""
    def bound(k: int) -> int:
        return first_at_or_after(zone, anchor + timedelta(days=k * days))

    if at < bound(0):
        return None
    k = max(0, (datetime.fromtimestamp(at / 1000, UTC).date() - anchor).days // days)
    while bound(k) > at:
        k -= 1
    while bound(k + 1) <= at:
        k += 1
    return (anchor + timedelta(days=k * days)).isoformat(), bound(k), bound(k + 1)


def oracle_yearly(zone: str, at: int) -> tuple[str, int, int]:
    year = datetime.fromtimestamp(at / 1000, UTC).year + 1
    while first_at_or_after(zone, date(year, 1, 1)) > at:
        year -= 1
    return str(year), first_at_or_after(zone, date(year, 1, 1)), first_at_or_after(zone, date(year + 1, 1, 1))


def oracle_every_hours(anchor: datetime, hours: int, at: int) -> tuple[str, int, int] | None:
    instant = datetime.fromtimestamp(at / 1000, UTC)
    anchor = anchor.astimezone(UTC)  # aware arithmetic in a zone would move wall clocks, not instants
    if instant < anchor:
        return None
    k = (instant - anchor) // timedelta(hours=hours)
    start = anchor + k * timedelta(hours=hours)
    return start.strftime("%Y-%m-%dT%HZ"), ms_of(start), ms_of(start + timedelta(hours=hours))


@cache
def clock_changes(zone: str) -> list[date]:
    """The local dates, 2010..2030, on which the zone's UTC offset changes (by the oracle's walk)."""
    tz = ZoneInfo(zone)
    changes = []
    day = date(2010, 1, 1)
    while day < date(2030, 1, 1):
        noon = datetime.combine(day, time(12), tzinfo=UTC)
        if (noon - timedelta(days=1)).astimezone(tz).utcoffset() != noon.astimezone(tz).utcoffset():
            changes.append(day)
        day += timedelta(days=1)
    return changes or [date(2020, 3, 29)]


@st.composite
def near_a_change(draw: st.DrawFn, zone: str) -> int:
    """An instant within a few days of one of ``zone``'s clock changes, to the minute."""
    day = draw(st.sampled_from(clock_changes(zone)))
    minutes = draw(st.integers(-3 * 24 * 60, 3 * 24 * 60))
    return ms_of(datetime.combine(day, time(), tzinfo=UTC) + timedelta(minutes=minutes)) + draw(st.integers(0, 59_999))


def as_window(kind: str, found: tuple[str, int, int]) -> Window:
    return Window(kind, *found)


def schedule_of(zone: str, custom: dict[str, object], periods: list[str] | None = None) -> Schedule:
    spec = parse_board("b", {"timezone": zone, "periods": periods or [], "custom_periods": custom})
    return spec.schedule()


# -- properties ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.data(), zone=st.sampled_from(ZONES), days=st.integers(1, 30))
def test_every_days_windows_match_the_oracle(data: st.DataObject, zone: str, days: int) -> None:
    anchor = data.draw(st.sampled_from(clock_changes(zone))) + timedelta(days=data.draw(st.integers(-40, 2)))
    at = data.draw(near_a_change(zone))
    schedule = schedule_of(zone, {"season": {"every_days": days, "anchor": anchor.isoformat()}})
    want = oracle_every_days(zone, days, anchor, at)
    if want is None:
        with pytest.raises(ValueError):
            schedule.window_at("season", at)
        first = oracle_every_days(zone, days, anchor, first_at_or_after(zone, anchor))
        assert first is not None and schedule.current("season", at) == as_window("season", first)
        return
    window = schedule.window_at("season", at)
    assert window == as_window("season", want)
    assert schedule.window_by_id("season", window.period_id) == window
    following = oracle_every_days(zone, days, anchor, want[2])
    assert following is not None and schedule.next(window) == as_window("season", following)
    if want[1] > first_at_or_after(zone, anchor):
        before = oracle_every_days(zone, days, anchor, want[1] - 1)
        assert before is not None and schedule.previous(window) == as_window("season", before)
    else:
        with pytest.raises(ValueError):
            schedule.previous(window)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), zone=st.sampled_from(ZONES), hours=st.integers(1, 8784))
def test_every_hours_windows_match_the_oracle(data: st.DataObject, zone: str, hours: int) -> None:
    change = data.draw(st.sampled_from(clock_changes(zone)))
    wall = datetime.combine(change, time()) + timedelta(minutes=data.draw(st.integers(-3000, 3000)))
    anchor = wall.replace(tzinfo=ZoneInfo(zone), fold=data.draw(st.integers(0, 1)))
    anchor_text = anchor.isoformat(timespec="seconds")  # "YYYY-MM-DDTHH:MM:SS±hh:mm" as a config writes it
    anchor = datetime.fromisoformat(anchor_text)
    at = data.draw(near_a_change(zone)) + data.draw(st.sampled_from([0, hours * 3_600_000, 7 * hours * 3_600_000]))
    schedule = schedule_of(zone, {"h": {"every_hours": hours, "anchor": anchor_text}})
    want = oracle_every_hours(anchor, hours, at)
    if want is None:
        with pytest.raises(ValueError):
            schedule.window_at("h", at)
        return
    window = schedule.window_at("h", at)
    assert window == as_window("h", want)
    assert schedule.window_by_id("h", window.period_id) == window
    assert schedule.next(window) == as_window("h", oracle_every_hours(anchor, hours, want[2]) or ("", 0, 0))


@settings(max_examples=200, deadline=None)
@given(data=st.data(), zone=st.sampled_from(ZONES))
def test_a_one_off_window_matches_the_oracle(data: st.DataObject, zone: str) -> None:
    tz = ZoneInfo(zone)
    start = datetime.fromtimestamp(data.draw(near_a_change(zone)) // 60_000 * 60, tz)
    end = start + timedelta(minutes=data.draw(st.integers(1, 5 * 24 * 60)))
    at = data.draw(near_a_change(zone))
    schedule = schedule_of(zone, {"cup": {"start": start.isoformat(), "end": end.isoformat()}})
    window = Window("cup", start.astimezone(UTC).strftime("%Y-%m-%dT%HZ"), ms_of(start), ms_of(end))
    if start <= datetime.fromtimestamp(at / 1000, UTC) < end:
        assert schedule.window_at("cup", at) == window
    else:
        with pytest.raises(ValueError):
            schedule.window_at("cup", at)
    assert schedule.current("cup", at) == window  # before, during and after: its one window
    assert schedule.window_by_id("cup", window.period_id) == window
    for step in (schedule.previous, schedule.next):
        with pytest.raises(ValueError):
            step(window)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), zone=st.sampled_from(ZONES))
def test_yearly_windows_match_the_oracle(data: st.DataObject, zone: str) -> None:
    at = data.draw(st.one_of(
        near_a_change(zone),
        st.integers(2011, 2029).map(lambda y: first_at_or_after(zone, date(y, 1, 1)))
        .flatmap(lambda b: st.integers(b - 60_000, b + 60_000)),
    ))
    schedule = Schedule(zone, (PeriodKind.YEARLY,))
    window = schedule.window_at(PeriodKind.YEARLY, at)
    assert window == as_window(PeriodKind.YEARLY, oracle_yearly(zone, at))
    assert schedule.window_by_id("yearly", window.period_id) == window
    assert window.end_ms is not None and schedule.next(window) == as_window(PeriodKind.YEARLY, oracle_yearly(zone, window.end_ms))


# -- examples ------------------------------------------------------------------------------------


def ms(text: str) -> int:
    return parse_rfc3339_ms(text)


def test_the_contract_tournament_is_one_window_named_by_its_utc_start_hour() -> None:
    schedule = schedule_of("UTC", {"finals": {"start": "2026-12-12T18:00:00+01:00", "end": "2026-12-13T18:00:00+01:00"}})
    window = schedule.window_by_id("finals", "2026-12-12T17Z")
    assert (format_ms(window.start_ms or 0), format_ms(window.end_ms or 0)) == ("2026-12-12T17:00:00.000Z", "2026-12-13T17:00:00.000Z")
    with pytest.raises(UnknownPeriod):
        schedule.window_by_id("finals", "2026-12-12T18Z")


def test_a_28_day_season_in_berlin_spans_the_spring_change_by_local_midnights() -> None:
    schedule = schedule_of("Europe/Berlin", {"season": {"every_days": 28, "anchor": "2026-03-02"}})
    window = schedule.window_at("season", ms("2026-03-29T12:00:00Z"))
    assert window.period_id == "2026-03-02"
    assert (format_ms(window.start_ms or 0), format_ms(window.end_ms or 0)) == ("2026-03-01T23:00:00.000Z", "2026-03-29T22:00:00.000Z")


def test_an_every_days_window_whose_only_day_is_skipped_does_not_exist() -> None:
    schedule = schedule_of("Pacific/Apia", {"d": {"every_days": 1, "anchor": "2011-12-01"}})
    with pytest.raises(UnknownPeriod):
        schedule.window_by_id("d", "2011-12-30")
    before = schedule.window_by_id("d", "2011-12-29")
    assert schedule.next(before).period_id == "2011-12-31"
    assert schedule.previous(schedule.next(before)) == before


def test_every_hours_ids_are_unique_across_a_fall_back() -> None:
    schedule = schedule_of("America/New_York", {"h": {"every_hours": 1, "anchor": "2026-11-01T00:00:00-04:00"}})
    ids = [schedule.window_at("h", ms("2026-11-01T04:00:00Z") + k * 3_600_000).period_id for k in range(4)]
    assert ids == ["2026-11-01T04Z", "2026-11-01T05Z", "2026-11-01T06Z", "2026-11-01T07Z"]


def test_the_current_window_of_a_custom_period_is_the_next_one_in_a_gap_and_the_last_one_after() -> None:
    schedule = schedule_of("UTC", {"season": {"every_days": 7, "anchor": "2026-06-01"},
                                   "cup": {"start": "2026-06-05T18:00:00Z", "end": "2026-06-07T18:00:00Z"}})
    assert schedule.current("season", ms("2026-05-20T00:00:00Z")).period_id == "2026-06-01"
    assert schedule.current("season", ms("2026-06-20T00:00:00Z")).period_id == "2026-06-15"
    for at in ("2026-06-01T00:00:00Z", "2026-06-06T00:00:00Z", "2026-06-30T00:00:00Z"):
        assert schedule.current("cup", ms(at)).period_id == "2026-06-05T18Z"
    assert schedule.gap_at("cup", ms("2026-06-01T00:00:00Z")) == (float("-inf"), ms("2026-06-05T18:00:00Z"))
    assert schedule.gap_at("cup", ms("2026-06-08T00:00:00Z")) == (ms("2026-06-07T18:00:00Z"), float("inf"))


@pytest.mark.parametrize(("custom", "error"), [
    ({"alltime": {"every_days": 1, "anchor": "2026-01-01"}}, "custom_periods.alltime: is a built-in period kind"),
    ({"Finals": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"}}, "custom_periods.Finals: a period name is 1..32"),
    ({"x" * 33: {"every_days": 1, "anchor": "2026-01-01"}}, "a period name is 1..32"),
    ({"s": {"every_days": 367, "anchor": "2026-01-01"}}, "custom_periods.s.every_days: must be between 1 and 366"),
    ({"s": {"every_days": 2.0, "anchor": "2026-01-01"}}, "custom_periods.s.every_days: must be an integer"),
    ({"s": {"every_days": 2}}, "custom_periods.s.anchor: missing"),
    ({"s": {"every_days": 2, "anchor": "2026-02-30"}}, "custom_periods.s.anchor: must be a local date"),
    ({"h": {"every_hours": 8785, "anchor": "2026-01-01T00:00:00Z"}}, "custom_periods.h.every_hours: must be between 1 and 8784"),
    ({"h": {"every_hours": 6, "anchor": "2026-01-01T00:00:00"}}, "custom_periods.h.anchor: must be an RFC 3339 time with an offset"),
    ({"c": {"start": "2026-01-02T00:00:00Z", "end": "2026-01-02T00:00:00Z"}}, "custom_periods.c.end: must be after start"),
    ({"c": {"start": "2026-01-02T00:00:00Z"}}, "custom_periods.c.end: missing"),
    ({"c": {"every_days": 1, "anchor": "2026-01-01", "start": "2026-01-02T00:00:00Z"}}, "custom_periods.c: give exactly one of"),
    ({"c": {}}, "custom_periods.c: give exactly one of"),
    ({"c": {"every_days": 1, "anchor": "2026-01-01", "grace": 1}}, "custom_periods.c.grace: unknown key"),
    ({"c": "weekly"}, "custom_periods.c: must be a table"),
    ([], "boards.b.custom_periods: must be a table"),
])
def test_config_errors_name_the_key_in_one_line(custom: object, error: str) -> None:
    with pytest.raises(Exception) as info:
        parse_board("b", {"periods": [], "custom_periods": custom})
    assert error in str(info.value) and "\n" not in str(info.value)


def test_periods_may_be_empty_only_beside_custom_periods() -> None:
    with pytest.raises(Exception, match=r"boards\.b\.periods: must name at least one period"):
        parse_board("b", {"periods": []})
    spec = parse_board("b", {"periods": [], "custom_periods": {"c": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"}}})
    assert spec.kinds == ("c",) and spec.periods == ()


def test_custom_periods_are_part_of_the_definition_and_read_back_by_the_parser() -> None:
    table = {"periods": ["yearly"], "custom_periods": {
        "season": {"every_days": 28, "anchor": "2026-01-05"},
        "shift": {"every_hours": 8, "anchor": "2026-01-05T07:00:00+01:00"},
        "cup": {"start": "2026-12-12T18:00:00+01:00", "end": "2026-12-13T18:00:00+01:00"}}}
    spec = parse_board("b", table)
    definition = spec.definition()
    assert definition["custom_periods"] == {
        "season": {"every_days": 28, "anchor": "2026-01-05"},
        "shift": {"every_hours": 8, "anchor": "2026-01-05T06:00:00.000Z"},
        "cup": {"start": "2026-12-12T17:00:00.000Z", "end": "2026-12-13T17:00:00.000Z"}}
    assert parse_board("b", {"periods": ["yearly"], "custom_periods": definition["custom_periods"]}) == spec
    assert "custom_periods" not in parse_board("b", {}).definition()  # a board of before keeps its definition
