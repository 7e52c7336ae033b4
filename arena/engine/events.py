"""Score events as sent, and the shape checks of the contract (validation steps 1-3).

Steps 4-7 (duplicates, bounds, skew, closed windows) need the board's state and live in
`arena.engine.board`; the order of all steps is the contract's and is fixed here and there.
Every rejection carries its `message`: one line for a person naming the field and the rule
(`value: must be an integer within [0, 1000000000], got 3.5`), built here as data; the edges
only serialise it. Clients match on `reason`, never on the message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import NamedTuple

import orjson

from arena.engine.spec import BoardSpec
from arena.engine.times import MAX_MS, format_ms, parse_rfc3339_ms

MAX_MEMBER_CHARS = 128
MAX_KEY_CHARS = 128
MAX_META_BYTES = 1024

# Unicode category Cc is exactly U+0000-U+001F and U+007F-U+009F. U+D800-U+DFFF are surrogates:
# JSON's "\ud800" escape reads as one, but alone it is no Unicode scalar value and has no UTF-8
# form, so no journal could store it.
_CONTROL_OR_SURROGATE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class Reason(StrEnum):
    """Why an event was rejected; the values are the wire codes."""

    INVALID_EVENT = "invalid_event"
    UNKNOWN_BOARD = "unknown_board"
    FORBIDDEN = "forbidden"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    VALUE_OUT_OF_RANGE = "value_out_of_range"
    OCCURRED_IN_FUTURE = "occurred_in_future"
    OUTSIDE_WINDOW = "outside_window"
    PERIOD_CLOSED = "period_closed"
    BOARD_RETIRED = "board_retired"
    UNAVAILABLE = "unavailable"


class Status(StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"


# Events and results are created per event on the hot path: NamedTuples are immutable like
# frozen dataclasses and three times cheaper to build.
class Result(NamedTuple):
    """The answer for one submitted event, in submit order."""

    idempotency_key: str | None
    status: Status
    reason: Reason | None = None
    message: str | None = None
    """A rejection's one line for a person: the field and the rule it broke."""


class Event(NamedTuple):
    """An event that passed the shape checks. ``meta`` is compact JSON text or None."""

    board: str
    member: str
    value: int
    occurred_at: int
    idempotency_key: str
    meta: str | None = None
    region: str | None = None
    """One of the board's regions, or None (always None on a board without regions)."""

    @property
    def fingerprint(self) -> Fingerprint:
        return (self.member, self.value, self.occurred_at, self.region)


Fingerprint = tuple[str, int, int, str | None]
"""(member, value, occurred_at, region): what must match for a retry to be a duplicate."""


def _echo_key(raw: dict[str, object]) -> str | None:
    key = raw.get("idempotency_key")
    return key if isinstance(key, str) else None


KEY_RULE = f"must be a string of 1 to {MAX_KEY_CHARS} characters of Unicode text"
MEMBER_RULE = f"must be a string of 1 to {MAX_MEMBER_CHARS} characters without control characters"
OCCURRED_AT_RULE = ("must be an RFC 3339 time with its offset (2026-12-06T02:00:00Z) or epoch milliseconds, "
                    "not before 1970")
_SHOWN_CHARS = 60


def region_rule(regions: tuple[str, ...]) -> str:
    shown_regions = ", ".join(regions[:8]) + (", …" if len(regions) > 8 else "")
    return f"must be one of the board's regions ({shown_regions}) or absent"


def value_rule(spec: BoardSpec) -> str:
    """The rule a value breaks, at step 3 (not an integer) as at step 5 (out of the bounds)."""
    return f"must be an integer within [{spec.min_value}, {spec.max_value}]"


def shown(value: object) -> str:
    """A value as sent, as JSON text for a message, cut to a few dozen characters."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # beyond 64 bits, a lone surrogate (json escapes it), or nested too deep
        try:
            text = json.dumps(value)
        except RecursionError:
            text = "a value nested too deep"
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 1] + "…"


def instant(ms: int) -> str:
    """An accepted occurred_at for a message: RFC 3339, or epoch ms past the year 9999 (an
    offset such as -23:59 takes a time written in 9999 there)."""
    return format_ms(ms) if ms < MAX_MS else f"{ms} ms since 1970"


def rejected(key: str | None, reason: Reason, message: str) -> Result:
    return Result(key, Status.REJECTED, reason, message)


def _occurred_at_ms(value: object) -> int | None:
    """Epoch ms of an occurred_at as sent, or None when invalid. Before 1970 is invalid in both
    forms: the engine's calendar starts at 0 ms."""
    if type(value) is int:
        ms = value
    elif isinstance(value, str):
        try:
            ms = parse_rfc3339_ms(value)
        except ValueError:
            return None
    else:
        return None
    return ms if ms >= 0 else None


