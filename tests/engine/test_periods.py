from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.engine.periods import Calendar, PeriodKind, UnknownPeriod, Window
from arena.engine.times import MAX_MS, format_ms, parse_rfc3339_ms

ALLTIME = PeriodKind.ALLTIME
HOURLY = PeriodKind.HOURLY
DAILY = PeriodKind.DAILY
WEEKLY = PeriodKind.WEEKLY
MONTHLY = PeriodKind.MONTHLY
TIMED_KINDS = [HOURLY, DAILY, WEEKLY, MONTHLY]
HOUR_MS = 3_600_000

ZONES = [
    "UTC",
    "Asia/Kolkata",
    "Europe/Madrid",
    "America/New_York",
    "Australia/Lord_Howe",  # 30-minute DST
    "Pacific/Chatham",  # +12:45/+13:45, changes at 02:45/03:45
    "America/Sao_Paulo",  # midnight skipped until 2018
    "America/Santiago",  # falls back across midnight, skips midnight
    "America/Havana",
    "Pacific/Apia",  # skipped 2011-12-30 entirely
]


def ms(text: str) -> int:
    return parse_rfc3339_ms(text)


def span(window: Window) -> tuple[str, str]:
    assert window.start_ms is not None and window.end_ms is not None
    return format_ms(window.start_ms), format_ms(window.end_ms)


def hours(window: Window) -> float:
    assert window.start_ms is not None and window.end_ms is not None
    return (window.end_ms - window.start_ms) / HOUR_MS


# -- the contract's worked examples -------------------------------------------------------------


def test_kolkata_local_midnight_starts_a_day_an_hour_a_week_and_no_month() -> None:
    cal = Calendar("Asia/Kolkata")
    instant = 1_796_581_800_000
    assert format_ms(instant) == "2026-12-06T18:30:00.000Z"

    daily = cal.window_at(DAILY, instant)
    assert daily.period_id == "2026-12-07"
    assert span(daily) == ("2026-12-06T18:30:00.000Z", "2026-12-07T18:30:00.000Z")
    hourly = cal.window_at(HOURLY, instant)
    assert hourly.period_id == "2026-12-07T00"
    assert span(hourly) == ("2026-12-06T18:30:00.000Z", "2026-12-06T19:30:00.000Z")
    weekly = cal.window_at(WEEKLY, instant)
    assert weekly.period_id == "2026-W50"
    assert span(weekly) == ("2026-12-06T18:30:00.000Z", "2026-12-13T18:30:00.000Z")
    monthly = cal.window_at(MONTHLY, instant)
    assert monthly.period_id == "2026-12"
    assert span(monthly) == ("2026-11-30T18:30:00.000Z", "2026-12-31T18:30:00.000Z")


def test_kolkata_one_ms_before_local_midnight_is_in_the_previous_day_hour_and_week() -> None:
    cal = Calendar("Asia/Kolkata")
    instant = 1_796_581_800_000 - 1
    assert cal.window_at(DAILY, instant).period_id == "2026-12-06"
    assert cal.window_at(HOURLY, instant).period_id == "2026-12-06T23"
    weekly = cal.window_at(WEEKLY, instant)
    assert weekly.period_id == "2026-W49"
    assert span(weekly) == ("2026-11-29T18:30:00.000Z", "2026-12-06T18:30:00.000Z")
    assert cal.window_at(MONTHLY, instant).period_id == "2026-12"


def test_utc_daily_window_by_id() -> None:
    window = Calendar("UTC").window_by_id(DAILY, "2026-12-02")
    assert window == Window(DAILY, "2026-12-02", ms("2026-12-02T00:00:00Z"), ms("2026-12-03T00:00:00Z"))
    assert span(window) == ("2026-12-02T00:00:00.000Z", "2026-12-03T00:00:00.000Z")


def test_utc_hourly_window_of_the_contract_instant() -> None:
    window = Calendar("UTC").window_at(HOURLY, 1_796_216_400_000)
    assert window.period_id == "2026-12-02T13"
    assert span(window) == ("2026-12-02T13:00:00.000Z", "2026-12-02T14:00:00.000Z")


