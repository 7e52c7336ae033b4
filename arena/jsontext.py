"""JSON text: the one encoder of every answer, frame and message between nodes."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(body: dict[str, Any]) -> bytes:
    """``body`` as compact JSON text. orjson refuses integers beyond 64 bits (an event's value, a
    query field or an echoed frame id may be one), lone surrogates (JSON's "\\ud800" escape reads
    as one) and nesting over 255 deep: those few bodies go through json, which writes such a
    surrogate back as it was sent."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
