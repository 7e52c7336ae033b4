"""The C heap: glibc's thresholds held fixed at the start, and memory freed by unloaded boards
given back to the OS.

glibc's malloc raises its mmap and trim thresholds each time it frees a large mapped block (up
to 32 MB and 64 MB): after a table's member dict has grown to millions of slots, the free top of
its main heap is no longer given back and blocks of up to the old dict's size are carved out of
the heap, where they stay resident once freed (a snapshot's lists of every entry). `tune` holds
both at glibc's starting 128 KiB. Measured, 10**6 members on the `bench` board, the server's RSS
once idle after the prefill: 113-133 B/member/table without it, 105-108 with it.

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
import os
import platform
from collections.abc import Callable, Mapping

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

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
THRESHOLD_BYTES = 128 * 1024
"""glibc's own starting value of both, held fixed (setting either stops glibc moving them)."""

_OPERATOR_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_ARENA_MAX", "MALLOC_TOP_PAD_")


def tune(environ: Mapping[str, str] = os.environ) -> bool:
    """Hold glibc's trim and mmap thresholds fixed (`mallopt`), once, before the server's threads
    start. Nothing is done elsewhere than glibc, or when the environment tunes malloc itself
    (``GLIBC_TUNABLES`` with ``glibc.malloc.*``, ``MALLOC_*``): the operator's word wins.
    True when the thresholds were set."""
    if platform.libc_ver()[0] != "glibc":
        return False
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", "") or any(name in environ for name in _OPERATOR_SETTINGS):
        log.info("malloc tuned by the environment: thresholds left as set")
        return False
    mallopt = ctypes.CDLL(None).mallopt
    return bool(mallopt(M_TRIM_THRESHOLD, THRESHOLD_BYTES)) and bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES))


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