@pytest.mark.parametrize("kind", TIMED_KINDS)
@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/New_York"])
def test_an_event_exactly_at_end_belongs_to_the_next_window(zone: str, kind: PeriodKind) -> None:
    cal = Calendar(zone)
    window = cal.window_at(kind, ms("2026-12-02T13:17:00Z"))
    assert window.end_ms is not None
    following = cal.window_at(kind, window.end_ms)
    assert following != window
    assert following == cal.next(window)
    assert following.start_ms == window.end_ms
    assert cal.window_at(kind, window.end_ms - 1) == window


# -- alltime ------------------------------------------------------------------------------------


def test_alltime_is_one_unbounded_window() -> None:
    cal = Calendar("Europe/Madrid")
    expected = Window(ALLTIME, "alltime", None, None)
    assert cal.window_at(ALLTIME, 0) == expected
    assert cal.window_at(ALLTIME, ms("2026-12-02T13:00:00Z")) == expected
    assert cal.window_by_id(ALLTIME, "alltime") == expected


def test_alltime_has_no_previous_or_next() -> None:
    cal = Calendar("UTC")
    alltime = cal.window_by_id(ALLTIME, "alltime")
    with pytest.raises(ValueError):
        cal.previous(alltime)
    with pytest.raises(ValueError):
        cal.next(alltime)


@pytest.mark.parametrize("period_id", ["", "all", "ALLTIME", "2026", "2026-12", " alltime"])
def test_alltime_accepts_only_the_word_alltime(period_id: str) -> None:
    with pytest.raises(UnknownPeriod):
        Calendar("UTC").window_by_id(ALLTIME, period_id)


# -- DST in Europe/Madrid (02:00 -> 03:00 on 2026-03-29; 03:00 -> 02:00 on 2026-10-25) ---------


def test_madrid_spring_forward_day_is_23_hours() -> None:
    cal = Calendar("Europe/Madrid")
    day = cal.window_by_id(DAILY, "2026-03-29")
    assert span(day) == ("2026-03-28T23:00:00.000Z", "2026-03-29T22:00:00.000Z")
    assert hours(day) == 23


def test_madrid_skipped_hour_has_no_window() -> None:
    cal = Calendar("Europe/Madrid")
    with pytest.raises(UnknownPeriod):
        cal.window_by_id(HOURLY, "2026-03-29T02")
    one = cal.window_by_id(HOURLY, "2026-03-29T01")
    three = cal.window_by_id(HOURLY, "2026-03-29T03")
    assert span(one) == ("2026-03-29T00:00:00.000Z", "2026-03-29T01:00:00.000Z")
    assert span(three) == ("2026-03-29T01:00:00.000Z", "2026-03-29T02:00:00.000Z")
    assert cal.next(one) == three
    assert cal.previous(three) == one


def test_madrid_window_at_never_returns_the_skipped_hour() -> None:
    cal = Calendar("Europe/Madrid")
    day = cal.window_by_id(DAILY, "2026-03-29")
    assert day.start_ms is not None and day.end_ms is not None
    seen = {
        cal.window_at(HOURLY, instant).period_id
        for instant in range(day.start_ms, day.end_ms, 60_000)
    }
    assert len(seen) == 23
    assert "2026-03-29T02" not in seen


def test_madrid_fall_back_day_is_25_hours_and_the_repeated_02_hour_is_one_window() -> None:
    cal = Calendar("Europe/Madrid")
    day = cal.window_by_id(DAILY, "2026-10-25")
    assert span(day) == ("2026-10-24T22:00:00.000Z", "2026-10-25T23:00:00.000Z")
    assert hours(day) == 25
    two = cal.window_by_id(HOURLY, "2026-10-25T02")
    # The first 02:00 (CEST) is 00:00Z; the clock first reads 03:00 at 02:00Z, after the repeat.
    assert span(two) == ("2026-10-25T00:00:00.000Z", "2026-10-25T02:00:00.000Z")
    first_pass = ms("2026-10-25T02:30:00+02:00")
    second_pass = ms("2026-10-25T02:30:00+01:00")
    assert cal.window_at(HOURLY, first_pass) == two
    assert cal.window_at(HOURLY, second_pass) == two
    assert cal.next(two).period_id == "2026-10-25T03"
    assert cal.previous(two).period_id == "2026-10-25T01"


