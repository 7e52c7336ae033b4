"""`Flag`: an `asyncio.Event` that costs a few bytes while nobody waits on it.

An `asyncio.Event` allocates a deque of waiters at once (about 700 bytes with its object); a node
holds three per board (a mailbox's wakeup and room, a handle's ``loaded``), so 10,000 idle
boards kept 20 MB of empty deques. A `Flag` makes its list of waiters at the first wait and drops
it with the last one; otherwise it behaves as `asyncio.Event` does.
"""

from __future__ import annotations

import asyncio


class Flag:
    """`set`, `clear`, `is_set` and `wait` as `asyncio.Event`'s."""

    __slots__ = ("_value", "_waiters")

    def __init__(self, value: bool = False) -> None:
        self._value = value
        self._waiters: list[asyncio.Future[bool]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        """Set the flag and wake every waiter."""
        if self._value:
            return
        self._value = True
        for future in self._waiters or ():
            if not future.done():
                future.set_result(True)

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> bool:
        """Until the flag is set (True at once if it is)."""
        if self._value:
            return True
        future = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(future)
        try:
            await future
            return True
        finally:
            waiters = self._waiters
            assert waiters is not None  # it holds this future until here
            waiters.remove(future)
            if not waiters:
                self._waiters = None
