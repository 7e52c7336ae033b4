"""One connection's subscription frames, written by one task so that no fan-out awaits a send.

Control frames (`subscribed`, `unsubscribed`, errors) go out in order; each subscription holds at
most one unsent update, which a newer one replaces: a slow reader gets fewer, newer updates and
bounded memory, and never slows a board or another subscriber.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

log = logging.getLogger("arena.live")


class Outbox:
    """The frames waiting for one connection. `put` and `control` never block."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        self._send = send
        self._control: deque[bytes] = deque()
        self._updates: dict[str, bytes] = {}  # subscription -> its newest unsent update
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.closed = False

    def control(self, frame: bytes) -> None:
        """Queue a frame that must be sent, after those queued before it."""
        self._control.append(frame)
        self._wake()

    def put(self, sub: str, frame: bytes) -> None:
        """Hold ``frame`` as ``sub``'s next update, replacing one not yet sent. O(1)."""
        self._updates[sub] = frame
        self._wake()

    def drop(self, sub: str) -> None:
        """Forget ``sub``'s unsent update (it was unsubscribed)."""
        self._updates.pop(sub, None)

    def close(self) -> None:
        self.closed = True
        self._control.clear()
        self._updates.clear()
        if self._task is not None:
            self._task.cancel()

    def _wake(self) -> None:
        if self.closed:
            return
        self._ready.set()
        if self._task is None:
            self._task = asyncio.create_task(self._write())

    async def _write(self) -> None:
        while not self.closed:
            await self._ready.wait()
            self._ready.clear()
            while self._control or self._updates:
                if self._control:
                    frame = self._control.popleft()
                else:
                    sub = next(iter(self._updates))
                    frame = self._updates.pop(sub)
                try:
                    await self._send(frame)
                except Exception:  # the peer is gone: the connection's reader ends it
                    log.debug("live frame not sent: connection gone")
                    self.closed = True
                    return