# -- DST in America/New_York (02:00 -> 03:00 on 2026-03-08; 02:00 -> 01:00 on 2026-11-01) ------


def test_new_york_spring_forward() -> None:
    cal = Calendar("America/New_York")
    day = cal.window_by_id(DAILY, "2026-03-08")
    assert span(day) == ("2026-03-08T05:00:00.000Z", "2026-03-09T04:00:00.000Z")
    with pytest.raises(UnknownPeriod):
        cal.window_by_id(HOURLY, "2026-03-08T02")
    assert cal.window_at(HOURLY, ms("2026-03-08T07:00:00Z")).period_id == "2026-03-08T03"
    assert cal.window_at(HOURLY, ms("2026-03-08T06:59:59.999Z")).period_id == "2026-03-08T01"


def test_new_york_fall_back_repeats_01_as_one_two_hour_window() -> None:
    cal = Calendar("America/New_York")
    day = cal.window_by_id(DAILY, "2026-11-01")
    assert span(day) == ("2026-11-01T04:00:00.000Z", "2026-11-02T05:00:00.000Z")
    assert hours(day) == 25
    one = cal.window_by_id(HOURLY, "2026-11-01T01")
    assert span(one) == ("2026-11-01T05:00:00.000Z", "2026-11-01T07:00:00.000Z")
    assert cal.window_at(HOURLY, ms("2026-11-01T01:59:59.999-04:00")) == one
    assert cal.window_at(HOURLY, ms("2026-11-01T01:00:00-05:00")) == one
    assert cal.window_at(HOURLY, ms("2026-11-01T02:00:00-05:00")).period_id == "2026-11-01T02"
    assert hours(cal.window_by_id(HOURLY, "2026-11-01T02")) == 1


# -- local midnight that does not exist ----------------------------------------------------------


def test_sao_paulo_day_starts_when_the_clock_jumps_over_midnight() -> None:
    cal = Calendar("America/Sao_Paulo")
    day = cal.window_by_id(DAILY, "2018-11-04")
    # 2018-11-03 23:59:59 -03 is followed by 2018-11-04 01:00:00 -02.
    assert span(day) == ("2018-11-04T03:00:00.000Z", "2018-11-05T02:00:00.000Z")
    assert hours(day) == 23
    assert span(cal.previous(day)) == ("2018-11-03T03:00:00.000Z", "2018-11-04T03:00:00.000Z")
    with pytest.raises(UnknownPeriod):
        cal.window_by_id(HOURLY, "2018-11-04T00")
    one = cal.window_by_id(HOURLY, "2018-11-04T01")
    assert span(one) == ("2018-11-04T03:00:00.000Z", "2018-11-04T04:00:00.000Z")
    assert cal.window_at(DAILY, ms("2018-11-04T03:00:00Z")) == day
    assert cal.window_at(DAILY, ms("2018-11-04T02:59:59.999Z")).period_id == "2018-11-03"


@pytest.mark.parametrize(
    ("zone", "day_id", "start"),
    [
        ("America/Havana", "2026-03-08", "2026-03-08T05:00:00.000Z"),
        ("Asia/Beirut", "2026-03-29", "2026-03-28T22:00:00.000Z"),
        ("America/Santiago", "2026-09-06", "2026-09-06T04:00:00.000Z"),
    ],
)
def test_other_zones_that_skip_midnight_start_the_day_at_the_jump(
    zone: str, day_id: str, start: str
) -> None:
    cal = Calendar(zone)
    day = cal.window_by_id(DAILY, day_id)
    assert span(day)[0] == start
    assert hours(day) == 23
    with pytest.raises(UnknownPeriod):
        cal.window_by_id(HOURLY, f"{day_id}T00")


def test_a_month_can_start_at_a_jump_over_midnight() -> None:
    # America/Asuncion: 2023-09-30 23:59:59 -04 is followed by 2023-10-01 01:00:00 -03.
    cal = Calendar("America/Asuncion")
    month = cal.window_by_id(MONTHLY, "2023-10")
    assert span(month)[0] == "2023-10-01T04:00:00.000Z"
    assert cal.previous(month).end_ms == month.start_ms


