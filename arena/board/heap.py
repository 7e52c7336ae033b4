"""Memory freed by unloaded boards, given back to the OS.

An unloaded board's tables, its load and its journal's connections (sqlite: a thread each) leave
their memory free in the C allocator's heaps, and glibc gives free pages in the middle of a heap
back only when asked (`malloc_trim`). Measured: 2,000 boards activated once and unloaded kept
about 12 KB each of free heap resident; one `malloc_trim` took 2 ms and gave it back. Elsewhere
than glibc (musl, macOS) there is nothing to ask, and nothing is done.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections.abc import Callable

log = logging.getLogger("arena.board")

TRIM_AFTER_SECONDS = 1.0
"""After an unload, the heap is trimmed once this much later: one trim for a sweep's unloads."""


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
        return trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


class HeapTrimmer:
    """`soon` after each unload: the C heap is trimmed `TRIM_AFTER_SECONDS` later, in a worker
    thread (the heap's locks, not the event loop, wait for it)."""

    def __init__(self) -> None:
        self._pending: asyncio.TimerHandle | None = None

    def soon(self) -> None:
        if _TRIM is None or self._pending is not None:
            return
        self._pending = asyncio.get_running_loop().call_later(TRIM_AFTER_SECONDS, self._trim)

    def _trim(self) -> None:
        self._pending = None
        assert _TRIM is not None
        asyncio.get_running_loop().run_in_executor(None, _TRIM, 0).add_done_callback(_logged)

    def cancel(self) -> None:
        """The server stops: no trim any more."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


def _logged(done: asyncio.Future[int]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.warning("malloc_trim failed: %r", done.exception())
