"""A submit frame's events split by board (each board's part goes to the node serving it), and
the parts' results merged back into one ack in event order. Pure: no I/O, no event loop.

The shape checks (validation steps 1-3) are decided where the frame is read, so only events that
passed them travel; the owner decides the rest (duplicates, bounds, the future and close rules).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from arena.engine.events import Event, Result


@dataclass(slots=True)
class Part:
    """One board's events of a frame, with their places in the frame."""

    board: str
    indexes: list[int] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


@dataclass(slots=True)
class Split:
    """A frame's events: ``decided`` holds the results known where it was read (the rejected
    shapes, by index), ``rejected`` the same results by board ("" for no known board: what the
    metrics count), ``parts`` the rest by board, in the order the boards first appear."""

    size: int
    decided: dict[int, Result] = field(default_factory=dict)
    rejected: dict[str, list[Result]] = field(default_factory=dict)
    parts: dict[str, Part] = field(default_factory=dict)


def split(parsed: Iterable[tuple[Event | Result, str | None]]) -> Split:
    """Group a frame's parsed events (each with the board its raw form names, if any) by board.
    O(events)."""
    out = Split(0)
    for index, (event, board) in enumerate(parsed):
        out.size = index + 1
        if isinstance(event, Result):
            out.decided[index] = event
            out.rejected.setdefault(board or "", []).append(event)
            continue
        part = out.parts.get(event.board)
        if part is None:
            part = out.parts[event.board] = Part(event.board)
        part.indexes.append(index)
        part.events.append(event)
    return out


def merge(frame: Split, answered: Iterable[tuple[Part, Sequence[Result]]]) -> list[Result]:
    """The frame's results in event order: its decided ones and each part's answer (one result
    per event of the part, in the part's order). Raises ValueError when a part's answer has
    another length or an event is left without a result. O(events)."""
    results: list[Result | None] = [None] * frame.size
    for index, result in frame.decided.items():
        results[index] = result
    for part, answer in answered:
        for index, result in zip(part.indexes, answer, strict=True):
            results[index] = result
    if any(r is None for r in results):
        raise ValueError("an event of the frame has no result")
    return results  # type: ignore[return-value]