def test_a_week_can_start_at_a_jump_over_midnight() -> None:
    # Asia/Tehran: Monday 2021-03-22 00:00 +0330 did not exist; the clock went to 01:00 +0430.
    cal = Calendar("Asia/Tehran")
    week = cal.window_by_id(WEEKLY, "2021-W12")
    assert span(week)[0] == "2021-03-21T20:30:00.000Z"
    assert cal.window_at(WEEKLY, ms("2021-03-21T20:29:59.999Z")).period_id == "2021-W11"


def test_santiago_falls_back_across_midnight_so_the_repeated_hour_is_saturday_23() -> None:
    # 2026-04-04 23:59:59 -03 is followed by 2026-04-04 23:00:00 -04.
    cal = Calendar("America/Santiago")
    saturday = cal.window_by_id(DAILY, "2026-04-04")
    assert span(saturday) == ("2026-04-04T03:00:00.000Z", "2026-04-05T04:00:00.000Z")
    assert hours(saturday) == 25
    eleven = cal.window_by_id(HOURLY, "2026-04-04T23")
    assert span(eleven) == ("2026-04-05T02:00:00.000Z", "2026-04-05T04:00:00.000Z")
    assert cal.window_at(DAILY, ms("2026-04-05T04:00:00Z")).period_id == "2026-04-05"


def test_a_whole_skipped_day_has_no_window() -> None:
    # Pacific/Apia went from 2011-12-29 23:59:59 -10 straight to 2011-12-31 00:00:00 +14.
    cal = Calendar("Pacific/Apia")
    with pytest.raises(UnknownPeriod):
        cal.window_by_id(DAILY, "2011-12-30")
    with pytest.raises(UnknownPeriod):
        cal.window_by_id(HOURLY, "2011-12-30T12")
    thursday = cal.window_by_id(DAILY, "2011-12-29")
    saturday = cal.window_by_id(DAILY, "2011-12-31")
    assert cal.next(thursday) == saturday
    assert cal.previous(saturday) == thursday
    assert thursday.end_ms == saturday.start_ms
    assert cal.next(cal.window_by_id(HOURLY, "2011-12-29T23")).period_id == "2011-12-31T00"
    week = cal.window_at(WEEKLY, ms("2011-12-29T12:00:00-10:00"))
    assert week.period_id == "2011-W52"
    assert hours(week) == 6 * 24


# -- shifts that are not whole hours ---------------------------------------------------------------


def test_lord_howe_half_hour_shifts() -> None:
    cal = Calendar("Australia/Lord_Howe")
    # 2026-10-04 02:00 +1030 -> 02:30 +11: the 02 hour lasts 30 minutes.
    short = cal.window_by_id(HOURLY, "2026-10-04T02")
    assert span(short) == ("2026-10-03T15:30:00.000Z", "2026-10-03T16:00:00.000Z")
    # 2026-04-05 02:00 +11 -> 01:30 +1030: the 01 hour lasts 90 minutes.
    long = cal.window_by_id(HOURLY, "2026-04-05T01")
    assert span(long) == ("2026-04-04T14:00:00.000Z", "2026-04-04T15:30:00.000Z")
    assert hours(cal.window_by_id(DAILY, "2026-04-05")) == 24.5
    assert hours(cal.window_by_id(DAILY, "2026-10-04")) == 23.5


def test_chatham_fall_back_across_an_hour_boundary() -> None:
    # 2026-04-05 03:45 +1345 -> 02:45 +1245: the second 02:45..02:59 comes after the first 03:00,
    # so it belongs to the 03 window, which ends when the clock first reads 04:00.
    cal = Calendar("Pacific/Chatham")
    three = cal.window_by_id(HOURLY, "2026-04-05T03")
    assert span(three) == ("2026-04-04T13:15:00.000Z", "2026-04-04T15:15:00.000Z")
    second_245 = ms("2026-04-05T02:50:00+12:45")
    assert cal.window_at(HOURLY, second_245) == three
    first_245 = ms("2026-04-05T02:50:00+13:45")
    assert cal.window_at(HOURLY, first_245).period_id == "2026-04-05T02"


# -- ISO weeks ------------------------------------------------------------------------------------


