from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.engine.times import MAX_MS, MIN_MS, format_ms, format_optional_ms, parse_rfc3339_ms

# 2026-12-02T13:00:00.000Z, the contract's example instant.
NOON_ISH = 1_796_216_400_000


def test_format_ms_of_the_contract_example() -> None:
    assert format_ms(NOON_ISH) == "2026-12-02T13:00:00.000Z"


def test_format_ms_always_writes_three_fraction_digits() -> None:
    assert format_ms(0) == "1970-01-01T00:00:00.000Z"
    assert format_ms(7) == "1970-01-01T00:00:00.007Z"
    assert format_ms(NOON_ISH + 3_723_045) == "2026-12-02T14:02:03.045Z"


def test_format_ms_before_1970_floors_to_the_previous_second() -> None:
    assert format_ms(-1) == "1969-12-31T23:59:59.999Z"
    assert format_ms(-1000) == "1969-12-31T23:59:59.000Z"


def test_format_ms_at_the_ends_of_its_range() -> None:
    assert format_ms(MIN_MS) == "0001-01-01T00:00:00.000Z"
    assert format_ms(MAX_MS - 1) == "9999-12-31T23:59:59.999Z"
    with pytest.raises(ValueError):
        format_ms(MAX_MS)
    with pytest.raises(ValueError):
        format_ms(MIN_MS - 1)


def test_format_ms_of_a_leap_day() -> None:
    assert format_ms(parse_rfc3339_ms("2028-02-29T23:59:59.999Z")) == "2028-02-29T23:59:59.999Z"


def test_format_optional_ms_passes_none_through() -> None:
    assert format_optional_ms(None) is None
    assert format_optional_ms(NOON_ISH) == "2026-12-02T13:00:00.000Z"


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-02T13:00:00Z",
        "2026-12-02T13:00:00z",
        "2026-12-02t13:00:00Z",
        "2026-12-02T13:00:00.000Z",
        "2026-12-02T13:00:00+00:00",
        "2026-12-02T13:00:00-00:00",
        "2026-12-02T18:30:00+05:30",
        "2026-12-02T10:00:00-03:00",
        "2026-12-03T02:45:00+13:45",
        "2026-12-01T23:00:00-14:00",
    ],
)
def test_parse_reads_every_offset_form_as_the_same_instant(text: str) -> None:
    assert parse_rfc3339_ms(text) == NOON_ISH


def test_parse_keeps_milliseconds() -> None:
    assert parse_rfc3339_ms("2026-12-02T13:00:00.5Z") == NOON_ISH + 500
    assert parse_rfc3339_ms("2026-12-02T13:00:00.05Z") == NOON_ISH + 50
    assert parse_rfc3339_ms("2026-12-02T13:00:00.123Z") == NOON_ISH + 123


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("2026-12-02T11:59:59.9999Z", 1_796_212_799_999),
        ("2026-12-02T11:59:59.999999999999Z", 1_796_212_799_999),
        ("2026-12-02T13:00:00.0001+05:30", NOON_ISH - 19_800_000),
        # Before 1970 the exact value is negative; flooring still drops the extra digits.
        ("1969-12-31T23:59:59.9999Z", -1),
        ("1969-12-31T23:59:59.0001Z", -1000),
    ],
)
def test_parse_floors_digits_finer_than_a_millisecond(text: str, expected_ms: int) -> None:
    assert parse_rfc3339_ms(text) == expected_ms


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-02T12:00:00",  # no offset
        "2026-12-02T12:00:00.000",
        "yesterday",
        "",
        "2026-12-02",
        "2026-12-02T12:00Z",  # no seconds
        "2026-12-02 12:00:00Z",  # space separator
        "2026-12-02T12:00:00+0530",  # offset without colon
        "2026-12-02T12:00:00+05",
        "2026-12-02T12:00:00.Z",  # empty fraction
        "2026-12-02T12:00:00ZZ",
        " 2026-12-02T12:00:00Z",
        "2026-12-02T12:00:00Z\n",
        "+2026-12-02T12:00:00Z",
        "26-12-02T12:00:00Z",
        "2026-12-2T12:00:00Z",
        "２０２６-12-02T12:00:00Z",  # full-width digits
        "٢٠٢٦-12-02T12:00:00Z",  # Arabic-Indic digits
        "2026-13-02T12:00:00Z",  # month 13
        "2026-00-02T12:00:00Z",
        "2026-02-30T12:00:00Z",  # Feb 30
        "2027-02-29T12:00:00Z",  # not a leap year
        "2026-12-00T12:00:00Z",
        "2026-12-02T24:00:00Z",  # hour 24
        "2026-12-02T12:60:00Z",
        "2026-12-02T23:59:60Z",  # second 60 where no leap second is inserted (not a month's end)
        "2026-12-31T22:59:60Z",
        "2026-12-31T23:59:61Z",
        "2026-12-02T12:00:00+24:00",
        "2026-12-02T12:00:00+05:60",
        "0000-01-01T00:00:00Z",
    ],
)
def test_parse_rejects_anything_but_rfc3339_with_an_offset(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rfc3339_ms(text)


@pytest.mark.parametrize(
    "text",
    ["2016-12-31T23:59:60Z", "2016-12-31T23:59:60.5Z", "2016-12-31T18:59:60-05:00", "2017-01-01T05:29:60+05:30"],
)
def test_a_leap_second_at_a_months_end_in_utc_reads_as_the_last_millisecond_before_it(text: str) -> None:
    assert parse_rfc3339_ms(text) == parse_rfc3339_ms("2017-01-01T00:00:00Z") - 1


def test_a_leap_second_at_the_end_of_june_is_valid_too() -> None:
    assert format_ms(parse_rfc3339_ms("2015-06-30T23:59:60Z")) == "2015-06-30T23:59:59.999Z"


def test_parse_accepts_leap_day_in_a_leap_year() -> None:
    assert format_ms(parse_rfc3339_ms("2028-02-29T00:00:00Z")) == "2028-02-29T00:00:00.000Z"


@given(st.integers(min_value=MIN_MS, max_value=MAX_MS - 1))
def test_format_then_parse_is_the_identity(ms: int) -> None:
    assert parse_rfc3339_ms(format_ms(ms)) == ms


@given(st.integers(min_value=0, max_value=MAX_MS - 1))
def test_format_ms_agrees_with_datetime(ms: int) -> None:
    moment = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    expected = moment.replace(tzinfo=None).isoformat(timespec="seconds")
    assert format_ms(ms) == f"{expected}.{ms % 1000:03d}Z"


@given(
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([timezone.utc]),
    ),
    st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59),
)
def test_parse_agrees_with_datetime_for_any_offset(moment: datetime, offset_minutes: int) -> None:
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    local = moment + timedelta(minutes=offset_minutes)
    # isoformat, not strftime: glibc writes year 1 as "1", not "0001".
    text = local.replace(tzinfo=None).isoformat(timespec="microseconds")
    text += f"{sign}{hours:02d}:{minutes:02d}"
    exact_us = (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
    assert parse_rfc3339_ms(text) == exact_us // 1000
