"""A board actor's mailbox: FIFO submissions and admin commands, bounded in events.

Frames are stamped and put here in one synchronous step, so mailbox order is received_at
order; that is what lets the actor close a table exactly at its close moment.

An empty mailbox holds no queue and no waiters' lists (a few dozen bytes): most boards of a node
with many boards are idle.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from arena.board.clock import wait_set
from arena.board.commands import Order, VoidOutcome
from arena.board.flag import Flag
from arena.engine.events import Event, Result


@dataclass(slots=True, eq=False)
class Submission:
    """One frame's events for one board; ``future`` gets their results in order."""

    events: Sequence[Event]
    received_at: int
    source: str
    future: asyncio.Future[list[Result]] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass(slots=True, eq=False)
class Command:
    """An admin command (`arena.board.commands`) for the actor; ``future`` gets its outcome."""

    order: Order
    future: asyncio.Future[VoidOutcome | None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Mailbox:
    """Bounded by ``limit`` queued events: producers check `has_room` / `wait_room` before they
    read their next frame (backpressure); `put` itself never blocks, to keep stamp order."""

    __slots__ = ("limit", "depth", "_items", "_wakeup", "_room")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.depth = 0
        self._items: deque[Submission | Command] | None = None
        """The queue, None while empty."""
        self._wakeup = Flag()
        self._room = Flag(True)

    def __len__(self) -> int:
        return 0 if self._items is None else len(self._items)

    def put(self, item: Submission | Command) -> None:
        if self._items is None:
            self._items = deque()
        self._items.append(item)
        if isinstance(item, Submission):
            self.depth += len(item.events)
            if self.depth >= self.limit:
                self._room.clear()
        self._wakeup.set()

    def has_room(self) -> bool:
        return self.depth < self.limit

    async def wait_room(self) -> None:
        await self._room.wait()

    def poke(self) -> None:
        """Wake the actor without a message (clock changed, stop requested)."""
        self._wakeup.set()

    async def wait(self, timeout: float | None) -> None:
        """Until something is queued, `poke` is called or ``timeout`` seconds pass."""
        if self._items:
            return
        self._wakeup.clear()
        await wait_set(self._wakeup, timeout)

    def first_received_at(self) -> int | None:
        for item in self._items or ():
            if isinstance(item, Submission):
                return item.received_at
        return None

    def take(self, max_events: int) -> list[Submission] | Command | None:
        """The next command alone, or submissions up to ``max_events`` (at least one)."""
        items = self._items
        if not items:
            return None
        if isinstance(items[0], Command):
            command = items.popleft()
            if not items:
                self._items = None
            return command  # type: ignore[return-value]
        batch: list[Submission] = []
        events = 0
        while items and isinstance(items[0], Submission):
            n = len(items[0].events)
            if batch and events + n > max_events:
                break
            item = items.popleft()
            assert isinstance(item, Submission)
            batch.append(item)
            events += n
        if not items:
            self._items = None
        self.depth -= events
        if self.depth < self.limit:
            self._room.set()
        return batch

    def take_all(self) -> list[Submission | Command]:
        items = list(self._items or ())
        self._items = None
        self.depth = 0
        self._room.set()
        return items