def test_iso_week_53_of_2020_runs_into_2021() -> None:
    cal = Calendar("UTC")
    week = cal.window_by_id(WEEKLY, "2020-W53")
    assert span(week) == ("2020-12-28T00:00:00.000Z", "2021-01-04T00:00:00.000Z")
    first = cal.next(week)
    assert first.period_id == "2021-W01"
    assert span(first)[0] == "2021-01-04T00:00:00.000Z"
    assert cal.window_at(WEEKLY, ms("2021-01-03T23:59:59.999Z")) == week
    assert cal.window_at(WEEKLY, ms("2021-01-01T12:00:00Z")) == week


def test_iso_week_53_of_2026_exists() -> None:
    assert date(2026, 12, 31).isocalendar().week == 53
    cal = Calendar("UTC")
    week = cal.window_by_id(WEEKLY, "2026-W53")
    assert span(week) == ("2026-12-28T00:00:00.000Z", "2027-01-04T00:00:00.000Z")
    assert cal.next(week).period_id == "2027-W01"
    assert cal.previous(week).period_id == "2026-W52"


@pytest.mark.parametrize("period_id", ["2021-W53", "2027-W53", "2026-W54", "2026-W00"])
def test_a_week_the_iso_year_does_not_have_is_unknown(period_id: str) -> None:
    with pytest.raises(UnknownPeriod):
        Calendar("UTC").window_by_id(WEEKLY, period_id)


def test_a_week_spanning_a_month_end_is_one_window() -> None:
    cal = Calendar("UTC")
    week = cal.window_at(WEEKLY, ms("2026-11-30T08:00:00Z"))
    assert week.period_id == "2026-W49"
    assert span(week) == ("2026-11-30T00:00:00.000Z", "2026-12-07T00:00:00.000Z")
    assert cal.window_at(WEEKLY, ms("2026-12-06T23:00:00Z")) == week


def test_the_week_holding_new_year_is_named_by_its_iso_year() -> None:
    cal = Calendar("UTC")
    # Friday 2027-01-01 is in the ISO week of Monday 2026-12-28.
    assert cal.window_at(WEEKLY, ms("2027-01-01T00:00:00Z")).period_id == "2026-W53"
    # Tuesday 2019-12-31 is in 2020-W01.
    assert cal.window_at(WEEKLY, ms("2019-12-31T00:00:00Z")).period_id == "2020-W01"


# -- months ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period_id", "start", "end", "days"),
    [
        ("2026-01", "2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z", 31),
        ("2026-02", "2026-02-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z", 28),
        ("2028-02", "2028-02-01T00:00:00.000Z", "2028-03-01T00:00:00.000Z", 29),
        ("2026-04", "2026-04-01T00:00:00.000Z", "2026-05-01T00:00:00.000Z", 30),
        ("2026-12", "2026-12-01T00:00:00.000Z", "2027-01-01T00:00:00.000Z", 31),
    ],
)
def test_month_windows(period_id: str, start: str, end: str, days: int) -> None:
    window = Calendar("UTC").window_by_id(MONTHLY, period_id)
    assert span(window) == (start, end)
    assert hours(window) == days * 24


def test_december_is_followed_by_january_of_the_next_year() -> None:
    cal = Calendar("UTC")
    december = cal.window_by_id(MONTHLY, "2026-12")
    assert cal.next(december).period_id == "2027-01"
    assert cal.previous(cal.next(december)) == december
    assert cal.next(cal.window_by_id(DAILY, "2026-12-31")).period_id == "2027-01-01"
    assert cal.next(cal.window_by_id(HOURLY, "2026-12-31T23")).period_id == "2027-01-01T00"


def test_leap_day_is_a_day() -> None:
    cal = Calendar("UTC")
    assert cal.next(cal.window_by_id(DAILY, "2028-02-28")).period_id == "2028-02-29"
    assert cal.next(cal.window_by_id(DAILY, "2026-02-28")).period_id == "2026-03-01"
    assert cal.window_at(DAILY, ms("2028-02-29T23:59:59.999Z")).period_id == "2028-02-29"


