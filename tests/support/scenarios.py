"""The contract's conformance scenarios (tests/conformance/*.json, copied from ../shared)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from arena.config import parse_board
from arena.engine.spec import BoardSpec

DIR = Path(__file__).resolve().parent.parent / "conformance"
NAMES = sorted(p.stem for p in DIR.glob("*.json"))


def load(name: str) -> dict[str, Any]:
    scenario: dict[str, Any] = orjson.loads((DIR / f"{name}.json").read_bytes())
    return scenario


def boards(scenario: dict[str, Any]) -> dict[str, BoardSpec]:
    return {name: parse_board(name, body) for name, body in scenario["boards"].items()}


def expected_results(step: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(r) for r in step["expect"]]


def without_messages(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Results as the scenarios spell them (no message: clients never match on it), after
    checking that every rejection has its one line naming a field."""
    for r in results:
        if r["status"] == "rejected":
            message = r.get("message")
            assert isinstance(message, str) and "\n" not in message and ": " in message, r
    return [{k: v for k, v in r.items() if k != "message"} for r in results]