def valid_text(text: str) -> bool:
    """Whether a string is Unicode scalar values only (no lone surrogate), so that it has a UTF-8
    form. O(1) for ASCII text."""
    return text.isascii() or _SURROGATE.search(text) is None


def plain_text(text: str) -> bool:
    """Whether a string is Unicode scalar values without a control character (category Cc), as a
    member's name is: no tab or newline can cut a canonical text line of it."""
    return _CONTROL_OR_SURROGATE.search(text) is None


def _meta_text(raw: dict[str, object]) -> str | None:
    """Compact JSON of meta that reads back as the same value, None when absent; ValueError when
    not an object, too big, or holding what JSON text cannot carry exactly (a lone surrogate, an
    infinity)."""
    meta = raw.get("meta")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise ValueError("must be an object")
    try:
        encoded = orjson.dumps(meta)
        # orjson writes an infinity as null: only a text with "null" in it can hide one
        exact = b"null" not in encoded
    except TypeError:  # an integer beyond 64 bits, a lone surrogate, or nested over 255 deep
        exact = False
    if not exact:  # the rare meta that json settles: it refuses infinities, writes big integers
        try:
            encoded = json.dumps(meta, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
        except (ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
            raise ValueError("must be JSON text: no lone surrogate, no infinity, not nested too deep") from exc
    if len(encoded) > MAX_META_BYTES:
        raise ValueError(f"must be at most {MAX_META_BYTES} bytes as JSON")
    return encoded.decode()


def _broken(raw: dict[str, object], field: str, rule: str) -> str:
    return f"{field}: {rule}, got {shown(raw[field])}" if field in raw else f"{field}: missing"


def _invalid(key: str | None, raw: dict[str, object], field: str, rule: str) -> Result:
    return rejected(key, Reason.INVALID_EVENT, _broken(raw, field, rule))


def _unknown_board(raw: dict[str, object]) -> str:
    board = raw.get("board")
    return f"board: no board named {shown(board)}" if isinstance(board, str) else _broken(raw, "board", "must be a string")


def parse_event(
    raw: object,
    boards: Mapping[str, BoardSpec],
    may_write: Callable[[str], bool],
) -> Event | Result:
    """Validation steps 1-3: an `Event`, or the rejecting `Result`. O(size of the event)."""
    if not isinstance(raw, dict):
        return rejected(None, Reason.INVALID_EVENT, f"event: must be an object, got {shown(raw)}")
    key = _echo_key(raw)
    board = raw.get("board")
    if not isinstance(board, str) or board not in boards:
        return rejected(key, Reason.UNKNOWN_BOARD, _unknown_board(raw))
    if not may_write(board):
        return rejected(key, Reason.FORBIDDEN, f"board: this game server may not write board {shown(board)}")
    if key is None or not 1 <= len(key) <= MAX_KEY_CHARS or not valid_text(key):
        return _invalid(key, raw, "idempotency_key", KEY_RULE)
    member = raw.get("member")
    if not isinstance(member, str) or not 1 <= len(member) <= MAX_MEMBER_CHARS or _CONTROL_OR_SURROGATE.search(member):
        return _invalid(key, raw, "member", MEMBER_RULE)
    value = raw.get("value")
    if type(value) is not int:  # bool is an int subclass and is invalid, like floats
        return _invalid(key, raw, "value", value_rule(boards[board]))
    occurred_at = _occurred_at_ms(raw.get("occurred_at"))
    if occurred_at is None:
        return _invalid(key, raw, "occurred_at", OCCURRED_AT_RULE)
    region = None  # ignored on a board without regions
    regions = boards[board].regions
    if regions and (sent := raw.get("region")) is not None:
        if not isinstance(sent, str) or sent not in regions:
            return _invalid(key, raw, "region", region_rule(regions))
        region = sent
    if "meta" not in raw:  # the common event: no meta to encode
        return Event(board, member, value, occurred_at, key, None, region)
    try:
        meta = _meta_text(raw)
    except ValueError as exc:
        return _invalid(key, raw, "meta", str(exc))
    return Event(board, member, value, occurred_at, key, meta, region)