def test_a_dst_month_is_not_a_whole_number_of_days() -> None:
    cal = Calendar("Europe/Madrid")
    assert hours(cal.window_by_id(MONTHLY, "2026-03")) == 31 * 24 - 1
    assert hours(cal.window_by_id(MONTHLY, "2026-10")) == 31 * 24 + 1


# -- strict ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "period_id"),
    [
        (HOURLY, "2026-12-02"),  # a daily id for hourly
        (HOURLY, "2026-12-02T1"),
        (HOURLY, "2026-12-02t13"),
        (HOURLY, "2026-12-02T13:00"),
        (HOURLY, "2026-12-02T24"),
        (HOURLY, "2026-12-02 13"),
        (DAILY, "2026-12-02T13"),
        (DAILY, "2026-12-2"),
        (DAILY, "2026-12-32"),
        (DAILY, "2026-02-29"),
        (DAILY, "2026-13-01"),
        (DAILY, "20261202"),
        (DAILY, "2026-12-02\n"),
        (DAILY, " 2026-12-02"),
        (DAILY, "٢٠٢٦-12-02"),
        (DAILY, "alltime"),
        (DAILY, ""),
        (WEEKLY, "2026-49"),
        (WEEKLY, "2026-W9"),
        (WEEKLY, "2026-w49"),
        (WEEKLY, "2026W49"),
        (WEEKLY, "2026-W49-1"),
        (WEEKLY, "2026-12"),
        (MONTHLY, "2026-00"),
        (MONTHLY, "2026-13"),
        (MONTHLY, "2026-1"),
        (MONTHLY, "2026-12-01"),
        (MONTHLY, "2026-W49"),
        (MONTHLY, "../2026-12"),
        (DAILY, "1969-12-31"),  # years outside 1970..9999
        (MONTHLY, "1969-12"),
        (WEEKLY, "1969-W52"),
        (HOURLY, "0000-01-01T00"),
        (DAILY, "10000-01-01"),
    ],
)
def test_malformed_or_unreal_ids_are_unknown_periods(kind: PeriodKind, period_id: str) -> None:
    with pytest.raises(UnknownPeriod):
        Calendar("UTC").window_by_id(kind, period_id)


def test_unknown_period_is_a_value_error() -> None:
    assert issubclass(UnknownPeriod, ValueError)


# -- range ----------------------------------------------------------------------------------------


def test_the_first_supported_windows() -> None:
    utc = Calendar("UTC")
    assert utc.window_at(DAILY, 0).period_id == "1970-01-01"
    # 1970-01-01 was a Thursday; its ISO week starts on Monday 1969-12-29 and is named 1970-W01.
    assert span(utc.window_at(WEEKLY, 0)) == ("1969-12-29T00:00:00.000Z", "1970-01-05T00:00:00.000Z")
    with pytest.raises(ValueError):
        utc.previous(utc.window_by_id(DAILY, "1970-01-01"))
    # East of UTC, the first local day starts before the epoch.
    kolkata = Calendar("Asia/Kolkata").window_by_id(DAILY, "1970-01-01")
    assert span(kolkata)[0] == "1969-12-31T18:30:00.000Z"


def test_instants_outside_the_supported_range_are_rejected() -> None:
    cal = Calendar("UTC")
    for kind in PeriodKind:
        with pytest.raises(ValueError):
            cal.window_at(kind, -1)
        with pytest.raises(ValueError):
            cal.window_at(kind, MAX_MS)


def test_an_instant_whose_local_day_is_in_1969_has_no_daily_window() -> None:
    cal = Calendar("America/New_York")  # ms 0 is 1969-12-31 19:00 local
    with pytest.raises(ValueError):
        cal.window_at(DAILY, 0)
    assert cal.window_at(WEEKLY, 0).period_id == "1970-W01"
    assert cal.window_at(DAILY, ms("1970-01-01T05:00:00Z")).period_id == "1970-01-01"


def test_a_cached_window_reaching_before_1970_does_not_admit_negative_instants() -> None:
    cal = Calendar("Asia/Kolkata")
    assert cal.window_at(DAILY, 0).period_id == "1970-01-01"
    assert cal.window_at(DAILY, 1).period_id == "1970-01-01"
    with pytest.raises(ValueError):
        cal.window_at(DAILY, -1)


