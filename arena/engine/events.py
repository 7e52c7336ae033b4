"""Score events as sent, and the shape checks of the contract (validation steps 1-3).

Steps 4-7 (duplicates, bounds, skew, closed windows) need the board's state and live in
`arena.engine.board`; the order of all steps is the contract's and is fixed here and there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Container
from enum import StrEnum
from typing import NamedTuple

import orjson

from arena.engine.times import parse_rfc3339_ms

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
    PERIOD_CLOSED = "period_closed"
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


class Event(NamedTuple):
    """An event that passed the shape checks. ``meta`` is compact JSON text or None."""

    board: str
    member: str
    value: int
    occurred_at: int
    idempotency_key: str
    meta: str | None = None

    @property
    def fingerprint(self) -> Fingerprint:
        return (self.member, self.value, self.occurred_at)


Fingerprint = tuple[str, int, int]
"""(member, value, occurred_at): what must match for a retry to be a duplicate."""


def _echo_key(raw: dict[str, object]) -> str | None:
    key = raw.get("idempotency_key")
    return key if isinstance(key, str) else None


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


def _meta_text(raw: dict[str, object]) -> str | None:
    """Compact JSON of meta that reads back as the same value, None when absent; ValueError when
    not an object, too big, or holding what JSON text cannot carry exactly (a lone surrogate, an
    infinity)."""
    meta = raw.get("meta")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise ValueError("meta must be an object")
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
            raise ValueError("meta is not JSON text") from exc
    if len(encoded) > MAX_META_BYTES:
        raise ValueError("meta is too big")
    return encoded.decode()


def _invalid(key: str | None) -> Result:
    return Result(key, Status.REJECTED, Reason.INVALID_EVENT)


def parse_event(
    raw: object,
    boards: Container[str],
    may_write: Callable[[str], bool],
) -> Event | Result:
    """Validation steps 1-3: an `Event`, or the rejecting `Result`. O(size of the event)."""
    if not isinstance(raw, dict):
        return Result(None, Status.REJECTED, Reason.INVALID_EVENT)
    key = _echo_key(raw)
    board = raw.get("board")
    if not isinstance(board, str) or board not in boards:
        return Result(key, Status.REJECTED, Reason.UNKNOWN_BOARD)
    if not may_write(board):
        return Result(key, Status.REJECTED, Reason.FORBIDDEN)
    if key is None or not 1 <= len(key) <= MAX_KEY_CHARS or not valid_text(key):
        return _invalid(key)
    member = raw.get("member")
    if not isinstance(member, str) or not 1 <= len(member) <= MAX_MEMBER_CHARS or _CONTROL_OR_SURROGATE.search(member):
        return _invalid(key)
    value = raw.get("value")
    if type(value) is not int:  # bool is an int subclass and is invalid, like floats
        return _invalid(key)
    occurred_at = _occurred_at_ms(raw.get("occurred_at"))
    if occurred_at is None:
        return _invalid(key)
    if "meta" not in raw:  # the common event: no meta to encode
        return Event(board, member, value, occurred_at, key)
    try:
        meta = _meta_text(raw)
    except ValueError:
        return _invalid(key)
    return Event(board, member, value, occurred_at, key, meta)
