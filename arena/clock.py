"""The server clock: wall-clock epoch milliseconds that never run backwards in one process."""

from __future__ import annotations

import time
from collections.abc import Callable


class Clock:
    """Stamps received_at and decides closes. ``set`` pins it (tests only, via fault injection)."""

    def __init__(self) -> None:
        self._last = 0
        self._pinned: int | None = None
        self._listeners: list[Callable[[], None]] = []

    def now(self) -> int:
        ms = time.time_ns() // 1_000_000 if self._pinned is None else self._pinned
        if ms < self._last:
            ms = self._last
        self._last = ms
        return ms

    def set(self, ms: int | None) -> None:
        """Pin the clock to ``ms`` (None: follow the wall clock again) and wake the listeners."""
        self._pinned = ms
        self._last = 0 if ms is None else ms
        for listener in self._listeners:
            listener()

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)