def test_the_last_window_of_each_kind_is_not_supported() -> None:
    cal = Calendar("UTC")
    for kind, last_id, before_last_id in [
        (HOURLY, "9999-12-31T23", "9999-12-31T22"),
        (DAILY, "9999-12-31", "9999-12-30"),
        (WEEKLY, "9999-W52", "9999-W51"),
        (MONTHLY, "9999-12", "9999-11"),
    ]:
        with pytest.raises(UnknownPeriod):
            cal.window_by_id(kind, last_id)
        with pytest.raises(ValueError):
            cal.next(cal.window_by_id(kind, before_last_id))
    with pytest.raises(ValueError):
        cal.window_at(HOURLY, MAX_MS - 1)
    assert cal.window_at(HOURLY, MAX_MS - HOUR_MS - 1).period_id == "9999-12-31T22"


def test_far_east_instants_in_local_year_10000_are_rejected() -> None:
    cal = Calendar("Pacific/Kiritimati")  # UTC+14
    with pytest.raises(ValueError):
        cal.window_at(DAILY, MAX_MS - 1)


def test_unknown_kind_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        Calendar("UTC").window_at("fortnightly", 0)
    with pytest.raises(UnknownPeriod):
        Calendar("UTC").window_by_id("fortnightly", "2026")


def test_a_window_from_another_timezone_is_refused_by_previous_and_next() -> None:
    foreign = Calendar("Asia/Kolkata").window_by_id(DAILY, "2026-12-02")
    with pytest.raises(ValueError):
        Calendar("UTC").next(foreign)


# -- timezones ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["Mars/Olympus_Mons", "", "utc ", "../etc/passwd", "/usr/share/zoneinfo/UTC", "America"]
)
def test_an_unknown_timezone_is_a_clear_value_error(name: str) -> None:
    with pytest.raises(ValueError, match="timezone"):
        Calendar(name)


def test_calendar_keeps_its_timezone_name() -> None:
    assert Calendar("Asia/Kolkata").timezone == "Asia/Kolkata"


# -- brute force: the definition, checked minute by minute around transitions -------------------


def _unit_of(kind: PeriodKind, wall: datetime) -> str:
    if kind is HOURLY:
        return wall.strftime("%Y-%m-%dT%H")
    if kind is DAILY:
        return wall.strftime("%Y-%m-%d")
    if kind is WEEKLY:
        iso = wall.isocalendar()
        return f"{iso.year:04d}-W{iso.week:02d}"
    return wall.strftime("%Y-%m")


