"""The server clock: wall-clock epoch milliseconds that never run backwards in one process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from arena.board.flag import Flag


class Clock:
    """Stamps received_at and decides closes. ``set`` pins it (the tests' clock route does)."""

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


async def wait_set(event: asyncio.Event | Flag, seconds: float | None) -> bool:
    """Wait until ``event`` is set (True) or ``seconds`` pass (False; None: no limit).

    Not `asyncio.wait_for`: on Python 3.11 it returns normally, and the caller's cancellation
    is lost, when the event is set in the same turn as the cancel (a loop that waits on a hint
    then never stops: a node hung on SIGTERM, renewing its lease, until it was killed)."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True