@pytest.mark.parametrize(
    ("zone", "around"),
    [
        ("Europe/Madrid", "2026-03-29T12:00:00Z"),
        ("Europe/Madrid", "2026-10-25T12:00:00Z"),
        ("America/New_York", "2026-03-08T12:00:00Z"),
        ("America/New_York", "2026-11-01T12:00:00Z"),
        ("America/Sao_Paulo", "2018-11-04T12:00:00Z"),
        ("America/Santiago", "2026-04-05T12:00:00Z"),
        ("America/Santiago", "2026-09-06T12:00:00Z"),
        ("America/Havana", "2026-11-01T12:00:00Z"),
        ("Australia/Lord_Howe", "2026-04-05T00:00:00Z"),
        ("Australia/Lord_Howe", "2026-10-04T00:00:00Z"),
        ("Pacific/Chatham", "2026-04-05T00:00:00Z"),
        ("Pacific/Chatham", "2026-09-27T00:00:00Z"),
        ("Pacific/Apia", "2011-12-30T12:00:00Z"),
        ("Asia/Tehran", "2021-03-22T00:00:00Z"),
        ("America/Asuncion", "2023-10-01T00:00:00Z"),
    ],
)
def test_windows_match_the_running_maximum_of_the_wall_clock(zone: str, around: str) -> None:
    # An instant t is in the window of unit U exactly when U holds the latest wall-clock reading
    # so far (max over s <= t): a window starts the first time the clock reads U's first local
    # time or later. Checked every 5 minutes over three days (every shift here is on a multiple of
    # 15 minutes), starting a day early so the running maximum has seen any earlier repeat.
    tz = ZoneInfo(zone)
    cal = Calendar(zone)
    center = ms(around)
    running_max: datetime | None = None
    previous: dict[PeriodKind, Window] = {}
    for instant in range(center - 60 * HOUR_MS, center + 36 * HOUR_MS, 5 * 60_000):
        wall = datetime.fromtimestamp(instant // 1000, tz).replace(tzinfo=None, fold=0)
        running_max = wall if running_max is None else max(running_max, wall)
        if instant < center - 36 * HOUR_MS:
            continue
        for kind in TIMED_KINDS:
            window = cal.window_at(kind, instant)
            assert window.period_id == _unit_of(kind, running_max), (kind, format_ms(instant))
            assert window.start_ms is not None and window.end_ms is not None
            assert window.start_ms <= instant < window.end_ms
            if kind in previous and previous[kind] != window:
                # A new window starts exactly where the old one ended: within this 5-minute step.
                assert previous[kind].end_ms == window.start_ms
                assert instant - 5 * 60_000 < window.start_ms <= instant
            previous[kind] = window


# -- properties over random instants ---------------------------------------------------------------

RANDOM_ZONES = [
    "UTC",
    "Asia/Kolkata",
    "Europe/Madrid",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/Sao_Paulo",
    "America/Santiago",
    "Pacific/Apia",
]
# From March 1970, so no window or previous window names 1969; to 2100.
EARLIEST = ms("1970-03-01T00:00:00Z")
INSTANTS = st.integers(min_value=EARLIEST, max_value=ms("2100-01-01T00:00:00Z"))


@settings(max_examples=300, deadline=None)
@given(
    zone=st.sampled_from(RANDOM_ZONES),
    kind=st.sampled_from(TIMED_KINDS),
    instant=INSTANTS,
)
def test_window_at_round_trips_through_ids_and_neighbours(
    zone: str, kind: PeriodKind, instant: int
) -> None:
    cal = Calendar(zone)
    window = cal.window_at(kind, instant)
    assert window.kind is kind
    assert window.start_ms is not None and window.end_ms is not None
    assert window.start_ms <= instant < window.end_ms
    assert cal.window_by_id(kind, window.period_id) == window
    following = cal.next(window)
    assert following.start_ms == window.end_ms
    assert cal.previous(following) == window
    assert cal.window_at(kind, window.end_ms) == following
    assert cal.window_at(kind, window.end_ms - 1) == window
    before = cal.previous(window)
    assert before.end_ms == window.start_ms
    assert cal.next(before) == window
    # A fresh calendar (no caches) agrees.
    assert Calendar(zone).window_at(kind, instant) == window
    assert Calendar(zone).window_by_id(kind, window.period_id) == window


@settings(max_examples=100, deadline=None)
@given(
    zone=st.sampled_from(RANDOM_ZONES),
    queries=st.lists(
        st.tuples(
            st.sampled_from(TIMED_KINDS),
            st.one_of(INSTANTS, st.integers(min_value=-5, max_value=5).map(lambda d: d * 1_800_000)),
        ),
        min_size=1,
        max_size=40,
    ),
    base=INSTANTS,
)
def test_the_window_cache_never_changes_an_answer(
    zone: str, queries: list[tuple[PeriodKind, int]], base: int
) -> None:
    # Small offsets around one base instant hop between neighbouring windows: the cache's hard case.
    cal = Calendar(zone)
    for kind, value in queries:
        instant = value if value >= EARLIEST else base + value
        assert cal.window_at(kind, instant) == Calendar(zone).window_at(kind, instant)


@settings(max_examples=200, deadline=None)
@given(zone=st.sampled_from(RANDOM_ZONES), day=st.dates(date(1971, 1, 1), date(2099, 12, 31)))
def test_days_tile_the_timeline(zone: str, day: date) -> None:
    cal = Calendar(zone)
    try:
        window = cal.window_by_id(DAILY, day.isoformat())
    except UnknownPeriod:
        # Only a day the clocks skipped has no window: the previous and next days then touch.
        before = cal.window_by_id(DAILY, (day - timedelta(days=1)).isoformat())
        assert cal.next(before).period_id == (day + timedelta(days=1)).isoformat()
        return
    assert cal.next(window).start_ms == window.end_ms
    assert 22 <= hours(window) <= 26 or zone == "Pacific/Apia"
